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


@pytest.fixture(params=["process", "sandbox"])
def kernel_rt_limited(request):
    if request.param == "sandbox":
        from tests.security.attempts import require_sandbox

        require_sandbox()
    rt = create_runtime(request.param, timeout=30, memory_limit_mb=512)
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


def _forged_arrow(table_code: str, options: str = "") -> str:
    return _SERVER + (
        "import os\nimport pyarrow as pa\n"
        "def forged(req, _):\n"
        "    path = os.path.join(req['dir'], '0123456789abcdef.arrow')\n"
        f"    t = {table_code}\n"
        f"    opts = pa.ipc.IpcWriteOptions({options})\n"
        "    with pa.OSFile(path, 'wb') as s, pa.ipc.new_file(s, t.schema, options=opts) as w:\n"
        "        w.write_table(t)\n"
        "    return {'ok': True, 'payload': {'format': 'arrow', 'path': path}}, b''\n"
        "srv._retrieve = forged\nx = 1\n"
    )


HOSTILE_PAYLOADS = {
    # 3 MB of zeros compress to a few kB: refused before anything is decompressed
    "compressed": _forged_arrow("pa.table({'a': pa.array([0] * 400_000, pa.int64())})", "compression='zstd'"),
    # pandas would open() a path the kernel chose to load this "time zone"
    "tz-path": _forged_arrow("pa.table({'t': pa.array([0], pa.timestamp('ns', tz='dateutil//etc/passwd'))})"),
}


@pytest.mark.parametrize("payload", sorted(HOSTILE_PAYLOADS))
def test_hostile_arrow_payloads_are_refused_not_loaded(kernel_rt, payload):
    from cave.runtimes import TransferError

    kernel_rt.execute(HOSTILE_PAYLOADS[payload])
    with pytest.raises(TransferError, match="refused"):
        kernel_rt.retrieve("x")
    kernel_rt.restart()
    kernel_rt.execute("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})")
    assert kernel_rt.retrieve("df")["a"].tolist() == [1, 2]  # the ordinary path still works


def test_a_corrupt_arrow_file_is_an_error_not_a_crash(tmp_path):
    from cave.runtimes.transfer import TransferError, read_arrow

    path = tmp_path / "bad.arrow"
    path.write_bytes(b"ARROW1\x00\x00" + os.urandom(4000))
    with pytest.raises(TransferError):
        read_arrow(str(path), validate=True)


def test_the_host_bounds_what_it_takes_from_the_jupyter_channels():
    """Every socket of cave's zmq context refuses messages over ZMQ_MAX_MESSAGE and queues few."""
    import zmq

    from cave.runtimes.kernel import ZMQ_MAX_MESSAGE, ZMQ_QUEUE, _zmq_context

    ctx = _zmq_context()
    pull = ctx.socket(zmq.PULL)
    try:
        assert pull.getsockopt(zmq.MAXMSGSIZE) == ZMQ_MAX_MESSAGE and pull.getsockopt(zmq.RCVHWM) == ZMQ_QUEUE
        port = pull.bind_to_random_port("tcp://127.0.0.1")
        sender = zmq.Context()
        for size, delivered in ((100, True), (ZMQ_MAX_MESSAGE + 1, False)):
            push = sender.socket(zmq.PUSH)
            push.connect(f"tcp://127.0.0.1:{port}")
            push.send(b"x" * size)
            arrived = pull.poll(1500) != 0 and len(pull.recv()) == size
            push.close(linger=0)
            assert arrived == delivered, size  # an oversized message never reaches the host's queue
        sender.term()
    finally:
        pull.close(linger=0)


def test_memory_limits_count_shared_mappings(kernel_rt_limited):
    """``mmap(-1, n)`` (a shared mapping) is not counted by RLIMIT_DATA; the address-space cap counts it."""
    ex = kernel_rt_limited.execute("import mmap\nm = mmap.mmap(-1, 2 << 30)\nm[-1:] = b'x'\nprint('MAPPED')")
    assert "MAPPED" not in ex.stdout and ex.error is not None
    assert kernel_rt_limited.execute("1 + 1").result == "2"


SHM = (
    "import ctypes, ctypes.util\nlibc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)\n"
    "shmid = libc.shmget(0, 1 << 20, 0o1600)\nprint(shmid)"
)


def test_sysv_segments_do_not_outlive_the_runtime():
    rt = create_runtime("process", timeout=30)
    try:
        shmid = int(rt.execute(SHM).stdout.strip())
    finally:
        rt.close()
    ids = [line.split()[1] for line in open("/proc/sysvipc/shm").readlines()[1:]]
    assert shmid < 0 or str(shmid) not in ids


DAEMON = (
    "import os, time\n"
    "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(600)\n    os._exit(0)\n"
    "time.sleep(0.5)\nprint('spawned')"
)


def test_close_kills_daemons_that_left_the_process_group():
    import psutil

    rt = create_runtime("process", timeout=30)
    token = None
    try:
        assert "spawned" in rt.execute(DAEMON).stdout
        token = rt._kernel.token
    finally:
        rt.close()
    time.sleep(0.3)
    marker = f"CAVE_CONTROL_TOKEN={token}"
    left = []
    for p in psutil.process_iter(["environ"]):
        try:
            if marker in [f"{k}={v}" for k, v in (p.info["environ"] or {}).items()]:
                left.append(p.pid)
        except psutil.Error:
            continue
    assert not left, left


def test_the_connection_file_is_gone_once_the_kernel_runs(kernel_rt):
    """Its HMAC key let a cell take over a sibling kernel of the same user."""
    import glob

    kernel_rt.execute("1")
    assert not glob.glob(os.path.join(kernel_rt._chan_dir, "*.json"))


def test_skills_work_in_the_sandbox(tmp_path):
    """The jail shows the bundled skills (cave's folders) and a run's own skill folders, read-only."""
    from tests.security.attempts import require_sandbox

    require_sandbox()
    from cave.skills import SkillSet

    folder = tmp_path / "skills" / "greet"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: greet\ndescription: says hello\n---\nSay hello politely.\n")
    rt = create_runtime("sandbox", timeout=30)
    try:
        SkillSet([str(tmp_path / "skills")]).install(rt)
        ex = rt.execute("print(activate_skill('greet'))\nprint(activate_skill('sql')[:40])")
        assert ex.error is None and "Say hello politely." in ex.stdout and "Skill 'sql' is active" in ex.stdout
        assert rt.execute(f"open({str(folder / 'x')!r}, 'w')").error is not None  # read-only
    finally:
        rt.close()
