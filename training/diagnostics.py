"""Gradient-spike diagnostics, per agent: pure functions of gradient norms, scores, groups and advantages.

The trainer logs them every step (``cave.training.trainer.step_metrics``, ``GradHistory``) and the toy grad-spike
experiment uses the same functions (``cave.training.experiments.gradspike``). Two views, because they disagree:

- the **absolute tail** of an agent's pre-clip gradient norms: median, p95, p99, max, the fraction of optimizer
  steps above the clip threshold (``grad_norm_tail``);
- **spikes relative to the typical norm**: max / median and the steps above 5x the median of the trailing 20
  steps (``trailing_spikes``).

Dr. MAS (REFERENCE.md) predicts that a global (prompt-group) baseline scales agent k's gradient second moment by
``(sigma_k^2 + (mu_k - mu)^2) / sigma^2`` (``inflation_factors``), and that agent-wise statistics set it to 1; the
agent's realized mean squared advantage ``E[A^2]`` (``adv_sq_mean``) shows what an estimator actually gave it.
Agent-wise normalization also has two degenerate cases, and ``agent_group_shares`` counts the calls in them: a
(prompt, agent) group with one call passes the raw score (mu = 0, sigma = 1), and one whose scores are all equal
gives every call A = 0 (no signal, so a gradient norm of 0 for a batch made only of such calls).

Steps whose norm is exactly 0 carry no learning signal (every advantage was 0); they are counted
(``zero_signal_frac``) but left out of the quantiles, which would otherwise be decided by how often an agent has
nothing to learn rather than by its spikes.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "SPIKE_FACTOR",
    "SPIKE_WINDOW",
    "GradHistory",
    "adv_sq_mean",
    "agent_diagnostics",
    "agent_group_shares",
    "grad_norm_tail",
    "inflation_factors",
    "score_stats",
    "trailing_spikes",
]

SPIKE_WINDOW = 20  # trailing optimizer steps whose median a spike is measured against
SPIKE_FACTOR = 5.0  # a spike: a norm above this many times the trailing median
MIN_HISTORY = 5  # trailing steps needed before a step can count as a spike
LIVE = 1e-12  # a norm at or below this is "no signal" (every advantage was 0)


def trailing_spikes(
    norms: Sequence[float], window: int = SPIKE_WINDOW, factor: float = SPIKE_FACTOR, min_history: int = MIN_HISTORY
) -> int:
    """Steps whose norm exceeds ``factor`` x the median of the ``window`` steps before it (with signal, in order).

    A step needs ``min_history`` earlier steps to be judged. Zero (no-signal) and non-finite norms are skipped.

    >>> trailing_spikes([1.0] * 6 + [6.0, 1.0, 4.0])
    1
    >>> trailing_spikes([1.0, 50.0])  # too little history to call anything a spike
    0
    """
    live = [g for g in norms if math.isfinite(g) and g > LIVE]
    count = 0
    for t, g in enumerate(live):
        past = live[max(0, t - window) : t]
        if len(past) >= min_history and g > factor * float(np.median(past)):
            count += 1
    return count


def grad_norm_tail(
    norms: Sequence[float],
    clip: float | None = 1.0,
    window: int = SPIKE_WINDOW,
    factor: float = SPIKE_FACTOR,
) -> dict[str, float | int | None]:
    """Both views of one agent's pre-clip gradient norms (one per optimizer step, in order).

    - ``median``, ``p95``, ``p99``, ``max``: over steps with a signal (norm > 0);
    - ``over_clip_frac``: share of those steps whose norm exceeded ``clip`` (the update was clipped; None: no clip);
    - ``max_over_median``; ``spikes_5x_trailing``: steps above ``factor`` x the trailing-``window`` median;
    - ``zero_signal_frac``: share of all steps with norm 0; ``steps``: all finite steps.

    >>> t = grad_norm_tail([0.5, 0.5, 0.0, 0.5, 0.5, 0.5, 4.0], clip=1.0)
    >>> t["median"], t["max"], t["over_clip_frac"], t["max_over_median"], t["spikes_5x_trailing"]
    (0.5, 4.0, 0.16666666666666666, 8.0, 1)
    >>> t["zero_signal_frac"], t["steps"]
    (0.14285714285714285, 7)
    """
    finite = [float(g) for g in norms if math.isfinite(g)]
    live = np.array([g for g in finite if g > LIVE])
    out: dict[str, float | int | None] = {"steps": len(finite)}
    out["zero_signal_frac"] = (len(finite) - live.size) / len(finite) if finite else None
    if not live.size:
        for k in ("median", "p95", "p99", "max", "over_clip_frac", "max_over_median"):
            out[k] = None
        out["spikes_5x_trailing"] = 0
        return out
    med = float(np.median(live))
    out.update(
        median=med,
        p95=float(np.percentile(live, 95)),
        p99=float(np.percentile(live, 99)),
        max=float(live.max()),
        over_clip_frac=float((live > clip).mean()) if clip is not None else None,
        max_over_median=float(live.max() / med),
        spikes_5x_trailing=trailing_spikes(live.tolist(), window, factor),
    )
    return out


def _by_agent(agent_ids: Sequence[Hashable]) -> dict[Hashable, np.ndarray]:
    """Row indices per agent, in order of first appearance."""
    rows: dict[Hashable, list[int]] = {}
    for i, a in enumerate(agent_ids):
        rows.setdefault(a, []).append(i)
    return {a: np.array(r) for a, r in rows.items()}


def adv_sq_mean(advantages: Any, agent_ids: Sequence[Hashable]) -> dict[str, float]:
    """Each agent's mean squared advantage E[A^2] (1 for advantages normalized over the agent's own calls).

    >>> adv_sq_mean([1.0, -1.0, 3.0], ["s", "s", "f"])
    {'s': 1.0, 'f': 9.0}
    """
    a = np.asarray(advantages, dtype=np.float64)
    return {str(k): float(np.mean(a[rows] ** 2)) for k, rows in _by_agent(list(agent_ids)).items()}


def score_stats(scores: Sequence[float], agent_ids: Sequence[Hashable]) -> dict[str, dict[str, float]]:
    """Each agent's call scores: mean and (population) std.

    >>> score_stats([1.0, 0.0, 0.9], ["s", "s", "f"])
    {'s': {'mean': 0.5, 'std': 0.5}, 'f': {'mean': 0.9, 'std': 0.0}}
    """
    s = np.asarray(scores, dtype=np.float64)
    return {
        str(k): {"mean": float(s[r].mean()), "std": float(s[r].std())} for k, r in _by_agent(list(agent_ids)).items()
    }


def inflation_factors(
    scores: Sequence[float], group_ids: Sequence[Hashable], agent_ids: Sequence[Hashable]
) -> dict[str, float | None]:
    """Dr. MAS's predicted second-moment factor per agent under one baseline per prompt group.

    In each prompt group g with pooled call scores of mean mu and (population) std sigma > 0, agent k's calls have
    mean mu_k and std sigma_k; its factor there is ``(sigma_k^2 + (mu_k - mu)^2) / sigma^2`` = the mean of
    ``((s - mu) / sigma)^2`` over its calls. The result averages over the agent's calls in every group with
    sigma > 0 (None: it has none). Over all agents, weighted by calls, the factors average to 1: a factor above 1
    is an agent that a shared baseline over-weights, one below 1 an agent it under-weights.

    Solver calls score 1, 1, 0, 0 and the fixer's 0, 0 in one group: mu = 1/3, sigma^2 = 2/9; the fixer's
    factor is (0 + 1/9) / (2/9) = 0.5, the solver's (1/4 + 1/36) / (2/9) = 1.25:

    >>> {k: round(v, 6) for k, v in inflation_factors([1, 1, 0, 0, 0, 0], ["q"] * 6, list("ssssff")).items()}
    {'s': 1.25, 'f': 0.5}

    An agent whose score distribution differs from the pooled one (a rare fixer whose call fails while the solver
    mostly succeeds: mu = 7/9, sigma^2 = 14/81) gets a factor far above 1, (0 + 49/81) / (14/81):

    >>> round(inflation_factors([1] * 7 + [0, 0], ["q"] * 9, ["s"] * 8 + ["f"])["f"], 6)
    3.5
    """
    s = np.asarray(scores, dtype=np.float64)
    groups, agents = list(group_ids), list(agent_ids)
    z2: dict[str, list[float]] = {str(a): [] for a in dict.fromkeys(agents)}
    for rows in _by_agent(groups).values():
        mu, sigma = s[rows].mean(), s[rows].std()
        if sigma <= 1e-12:
            continue
        for i in rows:
            z2[str(agents[i])].append(float((s[i] - mu) / sigma) ** 2)
    return {a: (float(np.mean(v)) if v else None) for a, v in z2.items()}


def agent_group_shares(
    scores: Sequence[float], group_ids: Sequence[Hashable], agent_ids: Sequence[Hashable]
) -> dict[str, dict[str, float]]:
    """Per agent: the share of its calls in a (prompt, agent) group of one call (``singleton``: agent-wise
    normalization passes the raw score, mu = 0, sigma = 1) and in one of several calls with all-equal scores
    (``all_equal``: every advantage is 0).

    >>> agent_group_shares([1, 0, 1, 1, 0.5], ["a", "a", "b", "b", "a"], ["s", "s", "s", "s", "f"])
    {'s': {'singleton': 0.0, 'all_equal': 0.5}, 'f': {'singleton': 1.0, 'all_equal': 0.0}}
    """
    s = np.asarray(scores, dtype=np.float64)
    agents = list(agent_ids)
    keys = list(zip(group_ids, agents, strict=True))
    counts = {str(a): {"calls": 0, "singleton": 0, "all_equal": 0} for a in dict.fromkeys(agents)}
    for (_, agent), rows in _by_agent(keys).items():
        c = counts[str(agent)]
        c["calls"] += rows.size
        if rows.size == 1:
            c["singleton"] += 1
        elif np.all(s[rows] == s[rows[0]]):
            c["all_equal"] += rows.size
    return {a: {"singleton": c["singleton"] / c["calls"], "all_equal": c["all_equal"] / c["calls"]}
            for a, c in counts.items()}  # fmt: skip


def agent_diagnostics(
    scores: Sequence[float], group_ids: Sequence[Hashable], agent_ids: Sequence[Hashable], advantages: Any
) -> dict[str, float | None]:
    """One batch's per-agent diagnostics as flat metric names (the trainer's metrics.jsonl keys):
    ``adv_sq/{agent}``, ``inflation/{agent}``, ``agent_group_singleton/{agent}``, ``agent_group_all_equal/{agent}``.

    >>> d = agent_diagnostics([1, 0, 0.5], ["q", "q", "q"], ["s", "s", "f"], [0.7, -0.7, 0.5])
    >>> d["adv_sq/s"], d["inflation/f"], d["agent_group_singleton/f"], d["agent_group_all_equal/s"]
    (0.48999999999999994, 0.0, 1.0, 0.0)
    """
    out: dict[str, float | None] = {}
    for a, v in adv_sq_mean(advantages, agent_ids).items():
        out[f"adv_sq/{a}"] = v
    for a, v in inflation_factors(scores, group_ids, agent_ids).items():
        out[f"inflation/{a}"] = v
    for a, shares in agent_group_shares(scores, group_ids, agent_ids).items():
        out[f"agent_group_singleton/{a}"] = shares["singleton"]
        out[f"agent_group_all_equal/{a}"] = shares["all_equal"]
    return out


class GradHistory:
    """Every pre-clip gradient norm of each role so far, and ``grad_norm_tail`` over it as flat metric names.

    >>> h = GradHistory({"s": 1.0})
    >>> h.add({"s": [0.5, 2.0]})
    >>> m = h.metrics()
    >>> m["gradspike/max/s"], m["gradspike/median/s"], m["gradspike/over_clip_frac/s"]
    (2.0, 1.25, 0.5)
    """

    KEYS = ("median", "p95", "p99", "max", "over_clip_frac", "max_over_median", "spikes_5x_trailing",
            "zero_signal_frac")  # fmt: skip

    def __init__(self, clip: Mapping[str, float | None] | None = None) -> None:
        self.clip = dict(clip or {})
        self.norms: dict[str, list[float]] = {}

    def add(self, role_norms: Mapping[str, Iterable[float]]) -> None:
        for role, norms in role_norms.items():
            self.norms.setdefault(role, []).extend(float(g) for g in norms)

    def metrics(self) -> dict[str, float | int | None]:
        out: dict[str, float | int | None] = {}
        for role, norms in self.norms.items():
            tail = grad_norm_tail(norms, self.clip.get(role, 1.0))
            for k in self.KEYS:
                out[f"gradspike/{k}/{role}"] = tail[k]
        return out
