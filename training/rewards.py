"""Runtime-verifiable rewards for training: ``reward(result, example) -> float | RoleRewards`` by name.

A reward reads the team run's outcome (``result.answer`` is the live object the solver passed to
``final_answer``, retrieved from its runtime; ``result.slots`` holds published objects;
``result.trajectory.meta`` what the pattern recorded, e.g. the loop's ``verdicts``) and the
example's reference. Never an LLM judge. A reward that raises marks that run's samples as failed:
the trainer counts and logs it and drops them, it does not kill the run.

    @register_reward("exact")
    def exact(result, example): return float(result.answer == example["answer"])

**Role-specific rewards.** A reward may return ``RoleRewards(team, roles)`` (or a plain mapping role ->
reward, whose team reward is the mean): every call of role ``r`` is then scored with ``roles[r]`` (minus
its format penalty) instead of the shared episode reward, and a role left out of ``roles`` gets ``team``.
``team`` stays the run's reward for success (``cave train eval``) and ``reward_mean``. The role rewards
travel in ``trajectory.meta["role_rewards"]``; ``by_role`` splits a trajectory so that ``build_samples``
gives each role's samples its own reward. ``math_verify`` is the solver/verifier case: the solver is
rewarded for a right answer, the verifier for a right verdict.
"""

from __future__ import annotations

import dataclasses
import math
import re
import string
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cave.registry import Registry

__all__ = [
    "REWARDS",
    "ROLE_REWARDS",
    "RewardFn",
    "RoleRewards",
    "answered",
    "by_role",
    "exact_match",
    "exact_match_score",
    "f1_score",
    "math_sympy",
    "math_verify",
    "normalize_answer",
    "reward_distribution",
    "split_reward",
    "sympy_equal",
    "verdict_reward",
]

ROLE_REWARDS = "role_rewards"  # Trajectory.meta key: role -> that role's reward for this run


@dataclass(frozen=True)
class RoleRewards:
    """A team run's reward per role, and the team's own (the run's success: what eval and reward_mean read)."""

    team: float
    roles: Mapping[str, float] = field(default_factory=dict)


RewardFn = Callable[[Any, Mapping[str, Any]], "float | RoleRewards | Mapping[str, float]"]
REWARDS: Registry[RewardFn] = Registry("reward")
register_reward = REWARDS.register  # @register_reward("name"): ``reward: name`` in train configs
get_reward = REWARDS.get


def sympy_equal(answer: Any, reference: Any, *, rel_tol: float = 1e-6) -> bool:
    """Whether ``answer`` equals ``reference`` as a math expression (numbers, fractions, '2*x', '7/2').

    >>> sympy_equal(3.5, "7/2"), sympy_equal("24", 24), sympy_equal("x+x", "2*x"), sympy_equal(None, 1)
    (True, True, True, False)
    >>> sympy_equal("12 apples", 12)
    False
    """
    import sympy

    if answer is None or isinstance(answer, bool):
        return False
    try:
        a = sympy.sympify(str(answer).strip().replace("^", "**"), rational=True)
        b = sympy.sympify(str(reference).strip().replace("^", "**"), rational=True)
    except (sympy.SympifyError, SyntaxError, TypeError, ValueError):
        return False
    if a.is_number and b.is_number:
        x, y = complex(a.evalf()), complex(b.evalf())
        return math.isclose(x.real, y.real, rel_tol=rel_tol, abs_tol=1e-9) and abs(x.imag - y.imag) < 1e-9
    return sympy.simplify(a - b) == 0


@register_reward("math_sympy")
def math_sympy(result: Any, example: Mapping[str, Any]) -> float:
    """1.0 when the team's final answer object equals the example's ``answer`` (checked with sympy), else 0.0."""
    if "answer" not in example:
        raise KeyError(f"example {dict(example)!r} has no 'answer' field; the math_sympy reward needs one")
    return 1.0 if sympy_equal(result.answer, example["answer"]) else 0.0


@register_reward("answered")
def answered(result: Any, example: Mapping[str, Any]) -> float:
    """1.0 when the team ended with any final answer (a smoke-test reward; not a correctness check)."""
    return 0.0 if result.answer is None else 1.0


def normalize_answer(value: Any) -> str:
    """The usual open-QA normalization of an answer object: its text, lowercased, without punctuation, articles
    (a, an, the) and extra spaces. A one-item list or tuple counts as its item; None as "".

    >>> normalize_answer("The  Kalo Works!"), normalize_answer(1784), normalize_answer(["Teman"]), normalize_answer(None)
    ('kalo works', '1784', 'teman', '')
    """
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    text = "" if value is None else str(value).lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match_score(answer: Any, reference: Any) -> float:
    """1.0 when the normalized answer equals the normalized reference.

    >>> exact_match_score("the river Teman.", "Teman"), exact_match_score("Teman", "Teman"), exact_match_score("", "")
    (0.0, 1.0, 0.0)
    """
    a, b = normalize_answer(answer), normalize_answer(reference)
    return 1.0 if a and a == b else 0.0


