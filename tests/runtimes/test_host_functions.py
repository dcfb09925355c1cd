"""Host functions (``inject_function(fn, host=True)``) against a real kernel: the function runs in this process,
the kernel calls a proxy with the same name, signature and docstring."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from cave.runtimes import create_runtime
from cave.runtimes.inprocess import InProcessRuntime
from cave.runtimes.kernel import KernelRuntime

pytestmark = pytest.mark.timeout(120)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def record(self, city: str, days: int = 1, *, units: str = "metric") -> dict:
        """Book a forecast for a city.

        More text the preview leaves out."""
        self.calls.append((city, days, units))
        return {"city": city, "n": len(self.calls), "ok": True}


class Refused(Exception):
    pass


def refuse(reason: str) -> None:
    raise Refused(reason)


@pytest.fixture(scope="module")
def rt():
    runtime = KernelRuntime(timeout=30, interrupt_grace_s=1.0)
    yield runtime
    runtime.close()


def test_calls_run_on_the_host_and_are_recorded(rt):
    rec = Recorder()
    rt.inject_function(rec.record, host=True, description="books forecasts", name="forecast")
    ex = rt.execute("out = [forecast('Oslo'), forecast('Rome', 3, units='imperial')]\nout[-1]")
    assert ex.ok, ex.error
    assert rec.calls == [("Oslo", 1, "metric"), ("Rome", 3, "imperial")]  # the host's own list, not a copy
    assert rt.retrieve("out") == [{"city": "Oslo", "n": 1, "ok": True}, {"city": "Rome", "n": 2, "ok": True}]
    ex = rt.execute("forecast('Oslo', 1, 2)")  # checked against the signature in the kernel, like a real call
    assert ex.error.type == "TypeError" and "forecast(city: str" in ex.error.message
    assert len(rec.calls) == 2


def test_describe_shows_the_signature_and_docstring(rt):
    rt.inject_function(Recorder().record, host=True, description="books forecasts", name="forecast")
    info = next(i for i in rt.describe() if i.name == "forecast")
    assert info.kind == "function" and info.injected and info.description == "books forecasts"
    assert info.preview == (
        "forecast(city: str, days: int = 1, *, units: str = 'metric') -> dict — Book a forecast for a city."
    )
    ex = rt.execute("import inspect\nprint(forecast.__doc__.splitlines()[0], inspect.signature(forecast))")
    assert (
        ex.stdout.strip() == "Book a forecast for a city. (city: str, days: int = 1, *, units: str = 'metric') -> dict"
    )


def test_exceptions_come_back_as_classes_the_kernel_knows(rt):
    rt.inject_function(refuse, host=True)
    unknown = rt.execute("refuse('no seats left')")
    assert unknown.error.type == "RuntimeError" and unknown.error.message == "Refused: no seats left"
    rt.execute("class Refused(Exception):\n    pass")  # now the namespace knows the name
    ex = rt.execute("try:\n    refuse('no seats left')\nexcept Refused as e:\n    caught = str(e)\ncaught")
    assert ex.ok and ex.result == "'no seats left'"

    def lookup(key: str) -> int:
        return {"a": 1}[key]

    rt.inject_function(lookup, host=True)
    assert rt.execute("lookup('b')").error.type == "KeyError"  # builtins by name

    def stop() -> None:
        raise SystemExit("the run is over")

    rt.inject_function(stop, host=True)
    ex = rt.execute("try:\n    stop()\nexcept Exception:\n    pass")  # not swallowed by except Exception
    assert ex.error.type == "HostCallAborted" and "SystemExit" in ex.error.message


def test_non_json_values_are_refused(rt):
    rec = Recorder()
    rt.inject_function(rec.record, host=True, name="forecast")
    ex = rt.execute("import numpy as np\nforecast('Oslo', np.int64(2))")
    assert ex.error.type == "TypeError" and "JSON values only" in ex.error.message and "int64" in ex.error.message
    ex = rt.execute("forecast({1, 2})")
    assert ex.error.type == "TypeError" and "set" in ex.error.message
    ex = rt.execute("forecast(lambda x: x**3)")  # BFCL: integrate(lambda x: x**3, ...) where the schema wants text
    assert "got a Python function (<lambda>)" in ex.error.message and "pass it as text, e.g. 'x**3'" in ex.error.message
    assert rec.calls == []  # nothing reached the host

    def gives_a_set() -> set:
        return {1}

    rt.inject_function(gives_a_set, host=True)
    ex = rt.execute("gives_a_set()")
    assert ex.error.type == "TypeError" and "not JSON" in ex.error.message
    assert rt.execute("1 + 1").result == "2"


def test_a_blocking_host_call_does_not_extend_the_timeout(rt):
    release = threading.Event()
    finished: list[bool] = []

    def wait_for_release() -> str:
        release.wait(20)
        finished.append(True)
        return "late"

    rt.inject_function(wait_for_release, host=True)
    t0 = time.monotonic()
    ex = rt.execute("wait_for_release()", timeout=1)
    took = time.monotonic() - t0
    assert ex.timed_out and ex.error.type == "TimeoutError" and took < 4, (took, ex)
    assert ex.recovery == "interrupted"  # the proxy's wait was interrupted; the kernel did not need a restart
    release.set()
    deadline = time.monotonic() + 5
    while not finished and time.monotonic() < deadline:
        time.sleep(0.05)
    assert finished
    rec = Recorder()  # the late result was dropped: the next calls get their own answers
    rt.inject_function(rec.record, host=True, name="forecast")
    ex = rt.execute("forecast('Oslo')['n'], 1 + 1")
    assert ex.ok and ex.result == "(1, 2)", ex


def test_a_blocking_host_function_does_not_stall_the_event_loop(rt):
    def slow() -> int:
        time.sleep(0.5)
        return 7

    rt.inject_function(slow, host=True)

    async def main() -> tuple[str | None, int]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.02)
                ticks += 1

        ticker = asyncio.ensure_future(tick())
        ex = await rt.aexecute("slow()")
        ticker.cancel()
        return ex.result, ticks

    result, ticks = asyncio.run(main())
    assert result == "7" and ticks >= 10


def test_calls_from_a_thread_or_an_async_cell(rt):
    rec = Recorder()
    rt.inject_function(rec.record, host=True, name="forecast")
    ex = rt.execute("import asyncio\nawait asyncio.sleep(0.01)\nforecast('Lima')['city']")
    assert ex.ok and ex.result == "'Lima'", ex
    code = (
        "import threading\nerrors = []\n"
        "def worker():\n    try:\n        forecast('Oslo')\n    except RuntimeError as e:\n        errors.append(str(e))\n"
        "t = threading.Thread(target=worker)\nt.start()\nt.join()\nerrors"
    )
    ex = rt.execute(code)
    assert ex.ok and "not from a thread" in ex.result
    assert rec.calls == [("Lima", 1, "metric")]


def test_restart_keeps_the_proxy():
    rec = Recorder()
    with KernelRuntime(timeout=30) as rt:
        rt.inject_function(rec.record, host=True, name="forecast")
        rt.restart()
        assert rt.execute("forecast('Oslo')['n']").result == "1"
        rt.execute("import os\nos._exit(1)")  # a crash restarts the kernel: the proxy is defined again
        assert rt.execute("forecast('Rome')['n']").result == "2"
        assert rt.registered["forecast"].host
    assert rec.calls == [("Oslo", 1, "metric"), ("Rome", 1, "metric")]


def test_process_mode_has_host_functions():
    rec = Recorder()
    with create_runtime("process", timeout=30) as rt:
        rt.inject_function(rec.record, host=True, name="forecast")
        assert rt.execute("forecast('Oslo')['n']").result == "1"
    assert rec.calls == [("Oslo", 1, "metric")]


def test_inprocess_runtime_accepts_host_functions():
    rec = Recorder()
    rt = InProcessRuntime()
    rt.inject_function(rec.record, host=True, name="forecast")
    assert rt.execute("forecast('Oslo')['n']").result == "1"
    assert rt.registered["forecast"].host and rt.namespace["forecast"] == rec.record
    rt.restart()
    assert rt.execute("forecast('Rome')['n']").result == "2"
    rt.close()
