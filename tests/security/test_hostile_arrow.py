"""An Arrow payload from an untrusted kernel never makes the host open a path, allocate without bound, or raise
anything but TransferError (docs/threat-model.md, "Retrieval").

Each attack below is a DataFrame payload whose pandas metadata or Arrow types name a file of the host (a copy of
a real zoneinfo file, so a reader that follows the name would succeed in opening it). The payload is read as
``retrieve`` reads it from a sandbox (``read_arrow(validate=True)``) while an audit hook records every file the
process opens.
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time

import pandas as pd
import pyarrow as pa
import pytest
from cave.runtimes.transfer import TransferError, read_arrow

_OPENED: list[str] = []
_WATCH: dict[str, str] = {}  # {"dir": the canary folder} while a payload is read


def _audit(event: str, args: tuple) -> None:
    if event == "open" and _WATCH and isinstance(args[0], str) and args[0].startswith(_WATCH["dir"]):
        _OPENED.append(args[0])


sys.addaudithook(_audit)  # cheap: a string compare per open, only while _WATCH is set


@pytest.fixture
def zone(tmp_path):
    """A file the kernel names: a valid time-zone file, so following the name would work."""
    folder = tmp_path / "host"
    folder.mkdir()
    shutil.copy("/usr/share/zoneinfo/UTC", folder / "zone")
    return str(folder / "zone")


def _frame() -> pd.DataFrame:
    frame = pd.DataFrame({"t": pd.date_range("2024", periods=3, tz="UTC"), "v": [1, 2, 3]})
    frame.columns.name = "cols"
    return frame


def _pandas_meta(table: pa.Table) -> dict:
    return json.loads(table.schema.metadata[b"pandas"])


def _with_meta(table: pa.Table, meta: dict | bytes) -> pa.Table:
    raw = meta if isinstance(meta, bytes) else json.dumps(meta).encode()
    return table.replace_schema_metadata({b"pandas": raw})


def _read(tmp_path, table: pa.Table, zone: str):
    path = tmp_path / "payload.arrow"
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    _OPENED.clear()
    _WATCH["dir"] = zone.rsplit("/", 1)[0]
    box: dict = {}

    def read() -> None:
        try:
            box["value"] = read_arrow(str(path), validate=True)
        except BaseException as e:  # noqa: BLE001 - the test inspects what came out
            box["error"] = e

    t0 = time.monotonic()
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(20)
    _WATCH.clear()
    assert not reader.is_alive(), "reading the payload blocked the host"
    assert time.monotonic() - t0 < 10
    assert not _OPENED, f"the host opened {_OPENED}, a path the kernel chose"
    error = box.get("error")
    assert error is None or isinstance(error, TransferError), f"{type(error).__name__}: {error}"
    return box.get("value"), error


def _tampered(column: int, **fields) -> pa.Table:
    table = pa.Table.from_pandas(_frame())
    meta = _pandas_meta(table)
    meta["columns"][column].update(fields)
    return _with_meta(table, meta)


def _tampered_column_index(**fields) -> pa.Table:
    table = pa.Table.from_pandas(_frame())
    meta = _pandas_meta(table)
    meta["column_indexes"][0].update(fields)
    return _with_meta(table, meta)


ATTACKS = {
    # a dtype string pandas parses, naming the file through dateutil (numpy and pyarrow spellings)
    "numpy-type-dateutil": lambda z: _tampered(1, numpy_type=f"datetime64[ns, dateutil/{z}]"),
    "numpy-type-arrow-dtype": lambda z: _tampered(1, numpy_type=f"timestamp[ns, tz=dateutil/{z}][pyarrow]"),
    "numpy-type-in-a-sparse-dtype": lambda z: _tampered(1, numpy_type=f"Sparse[datetime64[ns, dateutil/{z}]]"),
    # the tz-aware column's own metadata (pyarrow re-types the column with it)
    "column-metadata-timezone": lambda z: _tampered(0, metadata={"timezone": f"dateutil/{z}"}),
    # the column index: a time-zone level, read from the first column index's metadata
    "column-index-timezone": lambda z: _tampered_column_index(
        pandas_type="datetimetz", numpy_type="datetime64[ns]", metadata={"timezone": f"dateutil/{z}"}
    ),
    "column-index-numpy-type": lambda z: _tampered_column_index(numpy_type=f"datetime64[ns, dateutil/{z}]"),
    # the Arrow types themselves, below the top level
    "list-of-timestamps": lambda z: pa.table(
        {"t": pa.array([[0, 1]], pa.list_(pa.timestamp("ns", tz=f"dateutil/{z}")))}
    ),
    "struct-of-timestamps": lambda z: pa.table(
        {"s": pa.array([{"t": 0}], pa.struct([("t", pa.timestamp("ns", tz=f"dateutil/{z}"))]))}
    ),
    "dictionary-of-timestamps": lambda z: pa.table(
        {"d": pa.DictionaryArray.from_arrays([0], pa.array([0], pa.timestamp("ns", tz=f"dateutil/{z}")))}
    ),
}


@pytest.mark.parametrize("attack", ATTACKS, ids=list(ATTACKS))
def test_no_path_a_kernel_names_is_opened(attack, tmp_path, zone):
    _read(tmp_path, ATTACKS[attack](zone), zone)


HUGE = "V99999999999"  # a NumPy void dtype of 100 GB per item

BROKEN = {
    "huge-numpy-type-in-the-column-index": lambda: _tampered_column_index(numpy_type=HUGE),
    "huge-pandas-type-in-the-column-index": lambda: _tampered_column_index(pandas_type=HUGE),
    "huge-numpy-type-in-a-column": lambda: _tampered(1, numpy_type=HUGE),
    "index-names-a-missing-column": lambda: _with_meta(
        pa.Table.from_pandas(_frame()), {**_pandas_meta(pa.Table.from_pandas(_frame())), "index_columns": ["nope"]}
    ),
    "range-index-with-a-float-step": lambda: _with_meta(
        pa.Table.from_pandas(_frame()),
        {
            **_pandas_meta(pa.Table.from_pandas(_frame())),
            "index_columns": [{"kind": "range", "name": None, "start": 0, "stop": 3, "step": 0.5}],
        },
    ),
    "columns-not-a-list": lambda: _with_meta(
        pa.Table.from_pandas(_frame()), {**_pandas_meta(pa.Table.from_pandas(_frame())), "columns": 7}
    ),
    "column-named-by-a-mapping": lambda: _tampered(1, name={"a": 1}),
    "metadata-not-json": lambda: _with_meta(pa.Table.from_pandas(_frame()), b"{not json"),
    "metadata-a-list": lambda: _with_meta(pa.Table.from_pandas(_frame()), b"[1, 2]"),
    "attrs-of-a-megabyte": lambda: _with_meta(
        pa.Table.from_pandas(_frame()),
        {**_pandas_meta(pa.Table.from_pandas(_frame())), "attributes": {"x": "y" * (1 << 20)}},
    ),
}


@pytest.mark.parametrize("payload", BROKEN, ids=list(BROKEN))
def test_hostile_metadata_is_a_transfer_error_or_a_plain_frame(payload, tmp_path, zone):
    frame, error = _read(tmp_path, BROKEN[payload](), zone)
    if error is None:  # neutralized: the data is intact, the hostile hint is gone
        assert list(frame["v"]) == [1, 2, 3] and frame.attrs.get("x") is None


def test_an_honest_frame_keeps_its_index_dtypes_and_attrs(tmp_path, zone):
    frame = pd.DataFrame(
        {
            "when": pd.date_range("2024", periods=3, tz="Europe/Paris"),
            "n": pd.array([1, None, 3], dtype="Int64"),
            "ok": pd.array([True, None, False], dtype="boolean"),
            "kind": pd.Categorical(["a", "b", "a"]),
            "month": pd.period_range("2024-01", periods=3, freq="M"),
        },
        index=pd.Index([7, 8, 9], name="id"),
    )
    frame.columns.name = "field"
    frame.attrs = {"source": "kernel"}
    got, error = _read(tmp_path, pa.Table.from_pandas(frame), zone)
    assert error is None
    pd.testing.assert_frame_equal(got, frame)
    assert got.attrs == {"source": "kernel"}
