"""The DeepSpeed ZeRO update (CPU, gloo) equals the plain torch update, step for step, on a tiny random Llama.

In CI (CI set) a missing deepspeed fails these tests instead of skipping them: the real path is never skipped silently.
"""

from __future__ import annotations

import copy
import doctest
import functools
import importlib.util
import io
import os
import socket
import subprocess
import sys
from pathlib import Path

import cave.training.deepspeed_update
import numpy as np
import pytest
import torch
from cave.training.deepspeed_update import DeepSpeedConfig, deepspeed_config
from cave.training.policy import AgentPolicies, OptimizerConfig

from tests.training.test_policy import VOCAB, make_samples, params_vector
from tests.training.test_rollout import tiny_llama

torch.set_num_threads(1)


@pytest.fixture
def ds():
    """Skip without deepspeed locally; fail in CI."""
    if importlib.util.find_spec("deepspeed") is None:
        message = "deepspeed is not installed (DS_BUILD_OPS=0 pip install deepspeed==0.19.8, or the scale extra)"
        if os.environ.get("CI"):
            pytest.fail(f"{message}: CI must run the real DeepSpeed path")
        pytest.skip(message)


def pair(stage: int, per_role: bool = True, **optim):
    """The same tiny model (one model for two roles) under the torch path and under DeepSpeed ZeRO ``stage``."""
    model = tiny_llama(VOCAB)
    twin = copy.deepcopy(model)
    cfg = OptimizerConfig(lr=1e-2, **optim)
    ds_cfg = OptimizerConfig(lr=1e-2, deepspeed=DeepSpeedConfig(zero_stage=stage), **optim)
    torch_pol = AgentPolicies({"solver": model, "verifier": model}, cfg, per_role_grad_norm=per_role)
    ds_pol = AgentPolicies({"solver": twin, "verifier": twin}, ds_cfg, per_role_grad_norm=per_role)
    return torch_pol, ds_pol


def weights(pol: AgentPolicies) -> torch.Tensor:
    """The trainable weights of the policy's model, gathered (a ZeRO-3 model's own parameters are partitions)."""
    return torch.cat([t.flatten().float() for t in pol.slots[0].stepper.trainable_state().values()])


def assert_same_change(got: torch.Tensor, want: torch.Tensor, start: torch.Tensor) -> None:
    """The same parameter change, relative to the whole change: Adam turns a rounding difference in a gradient below
    its eps (1e-8) into a lr/eps = 1e6 times larger one in that weight's step, so a summation order other than the
    torch path's (ZeRO-3, two ranks) moves ~20 of 22688 weights by ~1e-6 (the change is ~1e-2 per weight)."""
    assert float((got - want).norm() / (want - start).norm()) < 1e-5


def test_config_is_hashable_and_validated():
    a = OptimizerConfig(deepspeed=DeepSpeedConfig(zero_stage=1))
    assert len({a, OptimizerConfig(deepspeed=DeepSpeedConfig(zero_stage=1)), OptimizerConfig()}) == 2
    with pytest.raises(ValueError, match="zero_stage must be 0, 1, 2 or 3"):
        DeepSpeedConfig(zero_stage=4)
    with pytest.raises(ValueError, match="bf16 needs ZeRO stage 1, 2 or 3"):
        DeepSpeedConfig(zero_stage=0, bf16=True)
    cfg = deepspeed_config(DeepSpeedConfig(zero_stage=3, offload_optimizer=True), OptimizerConfig(grad_clip=None))
    assert cfg["zero_optimization"] == {"stage": 3, "offload_optimizer": {"device": "cpu"}}
    assert cfg["gradient_clipping"] == 0.0


def test_doctests():
    result = doctest.testmod(cave.training.deepspeed_update)
    assert result.attempted > 0 and result.failed == 0


def test_policy_module_does_not_import_deepspeed():
    code = "import sys, cave.training.policy; sys.exit('deepspeed' in sys.modules)"
    root = Path(__file__).resolve().parents[2]
    assert subprocess.run([sys.executable, "-c", code], cwd=root).returncode == 0


