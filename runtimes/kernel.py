"""KernelRuntime: agents' code runs in an IPython kernel in a process of its own.

The kernel is an ipykernel started by jupyter-client's KernelManager (ipc transport).
At start, the kernel also opens a small control channel back to the host (a Unix
socket, length-prefixed JSON frames with an optional binary attachment). Cells,
transfers and describe() go through that channel and run on the kernel's main thread
(its event loop), with the same cell engine as the in-process runtime
(``cave.runtimes.inprocess.CellRunner``): one request, one reply with stdout, stderr, the
result repr and the error, no iopub round trips. That is what brings a trivial cell
from ~7 ms (a Jupyter execute request) to well under a millisecond.

What the host guarantees, whatever the cell does:

- Timeouts are killable. At the timeout the kernel gets SIGINT (KeyboardInterrupt in
  the cell); if no reply comes within ``interrupt_grace_s`` the kernel is killed,
  restarted and every registered object injected again. ``Execution.recovery`` says
  "interrupted" or "restarted"; ``timed_out`` is True either way.
- Crashes are detected (``os._exit``, a segfault, the OOM killer): the call that
  sees it restarts the kernel, re-injects registered objects and returns an
  Execution with ``recovery="crashed"`` and the kernel's last words (its stderr log,
  where faulthandler writes a traceback). A kernel found dead at the start of a call
  is restarted the same way, and the Execution says so.
- Every wait has a timeout: start, transfers, replies. Nothing hangs.
- Limits per runtime, applied inside the kernel process before ipykernel loads:
  ``memory_limit_mb`` sets RLIMIT_DATA (heap and private anonymous mappings, soft =
  hard so the code cannot raise it): an allocation past it raises MemoryError in the
  cell. RLIMIT_AS is not used: glibc's per-thread arenas make an idle ipykernel
  reserve ~800 MB of address space (measured), so an address-space limit of 512 MB
  would stop the kernel from starting. ``cpu_time_limit_s`` is CPU seconds per cell
  (RLIMIT_CPU's soft limit is moved before each cell; SIGXCPU raises
  CPUTimeLimitExceeded in the cell; the wall-clock timeout remains the hard stop).
- Each runtime has its own working directory (``workdir``, or a fresh temporary
  directory removed at close).

Objects cross the process boundary through ``cave.runtimes.transfer``: pickle protocol 5
with out-of-band buffers through a file in /dev/shm (mapped copy-on-write by the
receiver), recipes for what cannot be pickled (a SQLAlchemy Engine is re-created from
its URL), JSON for plain values. With ``trust=False`` retrieve() accepts only the safe
formats (Arrow, npy, JSON) and never unpickles what the kernel sends.

jupyter-client and ipykernel (the [kernel] extra) are imported only when a kernel
starts, so ``import cave.runtimes`` works on the core install. The kernel side lives in
``cave.runtimes.kernel_server``.
"""

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
import weakref
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from cave.runtimes import transfer
from cave.runtimes.base import (
    ExecError,
    Execution,
    Registration,
    Runtime,
    RuntimeError_,
    TransferError,
    VariableInfo,
    check_timeout,
    missing_name_error,
    register_runtime,
)
from cave.runtimes.describe import kind_of
from cave.runtimes.inprocess import DEFAULT_MAX_OUTPUT_CHARS, check_name

T = TypeVar("T")

KERNEL_EXTRA_HINT = "install the kernel extra: pip install 'cave[kernel]' (jupyter-client, ipykernel, pyarrow, psutil)"
_BOOT = "from cave.runtimes.kernel_server import kernel_main; kernel_main()"
_MID_FRAME_TIMEOUT_S = 60.0  # a frame that started arriving must finish within this
_MID_FRAME_GRACE_S = 5.0  # ... and at most this long after the call's own deadline
_LIVENESS_CHECK_S = 0.25  # while waiting for a reply, check this often that the kernel still lives
_PAYLOAD_NAME = re.compile(r"[0-9a-f]{16}\.(bin|arrow|npy)")  # what transfer.new_path makes, nothing else


