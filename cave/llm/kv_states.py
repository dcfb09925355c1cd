"""Saved llama.cpp KV states, so callers that take turns on one loaded model keep their prompt prefixes.

llama.cpp holds one sequence in its KV cache: the last prompt and reply. An agent whose next prompt extends
its last one re-reads only the new suffix. But when two callers share the model (a team's solver and
verifier on the same backend, two SDK sessions, a judge between an agent's steps), each call's prompt differs
from the previous caller's from the system prompt on, and every switch re-reads the whole prompt: ~8 s for
1,000 tokens on 2 cores.

``KVStates`` keeps the last few states (token ids -> llama.cpp state bytes, least recently used out). Before
a prompt is read, the state sharing the longest prefix with it is restored when that beats what the cache
holds now; the state being left is saved first, only when the new prompt does not extend it (a single
agent's steps save nothing). A state holds only the cells in use: ~12 KB per token for the 0.5B Qwen,
~28 KB for the 1.5B, so four 2,000-token states take 100-230 MB.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

MIN_TOKENS = 64  # a state shorter than this is cheaper to re-read than to keep
MIN_GAIN = 32  # restore only when it saves at least this many tokens of prompt reading


def common_prefix(a: list[int] | tuple[int, ...], b: list[int] | tuple[int, ...]) -> int:
    """How many leading tokens two sequences share.

    >>> common_prefix([1, 2, 3], [1, 2, 4, 5])
    2
    """
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass
class Hit:
    ids: tuple[int, ...]
    data: bytes
    shared: int  # tokens the saved state shares with the prompt


class KVStates:
    """Up to ``slots`` saved states, looked up by the longest shared prefix.

    >>> s = KVStates(slots=2)
    >>> s.put(list(range(100)), b"A"); s.put([7] * 100, b"B")
    >>> s.best(list(range(80)) + [1, 2]).shared, s.best([7] * 90).data
    (80, b'B')
    >>> s.put([5] * 100, b"C"); s.best(list(range(100))) is None  # the least recently used went out
    True
    """

    def __init__(self, slots: int = 4) -> None:
        self.slots = slots
        self._items: OrderedDict[tuple[int, ...], bytes] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def put(self, ids: list[int] | tuple[int, ...], data: bytes) -> None:
        if self.slots <= 0 or len(ids) < MIN_TOKENS:
            return
        key = tuple(ids)
        for other in [k for k in self._items if len(k) <= len(key) and key[: len(k)] == k]:
            del self._items[other]  # a state this one extends is no use any more
        self._items[key] = data
        self._items.move_to_end(key)
        while len(self._items) > self.slots:
            self._items.popitem(last=False)

    def best(self, prompt_ids: list[int]) -> Hit | None:
        best: Hit | None = None
        for ids, data in self._items.items():
            shared = min(common_prefix(ids, prompt_ids), len(prompt_ids) - 1)
            if shared >= MIN_TOKENS and (best is None or shared > best.shared):
                best = Hit(ids, data, shared)
        if best is not None:
            self._items.move_to_end(best.ids)
        return best


def save(llm: Any) -> tuple[list[int], bytes]:
    """The token ids in a ``llama_cpp.Llama``'s KV cache and its state bytes (the cells in use only)."""
    import llama_cpp

    size = llama_cpp.llama_state_get_size(llm._ctx.ctx)
    buf = (ctypes.c_uint8 * size)()
    n = llama_cpp.llama_state_get_data(llm._ctx.ctx, buf, size)
    return llm._input_ids.tolist(), bytes(memoryview(buf)[:n])


def restore(llm: Any, ids: tuple[int, ...], data: bytes) -> None:
    """Put a saved state back: the KV cells, and the token ids llama-cpp-python matches prompts against."""
    import llama_cpp

    buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
    if llama_cpp.llama_state_set_data(llm._ctx.ctx, buf, len(data)) != len(data):
        raise RuntimeError("llama.cpp refused a saved state")
    llm.input_ids[: len(ids)] = ids
    llm.n_tokens = len(ids)
