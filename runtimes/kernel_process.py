"""The kernel process as the host sees it: its jupyter-client manager, its control socket, its bounded log, and how
it (and everything it started) is killed and cleaned up. The protocol on top is ``cave.runtimes.kernel``."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import socket
import stat
import struct
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

from cave.runtimes import transfer
from cave.runtimes.base import Execution, RuntimeError_, TransferError

_BOOT = "from cave.runtimes.kernel_server import kernel_main; kernel_main()"
_PAYLOAD_NAME = re.compile(r"[0-9a-f]{16}\.(bin|arrow|npy)")  # what transfer.new_path makes, nothing else
_MID_FRAME_TIMEOUT_S = 60.0  # a frame that started arriving must finish within this
_MID_FRAME_GRACE_S = 5.0  # ... and at most this long after the call's own deadline
_LIVENESS_CHECK_S = 0.25  # while waiting for a reply, check this often that the kernel still lives


def _cave_root() -> str:
    """The folder that holds the ``cave`` package: a repository (editable install) or site-packages."""
    spec = importlib.util.find_spec("cave")
    locations = list(spec.submodule_search_locations or []) if spec else []
    return os.path.dirname(os.path.abspath(locations[0])) if locations else os.getcwd()


class KernelLog:
    """The kernel's stdout and stderr, read by the host through a pipe: whatever the kernel writes, the host keeps
    the last ``keep`` bytes in memory (for the last words of a crash) and at most ``max_file`` bytes on disk.

    A log file handed to the kernel as its stdout let a cell write until the file-size limit, crash, and do it
    again after every restart; the kernel never gets a file of the host's now, only the pipe's write end.
    """

    def __init__(self, path: str, keep: int = 64 << 10, max_file: int = 1 << 20) -> None:
        self.path, self.keep, self.max_file = path, keep, max_file
        self._tail = bytearray()
        self._lock = threading.Lock()
        self._read_fd, self.write_fd = os.pipe()
        self._file = open(path, "ab")  # noqa: SIM115 - closed by the pump at EOF
        self._written = 0
        self._thread = threading.Thread(target=self._pump, name="cave-kernel-log", daemon=True)
        self._thread.start()

    def started(self) -> None:
        """Close the host's copy of the write end (the kernel has its own): EOF comes when the kernel is gone."""
        with contextlib.suppress(OSError):
            os.close(self.write_fd)

    def _pump(self) -> None:
        try:
            while chunk := os.read(self._read_fd, 65536):
                with self._lock:
                    self._tail += chunk
                    del self._tail[: max(0, len(self._tail) - self.keep)]
                if self._written < self.max_file:
                    part = chunk[: self.max_file - self._written]
                    self._file.write(part)
                    self._file.flush()
                    self._written += len(part)
                    if self._written >= self.max_file:
                        self._file.write(b"\n[cave: log cut at max_file bytes; the kernel wrote more]\n")
        except OSError:
            pass
        finally:
            os.close(self._read_fd)
            self._file.close()

    def tail(self, limit: int = 4000) -> str:
        with self._lock:
            return bytes(self._tail[-limit:]).decode(errors="replace")


