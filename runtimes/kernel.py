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
import concurrent.futures
import contextlib
import importlib.util
import os
import signal
import tempfile
import threading
import time
import weakref
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

from cave.runtimes import host_functions, transfer
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
from cave.runtimes.cells import DEFAULT_MAX_OUTPUT_CHARS
from cave.runtimes.describe import kind_of
from cave.runtimes.freeze import IdleFreezer
from cave.runtimes.inprocess import check_name
from cave.runtimes.kernel_process import (
    KernelDied,
    KernelLauncher,
    KernelProcess,
    KernelProtocolError,
    checked_execution,
    claim_payload,
    finalize_runtime,
    recv_frame,
    send_frame,
)

T = TypeVar("T")

KERNEL_EXTRA_HINT = "install the kernel extra: pip install 'cave[kernel]' (jupyter-client, ipykernel, pyarrow, psutil)"


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: a module blocked in sys.modules (None)
        return False


def _require_kernel_extra() -> None:
    missing = [m for m in ("jupyter_client", "ipykernel") if not installed(m)]
    if missing:
        raise ImportError(f"KernelRuntime needs {' and '.join(missing)}: {KERNEL_EXTRA_HINT}")


def _shm_dir() -> str | None:
    """/dev/shm when it is a usable directory (then transfers never touch a disk)."""
    path = "/dev/shm"
    return path if os.path.isdir(path) and os.access(path, os.W_OK) else None


# -- the runtime ------------------------------------------------------------------------------------------


