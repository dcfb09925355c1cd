"""The grad-spike experiment runs end to end in quick mode and writes its metrics, summary and figure.

It asserts the artifacts and their consistency, not a research outcome: the outcome is what the run measures.
"""

import json

import numpy as np
import pytest
import torch

from training.experiments import gradspike as gs


@pytest.mark.slow
def test_quick_mode_writes_metrics_summary_and_figure(tmp_path, capsys):
    summary = gs.main(["--quick", "--out", str(tmp_path)])
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    seeds, iters = gs.QUICK["seeds"], gs.QUICK["iterations"]
    assert len(rows) == 3 * len(seeds) * iters
    assert {(r["estimator"], r["seed"]) for r in rows} == {(e, s) for e in gs.Config.estimators for s in seeds}
    row = rows[-1]
    for agent in gs.AGENTS:
        a = row["agents"][agent]
        assert len(a["grad_norms"]) == gs.Config.steps_per_iteration
        assert all(np.isfinite(a["grad_norms"]))
    assert set(row["probe"]) == set(gs.Config.estimators)
    # drmas normalizes each agent over its own calls: its mean squared advantage per agent is at most 1.
    assert all(v["adv_sq_mean"] <= 1.0 + 1e-6 for v in row["probe"]["drmas"].values())
    # Same seed -> same warm start and same first rollout for every estimator.
    first = [r for r in rows if r["iteration"] == 0 and r["seed"] == seeds[0]]
    assert len({r["reward"] for r in first}) == 1
    assert (tmp_path / "gradspike.png").stat().st_size > 10_000
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert set(saved["estimators"]) == set(gs.Config.estimators)
    assert set(saved["vs_grpo"]) == {"drmas", "pooled_calls"}
    assert summary["estimators"]["drmas"]["router"]["max_over_median"]["mean"] > 0
    assert "paired probe" in capsys.readouterr().out


def test_rollout_produces_cave_trajectories():
    cfg = gs.Config(prompts_per_iteration=2, rollouts_per_prompt=3, warm_start_steps=0)
    torch.set_num_threads(1)
    models = gs.warm_start(0, cfg)
    from training.policy import AgentPolicies

    pol = AgentPolicies(models)
    trajs = gs.rollout(pol, [3, 5], cfg, np.random.default_rng(0), torch.Generator().manual_seed(0), tag="t")
    assert len(trajs) == 6 and {t.meta["group_id"] for t in trajs} == {"t-0", "t-1"}
    for t in trajs:
        routers = t.by_role("router")
        assert 1 <= len(routers) <= cfg.max_router_steps
        assert len(t.by_role("answerer")) == (1 if t.status == "success" else 0)
        assert t.reward in (0.0, 1.0)
        for s in t.steps:
            assert len(s.token_ids) == len(s.logprobs) == 1 and s.logprobs[0] <= 0
            assert isinstance(s.meta["format_ok"], bool)


def test_grad_norm_stats():
    st = gs.grad_norm_stats([[1.0, 2.0], [0.0, 0.0], [1.0, 8.0]], warmup=0.0)
    assert st["grad_norm_median"] == 1.5 and st["max_over_median"] == pytest.approx(8 / 1.5)
    assert st["zero_signal_steps"] == 2 and st["steps"] == 6
    assert st["max_over_median_all_steps"] == pytest.approx(8 / 1.0)
    assert st["spikes_over_3x_median"] == 1