class KernelDied(RuntimeError_):
    """The kernel process exited while the host was waiting for it."""


class KernelProtocolError(KernelDied):
    """The kernel sent something that is not a well-formed reply (an oversized frame, bad JSON, a bad
    field): code in the kernel tampered with the control channel. The kernel is killed and restarted."""


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: a module blocked in sys.modules (None)
        return False


def _require_kernel_extra() -> None:
    missing = [m for m in ("jupyter_client", "ipykernel") if not _installed(m)]
    if missing:
        raise ImportError(f"KernelRuntime needs {' and '.join(missing)}: {KERNEL_EXTRA_HINT}")


def _cave_root() -> str:
    """The folder that holds the ``cave`` package: a repository (editable install) or site-packages."""
    spec = importlib.util.find_spec("cave")
    locations = list(spec.submodule_search_locations or []) if spec else []
    return os.path.dirname(os.path.abspath(locations[0])) if locations else os.getcwd()


def _shm_dir() -> str | None:
    """/dev/shm when it is a usable directory (then transfers never touch a disk)."""
    path = "/dev/shm"
    return path if os.path.isdir(path) and os.access(path, os.W_OK) else None


# -- the kernel process, as the host sees it ---------------------------------------------------------


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
class _Kernel:
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
        return _last_words(self.log.tail(limit))

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


def cap_address_space(pid: int, memory_limit_mb: float) -> int | None:
    """Set the kernel's RLIMIT_AS to what it has reserved now (measured: an idle ipykernel reserves ~800 MB of
    address space, mostly untouched thread arenas) plus ``memory_limit_mb``. RLIMIT_DATA alone misses shared
    mappings (``mmap(-1, n)``) and attached SysV segments; the address space counts everything. Returns the
    limit in bytes (None where it cannot be set)."""
    import resource

    try:
        with open(f"/proc/{pid}/status") as f:
            vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
        limit = vm + int(memory_limit_mb * 1024 * 1024)
        resource.prlimit(pid, resource.RLIMIT_AS, (limit, limit))
    except (OSError, StopIteration, ValueError, AttributeError):
        return None
    return limit


def _last_words(log: str) -> str:
    """Keep a faulthandler dump's message and the agent's own frames (cells renamed as in tracebacks)."""
    start = log.rfind("Fatal Python error")
    text = log[start:] if start >= 0 else log
    text = text.split("\nExtension modules:", 1)[0]
    lines = [line for line in text.splitlines() if line.strip() and not any(m in line for m in _MACHINERY)]
    return re.sub(r"<cave-\d+-cell-(\d+)>", r"<cell-\1>", "\n".join(lines[-30:])).strip()


ZMQ_MAX_MESSAGE = 1 << 20  # bytes the host accepts in one message on a jupyter channel
ZMQ_QUEUE = 16  # messages the host queues unread per channel
_ZMQ: Any = None


def _zmq_context() -> Any:
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


def _make_manager(chan_dir: str, argv: list[str]) -> Any:
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

    km = _CaveKernelManager(transport="ipc", ip=os.path.join(chan_dir, "zmq"), context=_zmq_context())
    km.connection_file = os.path.join(chan_dir, "kernel.json")
    return km


def _finalize(holder: dict[str, Any], dirs: list[str]) -> None:
    """Runs at close, at garbage collection or at interpreter exit: no kernel outlives its runtime."""
    kernel = holder.pop("kernel", None)
    if kernel is not None:
        kernel.kill()
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


# -- the runtime ------------------------------------------------------------------------------------------


