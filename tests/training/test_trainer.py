"""The trainer end to end: a tiny random Llama (fast, every path) and the real SmolLM2 through `cave train`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from cave.training.cli import train_main
from cave.training.config import load_config, parse_config
from cave.training.rewards import register_reward
from cave.training.trainer import Trainer, TrainingStopped, latest_checkpoint, prune_checkpoints, read_metrics

from tests.training.test_rollout import TEAM, save_tiny

ROOT = Path(__file__).resolve().parents[2]
CI_CONFIG = ROOT / "training" / "configs" / "math_smollm2.yaml"


@register_reward("test_length_parity")
def length_parity(result, example):
    """Verifiable from the run's output: a reward with variance even for a random model."""
    if example.get("boom"):
        raise RuntimeError("checker crashed")
    return float(len(str(result.answer)) % 2)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return save_tiny(tmp_path_factory.mktemp("tiny") / "model")


def tiny_config(tiny_dir: Path, out: Path, **extra):
    data = {
        "team": {**TEAM, "default_backend": "transformers"},
        "models": {"base": {"source": str(tiny_dir)}},
        "agents": {"solver": {"lr": 1e-2}, "verifier": {"lr": 1e-2}},
        "data": {
            "prompts": [
                {"question": "What is 2 + 3?", "answer": 5},
                {"question": "What is 4 * 6?", "answer": 24},
                {"question": "What is 1 + 1?", "answer": 2, "boom": True},
            ]
        },
        "reward": "test_length_parity",
        "estimator": "drmas",
        "group_size": 4,
        "batch_size": 3,
        "steps": 2,
        "max_tokens": 16,
        "output_dir": str(out),
        "threads": 1,
        **extra,
    }
    return parse_config(data)


def trainable(ckpt: Path) -> dict[str, torch.Tensor]:
    state = torch.load(ckpt, map_location="cpu", weights_only=False)
    (model,) = state["models"].values()
    return model["trainable"]


