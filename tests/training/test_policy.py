"""Per-agent policies on a real tiny Llama (built from a config, ~140k parameters, no download)."""

import copy
import math

import numpy as np
import pytest
import torch
from cave.training.forward import forward_logprobs
from cave.training.loss import LossConfig, ppo_loss
from cave.training.policy import AgentPolicies, OptimizerConfig
from cave.training.samples import Sample, collate

VOCAB = 64


def tiny_llama(seed=0):
    from tests.conftest import tiny_llama as build

    return build(VOCAB, hidden=64, intermediate=256, positions=128, tie=False, seed=seed)


def make_samples(n, roles=("solver", "verifier"), seed=0, with_logprobs=False):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        p = rng.integers(1, VOCAB, size=int(rng.integers(1, 7))).tolist()
        r = rng.integers(1, VOCAB, size=int(rng.integers(1, 5))).tolist()
        old = (-np.log(VOCAB) + rng.normal(0, 0.05, size=len(r))).tolist() if with_logprobs else None
        out.append(Sample(p, r, old_logprobs=old, agent_id=roles[i % len(roles)], traj_id=f"t{i}"))
    return out


def params_vector(model):
    return torch.cat([p.detach().flatten().clone() for p in model.parameters()])


def test_logprobs_are_padding_invariant():
    """A sample's log-probs in a padded batch equal its log-probs alone (left-pad prompt, right-pad response)."""
    model = tiny_llama().eval()
    samples = make_samples(6)
    with torch.no_grad():
        batched, _ = forward_logprobs(model, collate(samples))
        for i, s in enumerate(samples):
            alone, _ = forward_logprobs(model, collate([s]))
            torch.testing.assert_close(batched[i, : len(s.response_ids)], alone[0], atol=1e-5, rtol=1e-5)
    # And they match a plain forward over the unpadded sequence.
    s = samples[0]
    ids = torch.tensor([s.prompt_ids + s.response_ids])
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), -1)
    P = len(s.prompt_ids)
    want = torch.stack([logp[P - 1 + t, tok] for t, tok in enumerate(s.response_ids)])
    torch.testing.assert_close(batched[0, : len(s.response_ids)], want, atol=1e-5, rtol=1e-5)


