"""Attacks on the HOST process through a kernel (not escapes from the jail: see attempts.py). Each one tries to
hang, crash, fill the memory or disk of, or brick the host's runtime; each returns None when the host survived
(the call came back in time, nothing raised that should not, resources stayed bounded, the runtime still works),
else what went wrong. Used by test_host_harm.py and ``python -m cave.benchmarks.reliability``."""

from __future__ import annotations

import glob
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from cave.runtimes import TransferError, create_runtime

_SERVER = "import gc\nsrv = next(o for o in gc.get_objects() if type(o).__name__ == '_KernelServer')\n"


@dataclass
class Harm:
    id: str
    kind: str  # hang | crash | memory | disk | bricked
    run: Callable[[str], str | None]  # mode -> None if survived, else what went wrong


def _runtime(mode: str, **options):
    return create_runtime(mode, timeout=30, interrupt_grace_s=1.0, **options)


def _works(rt) -> str | None:
    return None if rt.execute("1 + 1").result == "2" else "the runtime did not work afterwards"


def stray_frames(mode: str) -> str | None:
    """Frames with a wrong request id, every 0.3 s, while the cell sleeps: the timeout must still hold."""
    code = _SERVER + (
        "import threading, time\nfrom cave.runtimes import transfer\n"
        "def spam():\n    while True:\n"
        "        srv.sock.sendall(transfer.pack({'id': -1, 'ok': True}, b''))\n        time.sleep(0.3)\n"
        "threading.Thread(target=spam, daemon=True).start()\nwhile True:\n    time.sleep(1)\n"
    )
    with _runtime(mode) as rt:
        t0 = time.monotonic()
        ex = rt.execute(code, timeout=2)
        took = time.monotonic() - t0
        if not ex.timed_out or took > 8:
            return f"execute(timeout=2) came back after {took:.1f} s (timed_out={ex.timed_out})"
        return _works(rt)


def forged_not_ok(mode: str) -> str | None:
    """A reply that says not ok: execute() must return an error, not raise."""
    with _runtime(mode) as rt:
        rt.execute(_SERVER + "srv._reply_execution = lambda req, ex: srv._reply(req, {'ok': False, 'error': 'no'})")
        try:
            ex = rt.execute("x = 1")
        except Exception as e:
            return f"execute raised {type(e).__name__}: {e}"
        if ex.error is None:
            return "no error reported"
        rt.restart()
        return _works(rt)


def brick_restarts(mode: str) -> str | None:
    """Sockets under the names the host binds next, a read-only channel folder, then exit."""
    code = (
        "import os, socket\nd = os.path.dirname(os.environ['CAVE_CONTROL_SOCKET'])\n"
        "for i in range(2, 400):\n    s = socket.socket(socket.AF_UNIX)\n"
        "    try:\n        s.bind(os.path.join(d, f'ctl{i}.sock'))\n    except OSError:\n        pass\n"
        "os.chmod(d, 0o500)\nos._exit(1)"
    )
    with _runtime(mode) as rt:
        rt.execute(code)
        for _ in range(3):
            if problem := _works(rt):
                return problem
            rt.restart()
    return None


def flood_log(mode: str) -> str | None:
    """64 MiB to stderr, crash, again after the restart: the host's disk must not pay."""
    code = "import os\nchunk = b'x' * (1 << 20)\nfor _ in range(64):\n    os.write(2, chunk)\nos._exit(1)"
    with _runtime(mode) as rt:
        for _ in range(2):
            rt.execute(code)
        size = sum(os.path.getsize(p) for p in glob.glob(os.path.join(rt._ctl_dir, "kernel*.log")))
        if size > 4 << 20:
            return f"the kernel logs took {size >> 20} MiB of the host's disk"
        return _works(rt)


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


def _refused(mode: str, code: str) -> str | None:
    with _runtime(mode) as rt:
        rt.execute(code)
        try:
            rt.retrieve("x")
        except TransferError:
            rt.restart()
            return _works(rt)
        return "the host loaded the payload"


def zip_bomb_arrow(mode: str) -> str | None:
    """A few kB of zstd that expand to MBs (GBs at scale) in the host: refused before decompression."""
    return _refused(mode, _forged_arrow("pa.table({'a': pa.array([0] * 400_000, pa.int64())})", "compression='zstd'"))


