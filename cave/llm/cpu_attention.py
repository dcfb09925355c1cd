"""Float32 attention over a float32 KV cache, for half-precision models decoding on a CPU.

On CPUs without AMX (AMD EPYC with AVX512-BF16, measured here), torch's SDPA kernel is ~6x slower in bfloat16 than
in float32 for the shapes of batched decoding (100 rows, 9 query / 3 KV heads, 400 positions: 44 ms against
6.6 ms a layer), while bfloat16 matmuls are 2-4x faster than float32 ones: a bf16 model decoding 100 rows spent
three quarters of each step in attention. So the generation engine keeps the running batch's KV in float32
(``decode_kv_dtype``; each new position is converted once, as it is written) and, inside ``float32_attention()``,
the SDPA attention of a half-precision query over float32 keys and values runs in float32 (the query, a single
position, is converted; the output is converted back). The weights' matmuls stay in half precision, and attention is
computed at least as precisely as before. Everywhere else (keys in the query's dtype, outside the block, other
threads, GPUs, training) it is transformers' own SDPA, untouched.

    with float32_attention():
        out = model(input_ids=ids, past_key_values=float32_cache, use_cache=True)
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["cpu_compute_dtype", "decode_kv_dtype", "float32_attention", "native_bf16"]

_LOCAL = threading.local()


@functools.cache
def native_bf16() -> bool:
    """Whether this CPU has bfloat16 arithmetic (AVX512-BF16 or AMX). Without it torch runs bf16 matmuls through
    conversions: a SmolLM2-135M forward over 16 x 96 tokens took 53 s in bf16 and 10 s in float32 on an AVX2-only
    AMD EPYC. True where /proc/cpuinfo cannot be read (nothing is changed there)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = set(f.read().split())
    except OSError:
        return True
    return bool(flags & {"avx512_bf16", "amx_bf16"})


def cpu_compute_dtype(dtype: str, device: str, native: bool | None = None) -> str:
    """The dtype a model asked to run in ``dtype`` on ``device`` computes in: a bfloat16 model on a CPU without bf16
    arithmetic (``native``, default ``native_bf16()``) computes in float32, its weights rounded to bfloat16 first
    (the same weights, ~5x faster there); anything else as asked.

    >>> cpu_compute_dtype("bfloat16", "cpu", native=False), cpu_compute_dtype("bfloat16", "cpu", native=True)
    ('float32', 'bfloat16')
    >>> cpu_compute_dtype("bfloat16", "cuda", native=False), cpu_compute_dtype("float32", "cpu", native=False)
    ('bfloat16', 'float32')
    """
    if dtype == "bfloat16" and device == "cpu" and not (native_bf16() if native is None else native):
        return "float32"
    return dtype


def _mixed(query: Any, key: Any) -> bool:
    """Whether this call is one the block converts: a half-precision CPU query over float32 keys, no gradients."""
    import torch

    return (getattr(_LOCAL, "on", 0) > 0 and query.device.type == "cpu" and key.dtype == torch.float32
            and query.dtype in (torch.bfloat16, torch.float16) and not torch.is_grad_enabled())  # fmt: skip


@functools.cache
def _install() -> bool:
    """Put the gated wrapper in place of transformers' "sdpa" attention (once); False where it cannot be found."""
    try:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward
        from transformers.modeling_utils import AttentionInterface
    except ImportError:
        return False

    def attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, *args: Any, **kwargs: Any):
        if not _mixed(query, key):
            return sdpa_attention_forward(module, query, key, value, attention_mask, *args, **kwargs)
        mask = attention_mask
        if mask is not None and mask.is_floating_point():
            mask = mask.to(key.dtype)
        out, weights = sdpa_attention_forward(module, query.to(key.dtype), key, value, mask, *args, **kwargs)
        return out.to(query.dtype), weights

    AttentionInterface.register("sdpa", attention)
    return True


def decode_kv_dtype(model: Any) -> Any:
    """The dtype to keep a decoding batch's KV in for ``model``: float32 for a half-precision model on a CPU whose
    attention is SDPA (then decode steps must run inside ``float32_attention()``), else None (the model's own)."""
    import torch

    try:
        param = next(model.parameters())
    except (StopIteration, AttributeError, TypeError):
        return None
    attn = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if param.device.type != "cpu" or param.dtype not in (torch.bfloat16, torch.float16) or attn != "sdpa":
        return None
    return torch.float32 if _install() else None


@contextlib.contextmanager
def float32_attention() -> Iterator[bool]:
    """Within the block, in this thread: SDPA attention of a half-precision CPU query over float32 keys and values
    runs in float32 (see the module docstring). Yields whether the wrapper is in place."""
    installed = _install()
    _LOCAL.on = getattr(_LOCAL, "on", 0) + 1
    try:
        yield installed
    finally:
        _LOCAL.on -= 1