def test_missing_deepspeed_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "deepspeed", None)
    cfg = OptimizerConfig(deepspeed=DeepSpeedConfig())
    with pytest.raises(ImportError, match=r"DS_BUILD_OPS=0 pip install deepspeed==0\.19\.8"):
        AgentPolicies({"solver": tiny_llama(VOCAB)}, cfg)


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_one_update_equals_the_torch_update(ds, stage):
    """Micro-batches, 2 steps, clipping, per-role norms: the same parameters and pre-clip norms as the torch path."""
    torch_pol, ds_pol = pair(stage, steps_per_iteration=2, micro_batch_size=2, grad_clip=0.05)
    samples = make_samples(9)  # no old logprobs: computed from the current weights first
    adv = np.linspace(-1, 1.5, 9)
    start = weights(torch_pol)
    probe = torch_pol.gradient_norms(make_samples(4, with_logprobs=True), adv[:4])
    assert ds_pol.gradient_norms(make_samples(4, with_logprobs=True), adv[:4]) == pytest.approx(probe, rel=1e-5)
    want = torch_pol.update(samples, adv)["solver+verifier"]
    got = ds_pol.update(samples, adv)["solver+verifier"]
    assert got.ok and got.steps == 2
    assert want.grad_norms[0] > 0.05  # above the clip: clipping was applied on both paths
    np.testing.assert_allclose(got.grad_norms, want.grad_norms, rtol=1e-5)
    assert_same_change(weights(ds_pol), weights(torch_pol), start)
    for role in ("solver", "verifier"):
        # (ZeRO-2 keeps no per-parameter gradient between backward passes: its hooks' fp32 copy gives the same norms)
        np.testing.assert_allclose(got.role_grad_norms[role], want.role_grad_norms[role], rtol=1e-5)
    assert not np.allclose(want.role_grad_norms["solver"], want.grad_norms)  # each role's own, not the model's
    assert got.metrics["loss"] == pytest.approx(want.metrics["loss"], rel=1e-5)


@pytest.mark.parametrize("stage", [0, 2, 3])
def test_nonfinite_loss_or_gradient_skips_the_step(ds, stage):
    """A NaN loss (in the 2nd micro-batch) or an inf gradient skips the step, weights unchanged, nothing left behind."""
    results, pols = [], pair(stage, per_role=False, micro_batch_size=2)
    for pol in pols:
        model = pol.model("solver")
        before = weights(pol)
        res = pol.update(make_samples(4), [1.0, 1.0, float("nan"), 1.0])["solver+verifier"]
        assert res.steps == 0 and [e.kind for e in res.errors] == ["nonfinite_loss"]
        assert torch.equal(before, weights(pol))
        handle = model.model.embed_tokens.weight.register_hook(lambda g: g * float("inf"))
        res = pol.update(make_samples(4), np.ones(4))["solver+verifier"]
        handle.remove()
        assert res.steps == 0 and res.errors[0].kind == "nonfinite_grad" and not np.isfinite(res.grad_norms[0])
        assert torch.equal(before, weights(pol))
        results.append(pol.update(make_samples(4, seed=5), np.linspace(-1, 1, 4))["solver+verifier"])
    want, got = results  # the next step is exactly the one a fresh torch policy takes
    assert got.ok and got.steps == 1
    np.testing.assert_allclose(got.grad_norms, want.grad_norms, rtol=1e-5)
    assert_same_change(weights(pols[1]), weights(pols[0]), before)


def test_bf16_zero2_steps_like_fp32(ds):
    torch_pol, _ = pair(2, per_role=False)
    cfg = OptimizerConfig(lr=1e-2, deepspeed=DeepSpeedConfig(zero_stage=2, bf16=True))
    model = tiny_llama(VOCAB)
    pol = AgentPolicies({"solver": model, "verifier": model}, cfg)
    assert next(model.parameters()).dtype == torch.bfloat16
    samples, adv = make_samples(6, with_logprobs=True), np.linspace(-1, 1, 6)
    want = torch_pol.update(samples, adv)["solver+verifier"]
    got = pol.update(samples, adv)["solver+verifier"]
    assert got.ok and got.grad_norms[0] == pytest.approx(want.grad_norms[0], rel=2e-2)
    change = (weights(pol) - weights(torch_pol)).norm()
    assert float(change) < 0.1 * float(weights(torch_pol).norm())


