"""Backends shared by a team's episodes, each behind a bound on in-flight requests."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from typing import Any

from cave.llm.base import LLM, Message, StreamItem, create_backend

__all__ = ["BoundedLLM", "make_backend"]


class BoundedLLM(LLM):
    """Wraps a backend so at most ``limit`` requests are in flight at once (per event loop).

    Every episode of a team shares the wrapper, so 256 concurrent episodes on one model queue
    here instead of overloading the server (or a single-threaded llama.cpp).
    """

    def __init__(self, inner: LLM, limit: int) -> None:
        self.inner = inner
        self.limit = limit
        self.name = getattr(inner, "name", "llm")
        self.context_window = getattr(inner, "context_window", 8192)
        self.supports_tools = getattr(inner, "supports_tools", False)
        self.in_flight = 0
        self.peak = 0
        self._sems: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        sem = self._sems.get(loop)
        if sem is None:
            sem = self._sems[loop] = asyncio.Semaphore(self.limit)
        return sem

    async def stream(self, messages: list[Message], **kwargs: Any) -> AsyncIterator[StreamItem]:
        async with self._semaphore():
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            try:
                async for item in self.inner.stream(messages, **kwargs):
                    yield item
            finally:
                self.in_flight -= 1

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __getattr__(self, name: str) -> Any:  # the wrapped backend's own attributes (calls, path, ...)
        return getattr(self.inner, name)


def make_backend(name: str, **options: Any) -> LLM:
    """``create_backend``: the backend registry imports a built-in backend's module on its first lookup."""
    return create_backend(name, **options)