@dataclass
class KernelProcess:
    manager: Any  # jupyter_client.KernelManager
    process: Any  # subprocess.Popen
    sock: socket.socket
    pid: int
    pgid: int | None
    log: KernelLog
    started_in: float  # seconds from launch to the control channel's hello
    # The kernel's own pid when a wrapper (a sandbox launcher) started it: signals other than SIGKILL go
    # there, since the wrapper may not pass them on. Found from the control socket's peer credentials.
    signal_pid: int | None = None
    cleanup: Any = None  # called after kill(): e.g. a sandbox removing its cgroup
    token: str = ""  # in the environment of the kernel and of everything it starts: how kill() finds them

    def alive(self) -> bool:
        return self.process.poll() is None

    def exit_description(self) -> str:
        code = self.process.poll()
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"killed by signal {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"

    def log_tail(self, limit: int = 4000) -> str:
        """The end of the kernel's stderr, cut to what helps: the fatal error and the agent's frames."""
        self.log._thread.join(0.5)  # the pipe drains when the kernel is gone
        return last_words(self.log.tail(limit))

    def signal(self, signum: int) -> None:
        try:
            if self.signal_pid is not None and signum != signal.SIGKILL:
                os.kill(self.signal_pid, signum)
            elif self.pgid is not None:
                os.killpg(self.pgid, signum)  # the kernel and whatever it spawned
            else:
                os.kill(self.pid, signum)
        except ProcessLookupError:
            pass

    def stopped(self) -> bool:
        """Whether the kernel process is stopped (state T in /proc/PID/stat: SIGSTOP, from us or itself)."""
        try:
            with open(f"/proc/{self.signal_pid or self.pid}/stat", "rb") as f:
                return f.read().rsplit(b")", 1)[1].split()[0] == b"T"
        except (OSError, IndexError):
            return False

    def continue_if_stopped(self) -> None:
        if self.stopped():
            self.signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL the kernel and everything it started, reap, release resources. Safe to call twice."""
        with contextlib.suppress(OSError):
            self.sock.close()
        if self.alive():
            self.signal(signal.SIGKILL)
        family = kill_tagged(self.token) if self.token else set()  # left the group (setsid, double fork)
        remove_shm_segments({self.pid, self.signal_pid or self.pid, *family})
        with contextlib.suppress(Exception):
            self.process.wait(timeout=5)
        with contextlib.suppress(Exception):
            self.manager.cleanup_resources()
        if self.cleanup is not None:
            cleanup, self.cleanup = self.cleanup, None
            cleanup()


_MACHINERY = (
    "site-packages",
    "/asyncio/",
    "/threading.py",
    "runtimes/kernel.py",
    "runtimes/inprocess.py",
    '"<string>"',
)


def kill_tagged(token: str) -> set[int]:
    """SIGKILL every process of this user whose environment carries ``CAVE_CONTROL_TOKEN=token``: the kernel's
    descendants, also those that left its process group (``setsid`` and a double fork). Returns their pids.
    A process that cleared its environment is not found this way: process mode says so (docs/threat-model.md);
    a pids cgroup, where one can be made, or the sandbox's pid namespace catches those too."""
    marker = f"CAVE_CONTROL_TOKEN={token}".encode()
    found: set[int] = set()
    for _ in range(3):  # a process that forks while we scan is caught on the next pass
        killed = False
        for entry in os.scandir("/proc") if os.path.isdir("/proc") else ():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as f:
                    if marker not in f.read().split(b"\0"):
                        continue
                os.kill(int(entry.name), signal.SIGKILL)
            except OSError:
                continue
            found.add(int(entry.name))
            killed = True
        if not killed:
            break
    return found


def remove_shm_segments(pids: set[int]) -> int:
    """Remove the SysV shared-memory segments created by ``pids`` (they outlive their creator; the memory limit
    does not count them until attached). Returns how many were removed."""
    try:
        with open("/proc/sysvipc/shm") as f:
            rows = [line.split() for line in f.readlines()[1:]]
    except OSError:
        return 0
    removed = 0
    for row in rows:
        try:
            shmid, cpid = int(row[1]), int(row[4])
        except (IndexError, ValueError):
            continue
        if cpid in pids and _shmctl_remove(shmid):
            removed += 1
    return removed


def _shmctl_remove(shmid: int) -> bool:
    import ctypes
    import ctypes.util

    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return libc.shmctl(ctypes.c_int(shmid), ctypes.c_int(0), None) == 0  # IPC_RMID


ADDRESS_SPACE_HEADROOM_MB = 1024  # address space for libraries a cell imports (numpy, pandas, pyarrow map ~400 MB)


