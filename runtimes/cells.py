"""The cell engine shared by the in-process runtime and the kernel: compile a cell (top-level ``await`` included),
run it on a namespace with stdout/stderr captured per cell, stop it at its timeout (best-effort, by an exception
raised in its thread), and report the result and a traceback trimmed to the agent's own code."""

from __future__ import annotations

import ast
import asyncio
import builtins
import contextvars
import ctypes
import heapq
import inspect
import itertools
import linecache
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from types import CodeType
from typing import Any

from cave.runtimes import aligned, coercion, matches
from cave.runtimes.base import (
    ExecError,
    Execution,
)
from cave.runtimes.capture import CAPTURE, Capture
from cave.runtimes.suggest import did_you_mean

# the modules whose functions stand in for a cell's own calls (the compiled cell calls matches.matched for
# `s.max()`): their frames are the runtime's, not the code's, and a traceback through them would point there
_WRAPPERS = frozenset(module.__file__ for module in (aligned, coercion, matches))

DEFAULT_MAX_OUTPUT_CHARS = 1_000_000  # per stream per cell; the rest is counted, not kept
_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
_CO_COROUTINE = inspect.CO_COROUTINE


# -- output capture ---------------------------------------------------------------------------


class _StreamProxy:
    """Stands in for sys.stdout / sys.stderr.

    While a cell runs, ``CAPTURE`` holds its capture in the cell's context (thread or
    asyncio task), so concurrent cells of different runtimes write to their own buffers.
    Outside a cell, writes go to the stream that was there before.
    """

    def __init__(self, fallback: Any, which: int) -> None:
        self._fallback = fallback
        self._which = which

    def write(self, s: str) -> int:
        cap = CAPTURE.get()
        if cap is None:
            return self._fallback.write(s) if self._fallback is not None else len(s)
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        return cap.write(self._which, s)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if CAPTURE.get() is None and self._fallback is not None:
            self._fallback.flush()

    def isatty(self) -> bool:
        if CAPTURE.get() is not None or self._fallback is None:
            return False
        return self._fallback.isatty()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fallback, name)


def _install_streams() -> None:
    """Put the proxies in place (again, if someone such as pytest replaced sys.stdout)."""
    if type(sys.stdout) is not _StreamProxy:
        sys.stdout = _StreamProxy(sys.stdout, 0)
    if type(sys.stderr) is not _StreamProxy:
        sys.stderr = _StreamProxy(sys.stderr, 1)


# -- best-effort timeouts ----------------------------------------------------------------------


class CellTimeout(BaseException):
    """Raised inside a cell's thread when it runs past its timeout (a BaseException, so
    ``except Exception`` in the agent's code does not swallow it)."""


def _set_async_exc(thread_id: int, exc: type[BaseException] | None) -> None:
    # None clears a pending exception (NULL in the C API).
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc else None)


class _Alarm:
    __slots__ = ("deadline", "thread_id", "exc", "active", "fired")

    def __init__(self, deadline: float, thread_id: int, exc: type[BaseException]) -> None:
        self.deadline, self.thread_id, self.exc = deadline, thread_id, exc
        self.active, self.fired = True, False


class _Watchdog:
    """One daemon thread for the whole process; arming an alarm is a heap push (microseconds)."""

    REFIRE_S = 0.5  # raise again this often while the cell keeps running (it may swallow the exception)

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._heap: list[tuple[float, int, _Alarm]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float, exc: type[BaseException] = CellTimeout) -> _Alarm:
        alarm = _Alarm(time.monotonic() + seconds, threading.get_ident(), exc)
        with self._cv:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="cave-watchdog", daemon=True)
                self._thread.start()
            heapq.heappush(self._heap, (alarm.deadline, next(self._seq), alarm))
            if self._heap[0][2] is alarm:
                self._cv.notify()
        return alarm

    def cancel(self, alarm: _Alarm) -> None:
        with self._cv:
            alarm.active = False
            if alarm.fired:
                _set_async_exc(alarm.thread_id, None)  # drop an exception not yet delivered

    def _loop(self) -> None:
        with self._cv:
            while True:
                while self._heap and not self._heap[0][2].active:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cv.wait()
                    continue
                delay = self._heap[0][0] - time.monotonic()
                if delay > 0:
                    # capped: a wait of inf (or of years) raises OverflowError, which would end this thread and
                    # with it every in-process timeout; a long wait wakes up, sees the deadline, waits again
                    self._cv.wait(min(delay, 3600.0))
                    continue
                _, _, alarm = heapq.heappop(self._heap)
                _set_async_exc(alarm.thread_id, alarm.exc)
                alarm.fired = True
                alarm.deadline += self.REFIRE_S
                heapq.heappush(self._heap, (alarm.deadline, next(self._seq), alarm))


