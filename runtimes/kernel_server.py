"""The kernel's side of KernelRuntime: what runs INSIDE the kernel process.

``kernel_main`` applies the limits (and a sandbox's setup) before ipykernel loads, then starts ipykernel with
cave's control channel: ``_KernelServer`` connects back to the host's Unix socket and runs each request (a cell,
a transfer, describe) on the kernel's main thread with the in-process runtime's cell engine. The host side is
``cave.runtimes.kernel``; nothing here runs in the host.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import importlib.util
import json
import os
import signal
import socket
import sys
import threading
import time
import warnings
from typing import Any

from cave.runtimes import transfer
from cave.runtimes.base import (
    ExecError,
    Execution,
)
from cave.runtimes.cells import DEFAULT_MAX_OUTPUT_CHARS


class CPUTimeLimitExceeded(BaseException):
    """Raised in a cell that used more CPU time than cpu_time_limit_s (a BaseException: not swallowed
    by ``except Exception``)."""


def kernel_main() -> None:
    """Entry point of the kernel process: limits, then ipykernel with cave's control channel."""
    import faulthandler

    setup = os.environ.get("CAVE_KERNEL_SETUP")  # "module:function", run first (a sandbox's limits, filters)
    if setup:
        module, _, function = setup.partition(":")
        getattr(importlib.import_module(module), function)()
    memory_mb = os.environ.get("CAVE_MEMORY_LIMIT_MB")
    if memory_mb:
        import resource

        limit = int(float(memory_mb) * 1024 * 1024)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    # stderr is the host's pipe (KernelLog): a segfault leaves a traceback the host can report
    faulthandler.enable(sys.__stderr__, all_threads=False)

    from cave.runtimes.cells import no_input

    builtins.input = no_input
    # pandas 3.1 warns on every `inplace=True` (PDEP-8) with four lines that say nothing about the result: the model
    # read them after each step of a development run; the call still works
    warnings.filterwarnings("ignore", message=r"The inplace keyword in \S+ is deprecated")

    from ipykernel.kernelapp import IPKernelApp
    from tornado.ioloop import IOLoop

    # cave talks to the kernel over its own control channel only (below), never over ipykernel's heartbeat or the
    # output it captures at the file-descriptor level (that went to an iopub socket nobody reads): without them,
    # 5 of the kernel's 12 threads are never started, and a frozen kernel (freeze_idle) has fewer to wake
    IPKernelApp.init_heartbeat = lambda self: None
    app = IPKernelApp.instance()
    app.initialize(
        [*sys.argv[1:], "--HistoryManager.enabled=False", "--quiet", "--IPKernelApp.capture_fd_output=False"]
    )
    server = _KernelServer(app.kernel.shell)
    IOLoop.current().add_callback(server.connect)
    app.start()


def _exit_when_host_gone(fd: int) -> None:
    """Exit as soon as the host's end of the control channel closes (the host died, even by SIGKILL),
    also while a cell is busy: a kernel without a host is a leak."""
    import select

    poller = select.poll()
    poller.register(fd, select.POLLRDHUP)  # POLLHUP and POLLERR are always reported
    while True:
        try:
            events = poller.poll()
        except InterruptedError:
            continue
        if any(ev & (select.POLLRDHUP | select.POLLHUP | select.POLLERR | select.POLLNVAL) for _, ev in events):
            if any(ev & select.POLLNVAL for _, ev in events):
                return  # the socket was closed inside the kernel: the main thread handles that
            if os.getpgid(0) == os.getpid():  # the kernel leads its process group: take its children along
                with contextlib.suppress(OSError):
                    os.killpg(0, signal.SIGKILL)
            os._exit(0)


def _refuse_exit() -> None:
    raise SystemExit(None)  # reported to the agent like in-process: the runtime keeps running