def test_tiny_team_trains_logs_plots_checkpoints_and_resumes(tiny_dir, tmp_path):
    from safetensors.torch import load_file

    run = tmp_path / "run"
    cfg = tiny_config(tiny_dir, run)
    assert Trainer(cfg, quiet=True).train() == run.resolve()

    rows = read_metrics(run)
    assert [r["step"] for r in rows] == [1, 2]
    r = rows[0]
    # the crashing checker marked its group's 4 runs as failed: counted and logged, the run went on
    assert r["rewards_failed"] == 4 and "checker crashed" in r["reward_errors"][0]
    assert r["episodes"] == 12 and r["samples"] == 16  # 8 scored runs x (solver + verifier)
    for agent in ("solver", "verifier"):
        for key in ("reward/{}/mean", "reward/{}/std", "adv/{}/mean", "adv/{}/std", "grad_norm/{}", "response_len/{}"):
            assert key.format(agent) in r
        assert abs(r[f"adv/{agent}/mean"]) < 1e-6  # agent-wise normalized: zero mean per agent
    for key in ("loss", "clip_frac", "approx_kl", "entropy", "tokens_per_s", "rollout_s", "update_s"):
        assert key in r
    assert any(r[f"grad_norm/{a}"] > 0 for r in rows for a in ("solver", "verifier"))
    assert {p.name for p in (run / "plots").iterdir()} >= {"reward.png", "grad_norm.png", "loss.png", "throughput.png"}

    # parameters changed: step 1 moved away from the initial weights, step 2 moved again
    base = load_file(tiny_dir / "model.safetensors")
    step1, step2 = trainable(run / "checkpoints" / "step_000001.pt"), trainable(run / "checkpoints" / "step_000002.pt")
    key = "model.layers.1.mlp.down_proj.weight"
    assert not torch.equal(step1[key], base[key]) and not torch.equal(step2[key], step1[key])

    # resume continues from step 2 to 3 with the step-2 weights and optimizer state
    resumed = Trainer(cfg.model_copy(update={"steps": 3}), resume=run, quiet=True)
    resumed.setup()
    assert resumed.start_step == 2
    live = dict(resumed.policies.slots[0].model.named_parameters())
    assert torch.equal(live[key].detach(), step2[key])
    assert resumed.policies.slots[0].optimizer.state_dict()["state"]  # Adam moments came back
    Trainer(cfg.model_copy(update={"steps": 3}), resume=run, quiet=True).train()
    rows = read_metrics(run)
    assert [r["step"] for r in rows] == [1, 2, 3]
    # gradient-spike diagnostics every step; the run-so-far statistics went on from the logged norms after --resume
    for agent in ("solver", "verifier"):
        for name in ("adv_sq", "inflation", "agent_group_singleton", "agent_group_all_equal", "grad_norms"):
            assert f"{name}/{agent}" in rows[-1]
        every = [g for r in rows for g in r[f"grad_norms/{agent}"] if g > 0]
        assert rows[-1][f"gradspike/max/{agent}"] == pytest.approx(max(every))
        assert rows[-1][f"gradspike/median/{agent}"] == pytest.approx(float(np.median(every)))
    assert latest_checkpoint(run).name == "step_000003.pt"

    # exploding gradients stop the step with a clear message; the last good checkpoint stays the latest
    boom = cfg.model_copy(update={"steps": 4, "max_grad_norm_stop": 1e-12})
    with pytest.raises(TrainingStopped, match=r"step 4 stopped: .*exploding gradients.*step_000003\.pt"):
        Trainer(boom, resume=run, quiet=True).train()
    assert latest_checkpoint(run).name == "step_000003.pt"

    # `cave train plot RUN_DIR` redraws the curves
    (run / "plots" / "reward.png").unlink()
    assert train_main(["plot", str(run)]) == 0 and (run / "plots" / "reward.png").is_file()
    assert train_main(["plot", str(tmp_path / "nowhere")]) == 2

    # the finished run saved each trained model as a plain HF folder; `cave train export` rebuilds one from a checkpoint
    from transformers import AutoModelForCausalLM

    step3 = trainable(run / "checkpoints" / "step_000003.pt")
    final = dict(AutoModelForCausalLM.from_pretrained(run / "final" / "base").named_parameters())
    assert torch.equal(final[key].detach(), step3[key])
    assert train_main(["export", str(run), "--out", str(tmp_path / "exported")]) == 0
    again = dict(AutoModelForCausalLM.from_pretrained(tmp_path / "exported" / "base").named_parameters())
    assert torch.equal(again[key].detach(), step3[key])
    assert (tmp_path / "exported" / "base" / "tokenizer_config.json").is_file()
    assert train_main(["export", str(tmp_path / "nowhere")]) == 2


def test_tensorboard_and_wandb_get_every_metric(tiny_dir, tmp_path, monkeypatch):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.setenv("WANDB_SILENT", "true")
    run = tmp_path / "run"
    cfg = tiny_config(tiny_dir, run, steps=2, tracking=["tensorboard", "wandb"], save_final=False)
    Trainer(cfg, quiet=True).train()
    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    rows = read_metrics(run)
    tags = set(events.Tags()["scalars"])
    assert {"reward_mean", "grad_norm/solver", "adv/verifier/std", "loss"} <= tags
    assert [e.step for e in events.Scalars("reward_mean")] == [1, 2]
    assert [e.value for e in events.Scalars("reward_mean")] == pytest.approx([r["reward_mean"] for r in rows])
    # wandb wrote an offline run in the run folder (no network), with the same id a resume would reuse
    run_id = (run / "wandb_run_id").read_text()
    offline = list((run / "wandb").glob(f"offline-run-*-{run_id}"))
    assert len(offline) == 1 and list(offline[0].glob("*.wandb"))
    assert not (run / "final").exists()


def test_cli_reports_bad_input_before_loading_a_model(tmp_path, capsys):
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"team": TEAM, "data": {"prompts": []}, "estimator": "x"}))
    assert train_main([str(tmp_path / "bad.yaml")]) == 2
    err = capsys.readouterr().err
    assert "bad config" in err and "estimator: unknown advantage estimator 'x'" in err
    good = yaml.safe_load(CI_CONFIG.read_text())
    (tmp_path / "good.yaml").write_text(yaml.safe_dump(good))
    assert train_main([str(tmp_path / "good.yaml"), "--resume", str(tmp_path / "norun")]) == 2
    assert "no checkpoint there" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(600)