def cap_address_space(pid: int, memory_limit_mb: float) -> int | None:
    """Set the kernel's RLIMIT_AS to what it has reserved now (measured: an idle ipykernel reserves ~800 MB of
    address space, mostly untouched thread arenas) plus ``memory_limit_mb`` plus ADDRESS_SPACE_HEADROOM_MB for the
    libraries cells import. RLIMIT_DATA (set in the kernel) bounds the heap exactly; this bounds what it misses,
    shared mappings (``mmap(-1, n)``) and attached SysV segments, at about ``memory_limit_mb`` + 1 GiB. Returns the
    limit in bytes (None where it cannot be set)."""
    import resource

    try:
        with open(f"/proc/{pid}/status") as f:
            vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
        limit = vm + int((memory_limit_mb + ADDRESS_SPACE_HEADROOM_MB) * 1024 * 1024)
        resource.prlimit(pid, resource.RLIMIT_AS, (limit, limit))
    except (OSError, StopIteration, ValueError, AttributeError):
        return None
    return limit


def last_words(log: str) -> str:
    """Keep a faulthandler dump's message and the agent's own frames (cells renamed as in tracebacks)."""
    start = log.rfind("Fatal Python error")
    text = log[start:] if start >= 0 else log
    text = text.split("\nExtension modules:", 1)[0]
    lines = [line for line in text.splitlines() if line.strip() and not any(m in line for m in _MACHINERY)]
    return re.sub(r"<cave-\d+-cell-(\d+)>", r"<cell-\1>", "\n".join(lines[-30:])).strip()


ZMQ_MAX_MESSAGE = 1 << 20  # bytes the host accepts in one message on a jupyter channel
ZMQ_QUEUE = 16  # messages the host queues unread per channel
_ZMQ: Any = None


def zmq_context() -> Any:
    """cave's own zmq context, shared by its runtimes (a context per runtime would cost I/O threads each).

    jupyter-client keeps a control-channel socket to each kernel that cave never reads; a cell can bind its own
    socket there and send it anything. Every socket of this context takes at most ZMQ_MAX_MESSAGE bytes a
    message (larger ones drop the connection) and queues at most ZMQ_QUEUE of them, so a kernel cannot grow
    the host's memory through the channels. (Not zmq.Context.instance(): those limits are ours, not the app's.)
    """
    global _ZMQ
    if _ZMQ is None:
        import zmq

        ctx = zmq.Context()
        ctx.setsockopt(zmq.MAXMSGSIZE, ZMQ_MAX_MESSAGE)
        ctx.setsockopt(zmq.RCVHWM, ZMQ_QUEUE)
        ctx.setsockopt(zmq.LINGER, 0)
        _ZMQ = ctx
    return _ZMQ


def make_manager(chan_dir: str, argv: list[str]) -> Any:
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpec

    class _CaveKernelManager(KernelManager):
        """A KernelManager whose kernel is ipykernel behind cave's bootstrap (limits + control channel)."""

        @property
        def kernel_spec(self) -> KernelSpec:
            return KernelSpec(
                argv=argv,
                display_name="cave",
                language="python",
                interrupt_mode="signal",
            )

    km = _CaveKernelManager(transport="ipc", ip=os.path.join(chan_dir, "zmq"), context=zmq_context())
    km.connection_file = os.path.join(chan_dir, "kernel.json")
    return km


def finalize_runtime(holder: dict[str, Any], dirs: list[str]) -> None:
    """Runs at close, at garbage collection or at interpreter exit: no kernel outlives its runtime."""
    kernel = holder.pop("kernel", None)
    if kernel is not None:
        kernel.kill()
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


class KernelDied(RuntimeError_):
    """The kernel process exited while the host was waiting for it."""


class KernelProtocolError(KernelDied):
    """The kernel sent something that is not a well-formed reply (an oversized frame, bad JSON, a bad
    field): code in the kernel tampered with the control channel. The kernel is killed and restarted."""


