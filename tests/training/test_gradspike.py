"""The grad-spike experiment runs end to end in quick mode and writes its metrics, summary and figure.

It asserts the artifacts and their consistency, not a research outcome: the outcome is what the run measures.
"""

import json

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
