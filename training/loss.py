"""The policy loss: PPO clipped objective with dual-clip, token-mean, optional k3 KL and entropy bonus.

Pure functions over tensors. Shapes: ``[B, T]`` per response token (B samples, T response positions, padded), a
``mask`` of the same shape (1 = a real response token), advantages ``[B]`` (one per sample, broadcast over its
tokens) or ``[B, T]``.

Reference settings (REFERENCE.md): clip 0.2/0.2, dual-clip 3.0 for A < 0, token-mean, no KL, entropy coefficient 0
(math) or 0.001 (search); the invalid-format penalty c is 0.1 (math) or 0.01 (search).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

__all__ = [
    "FORMAT_PENALTY",
    "LossConfig",
    "LossOutput",
    "entropy_from_logits",
    "format_penalized_score",
    "kl_k3",
    "masked_mean",
    "ppo_loss",
    "sft_loss",
    "token_logprobs",
]

# Invalid-format penalty per call, by task family (Dr. MAS reference runs).
FORMAT_PENALTY = {"math": 0.1, "search": 0.01}


@dataclass
class LossConfig:
    clip_low: float = 0.2
    clip_high: float = 0.2
    dual_clip: float | None = 3.0  # the cap on -A * ratio for A < 0; None disables it
    kl_coef: float = 0.0  # weight of the k3 KL to a frozen reference (0 = no reference model needed)
    entropy_coef: float = 0.0
    objective: str = "ppo"  # "ppo" (RL) | "sft": token-mean NLL of the response tokens (warm start; advantages unused)

    def __post_init__(self) -> None:
        if self.objective not in ("ppo", "sft"):
            raise ValueError(f"objective must be 'ppo' or 'sft'; got {self.objective!r}")
        if self.clip_low < 0 or self.clip_high < 0:
            raise ValueError(f"clip_low/clip_high must be >= 0; got {self.clip_low}/{self.clip_high}")
        if self.dual_clip is not None and self.dual_clip <= 1.0:
            raise ValueError(f"dual_clip must be > 1.0 (the reference uses 3.0) or None; got {self.dual_clip}")


@dataclass
class LossOutput:
    loss: torch.Tensor  # scalar, differentiable
    metrics: dict[str, float] = field(default_factory=dict)  # detached floats: pg_loss, clip_frac, approx_kl, ...


def format_penalized_score(reward: float, format_ok: bool | None, penalty: float) -> float:
    """A call's score: the episode reward, minus ``penalty`` when the call's format was invalid.

    ``format_ok=None`` (nothing checked the format) counts as valid.

    >>> format_penalized_score(1.0, False, FORMAT_PENALTY["math"])
    0.9
    >>> format_penalized_score(1.0, None, 0.1)
    1.0
    """
    return reward - penalty if format_ok is False else reward


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Token-mean over every real token of the batch (0 when there is none).

    >>> masked_mean(torch.tensor([[1.0, 2.0], [3.0, 9.0]]), torch.tensor([[1, 1], [1, 0]]))
    tensor(2.)
    """
    mask = mask.to(x.dtype)
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token low-variance KL estimate ``exp(r) - r - 1`` with ``r = ref - logp`` (Schulman's k3), clamped to 10.

    Non-negative, zero when the two policies agree on the token.

    >>> kl_k3(torch.tensor([-1.0, -2.0]), torch.tensor([-1.0, -1.0])).round(decimals=4)
    tensor([0.0000, 0.7183])
    """
    r = (ref_logprobs - logprobs).clamp(-20.0, 20.0)
    return (torch.exp(r) - r - 1.0).clamp(-10.0, 10.0)


def token_logprobs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """log p(label) per position from ``[..., V]`` logits (computed in float32).

    >>> token_logprobs(torch.zeros(1, 2, 4), torch.tensor([[0, 3]])).exp()
    tensor([[0.2500, 0.2500]])
    """
    logp = torch.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the token distribution at each position (nats).

    >>> entropy_from_logits(torch.zeros(4)).round(decimals=4)  # uniform over 4: log 4
    tensor(1.3863)
    """
    logits = logits.float()
    p = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (p * logits).sum(-1)


def ppo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    ref_logprobs: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = 3.0,
    kl_coef: float = 0.0,
    entropy_coef: float = 0.0,
) -> LossOutput:
    """PPO clipped surrogate with dual-clip, token-mean over the batch, plus ``kl_coef * KL - entropy_coef * H``.

    Per token, with ``r = exp(logp - old_logp)``:
    ``l = max(-A r, -A clip(r, 1 - clip_low, 1 + clip_high))``, and for A < 0 also capped: ``min(l, -A dual_clip)``.

    Two tokens: A = 1 with r = 1.5 is clipped to -1.2; A = -1 with r = 5 is dual-clipped to 3; the mean is 0.9:

    >>> lp = torch.log(torch.tensor([[1.5, 5.0]]))
    >>> out = ppo_loss(lp, torch.zeros(1, 2), torch.tensor([[1.0, -1.0]]), torch.ones(1, 2))
    >>> round(out.loss.item(), 4), out.metrics["clip_frac"], out.metrics["dual_clip_frac"]
    (0.9, 0.5, 0.5)
    """
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1)
    advantages = advantages.to(logprobs.dtype).expand_as(logprobs)
    mask = mask.to(logprobs.dtype)
    log_ratio = (logprobs - old_logprobs).clamp(-20.0, 20.0)  # guards exp() against overflow
    ratio = torch.exp(log_ratio)
    loss1 = -advantages * ratio
    loss2 = -advantages * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    clipped = torch.maximum(loss1, loss2)
    pg = clipped
    dual = torch.zeros_like(clipped, dtype=torch.bool)
    if dual_clip is not None:
        loss3 = -advantages * dual_clip
        dual = (advantages < 0) & (clipped > loss3)
        pg = torch.where(advantages < 0, torch.minimum(clipped, loss3), clipped)
    pg_loss = masked_mean(pg, mask)
    loss = pg_loss
    metrics = {
        "pg_loss": pg_loss.item(),
        "clip_frac": masked_mean((loss2 > loss1).to(mask.dtype), mask).item(),
        "dual_clip_frac": masked_mean(dual.to(mask.dtype), mask).item(),
        "approx_kl": masked_mean(-log_ratio, mask).item(),  # k1 estimate of KL(old || new), verl's ppo_kl
        "ratio_max": (ratio * mask).max().item() if mask.any() else 1.0,
        "tokens": float(mask.sum().item()),
    }
    if ref_logprobs is not None:
        kl = masked_mean(kl_k3(logprobs, ref_logprobs), mask)
        metrics["kl"] = kl.item()
        if kl_coef:
            loss = loss + kl_coef * kl
    elif kl_coef:
        raise ValueError("kl_coef > 0 needs ref_logprobs (log-probs of the frozen reference policy)")
    if entropy is not None:
        ent = masked_mean(entropy, mask)
        metrics["entropy"] = ent.item()
        if entropy_coef:
            loss = loss - entropy_coef * ent
    elif entropy_coef:
        raise ValueError("entropy_coef > 0 needs the per-token entropy (entropy_from_logits of the policy's logits)")
    metrics["loss"] = loss.item()
    return LossOutput(loss=loss, metrics=metrics)


def sft_loss(logprobs: torch.Tensor, mask: torch.Tensor) -> LossOutput:
    """Supervised fine-tuning: the token-mean negative log-likelihood of the response tokens.

    >>> lp = torch.log(torch.tensor([[0.5, 0.25, 1.0]]))
    >>> round(sft_loss(lp, torch.tensor([[1.0, 1.0, 0.0]])).loss.item(), 4)   # -(log .5 + log .25) / 2
    1.0397
    """
    nll = masked_mean(-logprobs, mask)
    return LossOutput(nll, {"loss": float(nll.detach()), "nll": float(nll.detach()), "tokens": float(mask.sum())})
