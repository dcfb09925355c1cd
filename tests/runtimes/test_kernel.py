"""KernelRuntime against real IPython kernels (jupyter-client + ipykernel), no mocks.

Most tests share one kernel (module fixture); tests that crash, restart or limit a
kernel get their own.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pandas as pd
import psutil
import pytest
import sqlalchemy as sa
from cave.runtimes import TransferError, create_runtime
from cave.runtimes.kernel import KernelRuntime
from cave.runtimes.transfer import Recipe, register_recipe

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def rt():
    runtime = KernelRuntime(timeout=30)
    runtime.start()
    yield runtime
    runtime.close()


@pytest.fixture(scope="module")
def crashy():
    """A kernel the tests may crash and restart."""
    runtime = KernelRuntime(timeout=30, interrupt_grace_s=0.5)
    runtime.inject("registered", {"survives": True}, description="injected by the host")
    yield runtime
    runtime.close()


def mixed_frame(n: int = 1000) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "f": rng.random(n),
            "f32": rng.random(n).astype("float32"),
            "i": rng.integers(0, 10**6, n),
            "s": pd.Series(rng.integers(0, 50, n)).astype(str).radd("item-"),
            "cat": pd.Categorical(rng.choice(["a", "b", "c"], n)),
            "when": pd.date_range("2024-01-01", periods=n, freq="h", tz="UTC"),
            "maybe": pd.array([None if k % 7 == 0 else k for k in range(n)], dtype="Int64"),
            "flag": rng.random(n) > 0.5,
        },
        index=pd.Index(np.arange(n) * 3 + 7, name="order_id"),
    )


# -- basics -------------------------------------------------------------------------------------------------


def test_state_persists_and_output_is_captured(rt):
    assert rt.execute("counter = 40").ok
    ex = rt.execute("counter += 2\nprint('counter', counter)\nimport sys\nprint('oops', file=sys.stderr)\ncounter")
    assert ex.ok, ex.error
    assert (ex.stdout, ex.stderr, ex.result) == ("counter 42\n", "oops\n", "42")
    assert rt.start_seconds is not None and rt.start_seconds < 10


def test_registry_creates_kernel_runtime():
    runtime = create_runtime("kernel", timeout=5)
    assert isinstance(runtime, KernelRuntime)
    runtime.close()  # never started: closing is still clean


def test_errors_carry_the_agents_line_numbers(rt):
    rt.execute("def ratio(a, b):\n    return a / b\n")
    ex = rt.execute("x = 1\n\ny = ratio(x, 0)\n")
    assert ex.error.type == "ZeroDivisionError" and ex.error.lineno == 3
    assert "line 3, in <module>" in ex.error.traceback and "return a / b" in ex.error.traceback
    assert "kernel.py" not in ex.error.traceback and "ipykernel" not in ex.error.traceback
    ex = rt.execute("if True:\n    a = [1,\n")
    assert ex.error.type == "SyntaxError" and ex.error.lineno == 2 and "^" in ex.error.traceback


def test_top_level_await_and_magics(rt):
    ex = rt.execute("import asyncio\nawait asyncio.sleep(0.01)\nawait asyncio.sleep(0, 'awaited')")
    assert ex.result == "'awaited'", ex.error
    ex = rt.execute("!echo from-shell")
    assert "from-shell" in ex.stdout


def test_exit_input_and_display(rt):
    assert rt.execute("input()").error.type == "RuntimeError"
    rt.execute("alive = True")
    pid = rt.pid
    for code in ("exit()", "quit()", "import sys\nsys.exit(2)", "raise SystemExit"):
        assert rt.execute(code).error.type == "SystemExit"
    time.sleep(0.3)  # IPython's own exit() would stop the kernel 0.1 s later
    assert rt.execute("alive").result == "True" and rt.pid == pid
    assert rt.execute("display({'shown': 1})").stdout == "{'shown': 1}\n"


def test_core_install_without_the_kernel_extra():
    code = (
        "import sys\n"
        "sys.modules['jupyter_client'] = None\n"  # as if the [kernel] extra were not installed
        "import cave.runtimes\n"
        "assert {'inprocess', 'kernel'} <= set(cave.runtimes.RUNTIMES)\n"
        "assert cave.runtimes.create_runtime('inprocess').execute('1 + 1').result == '2'\n"
        "try:\n    cave.runtimes.create_runtime('kernel')\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "pip install 'cave[kernel]'" in out.stdout


# -- objects ---------------------------------------------------------------------------------------------------


def test_dataframe_round_trip_is_faithful(rt):
    df = mixed_frame()
    rt.inject("orders", df, description="orders")
    ex = rt.execute("orders_in_kernel = orders.copy()\nbool(orders['i'].sum() == orders_in_kernel['i'].sum())")
    assert ex.result == "True", ex.error
    back = rt.retrieve("orders")
    assert back.equals(df)
    assert list(back.dtypes) == list(df.dtypes)
    assert back.index.equals(df.index) and back.index.name == "order_id"


def test_large_dataframe_goes_through_shared_memory(rt):
    df = pd.DataFrame({"a": np.arange(300_000), "b": np.random.default_rng(1).random(300_000)})
    rt.inject("big", df)
    rt.execute("big['c'] = big['a'] * 2")
    back = rt.retrieve("big")
    assert back["c"].equals(df["a"] * 2) and back["b"].equals(df["b"])
    back.loc[0, "a"] = -1  # writable on the host
    assert not os.listdir(rt._transfer_dir)  # payload files are gone once read


def test_retrieve_agent_created_objects(rt):
    rt.execute(
        "import pandas as pd, numpy as np\n"
        "made = pd.DataFrame({'k': ['x', 'y'], 'v': [1.5, 2.5]}).set_index('k')\n"
        "arr = np.arange(12).reshape(3, 4)\n"
        "class Local:\n    def __init__(self): self.v = 3\n"
        "obj = Local()\n"
        "square = lambda q: q * q\n"
    )
    made = rt.retrieve("made")
    assert made.equals(pd.DataFrame({"k": ["x", "y"], "v": [1.5, 2.5]}).set_index("k"))
    arr = rt.retrieve("arr")
    assert arr.shape == (3, 4) and arr[2, 3] == 11
    assert rt.retrieve("obj").v == 3
    assert rt.retrieve("square")(7) == 49


def test_injected_functions_and_types_run_in_the_kernel(rt):
    def area(w: float, h: float) -> float:
        """Area of a rectangle."""
        return w * h

    class Point:
        def __init__(self, x, y):
            self.x, self.y = x, y

    rt.inject_function(area, description="geometry helper")
    rt.inject_type(Point)
    ex = rt.execute("p = Point(2, 3)\narea(p.x, p.y)")
    assert ex.result == "6", ex.error
    info = {v.name: v for v in rt.describe()}
    assert info["area"].kind == "function" and info["area"].injected
    assert info["area"].description == "geometry helper"
    assert "area(w: float, h: float) -> float" in info["area"].preview
    assert info["Point"].kind == "type"
    assert info["p"].injected is False and info["p"].type.endswith("Point")


def test_describe_lists_agent_created_variables(rt):
    rt.execute("scores = {'a': 1, 'b': 2}\nnames = ['x', 'y']\nimport math")
    info = {v.name: v for v in rt.describe()}
    assert info["scores"].preview.startswith("dict len 2") and not info["scores"].injected
    assert info["names"].preview == "list len 2 of str"
    assert info["math"].kind == "module"
    assert not any(name in info for name in ("In", "Out", "get_ipython", "exit", "quit"))
    assert all(len(v.preview) <= 300 for v in info.values())


def test_retrieve_unknown_name_lists_available(rt):
    rt.execute("zebra = 1")
    with pytest.raises(KeyError) as info:
        rt.retrieve("unicorn")
    assert "unicorn" in str(info.value) and "zebra" in str(info.value)
    with pytest.raises(KeyError):
        rt.retrieve("get_ipython")  # IPython's machinery is not a user variable


def test_non_picklable_object_names_type_and_fix(rt):
    with pytest.raises(TransferError) as info:
        rt.inject("lock", threading.Lock())
    message = str(info.value)
    assert "_thread.lock" in message and "register_recipe" in message
    assert "lock" not in rt.registered
    rt.execute("gen = (i for i in range(3))")
    with pytest.raises(TransferError, match="generator"):
        rt.retrieve("gen")


class Client:
    """Holds a lock, so it cannot be pickled; a recipe rebuilds it from its address."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._lock = threading.Lock()


