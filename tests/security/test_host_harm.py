"""The host survives whatever the kernel does: a kernel is hostile input, in process and sandbox mode alike.

Each test is an attack on the host process itself (not an escape from the jail, see test_escapes.py): a wait
that never ends, a reply that makes the host raise, an in-process timeout that disables all others.
"""

from __future__ import annotations

import os
import time

import pytest

from cave.runtimes import create_runtime

_SERVER = "import gc\nsrv = next(o for o in gc.get_objects() if type(o).__name__ == '_KernelServer')\n"

STRAY_FRAMES = _SERVER + (
    "import threading, time\nfrom cave.runtimes import transfer\n"
    "def spam():\n"
    "    while True:\n"
    "        srv.sock.sendall(transfer.pack({'id': -1, 'ok': True}, b''))\n"
    "        time.sleep(0.3)\n"
    "threading.Thread(target=spam, daemon=True).start()\n"
    "while True:\n    time.sleep(1)\n"
)


@pytest.fixture(params=["process", "sandbox"])
def kernel_rt(request):
    if request.param == "sandbox":
        from tests.security.attempts import require_sandbox

        require_sandbox()
    rt = create_runtime(request.param, timeout=30, interrupt_grace_s=1.0)
    yield rt
    rt.close()


def test_frames_with_a_wrong_id_do_not_extend_the_timeout(kernel_rt):
    t0 = time.monotonic()
    ex = kernel_rt.execute(STRAY_FRAMES, timeout=2)
    elapsed = time.monotonic() - t0
    assert ex.timed_out and elapsed < 2 + 1 + 5, elapsed  # timeout + interrupt grace + restart, never "forever"
    assert kernel_rt.execute("1 + 1").result == "2"


def test_a_reply_that_says_not_ok_comes_back_as_an_error(kernel_rt):
    kernel_rt.execute(_SERVER + "srv._reply_execution = lambda req, ex: srv._reply(req, {'ok': False, 'error': 'no'})")
    ex = kernel_rt.execute("x = 1")  # must not raise: agent errors never do
    assert ex.error is not None and ex.error.type == "KernelError" and "no" in ex.error.message
    kernel_rt.restart()
    assert kernel_rt.execute("2 + 2").result == "4"


@pytest.mark.parametrize("timeout", [float("inf"), float("nan"), -1, 0, 10**9, True])
def test_timeouts_are_validated_at_every_entry(timeout):
    rt = create_runtime("inprocess")
    with pytest.raises(ValueError, match="finite number of seconds"):
        rt.execute("1", timeout=timeout)
    with pytest.raises(ValueError, match="finite number of seconds"):
        create_runtime("inprocess", timeout=timeout)
    # the process-wide watchdog still works for every in-process runtime afterwards
    ex = rt.execute("while True:\n    pass", timeout=0.3)  # Python code: the in-process timeout stops it
    assert ex.timed_out and ex.duration < 3


BRICK = (
    "import os, socket\nd = os.path.dirname(os.environ['CAVE_CONTROL_SOCKET'])\n"
    "for i in range(2, 400):\n"
    "    s = socket.socket(socket.AF_UNIX)\n"
    "    try:\n        s.bind(os.path.join(d, f'ctl{i}.sock'))\n    except OSError:\n        pass\n"
    "os.chmod(d, 0o500)\nos._exit(1)"
)


def test_a_kernel_cannot_brick_later_restarts(kernel_rt):
    """Sockets left under the names the host binds next, a read-only channel folder: the next kernel starts."""
    ex = kernel_rt.execute(BRICK)
    assert ex.recovery == "crashed"
    for _ in range(3):
        assert kernel_rt.execute("1 + 1").result == "2"
        kernel_rt.restart()


FLOOD_LOG = "import os\nchunk = b'x' * (1 << 20)\nfor _ in range(64):\n    os.write(2, chunk)\nos._exit(1)"


def test_the_kernel_cannot_fill_the_hosts_disk_through_its_log(kernel_rt):
    import glob

    for _ in range(2):  # and again after the restart
        assert kernel_rt.execute(FLOOD_LOG).recovery == "crashed"
    logs = glob.glob(os.path.join(kernel_rt._ctl_dir, "kernel*.log"))
    assert logs and sum(os.path.getsize(p) for p in logs) < 4 << 20  # at most ~1 MiB a kernel, not 64 MiB each