_WATCHDOG = _Watchdog()


# -- the cell engine ---------------------------------------------------------------------------


def no_input(prompt: object = "") -> str:
    raise RuntimeError("input() is not available: no one is typing at this runtime. Use the variables you were given.")


_AUDITS = {coercion.HELPER: coercion.audited, matches.HELPER: matches.matched, aligned.HELPER: aligned.assigned}
# Cells call the audit helpers by name from their builtins. A function defined in a cell and carried to another
# process (retrieve, dill) still calls them there, so every process that imports the runtimes can resolve them
# (the kernel's cells find them this way too).
for _name, _helper in _AUDITS.items():
    if getattr(builtins, _name, None) is None:
        setattr(builtins, _name, _helper)
_BUILTINS = dict(vars(builtins), input=no_input, **_AUDITS)


def fresh_namespace() -> dict[str, Any]:
    """A module-like namespace: ``__name__ == "__main__"``, builtins without ``input()``."""
    return {"__name__": "__main__", "__builtins__": _BUILTINS}


@dataclass
class _Cell:
    number: int
    body: CodeType | None
    expr: CodeType | None  # the trailing expression, whose repr is the cell's result
    warnings: str = ""  # what compiling it warned (SyntaxWarning: "'int' object is not callable"...), for its stderr

    @property
    def is_async(self) -> bool:
        return any(c is not None and c.co_flags & _CO_COROUTINE for c in (self.body, self.expr))


_NOTHING = object()
_runner_ids = itertools.count(1)