def test_custom_recipe(rt):
    register_recipe(Client, lambda c: Recipe(Client, (c.address,)))
    rt.inject("client", Client("db.local:5432"))
    ex = rt.execute("type(client).__name__, client.address")
    assert ex.result == "('Client', 'db.local:5432')", ex.error


def test_in_memory_sqlite_engine_is_refused_clearly(rt):
    with pytest.raises(TransferError) as info:
        rt.inject("engine", sa.create_engine("sqlite://"))
    assert "in-memory" in str(info.value) and "file-backed" in str(info.value)


def test_file_backed_sqlite_engine_is_shared(rt, tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'shop.db'}")
    with engine.begin() as conn:
        conn.execute(sa.text("create table sales (id integer primary key, amount real)"))
        conn.execute(sa.text("insert into sales (amount) values (1.5), (2.5)"))
    rt.inject("engine", engine, description="the shop database")
    code = (
        "import sqlalchemy as sa\n"
        "with engine.begin() as conn:\n"
        "    conn.execute(sa.text('insert into sales (amount) values (10.0)'))\n"
        "    total = conn.execute(sa.text('select sum(amount) from sales')).scalar()\n"
        "total"
    )
    assert rt.execute(code).result == "14.0"
    with engine.connect() as conn:  # the kernel's write is visible from the host
        assert conn.execute(sa.text("select count(*) from sales")).scalar() == 3
    info = {v.name: v for v in rt.describe()}
    assert "sqlite engine" in info["engine"].preview and "sales" in info["engine"].preview
    back = rt.retrieve("engine")  # rebuilt on the host from its URL
    with back.connect() as conn:
        assert conn.execute(sa.text("select max(amount) from sales")).scalar() == 10.0
    engine.dispose()
    back.dispose()