def test_cave_train_smollm2_solver_verifier_end_to_end(tmp_path):
    """The CI demonstration of the loop: `cave train` on SmolLM2, a two-agent math team, 2 steps, then --resume to step
    3. It does not show learning: SmolLM2 rarely earns a reward or a valid format here, so every advantage may be 0
    and the weights then move by the entropy bonus alone; test_real_signal.py checks a policy-gradient update."""
    from safetensors import safe_open

    from cave.llm import LLMError
    from cave.llm.convert import hf_checkpoint

    try:
        base_dir = hf_checkpoint("smollm2")
    except LLMError as e:
        pytest.skip(str(e))
    data = yaml.safe_load(CI_CONFIG.read_text())
    data["output_dir"] = str(tmp_path / "run")
    config = tmp_path / "math.yaml"
    config.write_text(yaml.safe_dump(data))
    run = tmp_path / "run"

    assert train_main([str(config), "--quiet"]) == 0
    rows = read_metrics(run)
    assert [r["step"] for r in rows] == [1, 2]
    assert {"grad_norm/solver", "grad_norm/verifier", "reward/solver/mean", "reward/verifier/mean"} <= set(rows[0])
    assert rows[0]["samples"] >= 4 and rows[0]["generated_tokens"] > 0
    assert (run / "plots" / "reward.png").is_file() and (run / "plots" / "grad_norm.png").is_file()

    # parameters changed: the trained last layer differs from the shipped weights (with entropy_coef 0.001 this holds
    # even when every advantage is 0, so it checks the update path, not a learning signal)
    cfg = load_config(config)
    n_layers = json.loads((base_dir / "config.json").read_text())["num_hidden_layers"]
    key = f"model.layers.{n_layers - 1}.mlp.down_proj.weight"
    with safe_open(base_dir / "model.safetensors", "pt") as f:
        before = f.get_tensor(key).float()
    after = trainable(run / "checkpoints" / "step_000002.pt")[key]
    assert cfg.models["base"].train_layers and not torch.equal(before, after)
    assert (after - before).abs().max() > 0

    assert train_main([str(config), "--resume", str(run), "--steps", "3", "--quiet"]) == 0
    assert [r["step"] for r in read_metrics(run)] == [1, 2, 3]
    assert latest_checkpoint(run).name == "step_000003.pt"
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["latest", "step_000003.pt"]  # keep_checkpoints


def test_prune_checkpoints_keeps_the_newest_and_latest(tmp_path):
    ckpts = tmp_path / "checkpoints"
    ckpts.mkdir()
    for name in ["step_000001.pt", "step_000002.pt", "step_000010.pt", "latest", "notes.txt"]:
        (ckpts / name).write_text("x")
    assert prune_checkpoints(tmp_path, None) == []
    assert [p.name for p in prune_checkpoints(tmp_path, 2)] == ["step_000001.pt"]
    assert sorted(p.name for p in ckpts.iterdir()) == ["latest", "notes.txt", "step_000002.pt", "step_000010.pt"]