class CellRunner:
    """Runs cells in one namespace: compile, execute, capture output, trim tracebacks.

    ``transform`` (optional) rewrites code that does not parse as Python, e.g. IPython's
    ``%magic`` syntax inside the kernel; it is never called for plain Python.
    ``run_cell`` / ``arun_cell`` run an already compiled cell (the kernel compiles first to
    pick the sync or async path).
    """

    def __init__(
        self,
        namespace: dict[str, Any],
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        transform: Callable[[str], str] | None = None,
        catch_keyboard_interrupt: bool = False,
    ) -> None:
        self.namespace = namespace
        self.catch_keyboard_interrupt = catch_keyboard_interrupt  # in a kernel, SIGINT is how the host interrupts
        self.max_output_chars = max_output_chars
        self.transform = transform
        self._prefix = f"<cave-{next(_runner_ids)}-cell-"  # unique per runner: no linecache clashes
        self._count = 0
        self._files: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None  # for async cells run from sync code
        self._thread_id: int | None = None  # thread of the running sync cell
        self._task: asyncio.Future[Any] | None = None  # task of the running async cell
        self._interrupt_requested = False

    # -- compile -------------------------------------------------------------------------
    def compile(self, code: str) -> _Cell:
        """Compile a cell; raises SyntaxError (with the cell's display filename)."""
        self._count += 1
        filename = f"{self._prefix}{self._count}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        self._files.append(filename)
        # the compiler's warnings belong to the cell's output (as in IPython), not to the host's stderr
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", SyntaxWarning)
            try:
                tree = ast.parse(code, filename)
            except SyntaxError:
                rewritten = self.transform(code) if self.transform else code
                if rewritten == code:
                    raise
                tree = ast.parse(rewritten, filename)
            if ("coerce" in code or "cut(" in code or "to_datetime" in code) and self._audits_coercion():
                coercion.rewrite(tree)  # errors="coerce" and pd.cut calls say what they turned into NaN
            if matches.maybe(code) and self._audits_coercion():
                matches.rewrite(tree)  # == 'north', .str.contains('Mar 2025'): say when they selected nothing
            if aligned.maybe(code) and self._audits_coercion():
                aligned.rewrite(tree)  # df['m'] = <per-month Series>: say when it lines up with no row
            expr = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                node = tree.body.pop().value
                expr = compile(ast.Expression(node), filename, "eval", _FLAGS, dont_inherit=True)
            body = compile(tree, filename, "exec", _FLAGS, dont_inherit=True) if tree.body else None
        notes = "".join(f"{filename}:{w.lineno}: {w.category.__name__}: {w.message}\n" for w in caught)
        return _Cell(self._count, body, expr, notes)

    def _audits_coercion(self) -> bool:
        """Whether the namespace's builtins hold the coercion helper (fresh_namespace's do; the kernel adds it)."""
        b = self.namespace.get("__builtins__")
        return coercion.HELPER in b if isinstance(b, dict) else hasattr(b, coercion.HELPER)

    # -- run -------------------------------------------------------------------------------
    def run(self, code: str, timeout: float | None = None) -> Execution:
        """Run a cell on the calling thread. Async cells run on a private event loop (or on a
        helper thread when this thread already runs a loop)."""
        t0 = time.perf_counter()
        try:
            cell = self.compile(code)
        except SyntaxError as e:
            return Execution(error=self.syntax_error(e), duration=time.perf_counter() - t0)
        if not cell.is_async:
            return self.run_cell(cell, timeout, t0)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._private_loop().run_until_complete(self.arun_cell(cell, timeout, t0))
        ctx = contextvars.copy_context()
        box: list[Execution] = []
        helper = threading.Thread(
            target=lambda: box.append(
                ctx.run(self._private_loop().run_until_complete, self.arun_cell(cell, timeout, t0))
            ),
            name="cave-async-cell",
        )
        helper.start()
        helper.join()
        return box[0]

    async def arun(self, code: str, timeout: float | None = None) -> Execution:
        """Run a cell from async code: an async cell is awaited on the running loop (no thread);
        a sync cell runs inline (it blocks the loop while it runs, as in-process code does)."""
        t0 = time.perf_counter()
        try:
            cell = self.compile(code)
        except SyntaxError as e:
            return Execution(error=self.syntax_error(e), duration=time.perf_counter() - t0)
        if cell.is_async:
            return await self.arun_cell(cell, timeout, t0)
        return self.run_cell(cell, timeout, t0)

    def run_cell(self, cell: _Cell, timeout: float | None, t0: float) -> Execution:
        _install_streams()
        cap = Capture(self.max_output_chars)
        if cell.warnings:
            cap.write(1, cell.warnings)
        token = CAPTURE.set(cap)
        result = error = None
        timed_out = False
        alarm = _WATCHDOG.arm(timeout) if timeout else None
        self._thread_id = threading.get_ident()
        try:
            try:
                ns = self.namespace
                if cell.body is not None:
                    exec(cell.body, ns)
                if cell.expr is not None:
                    result = self._repr(eval(cell.expr, ns))
            finally:
                self._thread_id = None
                if alarm is not None:
                    _WATCHDOG.cancel(alarm)
        except CellTimeout as e:
            timed_out = True
            error = self.error(e, timeout=timeout)
        except KeyboardInterrupt as e:
            if not (self._interrupt_requested or self.catch_keyboard_interrupt):
                raise  # the user pressed Ctrl-C in the host: that is not the agent's error
            error = self.error(e)
        except BaseException as e:  # SystemExit too: exit() must not end the host
            error = self.error(e)
        finally:
            CAPTURE.reset(token)
            self._interrupt_requested = False
        return cap.execution(result, error, t0, timed_out)

    async def arun_cell(self, cell: _Cell, timeout: float | None, t0: float) -> Execution:
        _install_streams()
        cap = Capture(self.max_output_chars)
        if cell.warnings:
            cap.write(1, cell.warnings)
        token = CAPTURE.set(cap)
        try:
            task = asyncio.ensure_future(self._cell_coroutine(cell))  # copies the context: output captured
        finally:
            CAPTURE.reset(token)
        self._task = task
        result = error = None
        timed_out = False
        try:
            try:
                done, _ = await asyncio.wait({task}, timeout=timeout)
            except asyncio.CancelledError:
                task.cancel()  # our caller was cancelled: do not leave the cell running
                raise
            if not done:
                timed_out = True
                task.cancel()
                await asyncio.wait({task}, timeout=1.0)  # let its finally blocks run
            try:
                result = task.result()
            except asyncio.CancelledError as e:
                inner = e.__context__ if isinstance(e.__context__, asyncio.CancelledError) else e
                if timed_out:
                    error = self.error(inner, timeout=timeout)
                elif self._interrupt_requested:
                    error = self.error(inner, interrupted=True)
                else:
                    error = self.error(inner)
            except asyncio.InvalidStateError:  # still running after cancel + 1 s: it ignores cancellation
                error = ExecError(
                    "TimeoutError", f"the cell ran past its timeout of {timeout:g} s and ignores cancellation"
                )
            except BaseException as e:
                error = self.error(e)
        finally:
            self._task = None
            self._interrupt_requested = False
        return cap.execution(result, error, t0, timed_out)

    async def _cell_coroutine(self, cell: _Cell) -> str | None:
        ns = self.namespace
        if cell.body is not None:
            ran = eval(cell.body, ns)  # eval, not exec: a top-level-await module returns a coroutine
            if cell.body.co_flags & _CO_COROUTINE:
                await ran
        if cell.expr is None:
            return None
        value = eval(cell.expr, ns)
        if cell.expr.co_flags & _CO_COROUTINE:
            value = await value
        return self._repr(value)

    def _repr(self, value: Any) -> str | None:
        if value is None:
            return None
        try:
            text = repr(value)
        except Exception as e:
            return f"<repr of {type(value).__name__} failed: {type(e).__name__}: {e}>"
        if len(text) > self.max_output_chars:
            text = text[: self.max_output_chars] + f"... [{len(text) - self.max_output_chars} more characters]"
        return text

    def _private_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
        return self._loop

    # -- control --------------------------------------------------------------------------
    def interrupt(self) -> bool:
        """Raise KeyboardInterrupt in the running cell (best-effort). True if a cell was running."""
        thread_id, task = self._thread_id, self._task
        if thread_id is not None:
            self._interrupt_requested = True
            _set_async_exc(thread_id, KeyboardInterrupt)
            return True
        if task is not None and not task.done():
            self._interrupt_requested = True
            task.get_loop().call_soon_threadsafe(task.cancel)
            return True
        return False

    def close(self) -> None:
        """Forget the cells' source and the private loop (the namespace is the owner's)."""
        for filename in self._files:
            linecache.cache.pop(filename, None)
        self._files.clear()
        if self._loop is not None and not self._loop.is_running():
            self._loop.close()
        self._loop = None

    # -- errors ---------------------------------------------------------------------------
    def display_name(self, filename: str) -> str:
        if filename.startswith(self._prefix):
            return f"<cell-{filename[len(self._prefix) : -1]}>"
        return filename

    def syntax_error(self, e: SyntaxError) -> ExecError:
        if e.filename:
            e.filename = self.display_name(e.filename)
        text = "".join(traceback.format_exception_only(type(e), e))
        return ExecError(type(e).__name__, e.msg or str(e), text, e.lineno)

    def error(self, e: BaseException, timeout: float | None = None, interrupted: bool = False) -> ExecError:
        """An ExecError whose traceback shows the agent's frames (library frames collapsed)."""
        frames = self._agent_frames(traceback.extract_tb(e.__traceback__))
        mine = [f for f in frames if not isinstance(f, int) and f.filename.startswith(self._prefix)]
        current = f"{self._prefix}{self._count}>"
        lineno = next((f.lineno for f in reversed(mine) if f.filename == current), None)
        if lineno is None and mine:
            lineno = mine[-1].lineno
        if timeout is not None:
            etype, message = "TimeoutError", f"the cell ran past its timeout of {timeout:g} s and was stopped"
            last = f"{etype}: {message}\n"
        elif interrupted or isinstance(e, KeyboardInterrupt):
            etype, message = "KeyboardInterrupt", "the cell was interrupted"
            last = f"{etype}: {message}\n"
        elif isinstance(e, SystemExit):
            etype, message = "SystemExit", f"the cell called exit({e.code!r}); the runtime ignored it and keeps running"
            last = f"{etype}: {message}\n"
        else:
            etype, message = type(e).__name__, str(e)
            last = "".join(traceback.format_exception_only(type(e), e))
            try:
                hint = did_you_mean(e, self.namespace)
            except Exception:  # a hint must never replace the error it explains
                hint = None
            if hint:
                message, last = f"{message}. {hint}", f"{last.rstrip()}. {hint}\n"
        text = "Traceback (most recent call last):\n" + self._format_frames(frames) + last if frames else last
        return ExecError(etype, message, text, lineno)

    def _agent_frames(self, frames: traceback.StackSummary) -> list[Any]:
        """From the first frame of agent code on; runs of library frames become one marker,
        except the innermost frame (where the error was raised), which is kept. The runtime's own wrappers of the
        cell's calls (``_WRAPPERS``) are left out: the error reads as it would from the cell's line."""
        frames = [f for f in frames if f.filename not in _WRAPPERS]
        mine = [f.filename.startswith(self._prefix) for f in frames]
        if True not in mine:
            return []
        start = mine.index(True)
        out: list[Any] = []
        run: list[Any] = []
        for frame, is_mine in zip(frames[start:], mine[start:], strict=True):
            if is_mine:
                if run:
                    out.append(len(run))  # an int stands for "N library frames"
                    run = []
                out.append(frame)
            else:
                run.append(frame)
        if run:
            if len(run) > 1:
                out.append(len(run) - 1)
            out.append(run[-1])
        return out

    def _format_frames(self, frames: list[Any]) -> str:
        lines = []
        for f in frames:
            if isinstance(f, int):
                lines.append(f"  [... {f} frame{'s' if f > 1 else ''} in library code ...]\n")
                continue
            _ = f.line  # load the source line before renaming the file
            f.filename = self.display_name(f.filename)
            lines.extend(traceback.StackSummary.from_list([f]).format())
        return "".join(lines)
