"""A wall-clock limit on one tau2 task: an LLM wrapper that stops generating at a deadline.

tau2's orchestrator runs synchronously and every cave backend call of a simulation goes through
``DeadlineLLM``; at the deadline the call in flight is cancelled (the local backend stops at its
next token: a prompt evaluation already under way finishes first, measured ~3 s on 2 busy cores)
and every later call raises ``TaskTimeout`` at once, so the simulation unwinds within seconds
instead of running on in an abandoned thread.

>>> import asyncio, time
>>> from cave.llm.base import Scripted
>>> llm = DeadlineLLM(Scripted(["hi"]), time.monotonic() - 1, 5)
>>> try:
...     asyncio.run(llm.complete([{"role": "user", "content": "x"}]))
... except TaskTimeout as e:
...     print(e)
the task ran past its 5 s limit (--task-timeout): stopped
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from cave.llm.base import LLM, LLMError, Message, StreamItem


class TaskTimeout(LLMError):
    """A tau2 task ran past its wall-clock limit; raised by every backend call after the deadline."""


class DeadlineLLM(LLM):
    """``inner`` with a deadline (``time.monotonic()`` seconds): past it, calls raise ``TaskTimeout``."""

    def __init__(self, inner: LLM, deadline: float, limit: float) -> None:
        self.inner, self.deadline, self.limit = inner, deadline, limit
        self.name = inner.name
        self.context_window = inner.context_window
        self.supports_tools = inner.supports_tools

    def __getattr__(self, attr: str) -> Any:  # backend extras (model_name, encode, ...) stay reachable
        return getattr(self.inner, attr)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def expired(self) -> TaskTimeout:
        return TaskTimeout(f"the task ran past its {self.limit:g} s limit (--task-timeout): stopped")

    async def stream(self, messages: list[Message], **kwargs: Any) -> AsyncIterator[StreamItem]:
        items = self.inner.stream(messages, **kwargs)
        async with contextlib.aclosing(items):  # closing it cancels the generation in flight
            while True:
                left = self.deadline - time.monotonic()
                if left <= 0:
                    raise self.expired()
                try:
                    item = await asyncio.wait_for(anext(items), left)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    raise self.expired() from None
                yield item

    async def aclose(self) -> None:
        await self.inner.aclose()