def checked_execution(d: Any) -> Execution:
    """An Execution from a reply, with every field of the type the host expects (the kernel may lie)."""
    if not isinstance(d, dict):
        raise TypeError(f"execution is a {type(d).__name__}, not an object")
    execution = Execution.from_dict(d)
    for name in ("stdout", "stderr"):
        if not isinstance(getattr(execution, name), str):
            raise TypeError(f"{name} is not a string")
    if execution.result is not None and not isinstance(execution.result, str):
        raise TypeError("result is not a string")
    error = execution.error
    if error is not None:
        if not all(isinstance(v, str) for v in (error.type, error.message, error.traceback)):
            raise TypeError("error fields are not strings")
        if error.lineno is not None and not isinstance(error.lineno, int):
            raise TypeError("error.lineno is not an int")
    if execution.recovery not in (None, "interrupted", "restarted", "crashed"):
        raise ValueError(f"unknown recovery {execution.recovery!r}")
    execution.timed_out = bool(execution.timed_out)
    return execution


def claim_payload(path: Any, transfer_dir: str, inbox_dir: str) -> str:
    """Move a payload file the kernel named into the host's own folder, after checking it is one.

    The kernel names the file, so it may name any path (/etc/passwd, a symlink it made): the host
    only takes a plain file it finds directly in the transfer folder, under the names the transfer
    code makes, and renames it away first (rename moves a symlink, never its target) so nothing can
    be swapped between the check and the read.
    """
    if (
        not isinstance(path, str)
        or os.path.dirname(path) != transfer_dir
        or not _PAYLOAD_NAME.fullmatch(os.path.basename(path))
    ):
        raise TransferError(f"the kernel named a payload file outside its transfer folder: {path!r}; refused")
    claimed = os.path.join(inbox_dir, os.path.basename(path))
    try:
        os.rename(path, claimed)
    except OSError as e:
        raise TransferError(f"the kernel's payload file {path!r} is gone: {e}") from e
    if not stat.S_ISREG(os.lstat(claimed).st_mode):
        os.unlink(claimed)
        raise TransferError(f"the kernel's payload {path!r} is not a plain file (a link?); refused")
    return claimed


async def recv_frame(
    kernel: KernelProcess, deadline: float | None, max_frame_bytes: int
) -> tuple[dict[str, Any], bytes] | None:
    """The next frame, or None if none started arriving before ``deadline`` (monotonic)."""
    header = await _recv_exactly(kernel, transfer.HEADER, deadline, allow_timeout=True)
    if header is None:
        return None
    json_len, att_len = transfer.unpack_header(header)
    if json_len + att_len > max_frame_bytes:
        raise KernelProtocolError(f"a reply frame of {json_len + att_len} bytes (max_frame_bytes={max_frame_bytes})")
    mid_frame = time.monotonic() + _MID_FRAME_TIMEOUT_S  # a frame that started must finish, within the call's time
    if deadline is not None:
        mid_frame = min(mid_frame, max(deadline, time.monotonic()) + _MID_FRAME_GRACE_S)
    body = await _recv_exactly(kernel, json_len + att_len, mid_frame)
    assert body is not None
    try:
        message = json.loads(body[:json_len])
    except (ValueError, RecursionError) as e:
        raise KernelProtocolError(f"a reply that is not JSON ({type(e).__name__})") from None
    if not isinstance(message, dict):
        raise KernelProtocolError(f"a reply that is not a JSON object: {str(message)[:100]}")
    return message, bytes(body[json_len:])


async def _recv_exactly(
    kernel: KernelProcess, n: int, deadline: float | None, allow_timeout: bool = False
) -> bytearray | None:
    buf = bytearray()
    sock = kernel.sock
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except BlockingIOError:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                if allow_timeout and not buf:
                    return None
                raise KernelDied("the kernel stopped in the middle of a reply") from None
            wait = _LIVENESS_CHECK_S if remaining is None else min(remaining, _LIVENESS_CHECK_S)
            if not await readable(sock, wait):
                if not kernel.alive():
                    raise KernelDied("the kernel process exited") from None
                kernel.continue_if_stopped()  # a thread of its own sent SIGSTOP: never wait out the timeout for it
            continue
        except OSError as e:
            raise KernelDied(str(e)) from e
        if not chunk:
            raise KernelDied("the kernel closed its control channel")
        buf += chunk
    return buf