@pytest.mark.parametrize("stage", [None, 0, 1, 2, 3])
def test_checkpoint_round_trip(ds, stage):
    """Save after one update, load into a fresh policy: the next update is the same as the uninterrupted run's."""

    def policies(seed):
        deepspeed = None if stage is None else DeepSpeedConfig(zero_stage=stage)
        model = tiny_llama(VOCAB, seed=seed)
        cfg = OptimizerConfig(lr=1e-2, steps_per_iteration=2, deepspeed=deepspeed)
        return AgentPolicies({"solver": model, "verifier": model}, cfg, seed=seed)

    pol = policies(0)
    pol.update(make_samples(6, seed=1), np.linspace(-1, 1, 6))
    buf = io.BytesIO()
    torch.save(pol.checkpoint_state(), buf)  # what the trainer does with it
    state = torch.load(io.BytesIO(buf.getvalue()), weights_only=False)
    saved = state["models"]["solver+verifier"]
    assert set(saved["trainable"]) == {n for n, _ in pol.model("solver").named_parameters()}  # the model's names
    assert saved["roles"] == ("solver", "verifier")
    resumed = policies(3)  # other weights, other rng, its own optimizer state: all replaced by the checkpoint's
    resumed.update(make_samples(6, seed=3), np.linspace(1, 2, 6))
    resumed.load_checkpoint_state(state)
    assert torch.equal(weights(resumed), weights(pol))
    samples, adv = make_samples(6, seed=2), np.linspace(1, -1, 6)
    a = pol.update(samples, adv)["solver+verifier"]
    b = resumed.update(samples, adv)["solver+verifier"]
    assert a.ok and b.ok
    np.testing.assert_allclose(b.grad_norms, a.grad_norms, rtol=1e-6)
    torch.testing.assert_close(weights(resumed), weights(pol))

    # a warm start (init_from) takes the weights only; under ZeRO >= 1 the optimizer's fp32 master copy would undo
    # them at the next step, so it is refused with the way out
    fresh = policies(4)
    if stage in (1, 2, 3):
        with pytest.raises(ValueError, match="export the warm-start run"):
            fresh.load_weights(state)
    else:
        fresh.load_weights(state)
        model = dict(fresh.model("solver").named_parameters())
        assert all(torch.equal(model[n].detach().cpu(), w) for n, w in saved["trainable"].items())


def _count_gathers(model: torch.nn.Module) -> list[str]:
    """Every all-gather of a ZeRO-3 model's weights from now on (DeepSpeed calls these on its parameters)."""
    calls: list[str] = []
    for p in model.parameters():
        for name in ("all_gather", "all_gather_coalesced"):
            real = getattr(p, name)

            def counted(*args, _real=real, _name=name, **kwargs):
                calls.append(_name)
                return _real(*args, **kwargs)

            setattr(p, name, counted)
    return calls


@pytest.mark.parametrize("batched", [True, False])
def test_zero3_rollout_engine_gathers_the_weights_once_per_generation(ds, batched):
    """The transformers engine on a ZeRO-3 model generates inside ``for_generation``: one all-gather of the weights
    for the whole generation (DeepSpeed's hooks would gather them for every forward, i.e. every decoded token), the
    same tokens and logprobs as the plain model, the weights partitioned again after, and training goes on."""
    from cave.training.engines import build_engine

    from tests.training.test_engines import complete
    from tests.training.test_rollout import smollm2_tokenizer

    tok = smollm2_tokenizer()
    model = tiny_llama(len(tok))
    twin, torch_twin = copy.deepcopy(model), copy.deepcopy(model)
    cfg = OptimizerConfig(lr=1e-2, deepspeed=DeepSpeedConfig(zero_stage=3))
    pol = AgentPolicies({"solver": model, "verifier": model}, cfg, per_role_grad_norm=True)
    offload = pol.slot("solver").optimizer.parameter_offload
    hooks = len(offload.forward_hooks)
    assert all(p.numel() == 0 for p in model.parameters()) and hooks  # partitioned, hooked
    want = complete(build_engine("transformers", twin, tok, batched=batched).llm, max_tokens=8)

    context = functools.partial(pol.for_generation, "solver")
    engine = build_engine("transformers", model, tok, batched=batched, generation_context=context)
    gathers = _count_gathers(model)
    got = complete(engine.llm, max_tokens=8)
    assert len(want.token_ids) == 8 and got.token_ids == want.token_ids
    assert got.logprobs == pytest.approx(want.logprobs, abs=1e-5)
    assert len(gathers) == 1
    assert all(p.numel() == 0 for p in model.parameters()) and len(offload.forward_hooks) == hooks

    gathers.clear()  # the same engine without the gather: the hooks' per-forward path, many gathers, same tokens
    hooked = complete(build_engine("transformers", model, tok, batched=batched).llm, max_tokens=8)
    assert hooked.token_ids == want.token_ids and len(gathers) > 8

    # the hooks that were taken off and put back still drive ZeRO-3's training step
    torch_pol = AgentPolicies({"solver": torch_twin, "verifier": torch_twin}, OptimizerConfig(lr=1e-2),
                              per_role_grad_norm=True)  # fmt: skip
    start = weights(torch_pol)
    samples, adv = make_samples(6, with_logprobs=True), np.linspace(-1, 1, 6)
    a = torch_pol.update(samples, adv)["solver+verifier"]
    b = pol.update(samples, adv)["solver+verifier"]
    assert b.ok
    np.testing.assert_allclose(b.grad_norms, a.grad_norms, rtol=1e-5)
    np.testing.assert_allclose(b.role_grad_norms["solver"], a.role_grad_norms["solver"], rtol=1e-5)
    assert_same_change(weights(pol), weights(torch_pol), start)


