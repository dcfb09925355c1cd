"""The safe (Arrow) transfer keeps pandas' extension dtypes: a host that only reads payloads gets them back."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
from cave.runtimes.transfer import encode

pytestmark = pytest.mark.timeout(120)

READ = """
import json, sys
from cave.runtimes.transfer import decode
frame = decode(json.loads(sys.argv[1]), trust=False)
print(json.dumps({"index": str(frame.index.dtype), "first": str(frame.index[0]),
                  **{c: str(t) for c, t in frame.dtypes.items()}}))
"""


def test_a_fresh_host_reads_periods_and_intervals_back(tmp_path):
    # the bug: months per period came back as 660, 661, ... in a host that had never written a period itself
    frame = pd.DataFrame(
        {"visits": [3, 4], "day": pd.period_range("2025-01-01", periods=2, freq="D")},
        index=pd.period_range("2025-01", periods=2, freq="M", name="date"),
    )
    frame["bucket"] = pd.arrays.IntervalArray.from_breaks([0, 10, 20])
    meta, _ = encode(frame, str(tmp_path), safe=True)
    assert meta["format"] == "arrow"
    out = subprocess.run([sys.executable, "-c", READ, json.dumps(meta)], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    assert got == {"index": "period[M]", "first": "2025-01", "visits": "int64", "day": "period[D]",
                   "bucket": "interval[int64, right]"}  # fmt: skip


MONTHLY = """
import pandas as pd
from cave.runtimes import create_runtime
traffic = pd.DataFrame({"date": pd.date_range("2025-01-01", periods=60, freq="D"), "visits": range(60)})
rt = create_runtime("process", trust=False)  # what a sandbox retrieves with
try:
    rt.inject("traffic", traffic)
    ex = rt.execute("m = traffic.groupby(traffic['date'].dt.to_period('M'))['visits'].sum()")
    assert ex.ok, ex.error
    m = rt.retrieve("m")
finally:
    rt.close()
print([str(p) for p in m.index], m.tolist())
"""


def test_a_monthly_table_from_an_untrusted_kernel_keeps_its_months():
    # in a fresh host process, as `cave run` is: nothing there has written a period to Arrow before
    out = subprocess.run([sys.executable, "-c", MONTHLY], capture_output=True, text=True, timeout=100, check=True)
    assert out.stdout.strip() == "['2025-01', '2025-02', '2025-03'] [465, 1246, 59]"


def test_numbers_of_types_the_host_may_not_have_come_back_as_int_or_float():
    # BFCL simple_python_16: final_answer(sympy Integer 4) was refused by the sandbox as an unknown type
    from cave.runtimes import create_runtime

    rt = create_runtime("process", trust=False)
    try:
        ex = rt.execute(
            "import enum, fractions\n"
            "class Level(enum.IntEnum):\n    HIGH = 3\n"
            "n, q, both = Level.HIGH, fractions.Fraction(3, 4), {'n': Level.HIGH, 'q': fractions.Fraction(1, 2)}"
        )
        assert ex.ok, ex.error
        assert (rt.retrieve("n"), rt.retrieve("q"), rt.retrieve("both")) == (3, 0.75, {"n": 3, "q": 0.5})
        assert type(rt.retrieve("n")) is int
    finally:
        rt.close()


def test_a_recipe_that_cannot_be_rebuilt_is_a_transfer_error(tmp_path):
    from cave.runtimes.transfer import TransferError, decode

    for meta in (
        {"format": "recipe", "builder": "sqlalchemy.create_engine", "args": [f"sqlite:///{tmp_path}/gone.db"]},
        {"format": "recipe", "builder": "sqlite3.connect", "args": [str(tmp_path / "gone.db")]},
        {"format": "recipe", "builder": "sqlalchemy.create_engine", "args": ["not a url"]},
    ):
        with pytest.raises(TransferError, match="cannot rebuild"):
            decode(meta, trust=True)  # the kernel's side of an inject (an untrusted kernel's recipes are refused)
    assert not (tmp_path / "gone.db").exists()  # no empty database made in its place


def test_pandas_arrays_and_indexes_come_back_from_an_untrusted_kernel():
    # a dev probe: final_answer(loans['genre'].unique()) was refused (an ArrowStringArray has no JSON/npy form),
    # and the retry with .tolist() dropped the .unique()
    from cave.runtimes import create_runtime

    rt = create_runtime("process", trust=False)
    try:
        rt.inject("df", pd.DataFrame({"g": ["a", "b", "a"], "n": pd.array([1, None, 3], dtype="Int64")}))
        ex = rt.execute(
            "u = df['g'].unique(); i = df.set_index('g').index; n = df['n'].unique(); c = df['g'].astype('category').values"
        )
        assert ex.ok, ex.error
        assert list(rt.retrieve("u")) == ["a", "b"]
        index = rt.retrieve("i")
        assert isinstance(index, pd.Index) and list(index) == ["a", "b", "a"] and index.name == "g"
        assert str(rt.retrieve("n").dtype) == "Int64" and rt.retrieve("n")[1] is pd.NA
        assert list(rt.retrieve("c").categories) == ["a", "b"]
    finally:
        rt.close()