async def send_frame(kernel: KernelProcess, frame: bytes, deadline: float | None) -> None:
    """Send a request, within the call's ``deadline`` (monotonic). A kernel that does not read its channel (stopped
    by a thread of its own, or a thread holding the GIL) once made a request larger than the socket's buffer wait
    forever; a stopped kernel is continued as while waiting for a reply, and past the deadline the frame is half
    sent, so the channel is broken: KernelProtocolError (the caller restarts the kernel)."""
    sock, view = kernel.sock, memoryview(frame)
    while view:
        try:
            view = view[sock.send(view) :]  # the hot path: a small frame goes at once, no waiting
            continue
        except BlockingIOError:
            pass
        except OSError as e:
            raise KernelDied(str(e)) from e
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise KernelProtocolError(
                f"the kernel stopped reading its control channel: {len(view)} of {len(frame)} bytes of the request "
                "were still unsent at the call's deadline"
            )
        wait = _LIVENESS_CHECK_S if remaining is None else min(remaining, _LIVENESS_CHECK_S)
        if not await readable(sock, wait, write=True):
            if not kernel.alive():
                raise KernelDied("the kernel process exited")
            kernel.continue_if_stopped()


async def readable(sock: socket.socket, timeout: float, write: bool = False) -> bool:
    """Whether ``sock`` became readable (or writable, with ``write``) within ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    fd = sock.fileno()

    def ready() -> None:
        if not fut.done():
            fut.set_result(True)

    (loop.add_writer if write else loop.add_reader)(fd, ready)
    handle = loop.call_later(timeout, lambda: fut.done() or fut.set_result(False))
    try:
        return await fut
    finally:
        handle.cancel()
        (loop.remove_writer if write else loop.remove_reader)(fd)


def peer_pid(conn: socket.socket) -> int | None:
    """The pid of the process at the other end of a Unix socket, as this process's pid namespace sees it."""
    try:
        pid, _, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    except (OSError, AttributeError):
        return None
    return pid or None


