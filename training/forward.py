"""The policy's forward pass over a batch of samples: per-token log-probs (and entropy) of the responses.

Agent prompts are long and responses short, and the N runs of one prompt group share their prompt: on HF models
each distinct prompt is run once and its KV cache repeated for its responses (gradients flow through it once).
The result equals the plain padded batch's (tested); only the compute differs.
"""

from __future__ import annotations

import torch
from cave.training.loss import entropy_from_logits, token_logprobs
from cave.training.samples import Batch

__all__ = ["forward_logprobs", "prompt_groups", "shared_prompt_logits"]


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
        kwargs = dict(input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=batch.position_ids)
        try:  # transformers: compute logits only at the positions that predict the response (saves memory)
            logits = model(**kwargs, use_cache=False, logits_to_keep=T + 1).logits[:, :T]
        except TypeError:
            logits = model(**kwargs).logits[:, P - 1 : P - 1 + T]
    logprobs = token_logprobs(logits, batch.response_ids)
    entropy = None
    if with_entropy:
        entropy = entropy_from_logits(logits if entropy_grad else logits.detach())
    return logprobs, entropy


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
        cache = getattr(out, "past_key_values", None)
        if cache is None or not hasattr(cache, "batch_repeat_interleave"):
            return None
        R, L = len(rows), prompt.shape[1]
        first = out.logits[:, -1:].expand(R, 1, -1)  # the prompt's last position predicts response token 0
        if T > 1:
            cache.batch_repeat_interleave(R)
            pos = torch.arange(L, L + T - 1, device=prompt.device).expand(R, -1)
            rest = model(
                input_ids=batch.response_ids[rows, : T - 1], past_key_values=cache, position_ids=pos, use_cache=True
            ).logits
            first = torch.cat([first, rest], dim=1)
        parts.append(first)
        order.extend(rows)
    logits = torch.cat(parts)
    return logits[torch.as_tensor(order, device=logits.device).argsort()]