def f1_score(answer: Any, reference: Any) -> float:
    """Token F1 between the normalized answer and reference (SQuAD's metric).

    >>> f1_score("the river Teman", "Teman"), f1_score("Kalo Works", "Kalo Works"), f1_score("x", "y")
    (0.6666666666666666, 1.0, 0.0)
    """
    a, b = normalize_answer(answer).split(), normalize_answer(reference).split()
    common = sum((Counter(a) & Counter(b)).values())
    if not common:
        return 0.0
    precision, recall = common / len(a), common / len(b)
    return 2 * precision * recall / (precision + recall)


@register_reward("exact_match")
def exact_match(result: Any, example: Mapping[str, Any]) -> float:
    """1.0 when the team's final answer object matches the example's ``answer`` after normalization (Dr. MAS search)."""
    if "answer" not in example:
        raise KeyError(f"example {dict(example)!r} has no 'answer' field; the exact_match reward needs one")
    return exact_match_score(result.answer, example["answer"])


# -- role-specific rewards -------------------------------------------------------------------------------------------
def split_reward(value: Any) -> tuple[float, dict[str, float]]:
    """(team reward, role rewards) of what a reward function returned: a number (every role shares it), a
    ``RoleRewards``, or a mapping role -> reward (the team reward is their mean). ValueError when not finite.

    >>> split_reward(1), split_reward(RoleRewards(0.0, {"verifier": 1.0})), split_reward({"a": 1.0, "b": 0.0})
    ((1.0, {}), (0.0, {'verifier': 1.0}), (0.5, {'a': 1.0, 'b': 0.0}))
    """
    if isinstance(value, RoleRewards):
        team, roles = float(value.team), {str(r): float(v) for r, v in value.roles.items()}
    elif isinstance(value, Mapping):
        if not value:
            raise ValueError("the reward returned an empty mapping; return role -> reward for at least one role")
        roles = {str(r): float(v) for r, v in value.items()}
        team = sum(roles.values()) / len(roles)
    else:
        team, roles = float(value), {}
    bad = [f"{name} {v}" for name, v in [("team", team), *roles.items()] if not math.isfinite(v)]
    if bad:
        raise ValueError(f"the reward is not finite ({', '.join(bad)})")
    return team, roles


def by_role(trajectories: Sequence[Any]) -> list[Any]:
    """Each trajectory with role rewards (``meta["role_rewards"]``) as one trajectory per role: that role's calls,
    in order, with ``reward`` = the role's reward (the team's for a role without one); others unchanged. Ids, task
    and meta are kept, so ``build_samples`` gives the calls their prompt group and team run as before.

    >>> from cave.trajectory import Step, Trajectory
    >>> t = Trajectory(task="q", steps=[Step(0, "solver"), Step(1, "verifier"), Step(2, "solver")], reward=0.0,
    ...                meta={"role_rewards": {"verifier": 1.0}})
    >>> [(x.steps[0].role, len(x.steps), x.reward) for x in by_role([t])]
    [('solver', 2, 0.0), ('verifier', 1, 1.0)]
    """
    out = []
    for traj in trajectories:
        roles = traj.meta.get(ROLE_REWARDS)
        if not roles:
            out.append(traj)
            continue
        for role in dict.fromkeys(step.role for step in traj.steps):
            steps = [step for step in traj.steps if step.role == role]
            out.append(dataclasses.replace(traj, steps=steps, reward=float(roles.get(role, traj.reward))))
    return out


def verdict_reward(trajectory: Any, correct: bool) -> float | None:
    """1.0 when the critic's last verdict is right about an answer that is ``correct`` (approve exactly when it
    is), 0.0 when it is wrong or was missing (the loop recorded none, or counted a missing one as approve or
    reject: no verdict is not a right verdict); None when no critic judged (no ``verdicts`` in the meta).

    >>> from types import SimpleNamespace as S
    >>> verdict_reward(S(meta={"verdicts": [{"round": 1, "approve": False}]}), correct=False)
    1.0
    >>> verdict_reward(S(meta={"verdicts": [{"round": 1, "approve": True}],
    ...                        "missing_verdicts": [{"round": 1}]}), correct=True)
    0.0
    >>> verdict_reward(S(meta={}), correct=True) is None
    True
    """
    verdicts = trajectory.meta.get("verdicts") or []
    if not verdicts:
        return None
    last = verdicts[-1]
    missing = {m.get("round") for m in trajectory.meta.get("missing_verdicts") or []}
    if last.get("round") in missing:
        return 0.0
    return 1.0 if bool(last.get("approve")) == correct else 0.0


