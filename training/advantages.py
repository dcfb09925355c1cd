"""Advantage estimators for multi-agent GRPO: vanilla GRPO, Dr. MAS (agent-wise), pooled per call, AT-GRPO.

Every estimator maps per-call arrays (one row per agent call = one training sample) to one advantage per call:

- ``scores``: the call's score (the episode reward minus the call's invalid-format penalty);
- ``group_ids``: the prompt group (the N team runs of one prompt share it);
- ``traj_ids``: the trajectory (team run) the call belongs to;
- ``agent_ids``: the role that made the call.

Ids may be ints or strings (anything hashable); arrays may be lists, numpy arrays or torch tensors. The result is a
float64 numpy array, or a tensor of the scores' dtype and device when ``scores`` is a tensor.

Statistics follow REFERENCE.md: ``A = (s - mu) / (sigma + eps)`` with the unbiased std and eps = 1e-6; a group with
one member gets mu = 0, sigma = 1; ``norm_by_std=False`` gives ``A = s - mu``.

Estimators register by name, like verl's ``register_adv_est``::

    @register_estimator("mine")
    def mine(scores, group_ids, traj_ids, agent_ids, *, norm_by_std=True, eps=EPS): ...
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, Protocol

import numpy as np

from cave.registry import Registry

__all__ = [
    "EPS",
    "ESTIMATORS",
    "Estimator",
    "advantage_stats",
    "agent_turns",
    "at_grpo",
    "compute_advantages",
    "drmas",
    "group_normalize",
    "grpo",
    "pooled_calls",
]

EPS = 1e-6


class Estimator(Protocol):
    def __call__(
        self, scores: Any, group_ids: Any, traj_ids: Any, agent_ids: Any, *, norm_by_std: bool = True, eps: float = EPS
    ) -> np.ndarray: ...


ESTIMATORS: Registry[Estimator] = Registry("advantage estimator")
register_estimator = ESTIMATORS.register  # @register_estimator("name"): ``estimator: name`` in train configs
get_estimator = ESTIMATORS.get


def compute_advantages(
    name: str, scores: Any, group_ids: Any, traj_ids: Any, agent_ids: Any, *, norm_by_std: bool = True, eps: float = EPS
) -> Any:
    """Run the estimator ``name``; a tensor ``scores`` gives a tensor back (same dtype and device).

    >>> compute_advantages("drmas", [1.0, 0.0], ["q", "q"], [0, 1], ["solver", "solver"]).round(4)
    array([ 0.7071, -0.7071])
    """
    adv = get_estimator(name)(scores, group_ids, traj_ids, agent_ids, norm_by_std=norm_by_std, eps=eps)
    if _is_tensor(scores):
        import torch

        return torch.as_tensor(adv, dtype=scores.dtype, device=scores.device)
    return adv


# -- the estimators --------------------------------------------------------------------------------------------------
@register_estimator("grpo")
def grpo(
    scores: Any, group_ids: Any, traj_ids: Any, agent_ids: Any = None, *, norm_by_std: bool = True, eps: float = EPS
) -> np.ndarray:
    """Vanilla GRPO: average each trajectory's call scores, normalize over the trajectories of a prompt group.

    Every call of a trajectory gets its trajectory's advantage; ``agent_ids`` is ignored.

    Two runs of one prompt: run "a" (solver 1, verifier 1) averages 1.0, run "b" (solver 0, solver 0, verifier -0.1
    for a bad format) averages -0.0333; two values normalize to +-1/sqrt(2):

    >>> grpo([1, 1, 0, 0, -0.1], [0] * 5, ["a", "a", "b", "b", "b"], None).round(4)
    array([ 0.7071,  0.7071, -0.7071, -0.7071, -0.7071])
    >>> grpo([1, 1, 0, 0, -0.1], [0] * 5, ["a", "a", "b", "b", "b"], None, norm_by_std=False).round(4)
    array([ 0.5167,  0.5167, -0.5167, -0.5167, -0.5167])
    """
    s = _scores(scores)
    n = len(s)
    groups = _ids(group_ids, n, "group_ids")
    trajs = _ids(traj_ids, n, "traj_ids")
    traj_idx, n_traj = _index(trajs)
    group_idx, _ = _index(groups)
    # A trajectory belongs to exactly one prompt group; anything else is a bookkeeping bug upstream.
    traj_group = np.full(n_traj, -1)
    traj_group[traj_idx] = group_idx
    bad = np.flatnonzero(traj_group[traj_idx] != group_idx)
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"trajectory {trajs[i]!r} appears in more than one prompt group (row {i} has group {groups[i]!r}); "
            "every call of a trajectory must carry the trajectory's prompt-group id"
        )
    traj_score = np.bincount(traj_idx, weights=s, minlength=n_traj) / np.bincount(traj_idx, minlength=n_traj)
    traj_adv = group_normalize(traj_score, traj_group, norm_by_std=norm_by_std, eps=eps)
    return traj_adv[traj_idx]


@register_estimator("drmas")
def drmas(
    scores: Any, group_ids: Any, traj_ids: Any, agent_ids: Any, *, norm_by_std: bool = True, eps: float = EPS
) -> np.ndarray:
    """Dr. MAS, agent-wise: group key = (prompt group, agent id), statistics over every call of that agent.

    The verifier's single call is a singleton group (mu 0, sigma 1), so it keeps its raw score; the solver's three
    calls are normalized among themselves (mean 1/3, unbiased std 0.577):

    >>> drmas([1, 0, 0, 0.5], [0, 0, 0, 0], [0, 0, 1, 1], ["s", "s", "s", "v"]).round(3)
    array([ 1.155, -0.577, -0.577,  0.5  ])
    """
    s = _scores(scores)
    n = len(s)
    groups = _ids(group_ids, n, "group_ids")
    agents = _ids(agent_ids, n, "agent_ids")
    idx, _ = _index(list(zip(groups, agents, strict=True)))
    return group_normalize(s, idx, norm_by_std=norm_by_std, eps=eps)


@register_estimator("pooled_calls")
def pooled_calls(
    scores: Any,
    group_ids: Any,
    traj_ids: Any = None,
    agent_ids: Any = None,
    *,
    norm_by_std: bool = True,
    eps: float = EPS,
) -> np.ndarray:
    """All agents pooled, statistics over calls (each call counts once, whoever made it).

    The ablation that keeps Dr. MAS's per-call weighting but drops its per-agent statistics:

    >>> pooled_calls([1, 0, 0, 0.5], [0, 0, 0, 0]).round(3)
    array([ 1.306, -0.783, -0.783,  0.261])
    """
    s = _scores(scores)
    idx, _ = _index(_ids(group_ids, len(s), "group_ids"))
    return group_normalize(s, idx, norm_by_std=norm_by_std, eps=eps)


@register_estimator("at_grpo")
def at_grpo(
    scores: Any, group_ids: Any, traj_ids: Any, agent_ids: Any, *, norm_by_std: bool = True, eps: float = EPS
) -> np.ndarray:
    """AT-GRPO (PettingLLMs, agent- and turn-wise grouping): group key = (prompt group, agent id, turn), where
    turn t is the agent's t-th call in its trajectory (rows of a trajectory in call order, as ``build_samples``
    gives them). An agent's first calls are compared only with its first calls, its second with its second.

    PettingLLMs samples its groups as a tree (the branches of one turn share the history before it); here the N
    team runs of a prompt are independent, so a turn-t group holds the calls the agent made at its t-th turn in
    each run that got that far. With one call per agent per run this is Dr. MAS's grouping.

    Run 0: solver right, then right again; run 1: wrong, then right. Turn 1 separates them, turn 2 is all-equal:

    >>> at_grpo([1, 1, 0, 1], [0] * 4, [0, 0, 1, 1], ["s"] * 4).round(4)
    array([ 0.7071,  0.    , -0.7071,  0.    ])
    >>> drmas([1, 1, 0, 1], [0] * 4, [0, 0, 1, 1], ["s"] * 4).round(4)
    array([ 0.5,  0.5, -1.5,  0.5])
    """
    s = _scores(scores)
    n = len(s)
    groups = _ids(group_ids, n, "group_ids")
    agents = _ids(agent_ids, n, "agent_ids")
    turns = agent_turns(_ids(traj_ids, n, "traj_ids"), agents)
    idx, _ = _index(list(zip(groups, agents, turns, strict=True)))
    return group_normalize(s, idx, norm_by_std=norm_by_std, eps=eps)


def agent_turns(traj_ids: Sequence[Hashable], agent_ids: Sequence[Hashable]) -> list[int]:
    """Each row's turn: 1 + how many calls its agent made earlier in its trajectory (rows in call order).

    >>> agent_turns(["a", "a", "a", "b", "a"], ["s", "v", "s", "s", "v"])
    [1, 1, 2, 1, 2]
    """
    seen: dict[tuple[Hashable, Hashable], int] = {}
    out = []
    for key in zip(traj_ids, agent_ids, strict=True):
        seen[key] = seen.get(key, 0) + 1
        out.append(seen[key])
    return out


# -- shared pieces ---------------------------------------------------------------------------------------------------
def group_normalize(values: Any, group_idx: Any, *, norm_by_std: bool = True, eps: float = EPS) -> np.ndarray:
    """``(v - mean_g) / (std_g + eps)`` per group (unbiased std); a singleton group uses mean 0, std 1; a group of
    several equal values gets exactly 0 (not the float noise of its mean).

    ``group_idx`` holds small non-negative ints (one group index per value).

    >>> group_normalize([-0.1, -0.1, -0.1, 0.9], [0, 0, 0, 1], norm_by_std=False).tolist()
    [0.0, 0.0, 0.0, 0.9]

    >>> group_normalize([1.0, 3.0, 5.0, 7.0], [0, 0, 0, 1]).round(4)
    array([-1.,  0.,  1.,  7.])
    >>> group_normalize([1.0, 3.0, 5.0, 7.0], [0, 0, 0, 1], norm_by_std=False)
    array([-2.,  0.,  2.,  7.])
    """
    v = np.asarray(values, dtype=np.float64)
    g = np.asarray(group_idx, dtype=np.int64)
    if v.shape != g.shape or v.ndim != 1:
        raise ValueError(f"values and group_idx must be 1-D and of equal length; got {v.shape} and {g.shape}")
    if v.size == 0:
        return v.copy()
    count = np.bincount(g)
    mean = np.bincount(g, weights=v) / np.maximum(count, 1)
    sq = np.bincount(g, weights=(v - mean[g]) ** 2)
    std = np.sqrt(sq / np.maximum(count - 1, 1))
    single = count == 1
    mean[single] = 0.0
    std[single] = 1.0
    centered = v - mean[g]
    # A group of several equal values gets exactly 0: the float mean of e.g. three -0.1 scores is
    # -0.10000000000000002, which left advantages of ~1e-11 (after the std division by eps) that Adam, which
    # normalizes the gradient's scale away, turned into a full-size update in a noise direction.
    lo, hi = np.full(count.size, np.inf), np.full(count.size, -np.inf)
    np.minimum.at(lo, g, v)
    np.maximum.at(hi, g, v)
    centered[(lo == hi)[g] & ~single[g]] = 0.0
    return centered / (std[g] + eps) if norm_by_std else centered


def advantage_stats(advantages: Any, agent_ids: Sequence[Hashable]) -> dict[str, dict[str, float]]:
    """Per-agent mean, std, min, max and count of advantages (for the metrics log).

    >>> advantage_stats([1.0, -1.0, 0.5], ["s", "s", "v"])["s"]["mean"]
    0.0
    """
    a = np.asarray(_to_numpy(advantages), dtype=np.float64)
    agents = _ids(agent_ids, len(a), "agent_ids")
    out: dict[str, dict[str, float]] = {}
    for agent in dict.fromkeys(agents):
        x = a[np.array([k == agent for k in agents])]
        out[str(agent)] = {
            "mean": float(x.mean()),
            "std": float(x.std()),
            "min": float(x.min()),
            "max": float(x.max()),
            "count": int(x.size),
        }
    return out


def _index(keys: Sequence[Hashable]) -> tuple[np.ndarray, int]:
    """Dense group index per row, in order of first appearance."""
    seen: dict[Hashable, int] = {}
    idx = np.fromiter((seen.setdefault(k, len(seen)) for k in keys), dtype=np.int64, count=len(keys))
    return idx, len(seen)


def _scores(scores: Any) -> np.ndarray:
    s = np.asarray(_to_numpy(scores), dtype=np.float64)
    if s.ndim != 1:
        raise ValueError(f"scores must be 1-D (one score per agent call); got shape {s.shape}")
    bad = np.flatnonzero(~np.isfinite(s))
    if bad.size:
        raise ValueError(
            f"score at row {int(bad[0])} is {s[bad[0]]}; drop samples whose reward failed before computing advantages"
        )
    return s


def _ids(ids: Any, n: int, name: str) -> list[Hashable]:
    if ids is None:
        raise ValueError(f"{name} is required by this estimator (one id per agent call)")
    out = _to_numpy(ids)
    out = out.tolist() if isinstance(out, np.ndarray) else list(out)
    if len(out) != n:
        raise ValueError(f"{name} has {len(out)} entries but scores has {n}; pass one id per agent call")
    return out


def _is_tensor(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def _to_numpy(x: Any) -> Any:
    if _is_tensor(x):
        return x.detach().cpu().numpy()
    return x