def test_rows_with_the_same_prompt_share_one_prompt_forward_with_the_same_result():
    """Grouped samples (the N runs of a prompt) reuse one prompt forward: same logprobs, entropy and gradients as the
    padded batch, and fewer prompt tokens through the model."""
    model = tiny_llama()
    rng = np.random.default_rng(1)
    prompts = [rng.integers(1, VOCAB, size=n).tolist() for n in (9, 4)]
    samples = [Sample(prompts[i % 2], rng.integers(1, VOCAB, size=int(rng.integers(1, 6))).tolist()) for i in range(7)]
    samples.append(Sample([5, 6, 7], [8]))  # a prompt of its own, a one-token response
    batch = collate(samples)

    def run(share):
        model.zero_grad()
        lp, ent = forward_logprobs(model, batch, with_entropy=True, entropy_grad=True, share_prompts=share)
        ((lp * batch.response_mask).sum() + (ent * batch.response_mask).sum()).backward()
        return lp.detach(), ent.detach(), [p.grad.clone() for p in model.parameters()]

    seen = []
    hook = model.model.embed_tokens.register_forward_hook(lambda m, i, o: seen.append(i[0].numel()))
    shared, plain = run(True), run(False)
    hook.remove()
    mask = batch.response_mask.bool()
    torch.testing.assert_close(shared[0][mask], plain[0][mask], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(shared[1][mask], plain[1][mask], atol=1e-5, rtol=1e-5)
    for a, b in zip(shared[2], plain[2], strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    n_shared, n_plain = sum(seen[: len(seen) - 1]), seen[-1]  # token positions through the embedding
    assert n_shared < n_plain / 2


def test_update_changes_parameters_and_improves_the_objective():
    model = tiny_llama()
    pol = AgentPolicies({"solver": model}, OptimizerConfig(lr=1e-2, steps_per_iteration=1))
    s = Sample([1, 2, 3], [4, 5], agent_id="solver", traj_id="a")
    before = params_vector(model)
    with torch.no_grad():
        lp0, _ = forward_logprobs(model, collate([s]))
    for _ in range(5):
        res = pol.update([s], [1.0])["solver"]
        assert res.ok and res.steps == 1
    assert not torch.equal(before, params_vector(model))
    with torch.no_grad():
        lp1, _ = forward_logprobs(model, collate([s]))
    assert lp1.sum() > lp0.sum()  # a positive advantage makes the response more likely
    assert set(res.metrics) >= {"loss", "pg_loss", "clip_frac", "approx_kl", "entropy", "grad_norm"}


def test_shared_model_roles_share_one_optimizer():
    shared, other = tiny_llama(0), tiny_llama(1)
    pol = AgentPolicies({"solver": shared, "verifier": shared, "judge": other}, OptimizerConfig(lr=1e-3))
    assert [s.name for s in pol.slots] == ["solver+verifier", "judge"]
    assert pol.slot("solver").optimizer is pol.slot("verifier").optimizer
    assert pol.slot("solver").optimizer is not pol.slot("judge").optimizer
    res = pol.update(make_samples(6, roles=("solver", "verifier", "judge")), np.linspace(-1, 1, 6))
    assert set(res) == {"solver+verifier", "judge"}
    assert res["solver+verifier"].n_samples == 4 and res["judge"].n_samples == 2
    with pytest.raises(KeyError, match="no policy for role 'critic'"):
        pol.model("critic")


def test_per_role_optimizer_settings():
    a, b = tiny_llama(0), tiny_llama(1)
    pol = AgentPolicies(
        {"solver": a, "verifier": b}, {"solver": OptimizerConfig(lr=1e-3), "verifier": OptimizerConfig(lr=5e-4)}
    )
    assert pol.slot("solver").optimizer.param_groups[0]["lr"] == 1e-3
    assert pol.slot("verifier").optimizer.param_groups[0]["lr"] == 5e-4
    with pytest.raises(ValueError, match="share one model but have different optimizer configs"):
        AgentPolicies({"solver": a, "verifier": a}, {"solver": OptimizerConfig(lr=1e-3), "verifier": OptimizerConfig()})
    with pytest.raises(KeyError, match="no optimizer config for role\\(s\\) \\['verifier'\\]"):
        AgentPolicies({"solver": a, "verifier": b}, {"solver": OptimizerConfig()})
    with pytest.raises(ValueError, match="lr must be > 0"):
        OptimizerConfig(lr=0)


@pytest.mark.parametrize("n_samples", [2, 5, 40])
def test_fixed_number_of_optimizer_steps(n_samples):
    a, b = tiny_llama(0), tiny_llama(1)
    pol = AgentPolicies(
        {"solver": a, "verifier": b},
        {"solver": OptimizerConfig(lr=1e-3, steps_per_iteration=4), "verifier": OptimizerConfig(lr=1e-3)},
    )
    res = pol.update(make_samples(n_samples), np.ones(n_samples))
    assert res["solver"].steps == 4 and len(res["solver"].grad_norms) == 4
    assert res["verifier"].steps == 1
    opt_state = pol.slot("solver").optimizer.state[next(a.parameters())]
    assert int(opt_state["step"]) == 4


def test_grad_norm_is_recorded_before_clipping():
    model = tiny_llama()
    reference = copy.deepcopy(model)
    samples = make_samples(4, roles=("solver",), with_logprobs=True)
    adv = [1.0, -1.0, 0.5, 2.0]
    pol = AgentPolicies({"solver": model}, OptimizerConfig(lr=1e-3, grad_clip=1e-3))
    seen = []
    opt = pol.slot("solver").optimizer
    step = opt.step

    def spy(*a, **k):  # the gradient the optimizer actually applies
        seen.append(math.sqrt(sum(float(p.grad.norm()) ** 2 for p in model.parameters() if p.grad is not None)))
        return step(*a, **k)

    opt.step = spy
    res = pol.update(samples, adv)["solver"]
    # The same loss by hand on an untouched copy: its gradient norm is what update() recorded.
    batch = collate(samples)
    lp, _ = forward_logprobs(reference.train(), batch)
    ppo_loss(lp, batch.old_logprobs, torch.tensor(adv), batch.response_mask).loss.backward()
    want = math.sqrt(sum(float(p.grad.norm()) ** 2 for p in reference.parameters() if p.grad is not None))
    assert res.grad_norms[0] == pytest.approx(want, rel=1e-4)
    assert want > 1e-2  # far above the clip, so clipping really happened ...
    assert seen[0] == pytest.approx(1e-3, rel=1e-3)  # ... and the optimizer saw the clipped gradient
    assert res.role_grad_norms["solver"] == res.grad_norms


def test_micro_batching_gives_the_same_gradient():
    samples = make_samples(7, roles=("solver",), with_logprobs=True)
    adv = np.linspace(-1, 1, 7)
    norms = []
    for micro in (None, 2):
        pol = AgentPolicies({"solver": tiny_llama()}, OptimizerConfig(lr=1e-3, micro_batch_size=micro, grad_clip=None))
        norms.append(pol.update(samples, adv)["solver"].grad_norms[0])
    assert norms[0] == pytest.approx(norms[1], rel=1e-4)


def test_per_role_grad_norms_on_a_shared_model():
    model = tiny_llama()
    samples = make_samples(6, with_logprobs=True)
    adv = np.array([1.0, -0.5, 2.0, 1.0, -1.0, 0.3])
    pol = AgentPolicies({"solver": model, "verifier": model}, OptimizerConfig(lr=1e-3), per_role_grad_norm=True, seed=0)
    res = pol.update(samples, adv)["solver+verifier"]
    total = sum(s.n_tokens for s in samples)
    # Each role's norm is the norm of its part of the token-mean loss (its tokens over all tokens of the step).
    for role in ("solver", "verifier"):
        ref = copy.deepcopy(model)  # parameters after the step: recompute on a fresh copy of the initial model
        ref.load_state_dict(tiny_llama().state_dict())
        idx = [i for i, s in enumerate(samples) if s.agent_id == role]
        batch = collate([samples[i] for i in idx])
        lp, _ = forward_logprobs(ref.train(), batch)
        out = ppo_loss(lp, batch.old_logprobs, torch.tensor(adv[idx], dtype=torch.float32), batch.response_mask)
        (out.loss * batch.n_tokens / total).backward()
        want = math.sqrt(sum(float(p.grad.norm()) ** 2 for p in ref.parameters() if p.grad is not None))
        assert res.role_grad_norms[role][0] == pytest.approx(want, rel=1e-3)
    r = res.role_grad_norms
    assert res.grad_norms[0] <= r["solver"][0] + r["verifier"][0] + 1e-6


def test_nan_loss_skips_the_step_without_crashing():
    model = tiny_llama()
    pol = AgentPolicies({"solver": model}, OptimizerConfig(lr=1e-2, steps_per_iteration=1))
    before = params_vector(model)
    res = pol.update(make_samples(4, roles=("solver",)), [1.0, float("nan"), 0.0, 1.0])["solver"]
    assert res.steps == 0 and len(res.errors) == 1
    err = res.errors[0]
    assert err.kind == "nonfinite_loss" and "the step was skipped and the weights are unchanged" in str(err)
    assert torch.equal(before, params_vector(model))
    # The next update with good data works.
    assert pol.update(make_samples(4, roles=("solver",)), np.ones(4))["solver"].steps == 1


def test_only_the_bad_mini_batch_is_skipped():
    pol = AgentPolicies({"solver": tiny_llama()}, OptimizerConfig(lr=1e-2, steps_per_iteration=4))
    res = pol.update(make_samples(4, roles=("solver",)), [1.0, float("nan"), 0.0, 1.0])["solver"]
    assert res.steps == 3 and [e.kind for e in res.errors] == ["nonfinite_loss"]
    assert sum(math.isfinite(g) for g in res.grad_norms) == 3


def test_inf_gradient_skips_the_step():
    model = tiny_llama()
    pol = AgentPolicies({"solver": model}, OptimizerConfig(lr=1e-2))
    before = params_vector(model)
    handle = model.model.embed_tokens.weight.register_hook(lambda g: g * float("inf"))
    res = pol.update(make_samples(3, roles=("solver",)), np.ones(3))["solver"]
    handle.remove()
    assert res.steps == 0 and res.errors[0].kind == "nonfinite_grad"
    assert not math.isfinite(res.grad_norms[0])
    assert torch.equal(before, params_vector(model))
    assert pol.slot("solver").optimizer.state == {} or all(
        int(s["step"]) == 0 for s in pol.slot("solver").optimizer.state.values()
    )


def test_missing_old_logprobs_are_computed_from_the_current_weights():
    pol = AgentPolicies({"solver": tiny_llama()}, OptimizerConfig(lr=1e-3))
    res = pol.update(make_samples(4, roles=("solver",)), np.ones(4))["solver"]
    # On-policy: ratio 1 on the first step, nothing clipped, approx KL 0.
    assert res.metrics["clip_frac"] == 0.0
    assert abs(res.metrics["approx_kl"]) < 1e-6


def test_kl_to_a_frozen_reference():
    model = tiny_llama()
    pol = AgentPolicies(
        {"solver": model}, OptimizerConfig(lr=1e-2, steps_per_iteration=3), loss=LossConfig(kl_coef=0.1)
    )
    slot = pol.slot("solver")
    assert slot.reference is not None and not any(p.requires_grad for p in slot.reference.parameters())
    res = pol.update(make_samples(6, roles=("solver",)), np.linspace(-1, 1, 6))["solver"]
    assert res.ok and res.metrics["kl"] > 0  # the policy moved away from the reference over the 3 steps
    assert AgentPolicies({"solver": tiny_llama()}).slot("solver").reference is None


def test_unknown_roles_and_shapes_are_errors():
    pol = AgentPolicies({"solver": tiny_llama()})
    with pytest.raises(KeyError, match="samples from roles without a policy: \\['verifier'\\]"):
        pol.update(make_samples(2), [1.0, 1.0])
    with pytest.raises(ValueError, match="expected one per sample"):
        pol.update(make_samples(2, roles=("solver",)), [1.0])


def test_state_dict_round_trip():
    a = AgentPolicies({"solver": tiny_llama(0)}, OptimizerConfig(lr=1e-3))
    a.update(make_samples(3, roles=("solver",)), np.ones(3))
    b = AgentPolicies({"solver": tiny_llama(1)}, OptimizerConfig(lr=1e-3))
    b.load_state_dict(a.state_dict())
    assert torch.equal(params_vector(a.model("solver")), params_vector(b.model("solver")))
    with pytest.raises(KeyError, match="checkpoint has no model 'judge'"):
        AgentPolicies({"judge": tiny_llama()}).load_state_dict(a.state_dict())


def test_gradient_norm_probe_matches_the_update_and_changes_nothing():
    samples = make_samples(6, with_logprobs=True)
    adv = np.array([1.0, -0.5, 2.0, 1.0, -1.0, 0.3])
    shared = tiny_llama()
    pol = AgentPolicies({"solver": shared, "verifier": shared}, OptimizerConfig(lr=1e-3), per_role_grad_norm=True)
    before = params_vector(shared)
    probe = pol.gradient_norms(samples, adv)
    assert torch.equal(before, params_vector(shared))
    assert all(p.grad is None for p in shared.parameters())
    many = pol.gradient_norms(samples, {"a": adv, "b": 2 * adv})
    assert many["a"] == pytest.approx(probe, rel=1e-5)
    # Twice the advantages, twice the policy-gradient (no entropy term here).
    assert many["b"]["solver"] == pytest.approx(2 * probe["solver"], rel=1e-4)
    res = pol.update(samples, adv)["solver+verifier"]  # one step over the same samples: the same per-role norms
    assert res.role_grad_norms["solver"][0] == pytest.approx(probe["solver"], rel=1e-4)
    assert res.role_grad_norms["verifier"][0] == pytest.approx(probe["verifier"], rel=1e-4)


def test_only_missing_old_logprobs_are_filled_unless_asked():
    model = tiny_llama()
    given = Sample([1, 2], [3], old_logprobs=[-9.0], agent_id="solver")
    missing = Sample([1, 2], [4], agent_id="solver")
    pol = AgentPolicies({"solver": model})
    filled = pol._with_old_logprobs(pol.slot("solver"), [given, missing])
    assert filled[0].old_logprobs == [-9.0] and filled[1].old_logprobs[0] < 0
    assert missing.old_logprobs is None  # the caller's samples are not modified
    pol = AgentPolicies({"solver": model}, recompute_old_logprobs=True)
    assert pol._with_old_logprobs(pol.slot("solver"), [given])[0].old_logprobs != [-9.0]


def test_bf16_weights_step_through_fp32_masters():
    """A bf16 model's AdamW step lands: at lr 1e-5 the step is below bf16's resolution for most weights, so an
    optimizer on the bf16 weights themselves would leave them unchanged; the fp32 masters keep every step and the
    model gets their rounding."""
    samples, adv = make_samples(4, roles=("solver",)), np.ones(4)
    bf16 = AgentPolicies({"solver": tiny_llama(0).to(torch.bfloat16)}, OptimizerConfig(lr=1e-5))
    stepper = bf16.slot("solver").stepper
    before = [m.detach().clone() for m in stepper.masters]
    bf16.update(samples, adv)
    moved = sum(int((m.detach() != b).sum()) for m, b in zip(stepper.masters, before, strict=True))
    assert moved > 0.9 * sum(b.numel() for b in before)  # nearly every master weight took the step
    for p, m in zip(stepper.params, stepper.masters, strict=True):
        assert p.dtype == torch.bfloat16 and m.dtype == torch.float32
        assert torch.equal(p.detach(), m.detach().to(torch.bfloat16))  # the model holds the masters' rounding
    # a checkpoint keeps the full-precision masters, and a fresh bf16 policy resumes from them exactly
    state = stepper.trainable_state()
    assert all(v.dtype == torch.float32 for v in state.values())
    again = AgentPolicies({"solver": tiny_llama(1).to(torch.bfloat16)}, OptimizerConfig(lr=1e-5))
    again.slot("solver").stepper.load(state, stepper.optimizer_state())
    for m, n in zip(stepper.masters, again.slot("solver").stepper.masters, strict=True):
        assert torch.equal(m.detach(), n.detach())


def test_fp32_weights_have_no_master_copy():
    pol = AgentPolicies({"solver": tiny_llama(0)}, OptimizerConfig(lr=1e-3))
    stepper = pol.slot("solver").stepper
    assert all(m is p for m, p in zip(stepper.masters, stepper.params, strict=True))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_left_padded_forward_equals_each_row_alone_and_its_gradient_is_finite(dtype):
    """Padding queries attend to themselves (no fully masked rows: a NaN source in SDPA backward); real tokens as alone."""
    from cave.training.forward import no_unattended_rows

    from tests.conftest import tiny_llama as build

    model = build(300, attn_implementation="sdpa").to(dtype)
    samples = [
        Sample(list(range(5, 25)), [7, 8, 9], old_logprobs=[-5.0] * 3),
        Sample([8, 9], [9, 10], old_logprobs=[-5.0] * 2),
    ]
    batch = collate(samples)
    assert no_unattended_rows(model, batch.attention_mask).dim() == 4  # the padded batch gets the 4D mask
    logprobs, entropy = forward_logprobs(model, batch, with_entropy=True, entropy_grad=True, share_prompts=False)
    for i, s in enumerate(samples):
        alone, _ = forward_logprobs(model, collate([s]), share_prompts=False)
        tol = 1e-5 if dtype == torch.float32 else 0.1
        assert torch.allclose(logprobs[i, : len(s.response_ids)], alone[0], atol=tol)
    out = ppo_loss(
        logprobs, batch.old_logprobs, torch.zeros(2), batch.response_mask, entropy=entropy, entropy_coef=1e-3
    )
    out.loss.backward()  # zero advantages: only the entropy term has a gradient (the bf16 GPU run's case)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
    assert math.isfinite(float(norm)) and float(norm) > 0