# -- control: timeouts, interrupts, crashes -------------------------------------------------------------------


def test_busy_loop_is_stopped_within_timeout_and_runtime_stays_usable(rt):
    rt.execute("before = 'kept'")
    t0 = time.monotonic()
    ex = rt.execute("n = 0\nwhile True:\n    n += 1\n", timeout=1)
    assert time.monotonic() - t0 < 1 + 2
    assert ex.timed_out and ex.recovery == "interrupted"
    assert ex.error.type == "TimeoutError" and ex.error.lineno in (2, 3)
    assert rt.execute("before, n > 0").result == "('kept', True)"


def test_long_silent_cell_within_timeout_is_fine(rt):
    ex = rt.execute("import time\ntime.sleep(1.5)\n'done'", timeout=5)
    assert ex.ok and ex.result == "'done'"


def test_interrupt_from_another_thread(rt):
    threading.Timer(0.5, rt.interrupt).start()
    ex = rt.execute("import time\ntime.sleep(20)", timeout=30)
    assert ex.error.type == "KeyboardInterrupt" and not ex.timed_out
    assert rt.execute("1 + 1").result == "2"


def test_cell_that_ignores_interrupts_gets_the_kernel_restarted(crashy):
    code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass"
    t0 = time.monotonic()
    ex = crashy.execute(code, timeout=1)
    assert ex.timed_out and ex.recovery == "restarted" and ex.error.type == "TimeoutError"
    assert time.monotonic() - t0 < 1 + 0.5 + 10
    assert crashy.retrieve("registered") == {"survives": True}


def test_os_exit_is_recovered_with_registered_objects(crashy):
    crashy.execute("scratch = 1")
    pid = crashy.pid
    ex = crashy.execute("import os\nos._exit(1)")
    assert ex.recovery == "crashed" and ex.error.type == "KernelDied" and "exit code 1" in ex.error.message
    assert crashy.pid != pid and not psutil.pid_exists(pid)
    assert crashy.execute("registered['survives']").result == "True"
    assert crashy.execute("scratch").error.type == "NameError"


def test_segfault_is_recovered_and_reported(crashy):
    ex = crashy.execute("import ctypes\n\ndef boom():\n    ctypes.string_at(0)\n\nboom()")
    assert ex.recovery == "crashed" and "SIGSEGV" in ex.error.message
    assert "Segmentation fault" in ex.error.traceback and '"<cell-' in ex.error.traceback
    assert crashy.execute("registered").ok


