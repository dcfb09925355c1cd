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


def _zoned(zone: str) -> pa.Array:
    return pa.array([0], pa.timestamp("ns", tz=f"dateutil/{zone}"))


def _extension(storage: pa.Array, name: str, serialized: dict | str) -> pa.Table:
    """A column that says it is of the registered extension type ``name``, with the kernel's metadata for it."""
    raw = serialized if isinstance(serialized, str) else json.dumps(serialized)
    metadata = {b"ARROW:extension:name": name.encode(), b"ARROW:extension:metadata": raw.encode()}
    return pa.Table.from_arrays([storage], schema=pa.schema([pa.field("x", storage.type, metadata=metadata)]))


def _tampered_index(**fields) -> pa.Table:
    frame = _frame()
    frame.index = pd.Index(pd.date_range("2024", periods=3, tz="UTC"), name="id")  # an index stored as a column
    table = pa.Table.from_pandas(frame)
    meta = _pandas_meta(table)
    entry = next(c for c in meta["columns"] if c["name"] == "id")
    entry.update(fields)
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
    "union-of-timestamps": lambda z: pa.table(
        {"u": pa.UnionArray.from_dense(pa.array([0], pa.int8()), pa.array([0], pa.int32()), [_zoned(z)])}
    ),
    "run-end-encoded-timestamps": lambda z: pa.table(
        {"r": pa.RunEndEncodedArray.from_arrays(pa.array([1], pa.int32()), _zoned(z))}
    ),
    "map-to-timestamps": lambda z: pa.table(
        {"m": pa.array([[("a", 0)]], pa.map_(pa.string(), pa.timestamp("ns", tz=f"dateutil/{z}")))}
    ),
    "list-view-of-timestamps": lambda z: pa.table(
        {"l": pa.array([[0]], pa.list_view(pa.timestamp("ns", tz=f"dateutil/{z}")))}
    ),
    # pandas' own Arrow extension types, which the host registers: their serialized metadata is the kernel's too
    "period-extension-frequency": lambda z: _extension(pa.array([1, 2]), "pandas.period", {"freq": f"dateutil/{z}"}),
    "interval-extension-of-zoned-timestamps": lambda z: _extension(
        pa.array([{"left": 0, "right": 1}], pa.struct([("left", _zoned(z).type), ("right", _zoned(z).type)])),
        "pandas.interval",
        {"subtype": "datetime64[ns]", "closed": "right"},
    ),
    # an index column's own description (a frame with a named index)
    "index-column-numpy-type": lambda z: _tampered_index(numpy_type=f"datetime64[ns, dateutil/{z}]"),
    "index-column-timezone": lambda z: _tampered_index(
        pandas_type="datetimetz", metadata={"timezone": f"dateutil/{z}"}
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
    "offset-time-zone-out-of-range": lambda: pa.table({"t": pa.array([0], pa.timestamp("ns", tz="+99:99"))}),
    "period-extension-without-frequency": lambda: _extension(pa.array([1]), "pandas.period", {}),
    "period-extension-metadata-not-json": lambda: _extension(pa.array([1]), "pandas.period", "{{"),
    "interval-extension-over-integers": lambda: _extension(
        pa.array([1]), "pandas.interval", {"subtype": "int64", "closed": "right"}
    ),
    "tensor-extension-of-a-petabyte": lambda: _extension(
        pa.array([[1.0] * 4], pa.list_(pa.float64(), 4)), "arrow.fixed_shape_tensor", {"shape": [10**5] * 3}
    ),
    "range-index-past-int64": lambda: _with_meta(
        pa.Table.from_pandas(_frame()),
        {
            **_pandas_meta(pa.Table.from_pandas(_frame())),
            "index_columns": [{"kind": "range", "name": None, "start": 0, "stop": 10**30, "step": 1}],
        },
    ),
    "interval-dtype-on-an-integer-column": lambda: _tampered(1, numpy_type="interval[int64, right]"),
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


def _forged_files(tmp_path) -> dict[str, dict]:
    """Payload descriptions a hostile kernel could send for the formats an untrusted retrieve accepts."""

    def npy(header: str, body: bytes = b"") -> str:
        raw = header.encode()
        raw += b" " * (63 - (len(raw) + 10) % 64) + b"\n"
        path = tmp_path / f"{len(list(tmp_path.iterdir()))}.npy"
        path.write_bytes(b"\x93NUMPY\x01\x00" + len(raw).to_bytes(2, "little") + raw + body)
        return str(path)

    def arrow(frame: pd.DataFrame) -> str:
        path = tmp_path / f"{len(list(tmp_path.iterdir()))}.arrow"
        table = pa.Table.from_pandas(frame)
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        return str(path)

    shape = "{'descr': '<f8', 'fortran_order': False, 'shape': (1000,), }"
    return {
        "npy-header-not-a-literal": {"format": "npy", "path": npy("__import__('os')")},
        "npy-shorter-than-its-shape": {"format": "npy", "path": npy(shape, bytes(8))},
        "npy-of-objects": {"format": "npy", "path": npy("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }")},
        "npy-dtype-of-100-GB": {
            "format": "npy",
            "path": npy("{'descr': '|V99999999999', 'fortran_order': False, 'shape': (1,), }"),
        },
        "series-named-by-a-list": {
            "format": "arrow",
            "path": arrow(pd.DataFrame({"a": [1]})),
            "series": True,
            "name": [1],
        },
        "json-without-a-value": {"format": "json"},
        "path-not-a-string": {"format": "arrow", "path": 5},
        "tagged-timestamp-naming-a-zone-file": {
            "format": "tjson",
            "value": {"__t": "timestamp", "v": "2024-01-01 dateutil//etc/passwd"},
        },
        "recipe-opening-a-host-database": {"format": "recipe", "builder": "sqlite3.connect", "args": ["file:pwned.db"]},
        "recipe-naming-a-database-server": {
            "format": "recipe",
            "builder": "sqlalchemy.create_engine",
            "args": ["postgresql+psycopg2://kernel.example/db"],
        },
    }


def test_a_forged_payload_of_any_safe_format_is_a_transfer_error(tmp_path, monkeypatch):
    """What ``retrieve`` reads from an untrusted kernel, besides Arrow: a refusal is always a TransferError (never
    the reader's ValueError, KeyError or TypeError), and a recipe is never rebuilt (it would open the database file
    or server the kernel names, and import its driver)."""
    from cave.runtimes.transfer import decode

    monkeypatch.chdir(tmp_path)  # where sqlite3.connect("file:pwned.db") would create its file
    payloads = tmp_path / "payloads"
    payloads.mkdir()
    for name, meta in _forged_files(payloads).items():
        before = set(sys.modules)
        with pytest.raises(TransferError):
            decode(meta, trust=False)
        assert not {m for m in set(sys.modules) - before if m.startswith(("psycopg", "sqlalchemy.dialects"))}, name
    assert not list(tmp_path.glob("pwned*")), "the host created the database a recipe named"
    assert not list(payloads.iterdir()), "a payload file was left behind"