def tz_path_arrow(mode: str) -> str | None:
    """A time zone named dateutil/<path>: pandas would open a file the kernel chose."""
    return _refused(
        mode, _forged_arrow("pa.table({'t': pa.array([0], pa.timestamp('ns', tz='dateutil//etc/passwd'))})")
    )


def fifo_dtype_arrow(mode: str) -> str | None:
    """pandas' metadata naming, as a column's dtype, a FIFO the kernel made in its working directory (a host path):
    a host that followed the name would block on the open."""
    table = (
        "(os.path.exists('tz.fifo') or os.mkfifo('tz.fifo'), pa.table({'v': [1]}).replace_schema_metadata({b'pandas': "
        "__import__('json').dumps({'index_columns': [], 'column_indexes': [], 'columns': [{'name': 'v', "
        "'field_name': 'v', 'pandas_type': 'int64', 'numpy_type': 'datetime64[ns, dateutil/' + "
        "os.path.abspath('tz.fifo') + ']', 'metadata': None}]})}))[1]"
    )
    with _runtime(mode) as rt:
        rt.execute(_forged_arrow(table))
        t0 = time.monotonic()
        try:
            rt.retrieve("x")
        except TransferError:
            pass
        else:
            return "the host loaded the payload"
        if time.monotonic() - t0 > 10:
            return f"retrieve took {time.monotonic() - t0:.0f} s"
        return _works(rt)


def shared_mapping(mode: str) -> str | None:
    """mmap(-1, 3 GiB): a shared mapping RLIMIT_DATA does not count."""
    with _runtime(mode, memory_limit_mb=512) as rt:
        ex = rt.execute("import mmap\nm = mmap.mmap(-1, 3 << 30)\nm[-1:] = b'x'\nprint('MAPPED')")
        if "MAPPED" in ex.stdout:
            return "a 3 GiB mapping past memory_limit_mb=512 (+ 1 GiB headroom)"
        return _works(rt)


def sysv_segment(mode: str) -> str | None:
    """A SysV shared-memory segment must not outlive the runtime."""
    code = (
        "import ctypes, ctypes.util\nlibc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)\n"
        "print(libc.shmget(0, 1 << 20, 0o1600))"
    )
    rt = _runtime(mode)
    try:
        out = rt.execute(code).stdout.strip()
    finally:
        rt.close()
    if mode == "sandbox":  # an IPC namespace of its own: gone with the jail
        return None
    shmid = int(out) if out.lstrip("-").isdigit() else -1
    with open("/proc/sysvipc/shm") as f:
        ids = [line.split()[1] for line in f.readlines()[1:]]
    return f"segment {shmid} outlived close()" if shmid >= 0 and str(shmid) in ids else None


def setsid_daemon(mode: str) -> str | None:
    """A double-forked setsid daemon must die with the runtime."""
    import psutil

    code = (
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(600)\n"
        "    os._exit(0)\ntime.sleep(0.5)\nprint('spawned')"
    )
    rt = _runtime(mode)
    try:
        rt.execute(code)
        token = rt._kernel.token
    finally:
        rt.close()
    time.sleep(0.3)
    marker = f"CAVE_CONTROL_TOKEN={token}"
    for p in psutil.process_iter(["environ"]):
        try:
            if marker in [f"{k}={v}" for k, v in (p.info["environ"] or {}).items()]:
                return f"process {p.pid} outlived close()"
        except psutil.Error:
            continue
    return None


def connection_file(mode: str) -> str | None:
    """The kernel's connection file holds its HMAC key: a sibling kernel of the same user could take it over."""
    with _runtime(mode) as rt:
        rt.execute("1")
        left = glob.glob(os.path.join(rt._chan_dir, "*.json"))
        return f"left on disk: {left}" if left else None


HARMS = [
    Harm("stray-frames", "hang", stray_frames),
    Harm("forged-not-ok", "crash", forged_not_ok),
    Harm("brick-restarts", "bricked", brick_restarts),
    Harm("flood-log", "disk", flood_log),
    Harm("zip-bomb-arrow", "memory", zip_bomb_arrow),
    Harm("tz-path-arrow", "crash", tz_path_arrow),
    Harm("fifo-dtype-arrow", "hang", fifo_dtype_arrow),
    Harm("shared-mapping", "memory", shared_mapping),
    Harm("sysv-segment", "memory", sysv_segment),
    Harm("setsid-daemon", "bricked", setsid_daemon),
    Harm("connection-file", "crash", connection_file),
]