def test_kernel_killed_between_calls_is_restarted_on_next_call(crashy):
    os.kill(crashy.pid, signal.SIGKILL)
    time.sleep(0.2)
    ex = crashy.execute("registered['survives']")
    assert ex.result == "True" and ex.recovery == "crashed"
    assert "had died since the last call" in ex.stderr and "SIGKILL" in ex.stderr


def test_restart_clears_code_state_and_reinjects(crashy):
    crashy.execute("temp = 5")
    crashy.restart()
    assert crashy.execute("temp").error.type == "NameError"
    assert crashy.retrieve("registered") == {"survives": True}


# -- limits, working directory, environment ------------------------------------------------------------------


def test_limits_workdir_and_env(tmp_path):
    workdir = tmp_path / "work"
    with KernelRuntime(
        timeout=20, memory_limit_mb=512, cpu_time_limit_s=1, workdir=str(workdir), env={"CAVE_TEST_VAR": "yes"}
    ) as runtime:
        ex = runtime.execute("import numpy as np\nhuge = np.ones(2 * 1024**3 // 8)")
        assert ex.error.type == "MemoryError" and "memory_limit_mb" in ex.error.message
        assert runtime.execute("data = bytearray(2 * 1024**3)").error.type == "MemoryError"
        ok = runtime.execute("import pandas as pd\nsmall = np.ones(10_000_000)\nfloat(small.sum())")
        assert ok.result == "10000000.0", ok.error  # 80 MB is fine under the limit
        t0 = time.monotonic()
        ex = runtime.execute("while True: pass")
        assert ex.error.type == "CPUTimeLimitExceeded" and time.monotonic() - t0 < 5
        assert runtime.execute("1").result == "1"  # the next cell has a fresh CPU budget
        ex = runtime.execute("import os\nopen('note.txt', 'w').write('hi')\nos.getcwd(), os.environ['CAVE_TEST_VAR']")
        assert ex.result == repr((str(workdir), "yes"))
        assert (workdir / "note.txt").read_text() == "hi"
        pid = runtime.pid
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert workdir.exists()  # a directory the user gave is theirs: not deleted


def test_each_runtime_gets_its_own_temporary_workdir(rt):
    cwd = rt.execute("import os; os.getcwd()").result
    assert cwd == repr(rt.workdir) and "cave-work-" in rt.workdir


# -- trust -------------------------------------------------------------------------------------------------------


def test_untrusted_retrieve_uses_safe_formats_only():
    with KernelRuntime(timeout=20, trust=False) as runtime:
        runtime.execute(
            "import pandas as pd, numpy as np\n"
            "df = pd.DataFrame({'a': [1, 2], 's': ['x', 'y']})\n"
            "arr = np.arange(4.0)\nplain = {'k': [1, 'two', None]}\n"
            "class Evil:\n    def __reduce__(self):\n        import os\n        return (os.system, ('echo pwned',))\n"
            "evil = Evil()\n"
        )
        assert runtime.retrieve("df").equals(pd.DataFrame({"a": [1, 2], "s": ["x", "y"]}))
        assert runtime.retrieve("arr").tolist() == [0.0, 1.0, 2.0, 3.0]
        assert runtime.retrieve("plain") == {"k": [1, "two", None]}
        with pytest.raises(TransferError, match="no safe format"):
            runtime.retrieve("evil")


