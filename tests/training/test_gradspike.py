"""The grad-spike experiment runs end to end in quick mode and writes its metrics, summary and figure.

It asserts the artifacts and their consistency, not a research outcome: the outcome is what the run measures.
"""

import json
from dataclasses import replace

import numpy as np
import pytest
import torch
from cave.training.experiments import gradspike as gs
from cave.training.policy import AgentPolicies


@pytest.mark.slow
def test_quick_mode_writes_metrics_summary_and_figure(tmp_path, capsys):
    summary = gs.main(["--quick", "--out", str(tmp_path)])
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    seeds, iters = gs.QUICK["seeds"], gs.QUICK["iterations"]
    agents = gs.TASKS["repair"].agents
    assert len(rows) == 3 * len(seeds) * iters
    assert {(r["estimator"], r["seed"]) for r in rows} == {(e, s) for e in gs.Config.estimators for s in seeds}
    for r in rows:
        solver = r["agents"]["solver"]
        assert solver["calls_per_run"] == 1.0  # the solver acts once in every run
        assert len(solver["grad_norms"]) == gs.Config.steps_per_iteration and all(np.isfinite(solver["grad_norms"]))
        assert set(r["probe"]) == set(gs.Config.estimators)
        # drmas normalizes each agent over its own calls: its mean squared advantage is at most 1 per agent.
        assert all(v["adv_sq_mean"] <= 1.0 + 1e-6 for v in r["probe"]["drmas"].values())
    # Same seed -> same warm start and same first rollout for every estimator.
    first = [r for r in rows if r["iteration"] == 0 and r["seed"] == seeds[0]]
    assert len({(r["reward"], r["agents"]["fixer"]["calls"]) for r in first}) == 1
    assert (tmp_path / "gradspike.png").stat().st_size > 10_000
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert set(saved["estimators"]) == set(gs.Config.estimators)
    assert set(saved["vs_grpo"]) == {"drmas", "pooled_calls"}
    assert set(saved["probe"]["grpo"]) == set(agents)
    assert summary["estimators"]["drmas"]["solver"]["max_over_median"]["mean"] > 0
    assert "paired probe" in capsys.readouterr().out
    # The summary and figure can be rebuilt from the metrics alone.
    again = gs.replot(tmp_path)
    assert again["estimators"]["grpo"]["reward_mean"] == summary["estimators"]["grpo"]["reward_mean"]


@pytest.mark.parametrize("task", sorted(gs.TASKS))
def test_rollouts_produce_cave_trajectories(task):
    cfg = gs.Config(task=task, prompts_per_iteration=2, rollouts_per_prompt=4, warm_start_steps=0)
    torch.set_num_threads(1)
    pol = AgentPolicies(gs.warm_start(0, cfg))
    trajs = cfg.toy.rollout(pol, [3, 5], cfg, np.random.default_rng(0), torch.Generator().manual_seed(0), tag="t")
    assert len(trajs) == 8 and {t.meta["group_id"] for t in trajs} == {"t-0", "t-1"}
    first, second = cfg.toy.agents
    for t in trajs:
        assert t.reward in (0.0, 1.0)
        assert 1 <= len(t.by_role(first)) <= 4 and len(t.by_role(second)) <= 1
        for s in t.steps:
            assert s.role in cfg.toy.agents
            assert len(s.token_ids) == len(s.logprobs) == 1 and s.logprobs[0] <= 0
            assert isinstance(s.meta["format_ok"], bool)
        if task == "repair":  # the fixer is called exactly when the solver's answer failed the check
            solver_ok = gs._digit(t.steps[0].token_ids[0]) == [3, 5][int(t.meta["group_id"][-1])]
            assert len(t.by_role("fixer")) == (0 if solver_ok else 1)


def test_unknown_task_is_an_error():
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        gs.Config(task="nope")


def test_grad_norm_stats():
    st = gs.grad_norm_stats([[1.0, 2.0], [0.0, 0.0], [1.0, 8.0]], warmup=0.0)
    assert st["grad_norm_median"] == 1.5 and st["max_over_median"] == pytest.approx(8 / 1.5)
    assert st["zero_signal_steps"] == 2 and st["steps"] == 6
    assert st["max_over_median_all_steps"] == pytest.approx(8 / 1.0)
    assert st["spikes_over_3x_median"] == 1


@pytest.mark.slow
def test_same_seed_gives_identical_runs_in_process_and_in_a_fresh_process(tmp_path):
    """Every estimator's run (grpo and pooled_calls included) is a function of config and seed: the metrics rows
    (rewards, per-step gradient norms, probe, diagnostics) of two runs are equal but for the wall-clock fields, in
    one process and in a fresh one with another hash seed (dict/set order of strings)."""
    import os
    import subprocess
    import sys

    cfg = gs.Config(seeds=(0,), iterations=4, warm_start_steps=10, prompts_per_iteration=4)

    def rows(path):
        return [gs.reproducible_part(json.loads(line)) for line in (path / "metrics.jsonl").read_text().splitlines()]

    for name in ("a", "b"):
        gs.run(replace(cfg, out=str(tmp_path / name)), verbose=False)
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    cmd = [sys.executable, "-m", "cave.training.experiments.gradspike", "--seeds", "0", "--iterations", "4",
           "--warm-start-steps", "10", "--prompts", "4", "--out", str(tmp_path / "c")]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    a, b, c = rows(tmp_path / "a"), rows(tmp_path / "b"), rows(tmp_path / "c")
    assert len(a) == 3 * cfg.iterations and {r["estimator"] for r in a} == set(cfg.estimators)
    assert a == b == c
    assert json.loads((tmp_path / "a" / "summary.json").read_text())["environment"]["torch"] == torch.__version__


def test_gradient_tail_statistics_are_in_the_rows_and_the_summary(tmp_path):
    cfg = gs.Config(seeds=(0,), iterations=3, warm_start_steps=0, prompts_per_iteration=2, probe=False,
                    estimators=("grpo", "drmas"), out=str(tmp_path))  # fmt: skip
    summary = gs.run(cfg, verbose=False)
    row = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[-1])
    for key in ("adv_sq", "inflation", "singleton_share", "all_equal_share"):
        assert key in row["agents"]["solver"]
    solver = summary["estimators"]["drmas"]["solver"]
    for key in gs.TAIL_KEYS:
        assert f"tail_{key}" in solver
    assert solver["tail_max"]["mean"] >= solver["tail_p99"]["mean"] >= solver["tail_median"]["mean"] > 0
    assert summary["estimators"]["drmas"]["fixer"]["singleton_share"] is not None
