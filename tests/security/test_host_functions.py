"""Host functions against a hostile kernel: the cell forges ``host_call`` frames on the control channel itself.

Whatever it sends, the host runs only functions registered with ``host=True``, under their own names, with JSON
arguments; nothing else runs on the host, and the runtime keeps working (a frame that breaks the protocol gets
the kernel restarted, with the proxies defined again).
"""

from __future__ import annotations

import time

import pytest
from cave.runtimes import create_runtime

pytestmark = pytest.mark.timeout(180)

_SERVER = "import gc\nsrv = next(o for o in gc.get_objects() if type(o).__name__ == '_KernelServer')\n"
_FORGE = _SERVER + (
    "from cave.runtimes import transfer\n"
    "def forge(frame):\n"
    "    srv.sock.sendall(transfer.pack(frame))\n"
    "    return srv._read_frame(whole=True)[0]\n"
)


class Host:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def book(self, seat: str) -> str:
        self.calls.append(("book", seat))
        return f"booked {seat}"

    def secret(self) -> str:  # injected normally (by value): not callable as a host function
        self.calls.append(("secret", None))
        return "secret"


def _runtime(mode: str):
    if mode == "sandbox":
        from tests.security.attempts import require_sandbox

        require_sandbox()
    return create_runtime(mode, timeout=20, interrupt_grace_s=1.0)


@pytest.mark.parametrize("mode", ["process", "sandbox"])
def test_forged_host_calls_run_nothing_unregistered(mode):
    host = Host()
    with _runtime(mode) as rt:
        rt.inject_function(host.book, host=True)
        rt.inject("config", {"a": 1})
        assert rt.execute(_FORGE).ok
        forged = [
            {"op": "host_call", "call": 1, "name": "os.system", "args": ["touch /tmp/pwned"], "kwargs": {}},
            {"op": "host_call", "call": 2, "name": "config", "args": [], "kwargs": {}},  # injected, not a host fn
            {"op": "host_call", "call": 3, "name": "__import__", "args": ["os"], "kwargs": {}},
            {"op": "host_call", "call": 4, "name": ["book"], "args": ["1A"], "kwargs": {}},
            {"op": "host_call", "call": 5, "name": "book", "args": "1A", "kwargs": {}},
            {"op": "host_call", "call": 6, "name": "book", "args": [], "kwargs": ["seat"]},
            {"op": "host_call", "call": 7, "name": "book", "args": [], "kwargs": {"seat": "1A", "x": 1}},
            {"op": "host_call", "call": "x", "name": "book", "args": ["2B"]},
        ]
        ex = rt.execute(f"answers = [forge(f) for f in {forged!r}]")
        assert ex.ok, ex.error
        answers = rt.retrieve("answers")
        assert [a["ok"] for a in answers] == [False] * 7 + [False]
        assert answers[0]["error"]["type"] == "NameError" and "os.system" in answers[0]["error"]["message"]
        assert answers[1]["error"]["type"] == answers[2]["error"]["type"] == "NameError"
        assert answers[4]["error"]["type"] == answers[5]["error"]["type"] == "TypeError"
        assert answers[6]["error"]["type"] == "TypeError"  # the host function's own error: unexpected keyword
        assert host.calls == []
        assert rt.execute("book('3C')").result == "'booked 3C'"
        assert host.calls == [("book", "3C")]


@pytest.mark.parametrize("mode", ["process", "sandbox"])
def test_broken_host_call_frames_restart_the_kernel_and_run_nothing(mode):
    host = Host()
    with _runtime(mode) as rt:
        rt.inject_function(host.book, host=True)
        cases = {
            "huge": _SERVER + "import struct\nsrv.sock.sendall(struct.pack('>II', 1 << 30, 0))\nimport time\n"
            "time.sleep(30)",
            "not json": _SERVER + 'import struct\nbody = b\'{"op": "host_call", "call": 1, "na\'\n'
            "srv.sock.sendall(struct.pack('>II', len(body), 0) + body)\nimport time\ntime.sleep(30)",
            "deep": _SERVER + "import struct\nbody = b'{\"op\": \"host_call\", \"args\": ' + b'[' * 100000 + b']' * "
            "100000 + b'}'\nsrv.sock.sendall(struct.pack('>II', len(body), 0) + body)\nimport time\ntime.sleep(30)",
        }
        for what, code in cases.items():
            t0 = time.monotonic()
            ex = rt.execute(code)
            took = time.monotonic() - t0
            assert ex.error is not None and ex.error.type == "KernelDied" and ex.recovery == "crashed", (what, ex)
            assert took < 15, (what, took)
            assert rt.execute("book('1A')").result == "'booked 1A'", what  # the proxy was defined again
        assert host.calls == [("book", "1A")] * 3


@pytest.mark.parametrize("mode", ["process", "sandbox"])
def test_host_calls_outside_a_cell_are_ignored(mode):
    """A thread left behind forges host calls between cells: the host answers nothing and runs nothing."""
    host = Host()
    with _runtime(mode) as rt:
        rt.inject_function(host.book, host=True)
        code = _SERVER + (
            "import threading, time\nfrom cave.runtimes import transfer\n"
            "def spam():\n    time.sleep(0.3)\n    for i in range(40):\n"
            "        srv.sock.sendall(transfer.pack({'op': 'host_call', 'call': 99, 'name': 'book', "
            "'args': ['9Z'], 'kwargs': {}}))\n        time.sleep(0.05)\n"
            "threading.Thread(target=spam, daemon=True).start()"
        )
        assert rt.execute(code).ok
        time.sleep(0.5)
        assert rt.describe()  # a request other than a cell skips the frames
        time.sleep(1.5)
        assert host.calls == []  # nothing ran between cells
        ex = rt.execute("book('1A')")  # frames still queued reach the host during a cell: registered calls only
        assert ex.result == "'booked 1A'", ex
        assert ("book", "1A") in host.calls and {name for name, _ in host.calls} == {"book"}
        assert rt.execute("1 + 1").result == "2"
