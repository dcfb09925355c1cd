"""The running batch's KV cache: per-layer buffers with room on the right, written in place.

transformers' ``DynamicLayer`` grows by ``torch.cat`` at every decoded token: each step allocates a new copy of every
layer's keys and values (for 100 rows of SmolLM2-135M at width 400, 60 tensors of ~15 MB) and frees the old ones.
Sizes that grow by one position each step never fit the holes they leave, so on a CPU glibc's heap fragments: in a
long eval the free-but-kept heap grew by gigabytes while the live tensors stayed near 2 GB, until the kernel's OOM
killer stopped the run. A ``SlackLayer`` keeps its keys and values as views of buffers with ``slack`` spare
positions on the right: a decode step writes its position into the buffer, and a layer is reallocated only when
its room runs out (every ``slack`` steps). The buffers also keep spare rows below the running ones (``row_room``):
in a busy engine calls finish and join nearly every step, and copying the whole batch for each (as
``torch.index_select`` and a re-stacking do) took a third of an eval's time. A row that leaves is filled by one
from the end (``fill_from_end``: one row copied per leaving row), and a call that joins is written into a spare
row; only a joining prompt wider than the running rows, or spare rows run out, reallocate.

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

__all__ = ["SLACK", "SlackLayer", "fill_from_end", "release_free_heap", "row_room", "slack_cache", "stack_right"]

SLACK = 64  # spare positions per reallocation: one copy of the layer per 64 decoded tokens instead of one per token


def row_room(rows: int, slack: int = SLACK, spare_rows: bool = True) -> int:
    """Spare rows a buffer of ``rows`` running rows is allocated with: a quarter more (at least 4), so that calls can
    join without a copy of the batch; none without ``spare_rows`` or ``slack`` (the reallocating baselines).

    >>> row_room(100), row_room(3), row_room(100, slack=0), row_room(100, spare_rows=False)
    (25, 4, 0, 0)
    """
    return max(4, rows // 4) if spare_rows and slack > 0 else 0


def fill_from_end(keep: Sequence[int], total: int) -> list[int]:
    """The rows ``keep`` (of ``total``, ascending) in the order that moves the fewest: a kept row stays where it is,
    unless it lies past the new end, where it fills the first place a leaving row freed. With this order
    ``SlackLayer.batch_select_indices`` copies one row per leaving row, in place.

    >>> fill_from_end([0, 2, 3, 5], 6), fill_from_end([1, 2], 3), fill_from_end([0, 1], 4)
    ([0, 5, 2, 3], [2, 1], [0, 1])
    """
    kept = set(keep)
    holes = [p for p in range(len(keep)) if p not in kept]
    tail = [i for i in keep if i >= len(keep)]
    if len(kept) != len(keep) or (keep and max(keep) >= total):
        raise ValueError(f"keep must be distinct rows below {total}, got {list(keep)}")
    fill = dict(zip(holes, tail, strict=True))
    return [fill.get(p, p) for p in range(len(keep))]


def stack_right(parts: Sequence[Any], width: int, slack: int = 0, dtype: Any = None, spare_rows: int = 0) -> Any:
    """One buffer ``[sum B + spare_rows, H, width + slack, D]`` holding ``parts`` (``[B_i, H, L_i, D]``,
    ``L_i <= width``) one after the other on the batch axis, each right-aligned at column ``width`` and zero on its
    left (left padding); the ``slack`` columns after ``width`` and the ``spare_rows`` rows after the parts' are left
    unwritten. One allocation, where padding each part and concatenating took two per part. ``dtype``: the
    buffer's (the parts are converted as they are copied in); default the first's.

    >>> import torch
    >>> out = stack_right([torch.ones(1, 1, 2, 1), 2 * torch.ones(1, 1, 3, 1)], 3, slack=1)
    >>> out[:, 0, :3, 0].tolist(), tuple(out.shape)
    ([[0.0, 1.0, 1.0], [2.0, 2.0, 2.0]], (2, 1, 4, 1))
    """
    first = parts[0]
    rows = sum(int(p.shape[0]) for p in parts)
    out = first.new_empty(
        (rows + spare_rows, first.shape[1], width + slack, first.shape[3]), dtype=dtype or first.dtype
    )
    b = 0
    for p in parts:
        n, length = int(p.shape[0]), int(p.shape[2])
        if length < width:
            out[b : b + n, :, : width - length].zero_()
        out[b : b + n, :, width - length : width] = p
        b += n
    return out


class SlackLayer(DynamicLayer):
    """A ``DynamicLayer`` whose ``keys`` / ``values`` are the first ``rows`` rows and the columns ``[start, end)`` of
    buffers with room after both (see the module docstring). It passes for a ``DynamicLayer`` everywhere
    transformers reads one."""

    def __init__(
        self,
        keys: Any,
        values: Any,
        *,
        slack: int = SLACK,
        stacked: bool = False,
        dtype: Any = None,
        rows: int | None = None,
        spare_rows: bool = True,
    ) -> None:
        super().__init__()
        self.slack, self.spare_rows = slack, spare_rows
        if stacked:  # already buffers with room: [B + spare, H, length + slack, D] holding ``rows`` x ``length``
            self._adopt(keys, values, int(keys.shape[2]) - slack, rows)
        else:
            self._restack([keys], [values], int(keys.shape[2]), slack, dtype)

    def _adopt(self, buffer_keys: Any, buffer_values: Any, length: int, rows: int | None = None) -> None:
        self.buffer_keys, self.buffer_values = buffer_keys, buffer_values
        self.rows = int(buffer_keys.shape[0]) if rows is None else rows
        self.start, self.end = 0, length
        self.device, self.dtype, self.is_initialized = buffer_keys.device, buffer_keys.dtype, True
        self._views()

    def _views(self) -> None:
        self.keys = self.buffer_keys[: self.rows, :, self.start : self.end]
        self.values = self.buffer_values[: self.rows, :, self.start : self.end]

    def _restack(self, keys: Sequence[Any], values: Sequence[Any], width: int, room: int, dtype: Any = None) -> None:
        """New buffers: ``keys`` / ``values`` right-aligned at ``width``, ``room`` columns and spare rows after."""
        rows = sum(int(k.shape[0]) for k in keys)
        spare = row_room(rows, self.slack, self.spare_rows)
        self._adopt(stack_right(keys, width, room, dtype, spare), stack_right(values, width, room, dtype, spare), width,
                    rows)  # fmt: skip

    def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        new = int(key_states.shape[-2])
        if self.end + new > self.buffer_keys.shape[2]:  # out of room: one copy, with room again
            self._restack([self.keys], [self.values], self.end - self.start, max(self.slack, new))
        # converted where the buffers' dtype differs
        self.buffer_keys[: self.rows, :, self.end : self.end + new] = key_states
        self.buffer_values[: self.rows, :, self.end : self.end + new] = value_states
        self.end += new
        self._views()
        return self.keys, self.values

    def drop_left(self, n: int) -> None:
        """Forget the first ``n`` columns (left padding no running row attends to); no copy."""
        self.start = min(self.start + n, self.end)
        self._views()

    def batch_select_indices(self, indices: Any) -> None:
        """Keep the rows ``indices``, in that order. In place when each row stays or comes from past the new end
        (``fill_from_end``'s order): one row copied per moved row. Otherwise one copy of the kept rows."""
        order = [int(i) for i in indices.tolist()]
        n = len(order)
        if len(set(order)) == n and all(i == p or n <= i < self.rows for p, i in enumerate(order)):
            moved = [(p, i) for p, i in enumerate(order) if i != p]
            if moved:
                dst = indices.new_tensor([p for p, _ in moved], device=self.buffer_keys.device)
                src = indices.new_tensor([i for _, i in moved], device=self.buffer_keys.device)
                for buffer in (self.buffer_keys, self.buffer_values):
                    buffer[dst, :, self.start : self.end] = buffer[src, :, self.start : self.end]
            self.rows = n
            self._views()
            return
        length, index = self.end - self.start, indices.to(self.buffer_keys.device)
        self.buffer_keys = self.buffer_keys[index, :, self.start :]
        self.buffer_values = self.buffer_values[index, :, self.start :]
        self.rows, self.start, self.end = n, 0, length
        self._views()

    def reorder_cache(self, beam_idx: Any) -> None:
        self.batch_select_indices(beam_idx.to(self.buffer_keys.device))

    def batch_repeat_interleave(self, repeats: int) -> None:
        length = self.end - self.start
        self.buffer_keys = self.buffer_keys[: self.rows, :, self.start :].repeat_interleave(repeats, dim=0)
        self.buffer_values = self.buffer_values[: self.rows, :, self.start :].repeat_interleave(repeats, dim=0)
        self.rows, self.start, self.end = self.rows * repeats, 0, length
        self._views()

    def crop(self, tokens_to_remove: int) -> None:
        """Forget the last ``-tokens_to_remove`` positions (transformers' convention: a negative count); no copy."""
        if tokens_to_remove > 0:
            raise ValueError(f"crop takes a negative number of positions to remove, got {tokens_to_remove}")
        self.end = max(self.start, self.end + tokens_to_remove)
        self._views()

    def join(self, keys: Sequence[Any], values: Sequence[Any], width: int) -> None:
        """Append rows (``keys`` / ``values``: one ``[B_i, H, L_i, D]`` each) below the running ones, every row
        right-aligned at ``width`` columns (>= both the running width and every new row's). Written into spare rows
        when there are enough and ``width`` is the running width; otherwise the whole batch is copied once."""
        new = sum(int(k.shape[0]) for k in keys)
        if width != self.end - self.start or self.rows + new > self.buffer_keys.shape[0]:
            self._restack([self.keys, *keys], [self.values, *values], width, self.slack)
            return
        b = self.rows
        for k, v in zip(keys, values, strict=True):
            n, length = int(k.shape[0]), int(k.shape[2])
            for buffer, part in ((self.buffer_keys, k), (self.buffer_values, v)):
                if length < width:
                    buffer[b : b + n, :, self.start : self.end - length].zero_()
                buffer[b : b + n, :, self.end - length : self.end] = part
            b += n
        self.rows = b
        self._views()

    def reset(self) -> None:
        self.buffer_keys = self.buffer_values = None
        super().reset()


def slack_cache(keys: Sequence[Sequence[Any]], values: Sequence[Sequence[Any]], width: int, slack: int = SLACK,
                dtype: Any = None, spare_rows: bool = True) -> Any:  # fmt: skip
    """A ``DynamicCache`` of ``SlackLayer``: layer ``i`` holds the rows ``keys[i]`` / ``values[i]`` (one
    ``[B_j, H, L_j, D]`` per row group) right-aligned at ``width``, in ``dtype`` (default: the states' own; float32
    for a half-precision model on a CPU, see ``cave.llm.cpu_attention``), with spare rows unless ``spare_rows`` is
    False."""
    from transformers import DynamicCache

    cache = DynamicCache()
    rows = sum(int(k.shape[0]) for k in keys[0]) if keys else 0
    spare = row_room(rows, slack, spare_rows)
    cache.layers[:] = [SlackLayer(stack_right(k, width, slack, dtype, spare), stack_right(v, width, slack, dtype, spare),
                                  slack=slack, stacked=True, rows=rows, spare_rows=spare_rows)
                       for k, v in zip(keys, values, strict=True)]  # fmt: skip
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
