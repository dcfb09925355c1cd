"""The runtime protocol: where agents' code runs and where live objects live.

A runtime has few verbs: inject / execute / retrieve / describe, plus lifecycle
(interrupt, restart, close). Implementations live one per file
(``inprocess.py``, ``kernel.py``) and register themselves by name so task files
and teams can say ``runtime: kernel``.

This package is the leaf of the architecture: it imports nothing from ``cave``.
"""

from __future__ import annotations

import asyncio
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from cave.registry import Registry

VariableKind = Literal["variable", "function", "type", "module"]


@dataclass
class ExecError:
    """An error raised by the agent's own code (never raised out of ``execute``)."""

    type: str  # e.g. "ZeroDivisionError", "SyntaxError"
    message: str
    traceback: str = ""  # trimmed to the agent's own code; SyntaxErrors carry line + caret
    lineno: int | None = None  # line in the agent's cell, 1-based

    def __str__(self) -> str:
        return self.traceback or f"{self.type}: {self.message}"


@dataclass
class Execution:
    """What happened when a cell ran."""

    stdout: str = ""
    stderr: str = ""
    result: str | None = None  # repr of the trailing expression, if any
    error: ExecError | None = None
    duration: float = 0.0  # seconds
    timed_out: bool = False
    # What the runtime had to do to recover, if anything: "interrupted" (the cell was
    # interrupted at its timeout), "restarted" (the runtime was restarted and registered
    # objects re-injected), "crashed" (the process died; it was restarted on this call).
    recovery: Literal["interrupted", "restarted", "crashed"] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (written for every code block: no dataclasses.asdict deep copy)."""
        err = self.error
        return {
            "stdout": self.stdout,
            "stderr": self.stderr,
            "result": self.result,
            "error": None
            if err is None
            else {"type": err.type, "message": err.message, "traceback": err.traceback, "lineno": err.lineno},
            "duration": self.duration,
            "timed_out": self.timed_out,
            "recovery": self.recovery,
        }

    @staticmethod
    def merge(executions: list[Execution]) -> Execution | None:
        """The blocks of one step as one Execution: outputs joined, the first error, durations summed."""
        if not executions:
            return None
        if len(executions) == 1:
            return executions[0]
        return Execution(
            stdout="".join(e.stdout for e in executions),
            stderr="".join(e.stderr for e in executions),
            result=executions[-1].result,
            error=next((e.error for e in executions if e.error is not None), None),
            duration=sum(e.duration for e in executions),
            timed_out=any(e.timed_out for e in executions),
            recovery=next((e.recovery for e in executions if e.recovery), None),
        )

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Execution:
        d = dict(d)
        if d.get("error") is not None:
            d["error"] = ExecError(**d["error"])
        return cls(**d)


@dataclass
class VariableInfo:
    """One user-visible variable of a runtime, described for a prompt.

    ``preview`` is bounded (a few hundred characters at most) whatever the object.
    """

    name: str
    type: str  # qualified-ish type name, e.g. "pandas.DataFrame", "function"
    kind: VariableKind = "variable"
    preview: str = ""  # shape/columns, len + element type, signature + doc line, fields...
    description: str | None = None  # given by whoever injected it
    injected: bool = False  # True if registered by the host, False if the agent created it

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Registration:
    """An object the host injected, remembered so restart() can re-inject it."""

    name: str
    value: Any
    kind: VariableKind = "variable"
    description: str | None = None
    host: bool = False  # a host function: the code calls a proxy, the function runs in the host process


class RuntimeError_(Exception):
    """Base class for errors of the runtime itself (not the agent's code)."""


class TransferError(RuntimeError_):
    """An object cannot cross into or out of a runtime (e.g. not picklable, no recipe)."""


class Runtime(ABC):
    """A persistent Python runtime.

    Subclasses implement the verbs below. ``inject_function`` and ``inject_type``
    default to ``inject`` with the object's own name; ``aexecute`` defaults to
    running ``execute`` in a worker thread.
    """

    name: str = "runtime"

    def __new__(cls, *args: Any, **kwargs: Any) -> Runtime:
        self = super().__new__(cls)
        self._made_with = (args, kwargs)  # the constructor's arguments, for sibling()
        return self

    def __init__(self) -> None:
        self._registered: dict[str, Registration] = {}

    def sibling(self) -> Runtime:
        """A new, empty runtime of this kind, made with this one's options (limits, environment, the folders a
        sandbox shows) but nothing injected and a working directory of its own: where an independent attempt
        at the same task runs without seeing or overwriting what this one's code made."""
        args, kwargs = getattr(self, "_made_with", ((), {}))
        options = _as_keywords(type(self), args, kwargs)
        if "workdir" in options:
            options["workdir"] = None
        return type(self)(**self._sibling_options(options))

    def _sibling_options(self, options: dict[str, Any]) -> dict[str, Any]:
        """Hook: the options a sibling is made with (a sandbox adds the folders exposed since it was made)."""
        return options

    # -- injection -------------------------------------------------------------------
    @abstractmethod
    def inject(self, name: str, value: Any, description: str | None = None) -> None:
        """Make ``value`` available to code as ``name``; remembered across restarts."""

    def inject_function(
        self, fn: Callable[..., Any], description: str | None = None, name: str | None = None, *, host: bool = False
    ) -> None:
        """Make ``fn`` callable by code as ``name`` (default: its own name).

        ``host=True``: ``fn`` keeps running in *this* process even when code runs in another one (a kernel
        gets a proxy with the same name, signature and docstring; arguments and results cross as JSON).
        For functions that must act on the host's live state: a recorder, a queue to an orchestrator.
        """
        name = name or fn.__name__
        if host:
            self._inject_host_function(name, fn, description)
        else:
            self._inject_kind(name, fn, "function", description)

    def inject_type(self, cls: type, description: str | None = None, name: str | None = None) -> None:
        self._inject_kind(name or cls.__name__, cls, "type", description)

    def _inject_kind(self, name: str, value: Any, kind: VariableKind, description: str | None) -> None:
        self.inject(name, value, description)
        self._registered[name].kind = kind

    def _inject_host_function(self, name: str, fn: Callable[..., Any], description: str | None) -> None:
        """Where code runs in this process, a host function is the function itself (runtimes in another
        process override this)."""
        self._inject_kind(name, fn, "function", description)
        self._registered[name].host = True

    @property
    def registered(self) -> dict[str, Registration]:
        """Objects the host injected, by name (read-only view)."""
        return dict(self._registered)

    # -- the rest of the protocol ----------------------------------------------------
    @abstractmethod
    def retrieve(self, name: str) -> Any:
        """The live object (in-process) or a faithful copy (out of process).

        Raises KeyError listing the available names when ``name`` does not exist.
        """

    @abstractmethod
    def execute(self, code: str, timeout: float | None = None) -> Execution:
        """Run a cell. The agent's own errors come back in ``Execution.error``."""

    async def aexecute(self, code: str, timeout: float | None = None) -> Execution:
        return await asyncio.to_thread(self.execute, code, timeout)

    @abstractmethod
    def describe(self) -> list[VariableInfo]:
        """Every user-visible variable, injected and agent-created, with bounded previews."""

    def interrupt(self) -> None:  # noqa: B027 - optional verb
        """Interrupt the running cell, if the runtime can."""

    @abstractmethod
    def restart(self) -> None:
        """Clear all state, then re-inject every registered object."""

    def close(self) -> None:  # noqa: B027 - optional verb
        """Release resources (processes, files). Idempotent."""

    # -- helpers for implementations (which set ``self.timeout`` and ``self._closed``) --------
    def _timeout(self, timeout: float | None) -> float | None:
        """The timeout a call runs under: its own, else the runtime's default."""
        return check_timeout(getattr(self, "timeout", None) if timeout is None else timeout)

    def _check_open(self) -> None:
        if getattr(self, "_closed", False):
            raise RuntimeError_(f"this runtime is closed; create a new {type(self).__name__}")

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _as_keywords(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """A constructor call's arguments by parameter name (a ``**options`` catch-all spread out)."""
    signature = inspect.signature(cls)
    bound = signature.bind_partial(*args, **kwargs).arguments
    for param in signature.parameters.values():
        if param.kind is inspect.Parameter.VAR_POSITIONAL and bound.get(param.name):
            raise TypeError(f"{cls.__name__}.sibling(): it was made with extra positional arguments; override sibling")
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            bound.update(bound.pop(param.name, {}))
    return bound


# -- registry ----------------------------------------------------------------------------
def _import_builtin_runtimes() -> None:
    import cave.runtimes  # noqa: F401 - importing the package registers the built-in runtimes


RUNTIMES: Registry[type[Runtime]] = Registry(
    "runtime",
    builtins=("inprocess", "kernel", "trusted", "process", "sandbox"),
    loader=_import_builtin_runtimes,
)


def register_runtime(name: str) -> Callable[[type[Runtime]], type[Runtime]]:
    """Class decorator: make a runtime available by name (``runtime: NAME`` in task files)."""
    return RUNTIMES.register(name, name_attr="name")


def create_runtime(name: str, **options: Any) -> Runtime:
    """Instantiate a registered runtime by name."""
    return RUNTIMES.get(name)(**options)


MAX_TIMEOUT_S = 7 * 24 * 3600.0  # a week: past that a number is a mistake (and timers overflow on inf)


def check_timeout(timeout: float | None, what: str = "timeout") -> float | None:
    """``timeout`` if it is None or a finite number of seconds in (0, a week]; a ValueError that says so otherwise.

    Checked at every entry (constructors and calls): an infinite timeout once killed the process-wide watchdog
    thread of the in-process runtimes (OverflowError), and no timeout worked after it.

    >>> check_timeout(2.5)
    2.5
    >>> check_timeout(float("inf"))
    Traceback (most recent call last):
    ...
    ValueError: timeout must be a finite number of seconds in (0, 604800], or None for the default; got inf
    """
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= MAX_TIMEOUT_S:
        raise ValueError(
            f"{what} must be a finite number of seconds in (0, {MAX_TIMEOUT_S:g}], or None for the default; "
            f"got {timeout!r}"
        )
    return float(timeout)


def missing_name_error(name: str, available: list[str]) -> KeyError:
    """The KeyError retrieve() raises: it lists what does exist."""
    shown = ", ".join(sorted(available)) if available else "(no variables yet)"
    return KeyError(f"no variable named {name!r} in the runtime; available: {shown}")


@dataclass
class RuntimeOptions:
    """Options shared by runtimes (implementations may accept more)."""

    timeout: float = 60.0  # default per-cell timeout, seconds
    memory_limit_mb: int | None = None
    cpu_time_limit_s: int | None = None
    workdir: str | None = None
    env: dict[str, str] = field(default_factory=dict)