def test_everyday_answers_cross_from_an_untrusted_kernel():
    """`df.col.mean()` is a numpy.float64: an answer like that must come back from a sandbox, type and all."""
    import datetime as dt
    import decimal

    with KernelRuntime(timeout=20, trust=False) as runtime:
        runtime.execute(
            "import numpy as np, pandas as pd, datetime as dt, decimal\n"
            "mean = np.float64(2.5)\ncount = np.int64(7)\nflag = np.bool_(True)\n"
            "mixed = {'total': np.float64(1.5), ('a', 1): {3, 4}, 2024: (np.int32(1), float('nan'))}\n"
            "when = pd.Timestamp('2025-03-01 10:00')\nday = dt.date(2025, 3, 1)\nprice = decimal.Decimal('1.10')\n"
            "stamp = np.datetime64('2025-03-01')\n"
        )
        mean = runtime.retrieve("mean")
        assert mean == 2.5 and type(mean).__name__ == "float64"
        assert runtime.retrieve("count") == 7 and type(runtime.retrieve("count")).__name__ == "int64"
        assert runtime.retrieve("flag") is np.True_
        mixed = runtime.retrieve("mixed")
        assert mixed["total"] == 1.5 and mixed[("a", 1)] == {3, 4}
        assert mixed[2024][0] == 1 and np.isnan(mixed[2024][1])
        assert runtime.retrieve("when") == pd.Timestamp("2025-03-01 10:00")
        assert runtime.retrieve("day") == dt.date(2025, 3, 1)
        assert runtime.retrieve("price") == decimal.Decimal("1.10")
        assert runtime.retrieve("stamp") == np.datetime64("2025-03-01")


def test_a_row_of_mixed_types_crosses_from_an_untrusted_kernel():
    """``df.loc[df.amount.idxmax()]`` is an object Series holding a name and a number: Arrow (one type per column)
    cannot carry it, but its items are plain values, so it comes back item by item; the same for a mixed column."""
    with KernelRuntime(timeout=20, trust=False) as runtime:
        runtime.execute(
            "import pandas as pd\n"
            "df = pd.DataFrame({'region': ['west', 'east'], 'amount': [12.5, 3.0], 'day': pd.to_datetime(['2024-01-01', '2024-01-02'])})\n"
            "row = df.loc[df['amount'].idxmax()]\n"
            "mixed = pd.DataFrame({'value': ['x', 1.5]})\n"
            "deep = pd.Series([1, 'a'], index=pd.MultiIndex.from_tuples([(1, 2), (3, 4)]))\n"
        )
        row = runtime.retrieve("row")
        assert row.to_dict() == {"region": "west", "amount": 12.5, "day": pd.Timestamp("2024-01-01")}
        assert row.name == 0
        assert runtime.retrieve("mixed")["value"].tolist() == ["x", 1.5]
        with pytest.raises(TransferError, match="no safe"):  # no item-by-item form either: still refused, clearly
            runtime.retrieve("deep")


def test_answers_holding_pandas_and_numpy_values_cross_from_an_untrusted_kernel():
    """`{"cols": df.columns[mask]}`, a dict of Series, arrays, a small frame: the dicts models really return."""
    with KernelRuntime(timeout=20, trust=False) as runtime:
        runtime.execute(
            "import numpy as np, pandas as pd\n"
            "df = pd.DataFrame({'a': [1, None], 'b': ['x', 'y'], 'when': pd.to_datetime(['2024-01-01', '2024-02-01'])})\n"
            "answer = {'missing': df.columns[df.isna().any()], 'means': df[['a']].mean(), 'arr': np.arange(3),\n"
            "          'objs': np.array(['x', 1], dtype=object), 'frame': df.head(1), 'series': [df['b']]}\n"
        )
        got = runtime.retrieve("answer")
    assert list(got["missing"]) == ["a"] and isinstance(got["missing"], pd.Index)
    assert got["means"].to_dict() == {"a": 1.0}
    assert got["arr"].tolist() == [0, 1, 2] and str(got["arr"].dtype) == "int64"
    assert got["objs"].tolist() == ["x", 1]
    assert list(got["frame"].columns) == ["a", "b", "when"] and got["frame"]["when"].iloc[0] == pd.Timestamp(
        "2024-01-01"
    )
    assert got["series"][0].tolist() == ["x", "y"]


def test_tagged_json_from_a_hostile_kernel_runs_no_code():
    from cave.runtimes.transfer import decode

    with pytest.raises(TransferError, match="not allowed"):
        decode({"format": "tjson", "value": {"__t": "np", "dtype": "O", "v": 1}}, trust=False)
    for tag in ("ndarray", "series"):  # the nested forms refuse object/record dtypes too
        payload = {"__t": tag, "dtype": "V8", "v": [1], "index": {"__t": "pdindex", "v": [0], "name": None}}
        with pytest.raises(TransferError, match="not allowed"):
            decode({"format": "tjson", "value": payload}, trust=False)
    with pytest.raises(TransferError, match="unknown tagged-JSON type"):
        decode({"format": "tjson", "value": {"__t": "os.system", "v": "echo pwned"}}, trust=False)


