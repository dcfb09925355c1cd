"""PPO loss with dual-clip, KL (k3), entropy and the format penalty, against hand-computed values."""

import math

import pytest
import torch
from cave.training.loss import (
    FORMAT_PENALTY,
    LossConfig,
    entropy_from_logits,
    format_penalized_score,
    kl_k3,
    masked_mean,
    ppo_loss,
    token_logprobs,
)


def _lp(ratios):
    return torch.log(torch.tensor(ratios, dtype=torch.float64))


def test_four_clip_cases_by_hand():
    # ratio, advantage -> per-token loss:
    #   1.5, +1: max(-1.5, -1.2) = -1.2          (clipped above)
    #   5.0, -1: max(5, 1.2) = 5 -> min(5, 3) = 3  (dual-clipped)
    #   0.5, -1: max(0.5, 0.8) = 0.8             (clipped below)
    #   0.5, +1: max(-0.5, -0.8) = -0.5          (not clipped)
    lp = _lp([[1.5, 5.0, 0.5, 0.5]])
    adv = torch.tensor([[1.0, -1.0, -1.0, 1.0]], dtype=torch.float64)
    out = ppo_loss(lp, torch.zeros_like(lp), adv, torch.ones_like(lp))
    assert out.loss.item() == pytest.approx((-1.2 + 3.0 + 0.8 - 0.5) / 4)
    assert out.metrics["clip_frac"] == pytest.approx(0.5)  # tokens 1 and 3
    assert out.metrics["dual_clip_frac"] == pytest.approx(0.25)
    assert out.metrics["approx_kl"] == pytest.approx(-(math.log(1.5) + math.log(5) + 2 * math.log(0.5)) / 4)
    assert out.metrics["ratio_max"] == pytest.approx(5.0)


def test_dual_clip_off_and_asymmetric_clip():
    lp = _lp([[5.0, 1.5]])
    adv = torch.tensor([[-1.0, 1.0]], dtype=torch.float64)
    out = ppo_loss(lp, torch.zeros_like(lp), adv, torch.ones_like(lp), dual_clip=None, clip_high=0.28)
    assert out.loss.item() == pytest.approx((5.0 - 1.28) / 2)


def test_token_mean_over_the_whole_batch():
    # Sample 0 has 3 tokens, sample 1 has 1: token-mean weighs tokens, not samples.
    lp = torch.zeros(2, 3, dtype=torch.float64)  # ratio 1 everywhere
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    out = ppo_loss(lp, torch.zeros_like(lp), torch.tensor([1.0, -2.0], dtype=torch.float64), mask)
    assert out.loss.item() == pytest.approx((-1 - 1 - 1 + 2) / 4)
    assert out.metrics["tokens"] == 4


def test_gradients_flow_only_through_unclipped_tokens():
    lp = _lp([[1.5, 0.5, 0.9]]).requires_grad_(True)
    adv = torch.tensor([1.0, 1.0, 1.0], dtype=torch.float64).unsqueeze(0)
    ppo_loss(lp, torch.zeros_like(lp), adv, torch.ones_like(lp)).loss.backward()
    # d/dlogp of -A * exp(logp) / 3 is -A * ratio / 3 when unclipped; 0 when the clipped branch is active.
    assert lp.grad.tolist()[0] == pytest.approx([0.0, -0.5 / 3, -0.9 / 3])


def test_dual_clipped_token_has_no_gradient():
    lp = _lp([[5.0]]).requires_grad_(True)
    ppo_loss(lp, torch.zeros_like(lp), torch.tensor([-1.0], dtype=torch.float64), torch.ones_like(lp)).loss.backward()
    assert lp.grad.item() == 0.0


def test_kl_k3_by_hand():
    # r = ref - logp = 1 -> e - 2; r = -1 -> 1/e; r = 0 -> 0.
    logp = torch.tensor([-2.0, -1.0, -1.0], dtype=torch.float64)
    ref = torch.tensor([-1.0, -2.0, -1.0], dtype=torch.float64)
    assert kl_k3(logp, ref).tolist() == pytest.approx([math.e - 2, 1 / math.e, 0.0])


def test_kl_and_entropy_terms():
    lp = torch.zeros(1, 2, dtype=torch.float64)
    ref = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    ent = torch.tensor([[2.0, 4.0]], dtype=torch.float64)
    adv = torch.tensor([1.0], dtype=torch.float64)
    base = ppo_loss(lp, lp, adv, torch.ones_like(lp)).loss.item()  # -1
    out = ppo_loss(lp, lp, adv, torch.ones_like(lp), ref_logprobs=ref, entropy=ent, kl_coef=0.5, entropy_coef=0.1)
    kl = (math.e - 2) / 2
    assert out.metrics["kl"] == pytest.approx(kl)
    assert out.metrics["entropy"] == pytest.approx(3.0)
    assert out.loss.item() == pytest.approx(base + 0.5 * kl - 0.1 * 3.0)


def test_missing_terms_are_errors():
    lp = torch.zeros(1, 1)
    with pytest.raises(ValueError, match="kl_coef > 0 needs ref_logprobs"):
        ppo_loss(lp, lp, torch.ones(1), torch.ones(1, 1), kl_coef=0.1)
    with pytest.raises(ValueError, match="entropy_coef > 0 needs the per-token entropy"):
        ppo_loss(lp, lp, torch.ones(1), torch.ones(1, 1), entropy_coef=0.1)
    with pytest.raises(ValueError, match="dual_clip must be > 1.0"):
        LossConfig(dual_clip=0.5)


def test_empty_mask_is_zero_not_nan():
    lp = torch.zeros(1, 2)
    out = ppo_loss(lp, lp, torch.ones(1), torch.zeros(1, 2))
    assert out.loss.item() == 0.0


def test_token_logprobs_and_entropy():
    logits = torch.log(torch.tensor([[0.5, 0.25, 0.25]]))
    assert token_logprobs(logits, torch.tensor([1])).item() == pytest.approx(math.log(0.25))
    assert entropy_from_logits(logits).item() == pytest.approx(-(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25)))
    assert masked_mean(torch.tensor([1.0, 5.0]), torch.tensor([1, 0])).item() == 1.0


def test_format_penalty():
    assert format_penalized_score(1.0, False, FORMAT_PENALTY["math"]) == pytest.approx(0.9)
    assert format_penalized_score(0.0, False, FORMAT_PENALTY["search"]) == pytest.approx(-0.01)
    assert format_penalized_score(1.0, True, 0.1) == 1.0
    assert format_penalized_score(1.0, None, 0.1) == 1.0
