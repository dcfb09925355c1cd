"""Where the benchmark harnesses (BFCL, Tau²-bench, the data suite) run the code agent's code.

Never in the benchmark's own process by default: a model once ran ``pip install`` there and changed the user's
environment. The default is a sandbox where this machine can run one, else a process-mode kernel; the functions
the agent calls that must act on the harness's live state (BFCL's recording stubs, tau2's tool relay) are host
functions (``inject_function(fn, host=True)``): they run here, the kernel holds proxies.
"""

from __future__ import annotations

import inspect
from typing import Any

RUNTIME_CHOICES = ("sandbox", "process", "kernel", "inprocess")
RUNTIME_HELP = (
    "where the code agent's code runs (default: sandbox where this machine has one, else process; "
    "inprocess runs model code inside this process: only for trusted, scripted policies)"
)


def default_runtime() -> str:
    """A sandbox where this machine can run one, else a process-mode kernel. ``inprocess`` is for trusted,
    scripted policies only (``--runtime inprocess``)."""
    from cave.runtimes import sandbox_problems

    return "process" if sandbox_problems() else "sandbox"


def code_runtime(kind: str | None = None, *, timeout: float = 120, memory_limit_mb: int = 4096) -> Any:
    """A fresh runtime of ``kind`` (default: ``default_runtime()``) for one benchmark entry."""
    from cave.runtimes import create_runtime

    kind = kind or default_runtime()
    if kind not in RUNTIME_CHOICES:
        raise ValueError(f"unknown runtime {kind!r} for the code agent: use one of {', '.join(RUNTIME_CHOICES)}")
    if kind == "inprocess":
        return create_runtime(kind, timeout=timeout)
    return create_runtime(kind, timeout=timeout, memory_limit_mb=memory_limit_mb)


def bind_call(sig: inspect.Signature, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments of a call to the host function ``name``, by parameter, as ``sig`` binds them. A call that does
    not fit raises a TypeError naming the function and its signature: what the model reads to fix its call.

    >>> def f(city, days=1): ...
    >>> bind_call(inspect.signature(f), "forecast", ("Lima",), {})
    {'city': 'Lima'}
    >>> bind_call(inspect.signature(f), "forecast", (), {"town": "Lima"})
    Traceback (most recent call last):
    ...
    TypeError: forecast(city, days=1): missing a required argument: 'city'
    """
    try:
        return dict(sig.bind(*args, **kwargs).arguments)
    except TypeError as e:
        raise TypeError(f"{name}{sig}: {e}") from None
