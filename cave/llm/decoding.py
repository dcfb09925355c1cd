"""Helpers shared by the backends that decode in this process (transformers, llama.cpp, the batching engine): where
a stop sequence cuts the text, how much of it streaming holds back, how many tokens a reply may have, and a blocking
generator driven on a worker thread with its items handed to the event loop."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from cave.llm.base import LLM, LLMError

__all__ = ["WAKE_INTERVAL_S", "held_back", "iterate_in_thread", "reply_room", "stop_position"]


def stop_position(text: str, stops: list[str], start: int = 0) -> int | None:
    """Index of the earliest stop sequence in ``text[start:]``, or None.

    >>> stop_position("abc```x", ["```"]), stop_position("abc", ["```"])
    (3, None)
    """
    hits = [i for s in stops if s and (i := text.find(s, start)) != -1]
    return min(hits) if hits else None


def held_back(text: str, stops: list[str]) -> int:
    """Length of the longest suffix of ``text`` that could still grow into a stop sequence.

    Streaming must not emit it yet, or a stop sequence split over two tokens would leak out.

    >>> held_back("print(1)\\n``", ["```"]), held_back("x = 1", ["```"])
    (2, 0)
    """
    best = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), best, -1):
            if text.endswith(s[:k]):
                best = k
                break
    return best


_DONE = object()


def reply_room(llm: LLM, prompt_tokens: int, max_tokens: int, advice: str = "compact the conversation") -> int:
    """How many tokens a reply may have: ``max_tokens``, cut to what the context window leaves after the prompt.

    >>> from cave.llm.base import Scripted
    >>> reply_room(Scripted(context_window=100), 30, 512)
    70
    """
    room = llm.context_window - prompt_tokens
    if room <= 0:
        raise LLMError(
            f"the prompt has {prompt_tokens} tokens but the context window is {llm.context_window}: {advice}"
        )
    return min(max_tokens, room)


WAKE_INTERVAL_S = 0.025  # how often a generating thread may wake the event loop


async def iterate_in_thread(
    gen: Iterator[Any], cancel: threading.Event, start: Callable[[Callable[[], None]], None] | None = None
) -> AsyncIterator[Any]:
    """Drive a blocking iterator in a worker thread; yield its items on the event loop as they come.

    ``start(work)`` runs ``work`` on some thread (a long-lived one, as the local backend's llama.cpp
    thread); by default a new daemon thread per call.

    Items are handed over in batches: the worker wakes the event loop at most every ``WAKE_INTERVAL_S``
    (and at once for the end or an error). Waking it per token put a third busy thread on a machine whose
    cores llama.cpp already uses, and cost 10-45% of decode speed on 2 cores. Closing the async iterator
    sets ``cancel`` so the worker stops at its next item.
    """
    loop = asyncio.get_running_loop()
    ready = asyncio.Event()
    lock = threading.Lock()
    pending: list[Any] = []
    state = {"scheduled": False, "last": 0.0}

    def put(item: Any, urgent: bool = False) -> None:
        with lock:
            pending.append(item)
            now = time.monotonic()
            if state["scheduled"] or (not urgent and now - state["last"] < WAKE_INTERVAL_S):
                return  # the consumer will find it with the next wake-up
            state["scheduled"], state["last"] = True, now
        try:
            loop.call_soon_threadsafe(ready.set)
        except RuntimeError:  # the loop closed under us: nobody is listening any more
            cancel.set()

    def work() -> None:
        try:
            if cancel.is_set():  # closed while it waited for its thread: do not start the generation
                return
            for item in gen:
                put(item)
                if cancel.is_set():
                    break
        except BaseException as e:  # handed to the consumer, raised there
            put(e, urgent=True)
        finally:
            gen.close()
            put(_DONE, urgent=True)

    if start is None:
        threading.Thread(target=work, name="cave-llm-generate", daemon=True).start()
    else:
        start(work)
    try:
        while True:
            await ready.wait()
            ready.clear()
            with lock:
                items, pending[:] = pending[:], []
                state["scheduled"] = False
            for item in items:
                if item is _DONE:
                    return
                if isinstance(item, BaseException):
                    if isinstance(item, LLMError):
                        raise item
                    raise LLMError(f"generation failed: {type(item).__name__}: {item}") from item
                yield item
    finally:
        cancel.set()