def recv_blocking(conn: socket.socket, deadline: float) -> dict[str, Any]:
    def exactly(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            conn.settimeout(max(0.001, deadline - time.monotonic()))
            chunk = conn.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("the control channel closed")
            buf += chunk
        return buf

    json_len, att_len = transfer.unpack_header(exactly(transfer.HEADER))
    body = exactly(json_len + att_len)
    return json.loads(body[:json_len])


class KernelLauncher:
    """How a kernel process is launched and connected: a mixin of KernelRuntime (process and sandbox modes override
    ``_kernel_argv``, ``_kernel_env`` and ``_spawn`` to add their limits and jail)."""

    def _new_chan_dir(self) -> None:
        """A fresh folder for the next kernel's channel, the previous one removed: whatever a kernel left there
        (sockets under the names the host will bind, files, changed permissions) cannot stop the next kernel."""
        old, self._chan_dir = self._chan_dir, tempfile.mkdtemp(prefix="chan-", dir=self._ctl_dir)
        if old:
            with contextlib.suppress(OSError):
                os.chmod(old, 0o700)
            shutil.rmtree(old, ignore_errors=True)

    def _spawn(self) -> KernelProcess:
        """Launch a kernel and wait for its hello on the control channel (blocking)."""
        self._spawned += 1
        if self._spawned > 1:
            self._new_chan_dir()
        sock_path = os.path.join(self._chan_dir, f"ctl{self._spawned}.sock")
        log_path = os.path.join(self._ctl_dir, f"kernel{self._spawned}.log")
        token = secrets.token_hex(16)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        log = KernelLog(log_path)
        try:
            listener.bind(sock_path)
            listener.listen(1)
            t0 = time.perf_counter()
            manager = make_manager(self._chan_dir, self._kernel_argv())
            try:
                manager.start_kernel(
                    env=self._kernel_env(sock_path, token, log_path), cwd=self.workdir, stdout=log.write_fd,
                    stderr=log.write_fd,
                )  # fmt: skip
            finally:
                log.started()
            process = manager.provisioner.process
            pid = process.pid
            pgid = manager.provisioner.pgid
            conn = self._accept(listener, process, log, t0)
        except BaseException:
            if "process" in locals():
                with contextlib.suppress(Exception):
                    os.killpg(pgid, signal.SIGKILL) if pgid else process.kill()
            raise
        finally:
            listener.close()
            with contextlib.suppress(OSError):
                os.unlink(sock_path)
        try:
            hello = recv_blocking(conn, deadline=time.monotonic() + 10)
            if hello.get("token") != token:
                raise RuntimeError_("a process other than the kernel connected to the control channel")
        except BaseException:
            conn.close()
            with contextlib.suppress(Exception):
                os.killpg(pgid, signal.SIGKILL) if pgid else process.kill()
            raise
        conn.setblocking(False)
        kernel = KernelProcess(manager, process, conn, pid, pgid, log, time.perf_counter() - t0, token=token)
        with contextlib.suppress(OSError):  # read by the kernel at start; on disk it would hand a sibling the key
            os.unlink(manager.connection_file)
        peer = peer_pid(conn)
        if peer not in (None, pid):  # started through a wrapper: interrupts go to the kernel itself
            kernel.signal_pid = peer
        if self.memory_limit_mb is not None:
            self.address_space_limit = cap_address_space(kernel.signal_pid or pid, self.memory_limit_mb)
        return kernel

    def _kernel_argv(self) -> list[str]:
        """The kernel's command line (``{connection_file}`` is filled in by jupyter-client). A subclass may
        wrap it, e.g. in a sandbox launcher, as long as the kernel still reaches the control socket."""
        return [sys.executable, "-c", _BOOT, "-f", "{connection_file}"]

    def _accept(self, listener: socket.socket, process: Any, log: KernelLog, t0: float) -> socket.socket:
        listener.settimeout(0.05)
        while True:
            try:
                conn, _ = listener.accept()
                return conn
            except TimeoutError:
                pass
            if process.poll() is not None:
                log._thread.join(1.0)
                tail = log.tail(3000)
                raise RuntimeError_(f"the kernel exited during start (exit code {process.returncode}):\n{tail}")
            if time.perf_counter() - t0 > self.start_timeout_s:
                raise RuntimeError_(
                    f"the kernel did not start within start_timeout_s={self.start_timeout_s:g} s "
                    "(a loaded machine? raise start_timeout_s)"
                )

    def _kernel_env(self, sock_path: str, token: str, log_path: str) -> dict[str, str]:
        env = (
            dict(os.environ)
            if self.inherit_env
            else {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
        )
        env.update(self.env)
        paths = [_cave_root()]  # where the `cave` package lives (its folder's parent, never the folder itself)
        if self.inherit_sys_path:
            paths += [os.path.abspath(p or os.getcwd()) for p in sys.path]
        if env.get("PYTHONPATH"):
            paths.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if p))
        env.update(
            CAVE_CONTROL_SOCKET=sock_path,
            CAVE_CONTROL_TOKEN=token,
            CAVE_KERNEL_LOG="/dev/stderr",  # the host's pipe: the kernel never holds a file of the host's
            CAVE_MAX_OUTPUT_CHARS=str(self.max_output_chars),
        )
        env.pop("CAVE_MEMORY_LIMIT_MB", None)
        env.pop("CAVE_CPU_TIME_LIMIT_S", None)
        if self.memory_limit_mb is not None:
            env["CAVE_MEMORY_LIMIT_MB"] = str(self.memory_limit_mb)
            # Arrow's default allocator reserves ~1 GB up front, which would count against the limit.
            env.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
        if self.cpu_time_limit_s is not None:
            env["CAVE_CPU_TIME_LIMIT_S"] = str(self.cpu_time_limit_s)
        return env