class _KernelServer:
    """The kernel's end of the control channel: requests run on the kernel's main thread."""

    def __init__(self, shell: Any) -> None:
        from cave.runtimes.cells import CellRunner  # installs the audit helpers in builtins: the cells find them

        self.shell = shell
        self.runner = CellRunner(
            shell.user_ns,
            max_output_chars=int(os.environ.get("CAVE_MAX_OUTPUT_CHARS", DEFAULT_MAX_OUTPUT_CHARS)),
            transform=shell.transform_cell,  # %magics and !shell lines, only for code that is not Python
            catch_keyboard_interrupt=True,
        )
        self._route_display(shell)
        shell.ask_exit = _refuse_exit  # IPython's exit() would stop the kernel's loop 0.1 s later
        cpu = os.environ.get("CAVE_CPU_TIME_LIMIT_S")
        self.cpu_limit = float(cpu) if cpu else None
        memory = os.environ.get("CAVE_MEMORY_LIMIT_MB")
        self.memory_limit_mb = float(memory) if memory else None
        self.sock: socket.socket | None = None
        self._in_cell = False  # host functions may be called only while a cell runs (the host is listening)
        self._host_calls = 0

    @staticmethod
    def _route_display(shell: Any) -> None:
        """display(obj) inside a cell prints its text form into the cell's captured stdout
        (there is no notebook frontend to show rich output to)."""
        from cave.runtimes.capture import CAPTURE

        publish = shell.display_pub.publish

        def publish_or_print(data: dict[str, Any], *args: Any, **kwargs: Any) -> None:
            if CAPTURE.get() is None:
                publish(data, *args, **kwargs)
            elif "text/plain" in data:
                print(data["text/plain"])

        shell.display_pub.publish = publish_or_print

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(os.environ["CAVE_CONTROL_SOCKET"])
        self.sock.sendall(transfer.pack({"token": os.environ["CAVE_CONTROL_TOKEN"], "pid": os.getpid()}))
        asyncio.get_event_loop().add_reader(self.sock.fileno(), self._on_request)
        threading.Thread(
            target=_exit_when_host_gone, args=(self.sock.fileno(),), name="cave-lifeline", daemon=True
        ).start()

    def _recv_exactly(self, n: int) -> bytes:
        assert self.sock is not None
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                os._exit(0)  # the host is gone: a kernel without a host is a leak
            buf += chunk
        return bytes(buf)

    def _read_frame(self, whole: bool = False) -> tuple[dict[str, Any], bytes]:
        """The next frame. ``whole``: an interrupt may stop the wait for it, never its reading half-way (which
        would leave the rest of it to be read as the next frame); it is raised once the frame is read."""
        json_len, att_len = transfer.unpack_header(self._recv_exactly(transfer.HEADER))
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if whole else None
        try:
            body = self._recv_exactly(json_len + att_len)
        finally:
            if mask is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return json.loads(body[:json_len]), body[json_len:]

    def _on_request(self) -> None:
        request, attachment = self._read_frame()
        op = request.get("op")
        if op == "exec":
            self._exec(request)
            return
        if op == "host_result":  # the answer to a host call that an interrupt abandoned: nobody waits for it
            return
        handler = {
            "inject": self._inject,
            "retrieve": self._retrieve,
            "describe": self._describe,
            "host_function": self._host_function,
        }.get(op)
        if handler is None:
            self._reply(request, {"ok": False, "error": f"unknown op {op!r}"})
            return
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            reply, out = handler(request, attachment)
        except KeyboardInterrupt:
            reply, out = {"ok": False, "error": "interrupted"}, b""
        except BaseException as e:
            reply, out = {"ok": False, "error": f"{type(e).__name__}: {e}", "type": type(e).__name__}, b""
        finally:
            signal.signal(signal.SIGINT, previous)
        self._reply(request, reply, out)

    def _reply(self, request: dict[str, Any], reply: dict[str, Any], attachment: bytes = b"") -> None:
        reply["id"] = request.get("id")
        assert self.sock is not None
        try:
            self.sock.sendall(transfer.pack(reply, attachment))
        except OSError:
            os._exit(0)

    # -- cells -----------------------------------------------------------------------------------------
    def _exec(self, request: dict[str, Any]) -> None:
        t0 = time.perf_counter()
        self.runner.max_output_chars = request.get("max_output_chars", self.runner.max_output_chars)
        try:
            cell = self.runner.compile(request["code"])
        except SyntaxError as e:
            self._reply_execution(request, Execution(error=self.runner.syntax_error(e)))
            return
        if cell.is_async:
            self._exec_async(request, cell, t0)
            return
        self._limit_cpu()
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        self._in_cell = True
        try:
            try:
                execution = self.runner.run_cell(cell, None, t0)
            finally:
                self._in_cell = False
                signal.signal(signal.SIGINT, previous)
                self._unlimit_cpu()
        except KeyboardInterrupt:  # arrived between the cell's end and the handler's reset
            execution = Execution(error=ExecError("KeyboardInterrupt", "the cell was interrupted"))
        self._reply_execution(request, execution)

    def _explain(self, execution: Execution) -> Execution:
        error = execution.error
        if error is not None and error.type == "MemoryError" and self.memory_limit_mb:
            note = f"the kernel's memory limit is {self.memory_limit_mb:g} MB (memory_limit_mb); use less memory"
            error.message = f"{error.message}; {note}" if error.message else note
            error.traceback = error.traceback.rstrip("\n") + f" ({note})\n"
        return execution

    def _exec_async(self, request: dict[str, Any], cell: Any, t0: float) -> None:
        loop = asyncio.get_event_loop()
        task = loop.create_task(self.runner.arun_cell(cell, None, t0))
        previous = signal.signal(signal.SIGINT, lambda *_: loop.call_soon_threadsafe(self.runner.interrupt))
        self._limit_cpu()
        self._in_cell = True

        def done(t: asyncio.Task[Execution]) -> None:
            self._in_cell = False
            signal.signal(signal.SIGINT, previous)
            self._unlimit_cpu()
            try:
                execution = t.result()
            except BaseException as e:
                execution = Execution(error=ExecError(type(e).__name__, str(e)))
            self._reply_execution(request, execution)

        task.add_done_callback(done)

    def _reply_execution(self, request: dict[str, Any], execution: Execution) -> None:
        self._reply(request, {"ok": True, "execution": self._explain(execution).to_dict()})

    def _limit_cpu(self) -> None:
        if self.cpu_limit is None:
            return
        import resource

        usage = resource.getrusage(resource.RUSAGE_SELF)
        soft = int(usage.ru_utime + usage.ru_stime + self.cpu_limit) + 1
        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
        limit = self.cpu_limit

        def exceeded(*_: Any) -> None:
            raise CPUTimeLimitExceeded(f"the cell used more than {limit:g} s of CPU time (cpu_time_limit_s)")

        signal.signal(signal.SIGXCPU, exceeded)

    def _unlimit_cpu(self) -> None:
        if self.cpu_limit is None:
            return
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))
        signal.signal(signal.SIGXCPU, signal.SIG_IGN)

    # -- host functions (see cave.runtimes.host_functions) ----------------------------------------------
    def _host_function(self, request: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        from cave.runtimes.host_functions import make_proxy

        spec = request["spec"]
        self.shell.user_ns[spec["name"]] = make_proxy(spec, self._call_host)
        return {"ok": True}, b""

    def _call_host(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Send the call on the control channel and wait for its result (the host reads frames while a cell runs).
        Only the cell's own thread may: it is the one thread that reads the channel while the cell runs."""
        from cave.runtimes.host_functions import encode_call, result_of

        if not self._in_cell or threading.current_thread() is not threading.main_thread():
            raise RuntimeError(
                f"{name}() runs on the host: call it from the cell's own code, not from a thread or after the cell"
            )
        self._host_calls += 1
        call = self._host_calls
        frame = encode_call(call, name, args, kwargs)
        assert self.sock is not None
        try:
            self.sock.sendall(transfer.pack(frame))
        except OSError:
            os._exit(0)
        while True:  # an interrupt (the cell's timeout) raises KeyboardInterrupt here; a late answer is dropped
            reply, _ = self._read_frame(whole=True)
            if reply.get("op") == "host_result" and reply.get("call") == call:
                return result_of(reply, self.shell.user_ns)

    # -- objects --------------------------------------------------------------------------------------
    def _inject(self, request: dict[str, Any], attachment: bytes) -> tuple[dict[str, Any], bytes]:
        self.shell.user_ns[request["name"]] = transfer.decode(request["payload"], attachment)
        return {"ok": True}, b""

    def _retrieve(self, request: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        from cave.runtimes.describe import user_names

        name = request["name"]
        ns = self.shell.user_ns
        hidden = self.shell.user_ns_hidden
        if name not in ns or name in hidden or name.startswith("__"):
            available = user_names(ns, hidden)
            return {"ok": False, "type": "KeyError", "error": f"no variable {name!r}", "available": available}, b""
        meta, out = transfer.encode(ns[name], request["dir"], safe=request.get("safe", False))
        return {"ok": True, "payload": meta}, out

    def _describe(self, request: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        from cave.runtimes.describe import describe_namespace

        infos = describe_namespace(self.shell.user_ns, hidden=self.shell.user_ns_hidden)
        return {"ok": True, "variables": [i.to_dict() for i in infos]}, b""