@register_reward("math_verify")
def math_verify(result: Any, example: Mapping[str, Any]) -> RoleRewards:
    """Role-specific rewards for a worker/critic loop (solver + verifier): the team's (and the worker's) reward
    is ``math_sympy``'s, 1.0 for a right final answer; every other role in the run (the critic) gets
    ``verdict_reward``: 1.0 when its last verdict approves exactly a right answer.

    The worker is the role of the run's first call (the loop always starts with it); the critic's last verdict
    judges the final answer (with ``max_rounds: 1``, its only one).
    """
    team = math_sympy(result, example)
    steps = result.trajectory.steps
    if not steps:
        return RoleRewards(team)
    worker = steps[0].role
    verdict = verdict_reward(result.trajectory, team >= 1.0)
    critics = {s.role for s in steps if s.role != worker}
    roles = {worker: team, **{c: verdict for c in critics if verdict is not None}}
    return RoleRewards(team, roles)


def reward_distribution(
    scores: Sequence[float],
    group_ids: Sequence[Any],
    traj_ids: Sequence[Any],
    agent_ids: Sequence[Any],
    *,
    rewards: Sequence[float] | None = None,
    norm_by_std: bool = True,
) -> dict[str, Any]:
    """Per role, from one batch's calls: how many, the mean and std of their scores, how often each score occurs
    (``values``; with ``rewards``, the calls' rewards before the format penalty too: ``rewards``), Dr. MAS's
    predicted inflation factor ``(sigma_k^2 + (mu_k - mu)^2) / sigma^2`` under one baseline per prompt
    group (``inflation``; ``cave.training.diagnostics.inflation_factors``, what the trainer logs) and over the
    whole batch (``inflation_batch``), and the E[A^2] every registered estimator gives the role (``adv_sq``).

    A solver right half the time and a verifier always right: the verifier's scores sit far from the pooled mean
    (0.75) and it has no spread of its own, so one shared baseline gives it a factor of (0 + 0.0625) / 0.1875:

    >>> d = reward_distribution([1, 1, 0, 1, 1, 1, 0, 1], ["q"] * 8, [0, 0, 1, 1, 2, 2, 3, 3], ["s", "v"] * 4)
    >>> d["roles"]["v"]["values"], round(d["roles"]["v"]["inflation_batch"], 4), d["roles"]["s"]["mean"]
    ({'1': 4}, 0.3333, 0.5)
    >>> d["roles"]["v"]["adv_sq"]["drmas"], round(d["roles"]["s"]["adv_sq"]["drmas"], 4)
    (0.0, 0.75)
    >>> reward_distribution([0.9, 0], [0, 0], [0, 1], ["s", "s"], rewards=[1, 0])["roles"]["s"]["rewards"]
    {'0': 1, '1': 1}
    """
    import numpy as np
    from cave.training.advantages import ESTIMATORS, compute_advantages
    from cave.training.diagnostics import adv_sq_mean, inflation_factors

    s = np.asarray(scores, dtype=np.float64)
    agents = [str(a) for a in agent_ids]
    mu, sigma = float(s.mean()), float(s.std())
    per_group = inflation_factors(s.tolist(), list(group_ids), agents)
    whole_batch = inflation_factors(s.tolist(), [0] * len(s), agents)  # one baseline over every call
    adv_sq = {
        name: adv_sq_mean(compute_advantages(name, s, group_ids, traj_ids, agents, norm_by_std=norm_by_std), agents)
        for name in ESTIMATORS.names()
    }
    roles: dict[str, Any] = {}
    for role in dict.fromkeys(agents):
        mine = np.array([a == role for a in agents])
        x = s[mine]
        roles[role] = {
            "calls": int(x.size),
            "mean": float(x.mean()),
            "std": float(x.std()),
            "values": _value_counts(x),
            "inflation": per_group[role],
            "inflation_batch": whole_batch[role],
            "adv_sq": {name: sq[role] for name, sq in adv_sq.items()},
        }
        if rewards is not None:
            roles[role]["rewards"] = _value_counts(np.asarray(rewards, dtype=np.float64)[mine])
    return {"pooled": {"calls": int(s.size), "mean": mu, "std": sigma}, "roles": roles}


def _value_counts(x: Any) -> dict[str, int]:
    """How many times each value occurs (rounded to 6 digits), by value."""
    import numpy as np

    counts = Counter(float(v) for v in np.round(x, 6))
    return {f"{v:g}": n for v, n in sorted(counts.items())}
