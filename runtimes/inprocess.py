"""InProcessRuntime: agents' code runs in this process, on the live objects (zero-copy).

The object you inject is the object the code sees, and ``retrieve`` returns the same
object. Each runtime has its own namespace and its own captured stdout/stderr: two
runtimes in one process never see each other's variables or output, even when they
run at the same time in different threads or asyncio tasks (``sys.stdout`` is replaced
once by a proxy that writes to the capture of whichever cell runs in the current
context; see ``_StreamProxy``).

The cell engine (``CellRunner``: compile, run, capture, trim tracebacks) is also what
runs cells inside the kernel of ``KernelRuntime``.

Timeouts are best-effort here, because the cell runs on the caller's own thread:

- a synchronous cell past its timeout gets an exception raised *in its thread* by a
  watchdog (``PyThreadState_SetAsyncExc``), re-raised every 0.5 s if the code swallows
  it. Pure-Python code stops at once; a call blocked inside C (``time.sleep``, a socket
  read, a long NumPy operation) only stops when that call returns.
- an asynchronous cell (top-level ``await``) is cancelled at its timeout; it stops at
  its next ``await``. An async cell that never awaits cannot be stopped.
- nothing is killed: for hard limits (killable timeouts, memory, CPU time) use
  ``KernelRuntime``.

Untrusted code must not run here: it runs with the host's full privileges.
"""

from __future__ import annotations

import keyword
from typing import Any

from cave.runtimes.base import (
    Execution,
    Registration,
    Runtime,
    VariableInfo,
    check_timeout,
    missing_name_error,
    register_runtime,
)
from cave.runtimes.cells import DEFAULT_MAX_OUTPUT_CHARS, CellRunner, fresh_namespace
from cave.runtimes.describe import describe_namespace, kind_of, user_names

# -- the runtime --------------------------------------------------------------------------------


def check_name(name: str) -> None:
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"cannot inject under the name {name!r}: it must be a Python identifier, e.g. 'sales_df'")


@register_runtime("inprocess")
class InProcessRuntime(Runtime):
    """A runtime in this process: zero-copy, fastest, for trusted code.

    Options: ``timeout`` (default seconds per cell; None for no limit) and
    ``max_output_chars`` (per stream per cell). Timeouts are best-effort (see the module
    docstring): they stop pure-Python code, not a blocking C call. Memory/CPU limits, a
    working directory and environment variables need a process of their own: use
    ``KernelRuntime``; passing them here is an error rather than a silent no-op.
    """

    def __init__(
        self,
        timeout: float | None = 60.0,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        memory_limit_mb: int | None = None,
        cpu_time_limit_s: int | None = None,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        super().__init__()
        given = {"memory_limit_mb": memory_limit_mb, "cpu_time_limit_s": cpu_time_limit_s, "workdir": workdir}
        given["env"] = env or None
        unsupported = [k for k, v in given.items() if v is not None]
        if unsupported:
            raise ValueError(
                f"InProcessRuntime cannot apply {', '.join(unsupported)}: code runs inside this process. "
                "Use the kernel runtime (runtime: kernel / KernelRuntime) for limits, a working directory or env."
            )
        self.timeout = check_timeout(timeout)
        self._runner = CellRunner(fresh_namespace(), max_output_chars)
        self._closed = False

    @property
    def namespace(self) -> dict[str, Any]:
        """The live namespace cells run in (the same dict, not a copy)."""
        return self._runner.namespace

    def inject(self, name: str, value: Any, description: str | None = None) -> None:
        check_name(name)
        self._check_open()
        self._registered[name] = Registration(name, value, kind_of(value), description)
        self.namespace[name] = value

    def retrieve(self, name: str) -> Any:
        self._check_open()
        if name in self.namespace and not name.startswith("__"):
            return self.namespace[name]
        raise missing_name_error(name, user_names(self.namespace))

    def execute(self, code: str, timeout: float | None = None) -> Execution:
        self._check_open()
        return self._runner.run(code, self._timeout(timeout))

    async def aexecute(self, code: str, timeout: float | None = None) -> Execution:
        self._check_open()
        return await self._runner.arun(code, self._timeout(timeout))

    def describe(self) -> list[VariableInfo]:
        self._check_open()
        return describe_namespace(self.namespace, registered=self._registered)

    # Async twins of the verbs, for code written against KernelRuntime's async API.
    def start(self) -> None:
        """Nothing to start: the namespace exists from construction."""
        self._check_open()

    async def astart(self) -> None:
        self.start()

    async def ainject(self, name: str, value: Any, description: str | None = None) -> None:
        self.inject(name, value, description)

    async def aretrieve(self, name: str) -> Any:
        return self.retrieve(name)

    async def adescribe(self) -> list[VariableInfo]:
        return self.describe()

    async def arestart(self) -> None:
        self.restart()

    def interrupt(self) -> None:
        self._runner.interrupt()

    def restart(self) -> None:
        self._check_open()
        self._runner.namespace.clear()
        self._runner.namespace.update(fresh_namespace())
        for reg in self._registered.values():
            self.namespace[reg.name] = reg.value

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._runner.close()
        self._runner.namespace.clear()
