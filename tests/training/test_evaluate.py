"""Held-out evaluation: the metrics, `cave train eval` on a tiny Llama (base and a trained checkpoint), eval_every."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cave.training.cli import train_main
from cave.training.evaluate import (
    EvalReport,
    avg_at_k,
    bootstrap_ci,
    intervals,
    is_success,
    pass_at_k,
    per_problem,
    read_eval,
    report_table,
)
from cave.training.trainer import Trainer, plot_run

from tests.training.test_rollout import TEAM, save_tiny

ROOT = Path(__file__).resolve().parents[2]


def test_metrics():
    runs = [[True, False, False, False], [False, False, False, False], [True, True, True, True]]
    assert avg_at_k(runs) == pytest.approx(5 / 12)
    assert pass_at_k(runs) == pytest.approx(2 / 3)
    assert pass_at_k(runs, k=1) == pytest.approx(avg_at_k(runs))  # pass@1 from k runs is avg@k
    with pytest.raises(ValueError, match="pass@5 needs at least 5 runs"):
        pass_at_k(runs, k=5)
    assert not is_success(0.9) and is_success(1.0)  # success is the full reward, not a partial one
    report = EvalReport("test", 4, 3, 0.5, 0.75, 0.25, {"solver": 0.1}, 2.0, 30.0, 0.5, 0, 1.0, 1.0)
    row = json.loads(report.to_json())
    assert row["avg@4"] == 0.5 and row["pass@4"] == 0.75 and row["greedy"] == 0.25


def test_bootstrap_ci_over_problems():
    import numpy as np

    rng = np.random.default_rng(7)
    values = (rng.random(100) < 0.3).astype(float)  # 100 problems, ~30% solved
    low, high = bootstrap_ci(values)
    assert low < values.mean() < high
    se = values.std() / np.sqrt(values.size)  # the normal approximation's 95% interval: mean +- 1.96 se
    assert high - low == pytest.approx(2 * 1.96 * se, rel=0.15)
    assert bootstrap_ci(values) == (low, high)  # seeded, hence reproducible
    assert bootstrap_ci(values, level=0.5)[1] - bootstrap_ci(values, level=0.5)[0] < high - low
    assert bootstrap_ci([]) != bootstrap_ci([])  # (nan, nan): nothing to resample
    with pytest.raises(ValueError, match="coverage between 0 and 1"):
        bootstrap_ci(values, level=95)

    # avg@k and pass@k resample the problems, not the runs: a problem's k runs move together
    runs = [[True, True, False, False]] * 50 + [[False] * 4] * 50
    assert per_problem(runs, "avg")[:1] == [0.5] and per_problem(runs, "pass")[:1] == [1.0]
    ci = intervals(runs, [True] * 50 + [False] * 50, 4)
    assert ci["avg@4"][0] < 0.25 < ci["avg@4"][1] and ci["pass@4"][0] < 0.5 < ci["pass@4"][1]
    assert ci["greedy"] == ci["pass@4"]  # the same per-problem values, the same resamples
    assert "greedy" not in intervals(runs, None, 4)


def test_report_json_and_table_carry_the_intervals():
    from rich.console import Console

    report = EvalReport("test", 4, 3, 0.5, 0.75, 0.25, {"solver": 0.1}, 2.0, 30.0, 0.5, 0, 1.0, 1.0,
                        ci={"avg@4": [0.25, 0.75], "greedy": [0.0, 0.5]}, successes=[[True, False, False, True]])  # fmt: skip
    row = json.loads(report.to_json())
    assert row["ci"]["avg@4"] == [0.25, 0.75] and row["successes"][0] == [True, False, False, True]
    console = Console(width=120, record=True)
    console.print(report_table(report))
    text = console.export_text()
    assert "0.500 [0.250, 0.750]" in text and "0.250 [0.000, 0.500]" in text


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return save_tiny(tmp_path_factory.mktemp("tiny") / "model")


def tiny_yaml(tiny_dir: Path, path: Path, **extra) -> Path:
    data = {
        "team": {**TEAM, "default_backend": "transformers"},
        "models": {"base": {"source": str(tiny_dir)}},
        "agents": {"solver": {"lr": 1e-2}, "verifier": {"lr": 1e-2}},
        "data": {"generator": "math_word", "n": 4},
        "reward": "math_sympy",
        "group_size": 2,
        "batch_size": 2,
        "steps": 1,
        "max_tokens": 16,
        "output_dir": str(path.parent / "run"),
        "threads": 1,
        **extra,
    }
    path.write_text(yaml.safe_dump(data))
    return path


def cave_eval(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "cave.training.cli", "eval", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)


def test_cave_train_eval_base_and_latest_checkpoint(tiny_dir, tmp_path, capsys):
    config = tiny_yaml(tiny_dir, tmp_path / "tiny.yaml")
    out = tmp_path / "base.json"
    r = cave_eval(str(config), "--checkpoint", "base", "--split", "test", "-k", "2", "--limit", "2", "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert "avg@2" in r.stdout and "pass@2" in r.stdout and "greedy" in r.stdout  # the rich table
    base = json.loads(out.read_text())
    assert base["problems"] == 2 and base["k"] == 2 and base["split"] == "test" and base["checkpoint"] == "base"
    assert 0 <= base["avg@2"] <= base["pass@2"] <= 1 and set(base["format_failure"]) == {"solver", "verifier"}
    assert base["mean_turns"] >= 1 and base["mean_tokens"] > 0
    # the bootstrap intervals over the 2 problems, and the per-problem runs they were drawn from
    assert len(base["successes"]) == 2 and all(len(runs) == 2 for runs in base["successes"])
    for metric in ("avg@2", "pass@2", "greedy"):
        low, high = base["ci"][metric]
        assert low <= base[metric] <= high

    # a config has no trained weights: latest/final need a run folder (bad input is reported before loading)
    assert train_main(["eval", str(config), "--checkpoint", "latest"]) == 2
    assert "a config has no trained weights" in capsys.readouterr().err

    # one training step, then the run folder's latest checkpoint (the default) and its final models
    run = Trainer(tiny_config(config), quiet=True).train()
    r = cave_eval(str(run), "--split", "test", "-k", "2", "--limit", "2", "--dtype", "bfloat16", "-q")
    assert r.returncode == 0, r.stderr
    latest = json.loads(r.stdout.strip().splitlines()[-1])
    assert latest["checkpoint"] == "latest (step 1)" and latest["problems"] == 2 and latest["dtype"] == "bfloat16"
    capsys.readouterr()
    assert train_main(["eval", str(run), "--checkpoint", "final", "-k", "1", "--limit", "1", "--no-greedy", "-q"]) == 0
    final = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert final["checkpoint"] == "final" and final["greedy"] is None and final["k"] == 1
    assert train_main(["eval", str(tmp_path / "nowhere")]) == 2
    assert "no such config file or run folder" in capsys.readouterr().err


def tiny_config(path: Path, **overrides):
    from cave.training.config import load_config

    return load_config(path, **overrides)


def test_eval_every_writes_eval_jsonl_and_plots_it(tiny_dir, tmp_path):
    config = tiny_yaml(tiny_dir, tmp_path / "tiny.yaml", eval_every=1, eval_k=2, eval_limit=2, save_final=False)
    run = Trainer(tiny_config(config), quiet=True).train()
    rows = read_eval(run)
    assert [r["step"] for r in rows] == [0, 1]  # the base model, then every step
    assert all(r["split"] == "test" and r["problems"] == 2 and "avg@2" in r and "pass@2" in r for r in rows)
    assert (run / "plots" / "heldout.png").is_file()
    (run / "plots" / "heldout.png").unlink()
    assert run / "plots" / "heldout.png" in plot_run(run)


def test_eval_at_start_false_leaves_out_the_step_0_eval(tiny_dir, tmp_path):
    # runs from one warm start share its step-0 eval: `--set eval_at_start=false` does not pay for it again
    config = tiny_yaml(
        tiny_dir, tmp_path / "tiny.yaml", eval_every=1, eval_at_start=False, eval_k=1, eval_limit=1, save_final=False
    )
    run = Trainer(tiny_config(config), quiet=True).train()
    assert [r["step"] for r in read_eval(run)] == [1]


def test_a_labelled_checkpoint_eval_loads_the_checkpoint(tiny_dir, tmp_path, monkeypatch):
    # the drmas_claim and search_team drivers name their checkpoints ("latest (step 8)"); the label once replaced
    # the load, so a trained run was evaluated as the untrained base (avg@4 0.000 after 8 steps)
    import cave.training.checkpoints as checkpoints
    from cave.training.evaluate import eval_examples, evaluate_checkpoint

    config = tiny_yaml(tiny_dir, tmp_path / "tiny.yaml")
    run = Trainer(tiny_config(config), quiet=True).train()
    loaded = []
    real = checkpoints.load_checkpoint
    monkeypatch.setattr(checkpoints, "load_checkpoint", lambda d, w: loaded.append(d) or real(d, w))
    cfg = tiny_config(config)
    report = evaluate_checkpoint(cfg, eval_examples(cfg, "test", 1), run_dir=run, k=1, greedy=False, label="step one")
    assert loaded == [Path(run)] and report.checkpoint == "step one"


def test_a_stopped_evaluation_goes_on_from_its_kept_shares(tiny_dir, tmp_path, monkeypatch):
    # a 100-problem eval takes 40 min on CPU; a stop (a session's end) loses at most one share of it
    import cave.training.evaluate as ev
    from cave.training.workers import LocalWorkers

    cfg = tiny_config(tiny_yaml(tiny_dir, tmp_path / "tiny.yaml"))
    examples = ev.eval_examples(cfg, "test", 3)
    parts = tmp_path / "heldout.parts.jsonl"
    ran = []
    real = ev.run_part
    monkeypatch.setattr(ev, "run_part", lambda *a, **kw: ran.append(kw["offset"]) or real(*a, **kw))
    workers = LocalWorkers(cfg)
    try:
        first = ev.evaluate(cfg, workers.engines, examples, k=2, parts=parts, chunk=2, checkpoint="c")
        assert ran == [0, 2] and len(parts.read_text().splitlines()) == 2
        assert len(first.successes) == 3 and all(len(r) == 2 for r in first.successes)
        assert len(first.greedy_successes) == 3 and first.mean_turns >= 1 and set(first.format_failure) <= {
            "solver", "verifier"}  # fmt: skip

        # stopped while writing the second share: the first is kept, the torn line is left out
        kept = parts.read_text().splitlines()[0]
        parts.write_text(kept + "\n" + '{"k": 2, "gree')
        ran.clear()
        again = ev.evaluate(cfg, workers.engines, examples, k=2, parts=parts, chunk=2, checkpoint="c")
        assert ran == [2] and again.successes[:2] == first.successes[:2]
        assert again.greedy_successes[:2] == first.greedy_successes[:2] and again.problems == 3

        # another checkpoint's (or k's) shares are not this evaluation's
        ran.clear()
        ev.evaluate(cfg, workers.engines, examples, k=1, parts=parts, chunk=2, checkpoint="c", greedy=False)
        assert ran == [0, 2]
        ran.clear()
        ev.evaluate(cfg, workers.engines, examples, k=2, parts=parts, chunk=2, checkpoint="other")
        assert ran == [0, 2]
    finally:
        workers.close()


@pytest.mark.parametrize("native", [True, False], ids=["bf16 CPU", "AVX2-only CPU"])
def test_an_eval_in_bfloat16_casts_the_checkpoint_and_says_so(tiny_dir, tmp_path, monkeypatch, native):
    # a 100-problem eval of an fp32 run in bf16 (~1.7x faster on AVX512-BF16 CPUs): the trained weights, cast; on a
    # CPU without bf16 arithmetic those bf16-rounded weights compute in float32 (~5x faster there), and it says so
    import torch
    from cave.training.evaluate import eval_examples, evaluate_checkpoint, read_parts
    from cave.training.workers import LocalWorkers

    from cave.llm import cpu_attention

    config = tiny_yaml(tiny_dir, tmp_path / "tiny.yaml")
    run = Trainer(tiny_config(config), quiet=True).train()
    cfg = tiny_config(config)
    examples = eval_examples(cfg, "test", 2)
    parts = tmp_path / "heldout.parts.jsonl"
    seen = {}
    real = LocalWorkers.__init__
    monkeypatch.setattr(cpu_attention, "native_bf16", lambda: native)

    def spy(self, c, *a, **kw):
        real(self, c, *a, **kw)
        p = next(iter(self.policies.slots)).model
        seen["dtype"] = next(p.parameters()).dtype
        seen["model"] = p

    LocalWorkers.__init__ = spy
    try:
        report = evaluate_checkpoint(cfg, examples, run_dir=run, k=1, greedy=False, dtype="bfloat16", parts=parts)
    finally:
        LocalWorkers.__init__ = real
    assert report.dtype == "bfloat16" and report.checkpoint == "latest (step 1)" and seen["dtype"] == torch.bfloat16
    trained = torch.load(next((run / "checkpoints").glob("step_*.pt")), map_location="cpu", weights_only=False)
    (saved,) = trained["models"].values()
    name, weight = next(iter(saved["trainable"].items()))  # the run's weights, cast: not the base model's
    held = dict(seen["model"].named_parameters())[name].detach()
    assert torch.equal(held, weight.to(torch.bfloat16).to(held.dtype))
    assert held.dtype == (torch.bfloat16 if native else torch.float32)
    assert report.compute_dtype == (None if native else "float32")
    compute = report.compute_dtype
    assert read_parts(parts, k=1, greedy=False, checkpoint=report.checkpoint, dtype="bfloat16", compute=compute)
    # shares computed otherwise are run again
    assert not read_parts(parts, k=1, greedy=False, checkpoint=report.checkpoint, dtype="bfloat16",
                          compute="float32" if native else None)  # fmt: skip
    assert not read_parts(parts, k=1, greedy=False, checkpoint=report.checkpoint)  # an fp32 eval runs them again
    fp32 = evaluate_checkpoint(cfg, examples, run_dir=run, k=1, greedy=False)
    assert fp32.dtype == "float32"
