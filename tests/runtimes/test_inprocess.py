"""InProcessRuntime: real CPython execution in this process, no doubles."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time

import pandas as pd
import pytest
from cave.runtimes import InProcessRuntime, create_runtime
from cave.runtimes.base import RuntimeError_


@pytest.fixture
def rt():
    with InProcessRuntime(timeout=10) as runtime:
        yield runtime


def test_state_persists_and_trailing_expression_is_the_result(rt):
    assert rt.execute("x = 20").ok
    ex = rt.execute("print('x is', x)\nx * 2 + 2")
    assert ex.ok, ex.error
    assert ex.stdout == "x is 20\n"
    assert ex.result == "42"
    assert rt.execute("None").result is None  # like a REPL, None is not shown
    assert rt.execute("y = x").result is None


def test_zero_copy_inject_and_retrieve(rt):
    df = pd.DataFrame({"a": [1, 2, 3]})
    rt.inject("df", df, description="the sales table")
    rt.execute("df['b'] = df['a'] * 10\nresult = df")
    assert rt.retrieve("df") is df
    assert rt.retrieve("result") is df
    assert list(df["b"]) == [10, 20, 30]


def test_registry_name():
    with create_runtime("inprocess") as runtime:
        assert isinstance(runtime, InProcessRuntime)
        assert runtime.execute("1 + 1").result == "2"


def test_two_runtimes_are_isolated():
    with InProcessRuntime() as a, InProcessRuntime() as b:
        a.execute("secret = 'a'")
        assert b.execute("secret").error.type == "NameError"
        assert b.execute("print('from b')").stdout == "from b\n"
        assert "secret" not in [v.name for v in b.describe()]


def test_concurrent_threads_never_mix_output():
    runtimes = [InProcessRuntime() for _ in range(4)]
    code = "import time\nfor i in range(200):\n    print(TAG, i)\n    if i % 20 == 0: time.sleep(0.001)\n"
    results: dict[int, str] = {}

    def work(i: int) -> None:
        runtimes[i].inject("TAG", f"rt{i}")
        results[i] = runtimes[i].execute(code).stdout

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, out in results.items():
        lines = out.splitlines()
        assert len(lines) == 200
        assert all(line.startswith(f"rt{i} ") for line in lines), f"runtime {i} saw foreign output"
    for r in runtimes:
        r.close()


async def test_concurrent_asyncio_tasks_never_mix_output():
    a, b = InProcessRuntime(), InProcessRuntime()
    code = "import asyncio\nfor i in range(50):\n    print(NAME, i)\n    await asyncio.sleep(0)\n"
    a.inject("NAME", "a")
    b.inject("NAME", "b")
    ea, eb = await asyncio.gather(a.aexecute(code), b.aexecute(code))
    assert ea.ok and eb.ok
    assert ea.stdout.splitlines() == [f"a {i}" for i in range(50)]
    assert eb.stdout.splitlines() == [f"b {i}" for i in range(50)]
    a.close()
    b.close()


def test_stderr_and_output_of_injected_functions_are_captured(rt):
    import sys

    def shout(msg: str) -> None:
        print(msg.upper())
        print("warn", file=sys.stderr)

    rt.inject_function(shout)
    ex = rt.execute("shout('hello')")
    assert ex.stdout == "HELLO\n"
    assert ex.stderr == "warn\n"


def test_errors_carry_the_agents_line_numbers(rt):
    rt.execute("def divide(a, b):\n    # a comment\n    return a / b\n")
    ex = rt.execute("x = 1\ny = 2\nz = divide(x, 0)\n")
    assert ex.error.type == "ZeroDivisionError"
    assert ex.error.lineno == 3
    tb = ex.error.traceback
    assert 'File "<cell-2>", line 3, in <module>' in tb
    assert "line 3, in divide" in tb and "return a / b" in tb
    assert "inprocess.py" not in tb  # the runtime's own frames are trimmed
    assert rt.execute("k = 1").ok  # still usable


def test_library_frames_are_collapsed(rt):
    ex = rt.execute("import pandas as pd\ndf = pd.DataFrame({'a': [1]})\ndf['missing']")
    assert ex.error.type == "KeyError"
    assert ex.error.lineno == 3
    assert "library code" in ex.error.traceback
    assert ex.error.traceback.count("File ") <= 3


def test_syntax_error_has_line_and_caret(rt):
    ex = rt.execute("a = 1\nb = (2 +\n")
    assert not ex.ok
    assert ex.error.type == "SyntaxError"
    assert ex.error.lineno == 2
    assert "^" in ex.error.traceback and "<cell-1>" in ex.error.traceback
    ex = rt.execute("for i in range(3):\nprint(i)")
    assert ex.error.type == "IndentationError" and ex.error.lineno == 2


def test_top_level_await_sync_and_async(rt):
    code = "import asyncio\nawait asyncio.sleep(0.001)\nvalue = 7\nawait asyncio.sleep(0, value * 6)"
    assert rt.execute(code).result == "42"

    async def main():
        ex = await rt.aexecute(code)
        assert ex.result == "42"
        # sync execute called from inside a running loop still works (helper thread)
        assert rt.execute(code).result == "42"
        # tasks created by one cell survive to the next (same loop in aexecute)
        await rt.aexecute("task = asyncio.ensure_future(asyncio.sleep(0, 'done'))")
        return await rt.aexecute("await task")

    assert asyncio.run(main()).result == "'done'"


def test_busy_loop_is_stopped_within_timeout_and_runtime_stays_usable(rt):
    t0 = time.monotonic()
    ex = rt.execute("n = 0\nwhile True:\n    n += 1\n", timeout=0.5)
    assert time.monotonic() - t0 < 0.5 + 2
    assert ex.timed_out and not ex.ok
    assert ex.error.type == "TimeoutError" and ex.error.lineno in (2, 3)
    assert rt.execute("n > 0").result == "True"  # state before the stop is kept


def test_swallowing_the_timeout_does_not_help(rt):
    code = "while True:\n    try:\n        while True: pass\n    except BaseException:\n        pass\n"
    t0 = time.monotonic()
    ex = rt.execute(code, timeout=0.3)
    assert ex.timed_out
    assert time.monotonic() - t0 < 0.3 + 2


async def test_async_cell_timeout(rt):
    t0 = time.monotonic()
    ex = await rt.aexecute("import asyncio\nawait asyncio.sleep(30)", timeout=0.3)
    assert ex.timed_out and ex.error.type == "TimeoutError" and ex.error.lineno == 2
    assert time.monotonic() - t0 < 2
    assert (await rt.aexecute("1")).result == "1"


def test_interrupt_from_another_thread(rt):
    timer = threading.Timer(0.3, rt.interrupt)
    timer.start()
    ex = rt.execute("while True: pass", timeout=None)
    assert ex.error.type == "KeyboardInterrupt"
    assert not ex.timed_out


def test_exit_and_input_do_not_escape(rt):
    ex = rt.execute("exit(3)")
    assert ex.error.type == "SystemExit"
    ex = rt.execute("input('name? ')")
    assert ex.error.type == "RuntimeError" and "input()" in ex.error.message
    assert rt.execute("2").result == "2"


def test_output_is_bounded():
    with InProcessRuntime(max_output_chars=1000) as rt:
        ex = rt.execute("for i in range(10_000): print('x' * 50)")
        assert len(ex.stdout) < 1200
        assert "more characters of output not kept" in ex.stdout


def test_retrieve_unknown_name_lists_available(rt):
    rt.inject("alpha", 1)
    rt.execute("beta = 2")
    with pytest.raises(KeyError) as info:
        rt.retrieve("gamma")
    message = str(info.value)
    assert "gamma" in message and "alpha" in message and "beta" in message
    with pytest.raises(KeyError):
        rt.retrieve("__builtins__")


def test_describe_covers_injected_and_agent_created(rt):
    @dataclasses.dataclass
    class Point:
        x: float
        y: float = 0.0

    def area(w: float, h: float) -> float:
        """Area of a rectangle."""
        return w * h

    rt.inject("sales", pd.DataFrame({"region": ["n", "s"], "amount": [1.5, 2.0]}), description="sales by region")
    rt.inject_function(area)
    rt.inject_type(Point)
    rt.execute("totals = {'n': 1.5, 's': 2.0}\nnames = ['a', 'b', 'c']\np = Point(1.0)\nimport math")
    info = {v.name: v for v in rt.describe()}
    assert set(info) == {"sales", "area", "Point", "totals", "names", "p", "math"}
    assert info["sales"].injected and info["sales"].description == "sales by region"
    assert info["sales"].type == "pandas.DataFrame"
    assert "2 rows x 2 columns" in info["sales"].preview and "region: str" in info["sales"].preview
    assert info["area"].kind == "function" and "area(w: float, h: float) -> float" in info["area"].preview
    assert "Area of a rectangle." in info["area"].preview
    assert info["Point"].kind == "type" and "x: float" in info["Point"].preview
    assert not info["totals"].injected and "dict len 2" in info["totals"].preview
    assert "list len 3 of str" == info["names"].preview
    assert "x=1.0" in info["p"].preview
    assert info["math"].kind == "module"


def test_restart_clears_state_and_reinjects(rt):
    rt.inject("base", 10)
    rt.execute("base = 11\nscratch = 1")
    rt.restart()
    assert rt.retrieve("base") == 10
    assert rt.execute("scratch").error.type == "NameError"


def test_bad_inputs(rt):
    with pytest.raises(ValueError, match="identifier"):
        rt.inject("not a name", 1)
    with pytest.raises(ValueError, match="identifier"):
        rt.inject("class", 1)
    with pytest.raises(ValueError, match="timeout"):
        rt.execute("1", timeout=0)
    with pytest.raises(ValueError, match="kernel"):
        InProcessRuntime(memory_limit_mb=512)
    rt.close()
    rt.close()  # idempotent
    with pytest.raises(RuntimeError_, match="closed"):
        rt.execute("1")


def test_trivial_cell_overhead_is_microseconds(rt):
    # Not a benchmark (see benchmarks/perf/runtime.py); a guard against gross regressions.
    rt.execute("x = 1")
    t0 = time.perf_counter()
    for _ in range(200):
        rt.execute("x = 1")
    assert (time.perf_counter() - t0) / 200 < 0.002


async def test_async_twins_of_the_verbs(rt):
    await rt.astart()
    await rt.ainject("n", 41)
    assert (await rt.aexecute("n += 1\nn")).result == "42"
    assert await rt.aretrieve("n") == 42
    assert [v.name for v in await rt.adescribe()] == ["n"]
    await rt.arestart()
    assert await rt.aretrieve("n") == 41


def test_compiler_warnings_go_to_the_cells_stderr_not_the_hosts(rt, capfd):
    # a small model's `48 * 9 * 3()` warns at compile time: the model should read it, the host's terminal should not
    ex = rt.execute("x = 1\ny = 48 * 9 * 3()")
    assert "SyntaxWarning: 'int' object is not callable" in ex.stderr and ":2:" in ex.stderr
    assert ex.error is not None and ex.error.type == "TypeError"
    ex = rt.execute("async def f():\n    return 2 is 2\nawait f()")
    assert "SyntaxWarning" in ex.stderr and ex.result == "True"
    assert "SyntaxWarning" not in capfd.readouterr().err
