"""The blocking edge of an async API: ``Team.run`` (and ``Agent.run``) is its ``arun`` run to the end on a new
event loop, and a clear error where a loop is already running (``asyncio.run`` would fail there less clearly)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["run_blocking"]

T = TypeVar("T")


def run_blocking(name: str, arun: Callable[..., Coroutine[Any, Any, T]], /, *args: Any, **kwargs: Any) -> T:
    """``asyncio.run(arun(*args, **kwargs))``; inside a running event loop a RuntimeError that says to await
    ``arun`` there instead (``name`` is the class whose ``run`` was called: "Team").

    >>> async def arun(x):
    ...     return x + 1
    >>> run_blocking("Team", arun, 1)
    2
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(arun(*args, **kwargs))
    raise RuntimeError(
        f"{name}.run() was called inside a running event loop; use `await {name.lower()}.arun(...)` there"
    )
