"""Prompt starts that many calls share, kept with their KV so that a new prompt runs only the tokens after them.

Concurrent calls of one role share its system prompt; a group's samples and later turns share their problem. The
generation engine (``cave.llm.engine``) asks a ``PrefixCache`` which kept start a prompt begins with (``longest``),
which starts the prompts admitted together share that none kept covers (``shared_starts``: it runs each once), and
tells it every prompt it ran (``learn``: the longest start the prompt shares with a recent one is kept as a slice of
the prompt's own KV, since a position's KV depends only on the tokens before it). Starts are kept least recently
used first out, within a budget of tokens. The cache holds whatever per-layer state the engine gives it; only
``learn`` slices it, through the ``cut`` callable the engine passes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

__all__ = ["MIN_PREFIX", "RECENT_PROMPTS", "PrefixCache", "common", "evict"]

MIN_PREFIX = 32  # a shared prompt start shorter than this is not worth keeping apart (a chat template's header)
RECENT_PROMPTS = 16  # how many of the last prefilled prompts a new prompt's shared start is looked for in

Tokens = tuple[int, ...]
S = TypeVar("S")


class PrefixCache:
    """Kept prompt starts (token tuple -> the engine's per-layer KV for them), at most ``budget`` tokens in all.

    >>> cache = PrefixCache(budget=100, min_prefix=2)
    >>> cache.learn((1, 2, 3, 9), "kv-a", cut=lambda kv, n: f"{kv}[:{n}]")  # nothing recent to share with
    >>> cache.learn((1, 2, 3, 8), "kv-b", cut=lambda kv, n: f"{kv}[:{n}]")
    >>> cache.longest((1, 2, 3, 7)), cache[(1, 2, 3)]
    ((1, 2, 3), 'kv-b[:3]')
    >>> cache.longest((1, 2, 3)), cache.longest((5, 6))  # a prompt keeps at least one token of its own to run
    ((), ())
    """

    def __init__(self, budget: int, *, min_prefix: int = MIN_PREFIX, recent: int = RECENT_PROMPTS) -> None:
        self.budget, self.min_prefix, self.recent_size = budget, min_prefix, recent
        self.kept: dict[Tokens, Any] = {}
        self.recent: list[Tokens] = []

    def __getitem__(self, prefix: Tokens) -> Any:
        return self.kept[prefix]

    def __len__(self) -> int:
        return len(self.kept)

    @property
    def on(self) -> bool:
        """Whether starts are shared at all (a budget of 0 turns sharing off: every prompt runs whole)."""
        return self.budget > 0

    def longest(self, prompt: Tokens) -> Tokens:
        """The longest kept start of ``prompt`` that leaves at least one token of it to run; () when none. Using a
        start makes it the most recently used."""
        best: Tokens = ()
        for prefix in self.kept:
            if len(best) < len(prefix) < len(prompt) and prompt[: len(prefix)] == prefix:
                best = prefix
        if best:
            self.kept[best] = self.kept.pop(best)
        return best

    def keep(self, prefix: Tokens, state: Any) -> None:
        """Keep ``prefix``'s state as the most recently used start, dropping the least recently used past the budget."""
        self.kept[prefix] = state
        evict(self.kept, self.budget)

    def shared_starts(self, prompts: Sequence[Tokens]) -> Iterator[tuple[Tokens, Tokens]]:
        """For prompts admitted together (the first calls of a role), each start they share that no kept start
        covers by ``min_prefix`` tokens or more, with the kept start it extends (() for none): the caller runs the
        start on top of that one and ``keep``s it before the next is chosen, so several prompts sharing one start
        run it once.

        >>> cache = PrefixCache(budget=100, min_prefix=2)
        >>> for start, kept in cache.shared_starts([(1, 2, 3, 4), (1, 2, 3, 5), (7, 8)]):
        ...     print(start, kept); cache.keep(start, "kv")
        (1, 2, 3) ()
        """
        ordered = sorted(prompts)  # the longest start a prompt shares with any other is with a neighbour in this order
        before, after = [(), *ordered[:-1]], [*ordered[1:], ()]
        most = {p: max(common(p, a), common(p, b)) for a, p, b in zip(before, ordered, after, strict=True)}
        for p in prompts:
            shared = min(most[p], len(p) - 1)
            kept = self.longest(p)
            if shared >= len(kept) + self.min_prefix:
                yield p[:shared], kept

    def learn(self, prompt: Tokens, state: Any, cut: Callable[[Any, int], Any]) -> None:
        """Keep the longest start ``prompt`` shares with a recent prompt (at least ``min_prefix`` tokens), its state
        ``cut(state, n)``: the first n positions of the prompt's own state (a copy, so the prompt's can be freed)."""
        shared = max((common(prompt, q) for q in self.recent), default=0)
        self.recent = [*self.recent[-(self.recent_size - 1) :], prompt]
        prefix = prompt[:shared]
        if shared >= self.min_prefix and prefix not in self.kept:
            self.keep(prefix, cut(state, shared))


def evict(kept: dict[Tokens, S], budget: int) -> None:
    """Drop the oldest entries of ``kept`` (token tuple -> state, oldest first) until their tokens fit ``budget``.

    >>> kept = {(1, 2): "a", (3,): "b", (4, 5): "c"}
    >>> evict(kept, 3); list(kept)
    [(3,), (4, 5)]
    """
    total = sum(len(key) for key in kept)
    for key in list(kept):
        if total <= budget:
            break
        total -= len(key)
        del kept[key]


def common(a: Tokens, b: Tokens) -> int:
    """How many tokens ``a`` and ``b`` share at their start.

    >>> common((1, 2, 3, 4), (1, 2, 5)), common((7,), (8,))
    (2, 0)
    """
    return len(os.path.commonprefix([a, b]))