@register_runtime("kernel")
class KernelRuntime(KernelLauncher, Runtime):
    """A persistent IPython kernel in its own process (see the module docstring).

    Options: ``timeout`` (default seconds per cell; None: no limit), ``memory_limit_mb``,
    ``cpu_time_limit_s`` (per cell), ``workdir`` (default: a temporary directory of its
    own), ``env`` (extra environment variables), ``interrupt_grace_s`` (how long an
    interrupted cell may take to stop before the kernel is restarted),
    ``start_timeout_s``, ``transfer_timeout_s``, ``max_output_chars`` (per stream per
    cell), ``trust`` (False: retrieve only safe formats, never unpickle),
    ``inherit_env`` (start from this process's environment), ``inherit_sys_path`` (the
    kernel can import what the host can, which objects pickled by reference need),
    ``transfer_dir`` (where large payloads are staged; default /dev/shm, else a temp dir), ``freeze_idle``
    (stop the kernel with SIGSTOP whenever no call is in flight, so threads a cell left behind cannot work
    between calls; the sandbox's default). A kernel stopped by anyone else is continued at the next call.

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
        freeze_idle: bool = False,
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
        if not isinstance(freeze_idle, bool):  # bool("no") is True: a flag given as text must not flip
            raise ValueError(f"freeze_idle must be true or false, got {freeze_idle!r}")
        self.freeze_idle = freeze_idle
        self._freezer = IdleFreezer(self._signal_kernel) if self.freeze_idle else None
        self._notice: str | None = None  # a restart outside execute(), told with the next cell's output

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

        self._holder: dict[str, Any] = {}  # {"kernel": KernelProcess}; shared with the finalizer
        self._finalizer = weakref.finalize(self, finalize_runtime, self._holder, dirs)
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
    def _kernel(self) -> KernelProcess | None:
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
        if self._freezer is not None:
            self._freezer.close()
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
            notice, self._notice = "; ".join(n for n in (self._notice, notice) if n) or None, None
            execution = await self._aexec_locked(code, timeout)
        if notice:
            execution.recovery = execution.recovery or "crashed"
            execution.stderr = f"[cave] {notice}\n" + execution.stderr
        return execution

    async def ainject(self, name: str, value: Any, description: str | None = None) -> None:
        check_name(name)
        reg = Registration(name, value, kind_of(value), description)
        async with self._held():
            # Start (or restart) the kernel before writing the payload: a (re)start clears the transfer folder of
            # payloads a dead kernel never read, which took a large first inject's file away from the new kernel.
            await self._aensure_kernel()
            meta, attachment = await self._aencode(value)  # a TransferError here registers nothing
            await self._ainject_locked(name, meta, attachment)
        self._registered[name] = reg

    def _inject_host_function(self, name: str, fn: Any, description: str | None) -> None:
        self._sync(self.ainject_host_function(fn, description, name))

    async def ainject_host_function(self, fn: Any, description: str | None = None, name: str | None = None) -> None:
        """``inject_function(fn, host=True)``: the kernel gets a proxy, ``fn`` runs here (see host_functions)."""
        name = name or fn.__name__
        check_name(name)
        if not callable(fn):
            raise TypeError(f"a host function must be callable, not {type(fn).__name__}")
        reg = Registration(name, fn, "function", description, host=True)
        async with self._held():
            await self._aensure_kernel()
            await self._adefine_host_function(reg)
        self._registered[name] = reg

    async def _adefine_host_function(self, reg: Registration) -> None:
        spec = host_functions.describe_function(reg.name, reg.value)
        reply, _ = await self._arequest({"op": "host_function", "spec": spec}, timeout=self.transfer_timeout_s)
        if not reply["ok"]:
            raise TransferError(f"the kernel could not define the host function {reg.name!r}: {reply['error']}")

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
        payload = {**payload, "path": claim_payload(payload["path"], self._transfer_dir, self._inbox_dir)}
        return await asyncio.to_thread(  # big: off the loop
            transfer.decode, payload, attachment, self.trust, self.validate_payloads
        )

    async def adescribe(self) -> list[VariableInfo]:
        async with self._held():
            await self._aensure_kernel()
            try:
                reply, _ = await self._arequest({"op": "describe"}, timeout=self._describe_timeout())
            except RuntimeError_ as e:  # stuck or dead: restarted like a cell; describe the fresh kernel
                self._notice = f"{e}; variables created by code are gone"
                reply, _ = await self._arequest({"op": "describe"}, timeout=self._describe_timeout())
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

    def _describe_timeout(self) -> float:
        """describe() runs between the agent's steps: never longer than a cell may (nor than a minute)."""
        return min(60.0, self.transfer_timeout_s, self.timeout or 60.0)

    # -- internals: requests ------------------------------------------------------------------------
    async def _aexec_locked(self, code: str, timeout: float | None) -> Execution:
        kernel = self._kernel
        assert kernel is not None
        t0 = time.perf_counter()
        request = {"op": "exec", "code": code, "max_output_chars": self.max_output_chars}
        self._in_cell = True
        try:
            try:
                reply = await self._aexchange(kernel, request, b"", timeout, host_calls="serve")
                if reply is not None:
                    return self._execution(reply[0], t0)
                kernel.continue_if_stopped()  # a kernel that stopped itself mid-cell would sit on the interrupt
                kernel.signal(signal.SIGINT)  # past the timeout: interrupt, then wait a grace period
                reply = await self._areply(kernel, self._next_id, self.interrupt_grace_s, host_calls="refuse")
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
            execution = checked_execution(reply["execution"])
        except (KeyError, TypeError, ValueError) as e:
            raise KernelProtocolError(f"a malformed cell reply ({type(e).__name__}: {e})") from None
        execution.duration = time.perf_counter() - t0
        return execution

    async def _arecover_from_crash(
        self, kernel: KernelProcess, t0: float, cause: KernelDied | None = None
    ) -> Execution:
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

    async def _await_exit(self, kernel: KernelProcess) -> tuple[str, str]:
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
                kernel.continue_if_stopped()  # stopped mid-request (by a thread of its own): the interrupt needs it
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
        self,
        kernel: KernelProcess,
        message: dict[str, Any],
        attachment: bytes,
        timeout: float | None,
        host_calls: str | None = None,
    ) -> tuple[dict[str, Any], bytes] | None:
        self._next_id += 1
        message["id"] = self._next_id
        deadline = None if timeout is None else time.monotonic() + timeout  # one deadline: sending and the reply
        await send_frame(kernel, transfer.pack(message, attachment), deadline)
        return await self._areply(kernel, message["id"], timeout, host_calls, deadline)

    async def _areply(
        self,
        kernel: KernelProcess,
        request_id: int,
        timeout: float | None,
        host_calls: str | None = None,
        deadline: float | None = None,
    ) -> tuple[dict[str, Any], bytes] | None:
        """The reply to ``request_id``, or None after ``timeout``. One deadline for the whole wait: frames that are
        not the reply (a late reply to an interrupted request, or a cell forging frames on the channel) are skipped
        without giving the kernel more time. ``host_calls``: "serve" runs the host functions a cell calls (within
        the same deadline), "refuse" answers them with an error (the cell is past its timeout), None skips them."""
        if deadline is None and timeout is not None:
            deadline = time.monotonic() + timeout
        while True:  # recv_frame continues a kernel found stopped while it waits (every 0.25 s)
            reply = await recv_frame(kernel, deadline, self.max_frame_bytes)
            if reply is None or reply[0].get("id") == request_id:
                return reply
            if host_calls and reply[0].get("op") == "host_call":
                functions = {r.name: r.value for r in self._registered.values() if r.host}
                answer = await host_functions.answer(reply[0], functions, deadline, serve=host_calls == "serve")
                if answer is None:
                    return None  # the deadline passed while the host function ran
                await send_frame(kernel, transfer.pack(answer), deadline)

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
            if reg.host:
                await self._adefine_host_function(reg)
                continue
            meta, attachment = await self._aencode(reg.value)
            await self._ainject_locked(reg.name, meta, attachment)

    async def _aencode(self, value: Any) -> tuple[dict[str, Any], bytes]:
        if type(value) in (int, float, str, bool) or value is None:
            return transfer.encode(value, self._transfer_dir)
        return await asyncio.to_thread(transfer.encode, value, self._transfer_dir)  # may be big: off the loop

    # -- internals: plumbing ------------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def _held(self) -> AsyncIterator[None]:
        """The request lock, acquired without blocking the event loop."""
        self._check_open()
        while not self._lock.acquire(blocking=False):
            await asyncio.sleep(0.002)
        try:
            self._continue()
            yield
        finally:
            self._freeze()
            self._lock.release()

    def _continue(self) -> None:
        """Before every call, SIGCONT to a kernel frozen by ``freeze_idle`` (``runtimes.freeze``). A kernel that
        stopped itself (SIGSTOP from a thread a cell left behind) is continued by the wait for its reply, within
        0.25 s (it used to cost the call its whole timeout, and describe() a minute)."""
        if self._freezer is not None:
            self._freezer.enter()

    def _freeze(self) -> None:
        """With ``freeze_idle``: nothing of the kernel runs between calls (threads a cell started included): it is
        stopped before the call returns."""
        if self._freezer is not None:  # after close() the freezer is closed too, and leave() does nothing
            self._freezer.leave()

    def _signal_kernel(self, signum: int) -> None:
        kernel = self._kernel
        if kernel is not None and not self._closed:
            kernel.signal(signum)

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


async def _in_fresh_context(fn: Any) -> Any:
    """Run blocking jupyter-client work on a worker thread *without* this task's context variables.

    jupyter-client's sync calls run their coroutines on a loop kept in a context variable; asyncio.to_thread
    copies the caller's context, so workers started from one context would share one loop (and fail with
    "This event loop is already running" when several kernels start at once).

    The workers are cave's own and live as long as this process: a sandbox's launcher dies with the thread that
    started it (bubblewrap's --die-with-parent follows the parent *thread*), and the default executor of an
    ``asyncio.run`` loop ends its threads when that loop closes."""
    return await asyncio.get_running_loop().run_in_executor(_LAUNCHERS, fn)


_LAUNCHERS = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="cave-launch")