# -- async ---------------------------------------------------------------------------------------------------------


async def test_aexecute_does_not_block_the_event_loop(rt):
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    ex = await rt.aexecute("import time\ntime.sleep(0.5)\n'slept'")
    task.cancel()
    assert ex.result == "'slept'"
    assert ticks >= 25  # the loop kept running while the kernel slept


async def test_two_kernels_run_concurrently(rt, crashy):
    await crashy.astart()
    t0 = time.monotonic()
    a, b = await asyncio.gather(
        rt.aexecute("import time\ntime.sleep(0.6)\n'a'"), crashy.aexecute("import time\ntime.sleep(0.6)\n'b'")
    )
    assert (a.result, b.result) == ("'a'", "'b'")
    assert time.monotonic() - t0 < 1.1


async def test_async_inject_retrieve_describe_and_timeout(rt):
    df = mixed_frame(50)
    await rt.ainject("async_df", df)
    assert (await rt.aretrieve("async_df")).equals(df)
    assert "async_df" in [v.name for v in await rt.adescribe()]
    ex = await rt.aexecute("while True: pass", timeout=0.5)
    assert ex.timed_out and ex.recovery == "interrupted"


def test_sync_call_from_inside_a_running_loop(rt):
    async def main():
        return rt.execute("6 * 7").result  # a sync call inside async code still works

    assert asyncio.run(main()) == "42"


# -- bad input --------------------------------------------------------------------------------------------------------


def test_bad_inputs(rt):
    with pytest.raises(ValueError, match="identifier"):
        rt.inject("2fast", 1)
    with pytest.raises(ValueError, match="timeout"):
        rt.execute("1", timeout=-1)
    with pytest.raises(TypeError, match="str"):
        rt.execute(b"1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="memory_limit_mb"):
        KernelRuntime(memory_limit_mb=10)


def test_close_leaves_no_process():
    runtime = KernelRuntime()
    runtime.execute("1")
    pid = runtime.pid
    runtime.close()
    runtime.close()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    with pytest.raises(Exception, match="closed"):
        runtime.execute("1")


@pytest.mark.parametrize("mode", ["kernel", "process"])
def test_a_large_first_inject_reaches_a_kernel_not_started_yet(mode):
    """The payload file of an inject that starts the kernel must survive the start (which clears stale payloads)."""
    import numpy as np
    import pandas as pd

    rt = create_runtime(mode, timeout=60)
    try:
        rt.inject("df", pd.DataFrame({"a": np.arange(200_000)}))  # big enough to travel as a file, not inline
        assert rt.execute("int(df['a'].sum())").result == str(sum(range(200_000)))
    finally:
        rt.close()


def test_a_series_crosses_in_the_safe_format():
    """Untrusted kernels send only safe formats: a pandas Series travels as one Arrow column, name and index kept."""
    rt = create_runtime("kernel", timeout=60, trust=False)
    try:
        rt.execute("import pandas as pd\ns = pd.Series([1.5, 2.0], index=['a', 'b'], name='revenue')")
        s = rt.retrieve("s")
        assert s.name == "revenue" and s.to_dict() == {"a": 1.5, "b": 2.0}
    finally:
        rt.close()


def test_compiler_warnings_reach_the_cells_stderr(rt):
    ex = rt.execute("y = 48 * 9 * 3()")
    assert "SyntaxWarning: 'int' object is not callable" in ex.stderr and ex.error.type == "TypeError"


def test_pandas_inplace_deprecation_is_not_in_the_cells_stderr_other_warnings_are(rt):
    # pandas 3.1 warns on every inplace=True: four lines after each step that say nothing about the result
    ex = rt.execute(
        "import pandas as pd, warnings\nd = pd.DataFrame({'a': [1, 1]})\nd.drop_duplicates(inplace=True)\n"
        "warnings.warn('look at this')\nprint(len(d))"
    )
    assert ex.stdout == "1\n" and "inplace" not in ex.stderr and "look at this" in ex.stderr
