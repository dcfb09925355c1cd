"""Role-specific rewards: read from the team run, carried to each role's samples, seen by every estimator;
`cave train inspect` shows them before training."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from cave.training.advantages import compute_advantages
from cave.training.cli import train_main
from cave.training.config import parse_config
from cave.training.evaluate import role_reward_means, score_episodes
from cave.training.rewards import (
    ROLE_REWARDS,
    RoleRewards,
    by_role,
    math_verify,
    register_reward,
    split_reward,
)
from cave.training.rollout import policy_team, rollout
from cave.training.samples import build_samples, sample_columns
from cave.training.trainer import inspect_rewards

from cave.llm.base import Scripted
from cave.team import TeamSpec
from cave.trajectory import Step, Trajectory
from tests.training.test_rollout import TEAM, save_tiny

# Each question says how the scripted solver and verifier behave; the reference answer is always a + b.
CASES = {  # question tag -> (solver right, verifier reply, expected solver reward, expected verifier reward)
    "right-approve": (True, "verdict(approve=True)", 1.0, 1.0),
    "right-reject": (True, "verdict(approve=False)", 1.0, 0.0),
    "wrong-approve": (False, "verdict(approve=True)", 0.0, 0.0),
    "wrong-reject": (False, "verdict(approve=False)", 0.0, 1.0),
    "right-silent": (True, "print('looks fine')", 1.0, 0.0),  # no verdict: the loop counts it as approve, we do not
}


def scripted(messages):
    text = " ".join(str(m["content"]) for m in messages)
    tag = re.search(r"\[(\S+)\]", text).group(1)
    right, verdict, _, _ = CASES[tag]
    if "answer:" in text:  # the loop's critic prompt ("The solver's answer: ..."), or a later call of its turn
        return f"```python\n{verdict}\n```"
    a, b = map(int, re.findall(r"\d+", text)[:2])
    return f"```python\nfinal_answer({a + b if right else a + b + 1})\n```"


def team_runs() -> list:
    # as in math_verify_smollm2.yaml: a verifier turn without a verdict does not end the run (on_role_error: skip)
    team = {**TEAM, "pattern": {**TEAM["pattern"], "on_role_error": "skip", "on_missing_verdict": "approve"}}
    spec = TeamSpec.model_validate(team, context={"base_dir": "."})
    team = policy_team(spec, {"solver": "base", "verifier": "base"}, {"base": Scripted(scripted)})
    examples = [{"question": f"[{tag}] What is {i} + 3?", "answer": i + 3} for i, tag in enumerate(CASES)]
    return rollout(team, examples, group_size=1, step=1).episodes


def test_split_reward_accepts_a_number_role_rewards_or_a_mapping():
    assert split_reward(0.5) == (0.5, {})
    assert split_reward(RoleRewards(1.0, {"solver": 1.0, "verifier": 0.0})) == (1.0, {"solver": 1.0, "verifier": 0.0})
    assert split_reward({"a": 1, "b": 0}) == (0.5, {"a": 1.0, "b": 0.0})
    with pytest.raises(ValueError, match="not finite.*verifier nan"):
        split_reward(RoleRewards(1.0, {"verifier": float("nan")}))
    with pytest.raises(ValueError, match="empty mapping"):
        split_reward({})


def test_math_verify_reads_the_answer_and_the_verdict_from_the_team_run():
    episodes = team_runs()
    assert score_episodes(episodes, math_verify) == []
    for ep, (tag, (_, _, solver, verifier)) in zip(episodes, CASES.items(), strict=True):
        assert ep.trajectory.meta[ROLE_REWARDS] == {"solver": solver, "verifier": verifier}, tag
        assert ep.reward == solver  # the team's reward (eval's success) is the answer's correctness
    assert episodes[-1].trajectory.meta["missing_verdicts"]  # the silent verifier really gave no verdict
    assert role_reward_means([ep.trajectory for ep in episodes]) == {"solver": 0.6, "verifier": 0.4}


def _call(i: int, role: str, ok: bool | None = None) -> Step:
    return Step(index=i, role=role, prompt_token_ids=[1, 2], token_ids=[3], logprobs=[-0.5],
                meta={} if ok is None else {"format_ok": ok})  # fmt: skip


def test_each_role_s_samples_get_its_role_reward_and_the_estimators_see_them():
    # one prompt, two runs; the solver is right in run a only, the verifier right in both (its call in run b has
    # an invalid format: c = 0.1); the team reward is the solver's
    trajs = [
        Trajectory(task="q", team_run_id=run, reward=team, steps=[_call(0, "solver"), _call(1, "verifier", ok)],
                   meta={ROLE_REWARDS: {"solver": team, "verifier": 1.0}})
        for run, team, ok in (("a", 1.0, True), ("b", 0.0, False))
    ]  # fmt: skip
    samples = build_samples(by_role(trajs), format_penalty=0.1)
    got = {(s.traj_id, s.agent_id): (s.reward, round(s.score, 9)) for s in samples}
    assert got == {("a", "solver"): (1.0, 1.0), ("a", "verifier"): (1.0, 1.0),
                   ("b", "solver"): (0.0, 0.0), ("b", "verifier"): (1.0, 0.9)}  # fmt: skip
    cols = sample_columns(samples)
    order = [(t, a) for t, a in zip(cols["traj_ids"], cols["agent_ids"], strict=True)]
    adv = {name: dict(zip(order, compute_advantages(name, **cols), strict=True)) for name in ("drmas", "grpo")}
    # drmas: the verifier's 1.0 vs 0.9 normalized among the verifier's calls only
    assert adv["drmas"][("a", "verifier")] == pytest.approx(1 / np.sqrt(2), rel=1e-4)
    assert adv["drmas"][("a", "solver")] == pytest.approx(1 / np.sqrt(2), rel=1e-4)
    # grpo: each run's mean call score (a: 1.0, b: 0.45), shared by both of its calls
    assert adv["grpo"][("b", "verifier")] == adv["grpo"][("b", "solver")] < 0
    # a trajectory without role rewards passes through whole
    plain = Trajectory(task="q", reward=1.0, steps=[_call(0, "solver"), _call(1, "verifier")])
    assert by_role([plain]) == [plain]


@register_reward("test_solver_parity")
def solver_parity(result, example):
    """A role reward with spread even for a random model: the solver by its answer's length, the verifier 1."""
    team = float(len(str(result.answer)) % 2)
    return RoleRewards(team, {"solver": team, "verifier": 1.0})


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return save_tiny(tmp_path_factory.mktemp("tiny") / "model")