@pytest.mark.slow
@pytest.mark.parametrize("stage", [2, 3])
def test_deepspeed_zero_updates_train_like_torch_and_resume(tiny_dir, tmp_path, stage):
    """`models.base.deepspeed: {zero_stage: N}` runs the same loop through a DeepSpeed engine: the same rollouts,
    gradient norms and weights as the torch AdamW run, a checkpoint that resumes, and a full export (ZeRO-3
    partitions the live weights: the export gathers them)."""
    if not os.environ.get("CI"):
        pytest.importorskip("deepspeed", reason="the scale extra (DS_BUILD_OPS=0 pip install deepspeed==0.19.8)")
    from transformers import AutoModelForCausalLM

    key = "model.layers.1.mlp.down_proj.weight"
    torch_run, ds_run = tmp_path / "torch", tmp_path / "ds"
    # (per-role norms on: ZeRO-2 keeps a hooked gradient copy for them; ZeRO-3 rolls out with gathered weights)
    Trainer(tiny_config(tiny_dir, torch_run), quiet=True).train()
    ds_model = {"base": {"source": str(tiny_dir), "deepspeed": {"zero_stage": stage}}}
    ds_cfg = tiny_config(tiny_dir, ds_run, models=ds_model)
    Trainer(ds_cfg, quiet=True).train()
    for a, b in zip(read_metrics(torch_run), read_metrics(ds_run), strict=True):
        assert a["reward_mean"] == b["reward_mean"] and a["samples"] == b["samples"]
        for role in ("solver", "verifier"):
            assert b[f"grad_norm/{role}"] == pytest.approx(a[f"grad_norm/{role}"], rel=1e-4)
        assert b["grad_norm/solver"] != pytest.approx(b["grad_norm/verifier"], rel=1e-3)  # each role's own
    want = trainable(torch_run / "checkpoints" / "step_000002.pt")
    got = trainable(ds_run / "checkpoints" / "step_000002.pt")
    assert got[key] == pytest.approx(want[key], abs=1e-5) and not torch.equal(got[key], want[key] * 0)
    final = dict(AutoModelForCausalLM.from_pretrained(ds_run / "final" / "base").named_parameters())
    assert torch.equal(final[key].detach(), got[key])
    Trainer(ds_cfg.model_copy(update={"steps": 3}), resume=ds_run, quiet=True).train()
    assert [r["step"] for r in read_metrics(ds_run)] == [1, 2, 3]


def test_plots_are_readable(tmp_path, monkeypatch):
    """Integer steps get integer ticks, every axis is labelled, the legend stands beside the data."""
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from cave.training.trainer import PLOT_GROUPS, PLOT_YLABELS, plot_run

    rows = [{"step": s, "reward_mean": 0.5, "reward/solver": 0.5, "reward/verifier": 0.5, "adv/solver": 0.1 * s}
            for s in range(1, 4)]  # fmt: skip
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    seen = []
    real_savefig = plt.Figure.savefig

    def check(fig, path, *a, **k):
        ax = fig.axes[0]
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert all(float(t).is_integer() for t in ticks), ticks
        assert ax.get_ylabel() and ax.get_xlabel() == "step"
        legend = ax.get_legend()
        assert legend is not None and len(legend.get_texts()) == len(ax.get_lines())
        seen.append(path)
        return real_savefig(fig, path, *a, **k)

    monkeypatch.setattr(plt.Figure, "savefig", check)
    files = plot_run(tmp_path)
    assert {f.stem for f in files} == {"reward", "advantage"} and len(seen) == 2
    assert set(PLOT_YLABELS) == set(PLOT_GROUPS)


def test_one_skipped_nonfinite_step_does_not_end_the_run_but_a_repeat_does(tmp_path):
    """Issue 37: a single non-finite step is skipped (weights unchanged) and logged; two in a row stop the run."""
    from types import SimpleNamespace

    from cave.training.policy import StepError

    trainer = Trainer.__new__(Trainer)
    trainer.cfg = SimpleNamespace(skip_nonfinite_steps=1, max_grad_norm_stop=1e4)
    trainer.run_dir, trainer.skipped_in_row = tmp_path, 0

    def results(ok: bool) -> dict:
        errors = [] if ok else [StepError("m", 1, "nonfinite_grad", "m: gradient norm is nan; the step was skipped")]
        return {"m": SimpleNamespace(errors=errors, grad_norms=[0.1 if ok else float("nan")], model="m")}

    assert trainer.check(1, results(False)) == ["m: gradient norm is nan; the step was skipped"]
    assert trainer.check(2, results(True)) == [] and trainer.skipped_in_row == 0
    trainer.check(3, results(False))
    with pytest.raises(TrainingStopped, match="gradient norm is nan.*2 steps in a row were skipped"):
        trainer.check(4, results(False))
    trainer.cfg.skip_nonfinite_steps, trainer.skipped_in_row = 0, 0  # 0: the first one stops the run
    with pytest.raises(TrainingStopped, match="step 5 stopped"):
        trainer.check(5, results(False))
