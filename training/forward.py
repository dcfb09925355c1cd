"""The policy's forward pass over a batch of samples: per-token log-probs (and entropy) of the responses.

Agent prompts are long and responses short, and the N runs of one prompt group share their prompt: on HF models
each distinct prompt is run once and its KV cache repeated for its responses (gradients flow through it once).
The result equals the plain padded batch's (tested); only the compute differs.
"""

from __future__ import annotations

import torch
from cave.training.loss import entropy_from_logits, token_logprobs
from cave.training.samples import Batch

from cave.llm.hf import cache_kwarg

__all__ = ["forward_logprobs", "no_unattended_rows", "prompt_groups", "shared_prompt_logits"]


def forward_logprobs(
    model: torch.nn.Module,
    batch: Batch,
    *,
    with_entropy: bool = False,
    entropy_grad: bool = False,
    share_prompts: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probs ``[B, T]`` of the batch's responses under ``model`` (and the entropy, if asked).

    Works with any causal LM that takes (input_ids, attention_mask, position_ids) and returns ``.logits``. With
    ``share_prompts`` rows whose prompt is the same (the N runs of one prompt group) share one forward of that
    prompt on HF models: its KV cache is repeated for their responses, gradients flow through it once. Agent prompts
    are long and responses short, so this removes most of the update's compute; the result is the same.
    """
    logits = shared_prompt_logits(model, batch) if share_prompts else None
    if logits is None:
        T = batch.response_mask.shape[1]
        P = batch.prompt_len
        mask = no_unattended_rows(model, batch.attention_mask)
        kwargs = dict(input_ids=batch.input_ids, attention_mask=mask, position_ids=batch.position_ids)
        try:  # transformers: compute logits only at the positions that predict the response (saves memory)
            logits = model(**kwargs, use_cache=False, logits_to_keep=T + 1).logits[:, :T]
        except TypeError:
            logits = model(**kwargs).logits[:, P - 1 : P - 1 + T]
    logprobs = token_logprobs(logits, batch.response_ids)
    entropy = None
    if with_entropy:
        entropy = entropy_from_logits(logits if entropy_grad else logits.detach())
    return logprobs, entropy


def no_unattended_rows(model: torch.nn.Module, attention_mask: torch.Tensor) -> torch.Tensor:
    """The batch's mask as a 4D causal mask in which a padding position attends to itself, where that is safe.

    Left padding gives the padding positions' queries no key at all (every key before them is padding). The loss
    never reads those rows, but attention kernels differ on them: transformers (5.x) no longer rewrites such rows
    for SDPA, and a fully masked row can give NaN in a kernel's backward (seen as a NaN gradient norm in a bf16 run
    on a GPU, with every loss term finite); 0 x NaN is NaN, so it reaches every weight's gradient. The real tokens'
    attention is unchanged (tested). Models on other attention implementations (eager reads a 4D mask as additive,
    flash attention takes none) and batches without padding keep the 2D mask.

    >>> class M(torch.nn.Module):
    ...     config = type("C", (), {"_attn_implementation": "sdpa"})()
    >>> no_unattended_rows(M(), torch.tensor([[0, 1, 1]]))[0, 0].int().tolist()
    [[1, 0, 0], [0, 1, 0], [0, 1, 1]]
    """
    impl = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if impl != "sdpa" or bool(attention_mask.all()):
        return attention_mask
    real = attention_mask.bool()
    L = real.shape[1]
    causal = torch.ones(L, L, dtype=torch.bool, device=real.device).tril()
    mask = causal[None] & real[:, None, :]
    mask |= torch.eye(L, dtype=torch.bool, device=real.device)[None] & ~real[:, :, None]
    return mask[:, None]


def prompt_groups(batch: Batch) -> list[list[int]]:
    """Rows of the batch grouped by their (unpadded) prompt, in order of first appearance.

    >>> from cave.training.samples import Sample, collate
    >>> prompt_groups(collate([Sample([1, 2], [3]), Sample([4], [5]), Sample([1, 2], [6, 7])]))
    [[0, 2], [1]]
    """
    P = batch.prompt_len
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, (ids, mask) in enumerate(
        zip(batch.input_ids[:, :P].tolist(), batch.attention_mask[:, :P].tolist(), strict=True)
    ):
        groups.setdefault(tuple(t for t, m in zip(ids, mask, strict=True) if m), []).append(i)
    return list(groups.values())


def shared_prompt_logits(model: torch.nn.Module, batch: Batch) -> torch.Tensor | None:
    """The ``[B, T, V]`` logits that predict the responses, one prompt forward per distinct prompt.

    None when no two rows share a prompt or the model keeps no repeatable KV cache (the caller then runs the
    plain padded batch).
    """
    groups = prompt_groups(batch)
    B, T = batch.response_mask.shape
    if len(groups) == B or T == 0:
        return None
    P = batch.prompt_len
    parts, order = [], []
    for rows in groups:
        prompt = batch.input_ids[rows[0], :P][batch.attention_mask[rows[0], :P].bool()][None]
        try:
            out = model(input_ids=prompt, use_cache=True, logits_to_keep=1)
        except TypeError:
            return None
        cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
        if cache is None or not hasattr(cache, "batch_repeat_interleave"):
            return None
        R, L = len(rows), prompt.shape[1]
        first = out.logits[:, -1:].expand(R, 1, -1)  # the prompt's last position predicts response token 0
        if T > 1:
            cache.batch_repeat_interleave(R)
            pos = torch.arange(L, L + T - 1, device=prompt.device).expand(R, -1)
            rest = model(
                input_ids=batch.response_ids[rows, : T - 1],
                position_ids=pos,
                use_cache=True,
                **{cache_kwarg(model): cache},
            ).logits
            first = torch.cat([first, rest], dim=1)
        parts.append(first)
        order.extend(rows)
    logits = torch.cat(parts)
    return logits[torch.as_tensor(order, device=logits.device).argsort()]