@register_runtime("kernel")
class KernelRuntime(Runtime):
    """A persistent IPython kernel in its own process (see the module docstring).

    Options: ``timeout`` (default seconds per cell; None: no limit), ``memory_limit_mb``,
    ``cpu_time_limit_s`` (per cell), ``workdir`` (default: a temporary directory of its
    own), ``env`` (extra environment variables), ``interrupt_grace_s`` (how long an
    interrupted cell may take to stop before the kernel is restarted),
    ``start_timeout_s``, ``transfer_timeout_s``, ``max_output_chars`` (per stream per
    cell), ``trust`` (False: retrieve only safe formats, never unpickle),
    ``inherit_env`` (start from this process's environment), ``inherit_sys_path`` (the
    kernel can import what the host can, which objects pickled by reference need),
    ``transfer_dir`` (where large payloads are staged; default /dev/shm, else a temp dir).

    The kernel starts on first use, or with ``start()`` / ``await astart()``.
    Async methods (``aexecute`` etc.) never block the event loop; sync methods may be
    called from any thread, also while an event loop runs there. One request at a time
    per runtime (concurrent callers wait their turn); ``interrupt()`` may be called
    from anywhere at any time.
    """

    def __init__(
        self,
        timeout: float | None = 60.0,
        memory_limit_mb: int | None = None,
        cpu_time_limit_s: int | None = None,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
        *,
        interrupt_grace_s: float = 1.0,
        start_timeout_s: float = 30.0,
        transfer_timeout_s: float = 300.0,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        trust: bool = True,
        validate_payloads: bool | None = None,
        inherit_env: bool = True,
        inherit_sys_path: bool = True,
        transfer_dir: str | None = None,
    ) -> None:
        super().__init__()
        _require_kernel_extra()
        for label, value in (("memory_limit_mb", memory_limit_mb), ("cpu_time_limit_s", cpu_time_limit_s)):
            if value is not None and (not isinstance(value, int | float) or value <= 0):
                raise ValueError(f"{label} must be a positive number or None, got {value!r}")
        if memory_limit_mb is not None and memory_limit_mb < 200:
            raise ValueError(f"memory_limit_mb={memory_limit_mb} is too small: an idle kernel needs ~150 MB")
        self.timeout = check_timeout(timeout)
        self.memory_limit_mb = memory_limit_mb
        self.cpu_time_limit_s = cpu_time_limit_s
        self.env = dict(env or {})
        self.interrupt_grace_s = check_timeout(interrupt_grace_s, "interrupt_grace_s")
        self.start_timeout_s = check_timeout(start_timeout_s, "start_timeout_s")
        self.transfer_timeout_s = check_timeout(transfer_timeout_s, "transfer_timeout_s")
        self.max_output_chars = max_output_chars
        self.trust = trust
        # Arrow payloads checked as hostile input (copied, no compression, known time zones, full validation):
        # always for an untrusted kernel; process mode turns it on for trusted-but-buggy code too.
        self.validate_payloads = (not trust) if validate_payloads is None else validate_payloads
        self.inherit_env = inherit_env
        self.inherit_sys_path = inherit_sys_path

        self._ctl_dir = tempfile.mkdtemp(prefix="cave-k-")  # short path: Unix socket names are limited
        # The kernel's side of the channel (zmq sockets, connection file, control socket) lives in a
        # subfolder; the logs stay in the parent, which a sandboxed kernel never sees.
        self._chan_dir = ""
        self._new_chan_dir()
        base = transfer_dir or _shm_dir() or self._ctl_dir  # /dev/shm: large payloads never touch a disk
        os.makedirs(base, exist_ok=True)
        self._transfer_dir = tempfile.mkdtemp(prefix="cave-x-", dir=base)
        # Payload files the kernel names are moved here before they are read: the kernel cannot swap them.
        self._inbox_dir = tempfile.mkdtemp(prefix="cave-i-", dir=base)
        dirs = [self._ctl_dir, self._transfer_dir, self._inbox_dir]
        if workdir is None:
            workdir = tempfile.mkdtemp(prefix="cave-work-")
            dirs.append(workdir)
        else:
            os.makedirs(workdir, exist_ok=True)
        self.workdir = os.path.abspath(workdir)

        self._holder: dict[str, Any] = {}  # {"kernel": _Kernel}; shared with the finalizer
        self._finalizer = weakref.finalize(self, _finalize, self._holder, dirs)
        self._lock = threading.Lock()  # one request at a time
        self._sync_lock = threading.Lock()  # one sync caller drives the private loop at a time
        self._loop: asyncio.AbstractEventLoop | None = None
        self._in_cell = False
        self._next_id = 0
        self._spawned = 0
        self._closed = False
        self.max_frame_bytes = 256 << 20  # a reply frame larger than this breaks the protocol (the kernel is restarted)
        self.restarts = 0  # how many times the kernel was restarted (crash, stuck cell, restart())
        self.address_space_limit: int | None = None  # RLIMIT_AS of the kernel (memory_limit_mb + its idle reservation)
        self.start_seconds: float | None = None  # launch to ready, of the current kernel

    # -- lifecycle ------------------------------------------------------------------------------------
    @property
    def _kernel(self) -> _Kernel | None:
        return self._holder.get("kernel")

    @property
    def pid(self) -> int | None:
        """The kernel's process id (None before start)."""
        return self._kernel.pid if self._kernel else None

    def start(self) -> None:
        """Start the kernel now (otherwise the first call starts it)."""
        self._sync(self.astart())

    async def astart(self) -> None:
        async with self._held():
            await self._aensure_kernel()

    def restart(self) -> None:
        self._sync(self.arestart())

    async def arestart(self) -> None:
        """Kill the kernel, start a fresh one, inject every registered object again."""
        async with self._held():
            await self._arespawn()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._finalizer()
        if self._loop is not None and not self._loop.is_running():
            self._loop.close()

    def interrupt(self) -> None:
        """Send SIGINT to the kernel if a cell is running (KeyboardInterrupt in the cell)."""
        kernel = self._kernel
        if kernel is not None and self._in_cell:
            kernel.signal(signal.SIGINT)

    # -- the verbs (sync wrappers over the async core) ------------------------------------------------
    def execute(self, code: str, timeout: float | None = None) -> Execution:
        return self._sync(self.aexecute(code, timeout))

    def inject(self, name: str, value: Any, description: str | None = None) -> None:
        self._sync(self.ainject(name, value, description))

    def retrieve(self, name: str) -> Any:
        return self._sync(self.aretrieve(name))

    def describe(self) -> list[VariableInfo]:
        return self._sync(self.adescribe())

    # -- the async core -------------------------------------------------------------------------------
    async def aexecute(self, code: str, timeout: float | None = None) -> Execution:
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, not {type(code).__name__}")
        timeout = self._timeout(timeout)
        async with self._held():
            notice = await self._aensure_kernel()
            execution = await self._aexec_locked(code, timeout)
        if notice:
            execution.recovery = execution.recovery or "crashed"
            execution.stderr = f"[cave] {notice}\n" + execution.stderr
        return execution

    async def ainject(self, name: str, value: Any, description: str | None = None) -> None:
        check_name(name)
        reg = Registration(name, value, kind_of(value), description)
        meta, attachment = await self._aencode(value)  # a TransferError here registers nothing
        async with self._held():
            await self._aensure_kernel()
            await self._ainject_locked(name, meta, attachment)
        self._registered[name] = reg

    async def aretrieve(self, name: str) -> Any:
        async with self._held():
            await self._aensure_kernel()
            reply, attachment = await self._arequest(
                {"op": "retrieve", "name": name, "dir": self._transfer_dir, "safe": not self.trust},
                timeout=self.transfer_timeout_s,
            )
        if not reply["ok"]:
            if reply.get("type") == "KeyError":
                raise missing_name_error(name, reply.get("available", []))
            raise TransferError(f"cannot retrieve {name!r} from the kernel: {reply['error']}")
        payload = reply.get("payload")
        if not isinstance(payload, dict):
            raise TransferError(f"the kernel sent a malformed reply for {name!r} (no payload)")
        if "path" not in payload:
            return transfer.decode(payload, attachment, trust=self.trust, validate=self.validate_payloads)
        payload = {**payload, "path": self._claim_payload(payload["path"])}
        return await asyncio.to_thread(  # big: off the loop
            transfer.decode, payload, attachment, self.trust, self.validate_payloads
        )

    def _claim_payload(self, path: Any) -> str:
        """Move a payload file the kernel named into the host's own folder, after checking it is one.

        The kernel names the file, so it may name any path (/etc/passwd, a symlink it made): the host
        only takes a plain file it finds directly in the transfer folder, under the names the transfer
        code makes, and renames it away first (rename moves a symlink, never its target) so nothing can
        be swapped between the check and the read.
        """
        if (
            not isinstance(path, str)
            or os.path.dirname(path) != self._transfer_dir
            or not _PAYLOAD_NAME.fullmatch(os.path.basename(path))
        ):
            raise TransferError(f"the kernel named a payload file outside its transfer folder: {path!r}; refused")
        claimed = os.path.join(self._inbox_dir, os.path.basename(path))
        try:
            os.rename(path, claimed)
        except OSError as e:
            raise TransferError(f"the kernel's payload file {path!r} is gone: {e}") from e
        if not stat.S_ISREG(os.lstat(claimed).st_mode):
            os.unlink(claimed)
            raise TransferError(f"the kernel's payload {path!r} is not a plain file (a link?); refused")
        return claimed

    async def adescribe(self) -> list[VariableInfo]:
        async with self._held():
            await self._aensure_kernel()
            reply, _ = await self._arequest({"op": "describe"}, timeout=min(60.0, self.transfer_timeout_s))
        if not reply["ok"]:
            raise RuntimeError_(f"describe() failed inside the kernel: {reply['error']}")
        infos = []
        for d in reply.get("variables") or []:
            try:
                info = VariableInfo(**d)
                info.name, info.type, info.preview = str(info.name), str(info.type), str(info.preview)[:2000]
            except (TypeError, ValueError):
                raise RuntimeError_(f"the kernel sent a malformed variable description: {str(d)[:200]}") from None
            reg = self._registered.get(info.name)
            if reg is not None:
                info.injected = True
                info.description = reg.description
                if reg.kind != "variable":
                    info.kind = reg.kind
            infos.append(info)
        return infos

    # -- internals: requests ------------------------------------------------------------------------
    async def _aexec_locked(self, code: str, timeout: float | None) -> Execution:
        kernel = self._kernel
        assert kernel is not None
        t0 = time.perf_counter()
        request = {"op": "exec", "code": code, "max_output_chars": self.max_output_chars}
        self._in_cell = True
        try:
            try:
                reply = await self._aexchange(kernel, request, b"", timeout)
                if reply is not None:
                    return self._execution(reply[0], t0)
                kernel.signal(signal.SIGINT)  # past the timeout: interrupt, then wait a grace period
                reply = await self._areply(kernel, self._next_id, self.interrupt_grace_s)
            finally:
                self._in_cell = False
        except KernelDied as e:
            return await self._arecover_from_crash(kernel, t0, e)
        assert timeout is not None
        if reply is not None:
            try:
                execution = self._execution(reply[0], t0)
            except KernelProtocolError as e:
                return await self._arecover_from_crash(kernel, t0, e)
            execution.timed_out, execution.recovery = True, "interrupted"
            execution.error = _as_timeout(execution.error, timeout)
            return execution
        await self._arespawn()
        message = (
            f"the cell ran past its timeout of {timeout:g} s and did not stop within {self.interrupt_grace_s:g} s "
            "of an interrupt, so the kernel was restarted: variables created by code are gone, "
            "registered objects were injected again"
        )
        return Execution(
            error=ExecError("TimeoutError", message, f"TimeoutError: {message}\n"),
            duration=time.perf_counter() - t0,
            timed_out=True,
            recovery="restarted",
        )

    def _execution(self, reply: dict[str, Any], t0: float) -> Execution:
        if not reply.get("ok"):  # an agent's cell never makes execute() raise, whatever the kernel replies
            message = f"the kernel could not run the cell: {str(reply.get('error'))[:2000]}"
            return Execution(
                error=ExecError("KernelError", message, f"KernelError: {message}\n"), duration=time.perf_counter() - t0
            )
        try:
            execution = _checked_execution(reply["execution"])
        except (KeyError, TypeError, ValueError) as e:
            raise KernelProtocolError(f"a malformed cell reply ({type(e).__name__}: {e})") from None
        execution.duration = time.perf_counter() - t0
        return execution

    async def _arecover_from_crash(self, kernel: _Kernel, t0: float, cause: KernelDied | None = None) -> Execution:
        if isinstance(cause, KernelProtocolError):
            kernel.kill()
        how, last_words = await self._await_exit(kernel)
        await self._arespawn()
        what = "died while running this cell"
        if isinstance(cause, KernelProtocolError):
            what, how, last_words = "broke the control protocol", str(cause), ""
        message = (
            f"the kernel process {what} ({how}); it was restarted and registered objects "
            "injected again, but variables created by code are gone"
        )
        text = f"KernelDied: {message}\n" + (f"The kernel's last output:\n{last_words}\n" if last_words else "")
        return Execution(
            error=ExecError("KernelDied", message, text), duration=time.perf_counter() - t0, recovery="crashed"
        )

    async def _await_exit(self, kernel: _Kernel) -> tuple[str, str]:
        for _ in range(100):  # the socket closes a moment before the process is reaped
            if not kernel.alive():
                break
            await asyncio.sleep(0.01)
        return kernel.exit_description(), kernel.log_tail()

    async def _ainject_locked(self, name: str, meta: dict[str, Any], attachment: bytes) -> None:
        reply, _ = await self._arequest(
            {"op": "inject", "name": name, "payload": meta}, attachment, timeout=self.transfer_timeout_s
        )
        if not reply["ok"]:
            raise TransferError(f"the kernel could not rebuild {name!r}: {reply['error']}")

    async def _arequest(
        self, message: dict[str, Any], attachment: bytes = b"", timeout: float | None = None
    ) -> tuple[dict[str, Any], bytes]:
        """A request that is not a cell: a timeout or a crash restarts the kernel and raises."""
        kernel = self._kernel
        assert kernel is not None
        try:
            reply = await self._aexchange(kernel, message, attachment, timeout)
            if reply is None:
                kernel.signal(signal.SIGINT)
                reply = await self._areply(kernel, self._next_id, self.interrupt_grace_s)
        except KernelDied as e:
            if isinstance(e, KernelProtocolError):
                kernel.kill()
            how, last_words = await self._await_exit(kernel)
            if isinstance(e, KernelProtocolError):
                how, last_words = f"it broke the control protocol: {e}", ""
            await self._arespawn()
            raise KernelDied(
                f"the kernel died during {message['op']} ({how}); it was restarted and registered objects injected "
                f"again. Its last output:\n{last_words}"
            ) from None
        if reply is None:
            await self._arespawn()
            raise RuntimeError_(f"{message['op']} took longer than {timeout:g} s; the kernel was restarted")
        return reply

    async def _aexchange(
        self, kernel: _Kernel, message: dict[str, Any], attachment: bytes, timeout: float | None
    ) -> tuple[dict[str, Any], bytes] | None:
        self._next_id += 1
        message["id"] = self._next_id
        loop = asyncio.get_running_loop()
        try:
            await loop.sock_sendall(kernel.sock, transfer.pack(message, attachment))
        except OSError as e:
            raise KernelDied(str(e)) from e
        return await self._areply(kernel, message["id"], timeout)

    async def _areply(
        self, kernel: _Kernel, request_id: int, timeout: float | None
    ) -> tuple[dict[str, Any], bytes] | None:
        """The reply to ``request_id``, or None after ``timeout``. One deadline for the whole wait: frames that are
        not the reply (a late reply to an interrupted request, or a cell forging frames on the channel) are skipped
        without giving the kernel more time."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            reply = await self._arecv_until(kernel, deadline)
            if reply is None or reply[0].get("id") == request_id:
                return reply

    async def _arecv(self, kernel: _Kernel, timeout: float | None) -> tuple[dict[str, Any], bytes] | None:
        """The next frame, or None if none started arriving within ``timeout``. KernelDied on EOF/exit."""
        return await self._arecv_until(kernel, None if timeout is None else time.monotonic() + timeout)

    async def _arecv_until(self, kernel: _Kernel, deadline: float | None) -> tuple[dict[str, Any], bytes] | None:
        """The next frame, or None if none started arriving before ``deadline`` (monotonic)."""
        header = await self._arecv_exactly(kernel, transfer.HEADER, deadline, allow_timeout=True)
        if header is None:
            return None
        json_len, att_len = transfer.unpack_header(header)
        if json_len + att_len > self.max_frame_bytes:
            raise KernelProtocolError(
                f"a reply frame of {json_len + att_len} bytes (max_frame_bytes={self.max_frame_bytes})"
            )
        mid_frame = time.monotonic() + _MID_FRAME_TIMEOUT_S  # a frame that started must finish, within the call's time
        if deadline is not None:
            mid_frame = min(mid_frame, max(deadline, time.monotonic()) + _MID_FRAME_GRACE_S)
        body = await self._arecv_exactly(kernel, json_len + att_len, mid_frame)
        assert body is not None
        try:
            message = json.loads(body[:json_len])
        except (ValueError, RecursionError) as e:
            raise KernelProtocolError(f"a reply that is not JSON ({type(e).__name__})") from None
        if not isinstance(message, dict):
            raise KernelProtocolError(f"a reply that is not a JSON object: {str(message)[:100]}")
        return message, bytes(body[json_len:])

    async def _arecv_exactly(
        self, kernel: _Kernel, n: int, deadline: float | None, allow_timeout: bool = False
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
                if not await _readable(sock, wait) and not kernel.alive():
                    raise KernelDied("the kernel process exited") from None
                continue
            except OSError as e:
                raise KernelDied(str(e)) from e
            if not chunk:
                raise KernelDied("the kernel closed its control channel")
            buf += chunk
        return buf

    # -- internals: kernel lifecycle --------------------------------------------------------------------
    async def _aensure_kernel(self) -> str | None:
        """Start the kernel if needed; restart it if it died since the last call (returns a notice)."""
        self._check_open()
        kernel = self._kernel
        if kernel is not None and kernel.alive():
            return None
        if kernel is None and self._spawned == 0:
            await self._arespawn()
            return None
        how = kernel.exit_description() if kernel is not None else "gone"
        last_words = kernel.log_tail(500) if kernel is not None else ""
        await self._arespawn()
        return (
            f"the kernel had died since the last call ({how}); it was restarted and registered objects injected "
            "again, but variables created by code are gone" + (f". Its last output: {last_words}" if last_words else "")
        )

    async def _arespawn(self) -> None:
        self._check_open()  # closed from another thread mid-call: never start a kernel nobody will close
        old = self._holder.pop("kernel", None)
        if old is not None:
            self.restarts += 1
            await _in_fresh_context(old.kill)
        for name in os.listdir(self._transfer_dir):  # payloads a dead kernel never picked up
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self._transfer_dir, name))
        kernel = await _in_fresh_context(self._spawn)
        self._holder["kernel"] = kernel
        self.start_seconds = kernel.started_in
        for reg in list(self._registered.values()):
            meta, attachment = await self._aencode(reg.value)
            await self._ainject_locked(reg.name, meta, attachment)

    async def _aencode(self, value: Any) -> tuple[dict[str, Any], bytes]:
        if type(value) in (int, float, str, bool) or value is None:
            return transfer.encode(value, self._transfer_dir)
        return await asyncio.to_thread(transfer.encode, value, self._transfer_dir)  # may be big: off the loop

    def _new_chan_dir(self) -> None:
        """A fresh folder for the next kernel's channel, the previous one removed: whatever a kernel left there
        (sockets under the names the host will bind, files, changed permissions) cannot stop the next kernel."""
        old, self._chan_dir = self._chan_dir, tempfile.mkdtemp(prefix="chan-", dir=self._ctl_dir)
        if old:
            with contextlib.suppress(OSError):
                os.chmod(old, 0o700)
            shutil.rmtree(old, ignore_errors=True)

    def _spawn(self) -> _Kernel:
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
            manager = _make_manager(self._chan_dir, self._kernel_argv())
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
            hello = _recv_blocking(conn, deadline=time.monotonic() + 10)
            if hello.get("token") != token:
                raise RuntimeError_("a process other than the kernel connected to the control channel")
        except BaseException:
            conn.close()
            with contextlib.suppress(Exception):
                os.killpg(pgid, signal.SIGKILL) if pgid else process.kill()
            raise
        conn.setblocking(False)
        kernel = _Kernel(manager, process, conn, pid, pgid, log, time.perf_counter() - t0, token=token)
        with contextlib.suppress(OSError):  # read by the kernel at start; on disk it would hand a sibling the key
            os.unlink(manager.connection_file)
        peer_pid = _peer_pid(conn)
        if peer_pid not in (None, pid):  # started through a wrapper: interrupts go to the kernel itself
            kernel.signal_pid = peer_pid
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

    # -- internals: plumbing ------------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def _held(self) -> AsyncIterator[None]:
        """The request lock, acquired without blocking the event loop."""
        self._check_open()
        while not self._lock.acquire(blocking=False):
            await asyncio.sleep(0.002)
        try:
            yield
        finally:
            self._lock.release()

    def _sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine to completion from sync code, on this runtime's private loop
        (or on a helper thread when this thread is already running a loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            with self._sync_lock:
                if self._loop is None or self._loop.is_closed():
                    self._loop = asyncio.new_event_loop()
                return self._loop.run_until_complete(coro)
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["value"] = asyncio.run(coro)
            except BaseException as e:
                box["error"] = e

        helper = threading.Thread(target=run, name="cave-kernel-sync")
        helper.start()
        helper.join()
        if "error" in box:
            raise box["error"]
        return box["value"]


def _as_timeout(error: ExecError | None, timeout: float) -> ExecError:
    """The KeyboardInterrupt of a timed-out cell, reported as the timeout it is."""
    message = f"the cell ran past its timeout of {timeout:g} s and was interrupted"
    if error is None:  # it finished just as the interrupt arrived
        return ExecError("TimeoutError", message, f"TimeoutError: {message}\n")
    tb = error.traceback
    last = tb.rstrip("\n").rsplit("\n", 1)
    tb = (last[0] + "\n" if len(last) == 2 else "") + f"TimeoutError: {message}\n"
    return ExecError("TimeoutError", message, tb, error.lineno)


async def _readable(sock: socket.socket, timeout: float) -> bool:
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    fd = sock.fileno()

    def ready() -> None:
        if not fut.done():
            fut.set_result(True)

    loop.add_reader(fd, ready)
    handle = loop.call_later(timeout, lambda: fut.done() or fut.set_result(False))
    try:
        return await fut
    finally:
        handle.cancel()
        loop.remove_reader(fd)


async def _in_fresh_context(fn: Any) -> Any:
    """Run blocking jupyter-client work on a worker thread *without* this task's context variables.

    jupyter-client's sync calls run their coroutines on a loop kept in a context variable; asyncio.to_thread
    copies the caller's context, so workers started from one context would share one loop (and fail with
    "This event loop is already running" when several kernels start at once)."""
    return await asyncio.get_running_loop().run_in_executor(None, fn)


def _peer_pid(conn: socket.socket) -> int | None:
    """The pid of the process at the other end of a Unix socket, as this process's pid namespace sees it."""
    try:
        pid, _, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    except (OSError, AttributeError):
        return None
    return pid or None


def _checked_execution(d: Any) -> Execution:
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


def _recv_blocking(conn: socket.socket, deadline: float) -> dict[str, Any]:
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
