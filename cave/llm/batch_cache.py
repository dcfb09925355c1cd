"""The running batch's KV cache: per-layer buffers with room on the right, written in place.

transformers' ``DynamicLayer`` grows by ``torch.cat`` at every decoded token: each step allocates a new copy of every
layer's keys and values (for 100 rows of SmolLM2-135M at width 400, 60 tensors of ~15 MB) and frees the old ones.
Sizes that grow by one position each step never fit the holes they leave, so on a CPU glibc's heap fragments: in a
long eval the free-but-kept heap grew by gigabytes while the live tensors stayed near 2 GB, until the kernel's OOM
killer stopped the run. A ``SlackLayer`` keeps its keys and values as views of buffers with ``slack`` spare
positions on the right: a decode step writes its position into the buffer, and a layer is reallocated only when
its room runs out (every ``slack`` steps), when rows leave (``batch_select_indices``) or when rows join (``join``).

>>> import torch
>>> layer = SlackLayer(torch.ones(2, 1, 3, 4), torch.ones(2, 1, 3, 4), slack=2)
>>> buffer = layer.buffer_keys
>>> k, v = layer.update(torch.zeros(2, 1, 1, 4), torch.zeros(2, 1, 1, 4))
>>> tuple(k.shape), layer.buffer_keys is buffer   # written in place: same buffer
((2, 1, 4, 4), True)
>>> layer.drop_left(1); tuple(layer.keys.shape), layer.get_seq_length()
((2, 1, 3, 4), 3)
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Sequence
from typing import Any

from transformers.cache_utils import DynamicLayer

__all__ = ["SLACK", "SlackLayer", "release_free_heap", "slack_cache", "stack_right"]

SLACK = 64  # spare positions per reallocation: one copy of the layer per 64 decoded tokens instead of one per token


def stack_right(parts: Sequence[Any], width: int, slack: int = 0, dtype: Any = None) -> Any:
    """One buffer ``[sum B, H, width + slack, D]`` holding ``parts`` (``[B_i, H, L_i, D]``, ``L_i <= width``) one after
    the other on the batch axis, each right-aligned at column ``width`` and zero on its left (left padding); the
    ``slack`` columns after ``width`` are left unwritten. One allocation, where padding each part and concatenating
    took two per part. ``dtype``: the buffer's (the parts are converted as they are copied in); default the first's.

    >>> import torch
    >>> out = stack_right([torch.ones(1, 1, 2, 1), 2 * torch.ones(1, 1, 3, 1)], 3, slack=1)
    >>> out[:, 0, :3, 0].tolist(), tuple(out.shape)
    ([[0.0, 1.0, 1.0], [2.0, 2.0, 2.0]], (2, 1, 4, 1))
    """
    first = parts[0]
    rows = sum(int(p.shape[0]) for p in parts)
    out = first.new_empty((rows, first.shape[1], width + slack, first.shape[3]), dtype=dtype or first.dtype)
    b = 0
    for p in parts:
        n, length = int(p.shape[0]), int(p.shape[2])
        if length < width:
            out[b : b + n, :, : width - length].zero_()
        out[b : b + n, :, width - length : width] = p
        b += n
    return out


class SlackLayer(DynamicLayer):
    """A ``DynamicLayer`` whose ``keys`` / ``values`` are the columns ``[start, end)`` of buffers with room after
    ``end`` (see the module docstring). It passes for a ``DynamicLayer`` everywhere transformers reads one."""

    def __init__(self, keys: Any, values: Any, *, slack: int = SLACK, stacked: bool = False, dtype: Any = None) -> None:
        super().__init__()
        self.slack = slack
        if stacked:  # already buffers with room: [B, H, length + slack, D] holding ``length`` columns
            self._adopt(keys, values, int(keys.shape[2]) - slack)
        else:
            length = int(keys.shape[2])
            self._adopt(stack_right([keys], length, slack, dtype), stack_right([values], length, slack, dtype), length)

    def _adopt(self, buffer_keys: Any, buffer_values: Any, length: int) -> None:
        self.buffer_keys, self.buffer_values = buffer_keys, buffer_values
        self.start, self.end = 0, length
        self.device, self.dtype, self.is_initialized = buffer_keys.device, buffer_keys.dtype, True
        self._views()

    def _views(self) -> None:
        self.keys = self.buffer_keys[:, :, self.start : self.end]
        self.values = self.buffer_values[:, :, self.start : self.end]

    def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        new = int(key_states.shape[-2])
        if self.end + new > self.buffer_keys.shape[2]:  # out of room: one copy, with room again
            length = self.end - self.start
            room = max(self.slack, new)
            self._adopt(stack_right([self.keys], length, room), stack_right([self.values], length, room), length)
        self.buffer_keys[:, :, self.end : self.end + new] = key_states  # converted where the buffers' dtype differs
        self.buffer_values[:, :, self.end : self.end + new] = value_states
        self.end += new
        self._views()
        return self.keys, self.values

    def drop_left(self, n: int) -> None:
        """Forget the first ``n`` columns (left padding no running row attends to); no copy."""
        self.start = min(self.start + n, self.end)
        self._views()

    def batch_select_indices(self, indices: Any) -> None:
        """Keep the rows ``indices``: one copy of the kept rows' columns and the room after them."""
        length = self.end - self.start
        self.buffer_keys = self.buffer_keys[indices, :, self.start :]
        self.buffer_values = self.buffer_values[indices, :, self.start :]
        self.start, self.end = 0, length
        self._views()

    def reorder_cache(self, beam_idx: Any) -> None:
        self.batch_select_indices(beam_idx.to(self.buffer_keys.device))

    def batch_repeat_interleave(self, repeats: int) -> None:
        length = self.end - self.start
        self.buffer_keys = self.buffer_keys[:, :, self.start :].repeat_interleave(repeats, dim=0)
        self.buffer_values = self.buffer_values[:, :, self.start :].repeat_interleave(repeats, dim=0)
        self.start, self.end = 0, length
        self._views()

    def crop(self, tokens_to_remove: int) -> None:
        """Forget the last ``-tokens_to_remove`` positions (transformers' convention: a negative count); no copy."""
        if tokens_to_remove > 0:
            raise ValueError(f"crop takes a negative number of positions to remove, got {tokens_to_remove}")
        self.end = max(self.start, self.end + tokens_to_remove)
        self._views()

    def join(self, keys: Sequence[Any], values: Sequence[Any], width: int) -> None:
        """Append rows (``keys`` / ``values``: one ``[B_i, H, L_i, D]`` each) below the running ones, every row
        right-aligned at ``width`` columns (>= both the running width and every new row's)."""
        self._adopt(stack_right([self.keys, *keys], width, self.slack),
                    stack_right([self.values, *values], width, self.slack), width)  # fmt: skip

    def reset(self) -> None:
        self.buffer_keys = self.buffer_values = None
        super().reset()


def slack_cache(keys: Sequence[Sequence[Any]], values: Sequence[Sequence[Any]], width: int, slack: int = SLACK,
                dtype: Any = None) -> Any:  # fmt: skip
    """A ``DynamicCache`` of ``SlackLayer``: layer ``i`` holds the rows ``keys[i]`` / ``values[i]`` (one
    ``[B_j, H, L_j, D]`` per row group) right-aligned at ``width``, in ``dtype`` (default: the states' own; float32
    for a half-precision model on a CPU, see ``cave.llm.cpu_attention``)."""
    from transformers import DynamicCache

    cache = DynamicCache()
    cache.layers[:] = [SlackLayer(stack_right(k, width, slack, dtype), stack_right(v, width, slack, dtype), slack=slack,
                                  stacked=True) for k, v in zip(keys, values, strict=True)]  # fmt: skip
    return cache


@functools.cache
def _libc() -> Any:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


def release_free_heap() -> bool:
    """Give the heap's free pages back to the OS (glibc's ``malloc_trim``); False where there is none (musl, macOS).

    Called when a generation engine goes idle: what a busy period freed is returned rather than kept by the process."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True