def test_inspect_reports_each_role_s_reward_distribution_before_training(tiny_dir, tmp_path, capsys):
    data = {
        "team": {**TEAM, "default_backend": "transformers"},
        "models": {"base": {"source": str(tiny_dir)}},
        "data": {
            "prompts": [{"question": "What is 2 + 3?", "answer": 5}, {"question": "What is 4 * 6?", "answer": 24}]
        },
        "reward": "test_solver_parity",
        "group_size": 4,
        "batch_size": 2,
        "max_tokens": 16,
        "format_penalty": 0.0,  # scores = the role rewards (a penalty would shift the random model's calls)
        "output_dir": str(tmp_path / "run"),
        "threads": 1,
    }
    report = inspect_rewards(parse_config(data))
    assert report["episodes"] == 8 and not (tmp_path / "run").exists()  # inspecting writes nothing
    solver, verifier = report["roles"]["solver"], report["roles"]["verifier"]
    assert solver["calls"] == 8 and sum(solver["values"].values()) == 8
    assert set(solver["values"]) <= {"0", "1"} and verifier["mean"] == 1.0 and verifier["std"] == 0.0
    assert solver["rewards"] == solver["values"] and verifier["rewards"] == {"1": 8}  # no format penalty here
    assert {"drmas", "grpo", "pooled_calls", "at_grpo"} <= set(verifier["adv_sq"])
    assert verifier["adv_sq"]["drmas"] == 0.0  # all-equal (prompt, verifier) groups: no signal, whatever the baseline
    if report["pooled"]["std"] > 0:  # the pooled baseline sees two different distributions
        mu, var = report["pooled"]["mean"], report["pooled"]["std"] ** 2
        assert verifier["inflation_batch"] == pytest.approx((0 + (1 - mu) ** 2) / var)

    # the CLI: a table with the roles and the factors, the same report as JSON
    cfg_path = tmp_path / "inspect.yaml"
    import yaml

    cfg_path.write_text(yaml.safe_dump(data))
    out = tmp_path / "inspect.json"
    assert train_main(["inspect", str(cfg_path), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "inflation" in printed and "solver" in printed and "verifier" in printed
    assert json.loads(Path(out).read_text())["roles"]["verifier"]["calls"] == 8
    assert train_main(["inspect", str(cfg_path), "--batches", "0"]) == 2