def test_generation_blocks_may_overlap(ds):
    """Concurrent unbatched calls each open a block: the first gathers, the last releases."""
    model = tiny_llama(VOCAB)
    pol = AgentPolicies({"solver": model}, OptimizerConfig(deepspeed=DeepSpeedConfig(zero_stage=3)))
    with pol.for_generation("solver"):
        with pol.for_generation("solver"):
            assert all(p.numel() > 0 for p in model.parameters())
        assert all(p.numel() > 0 for p in model.parameters())
    assert all(p.numel() == 0 for p in model.parameters())
    with AgentPolicies({"solver": tiny_llama(VOCAB)}, OptimizerConfig()).for_generation("solver"):
        pass  # the torch path: nothing to gather


def test_local_workers_roll_out_a_zero3_model_inside_its_gather(ds, tmp_path):
    """The trainer's wiring: LocalWorkers' transformers engine generates inside the policies' for_generation."""
    from cave.training.workers import LocalWorkers

    from tests.training.test_rollout import save_tiny
    from tests.training.test_trainer import tiny_config

    src = save_tiny(tmp_path / "model")
    ds_model = {"base": {"source": str(src), "deepspeed": {"zero_stage": 3}}}
    workers = LocalWorkers(tiny_config(src, tmp_path / "run", models=ds_model, group_size=2))
    stepper = workers.policies.slot("solver").stepper
    real, entered = stepper.for_generation, []

    def counted():
        entered.append(1)
        return real()

    stepper.for_generation = counted
    try:
        roll = workers.rollout([{"question": "What is 2 + 3?", "answer": 5}], 1)
    finally:
        workers.close()
    assert roll.generated_tokens and entered
    assert all(p.numel() == 0 for p in workers.models["base"][0].parameters())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, port: int, out: str, roles: tuple[str, ...]) -> None:
    """One of two ranks: ZeRO-2 on its half of the samples (``roles`` share the model, with per-role norms)."""
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK="0")
    cfg = OptimizerConfig(lr=1e-2, micro_batch_size=2, grad_clip=0.05, deepspeed=DeepSpeedConfig(zero_stage=2))
    model = tiny_llama(VOCAB)
    pol = AgentPolicies(dict.fromkeys(roles, model), cfg, per_role_grad_norm=True)
    samples, adv = make_samples(5, roles=roles), np.linspace(-1, 1.5, 5)
    mine = [0, 1, 2] if rank == 0 else [3, 4]  # 2 micro-batches on rank 0, 1 on rank 1 (one role)
    res = pol.update([samples[i] for i in mine], adv[mine])["+".join(roles)]
    opt = pol.slot("solver").optimizer
    torch.save(
        {
            "params": weights(pol),
            "grad_norms": res.grad_norms,
            "role_grad_norms": res.role_grad_norms,
            "steps": res.steps,
            "partition": sum(t.numel() for t in opt.single_partition_of_fp32_groups),
            "exp_avg": sum(s["exp_avg"].numel() for s in opt.optimizer.state.values()),
        },
        os.path.join(out, f"rank{rank}.pt"),
    )


@pytest.mark.parametrize("roles", [("solver",), ("solver", "verifier")])
def test_two_ranks_zero2_equal_one_rank_on_all_samples(ds, tmp_path, roles):
    """The same step, and with two roles on the model the same per-role norms (ZeRO-2's hooked gradient copy,
    averaged over the ranks as DeepSpeed averages the gradient)."""
    torch.multiprocessing.spawn(_rank, args=(_free_port(), str(tmp_path), roles), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(2)]
    model = tiny_llama(VOCAB)
    start = params_vector(model)
    n_params = sum(p.numel() for p in model.parameters())
    cfg = OptimizerConfig(lr=1e-2, micro_batch_size=2, grad_clip=0.05)
    pol = AgentPolicies(dict.fromkeys(roles, model), cfg, per_role_grad_norm=True)
    want = pol.update(make_samples(5, roles=roles), np.linspace(-1, 1.5, 5))["+".join(roles)]
    for r in ranks:
        assert r["steps"] == 1
        np.testing.assert_allclose(r["grad_norms"], want.grad_norms, rtol=1e-5)
        for role in roles:
            np.testing.assert_allclose(r["role_grad_norms"][role], want.role_grad_norms[role], rtol=1e-5)
        assert_same_change(r["params"], params_vector(model), start)
        # each rank holds half of the fp32 master weights and of the Adam moments
        assert r["partition"] == r["exp_avg"] and abs(r["partition"] - n_params / 2) <= 16
