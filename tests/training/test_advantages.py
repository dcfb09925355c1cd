"""Advantage estimators against hand-computed numbers.

The fixture: two prompt groups, unequal numbers of calls per agent, a verifier absent from some trajectories.

    row traj group agent     score   (reward, format)
    0   t1   q1    solver    1.0     R=1
    1   t1   q1    verifier  1.0
    2   t1   q1    solver    1.0
    3   t2   q1    solver    0.0     R=0
    4   t2   q1    verifier -0.1     invalid format (c = 0.1)
    5   t2   q1    solver    0.0
    6   t2   q1    verifier  0.0
    7   t3   q1    solver    0.9     R=1, invalid format; no verifier call
    8   t4   q2    solver    0.5     R=0.5
    9   t4   q2    verifier  0.5
    10  t5   q2    solver    0.0     R=0; no verifier call
"""

import math

import numpy as np
import pytest
import torch
from cave.training.advantages import (
    EPS,
    ESTIMATORS,
    advantage_stats,
    agent_turns,
    at_grpo,
    compute_advantages,
    drmas,
    get_estimator,
    group_normalize,
    grpo,
    pooled_calls,
    register_estimator,
)

SCORES = [1.0, 1.0, 1.0, 0.0, -0.1, 0.0, 0.0, 0.9, 0.5, 0.5, 0.0]
TRAJS = ["t1", "t1", "t1", "t2", "t2", "t2", "t2", "t3", "t4", "t4", "t5"]
GROUPS = ["q1"] * 8 + ["q2"] * 3
AGENTS = ["s", "v", "s", "s", "v", "s", "v", "s", "s", "v", "s"]
COLS = dict(scores=SCORES, group_ids=GROUPS, traj_ids=TRAJS, agent_ids=AGENTS)


def test_grpo_hand_computed():
    # q1 trajectory means: t1 = 1.0, t2 = -0.1 / 4 = -0.025, t3 = 0.9; mean 0.625,
    # deviations 0.375, -0.65, 0.275; unbiased var = (0.140625 + 0.4225 + 0.075625) / 2 = 0.319375.
    sd = math.sqrt(0.319375)
    a1, a2, a3 = 0.375 / (sd + EPS), -0.65 / (sd + EPS), 0.275 / (sd + EPS)
    # q2: t4 = 0.5, t5 = 0.0 -> mean 0.25, sd = 0.25 * sqrt(2).
    b = 0.25 / (0.25 * math.sqrt(2) + EPS)
    expected = [a1, a1, a1, a2, a2, a2, a2, a3, b, b, -b]
    np.testing.assert_allclose(grpo(**COLS), expected, rtol=1e-9)
    assert a1 == pytest.approx(0.66356, abs=1e-5) and a2 == pytest.approx(-1.15017, abs=1e-5)


def test_grpo_without_std():
    expected = [0.375] * 3 + [-0.65] * 4 + [0.275, 0.25, 0.25, -0.25]
    np.testing.assert_allclose(grpo(**COLS, norm_by_std=False), expected, atol=1e-12)


def test_drmas_hand_computed():
    # (q1, solver): rows 0,2,3,5,7 = [1, 1, 0, 0, 0.9]; mean 0.58; var = (2*.1764 + 2*.3364 + .1024) / 4 = 0.282.
    s_sd = math.sqrt(0.282) + EPS
    # (q1, verifier): rows 1,4,6 = [1, -0.1, 0]; mean 0.3; var = (.49 + .16 + .09) / 2 = 0.37.
    v_sd = math.sqrt(0.37) + EPS
    # (q2, solver): rows 8,10 = [0.5, 0] -> +-1/sqrt(2).  (q2, verifier): row 9 alone -> mu 0, sigma 1.
    b = 0.25 / (0.25 * math.sqrt(2) + EPS)
    expected = [
        0.42 / s_sd,
        0.7 / v_sd,
        0.42 / s_sd,
        -0.58 / s_sd,
        -0.4 / v_sd,
        -0.58 / s_sd,
        -0.3 / v_sd,
        0.32 / s_sd,
        b,
        0.5 / (1 + EPS),
        -b,
    ]
    np.testing.assert_allclose(drmas(**COLS), expected, rtol=1e-9)


def test_drmas_without_std():
    expected = [0.42, 0.7, 0.42, -0.58, -0.4, -0.58, -0.3, 0.32, 0.25, 0.5, -0.25]
    np.testing.assert_allclose(drmas(**COLS, norm_by_std=False), expected, atol=1e-12)


def test_pooled_calls_hand_computed():
    # q1: rows 0..7 = [1, 1, 1, 0, -0.1, 0, 0, 0.9]; sum 3.8, mean 0.475;
    # squared deviations 3 * .275625 + 3 * .225625 + .330625 + .180625 = 2.015; unbiased var = 2.015 / 7.
    sd = math.sqrt(2.015 / 7) + EPS
    # q2: rows 8..10 = [0.5, 0.5, 0]; mean 1/3; var = (2/36 + 4/36) / 2 = 1/12.
    sd2 = math.sqrt(1 / 12) + EPS
    expected = [
        0.525 / sd,
        0.525 / sd,
        0.525 / sd,
        -0.475 / sd,
        -0.575 / sd,
        -0.475 / sd,
        -0.475 / sd,
        0.425 / sd,
        (1 / 6) / sd2,
        (1 / 6) / sd2,
        (-1 / 3) / sd2,
    ]
    np.testing.assert_allclose(pooled_calls(**COLS), expected, rtol=1e-9)


def test_at_grpo_hand_computed():
    # turns: t1 = s1 v1 s2; t2 = s1 v1 s2 v2; t3 = s1; t4 = s1 v1; t5 = s1
    assert agent_turns(TRAJS, AGENTS) == [1, 1, 2, 1, 1, 2, 2, 1, 1, 1, 1]
    # (q1, s, 1): rows 0,3,7 = [1, 0, 0.9], mean 19/30, unbiased var = sum of squared deviations / 2
    m1 = 1.9 / 3
    sd1 = math.sqrt(((1 - m1) ** 2 + m1**2 + (0.9 - m1) ** 2) / 2) + EPS
    # (q1, v, 1): rows 1,4 = [1, -0.1] -> +-1/sqrt(2) (times sd / (sd + eps)); (q1, s, 2): rows 2,5 = [1, 0] the same
    pair = lambda d: d / (d * math.sqrt(2) + EPS)  # noqa: E731  (half the gap over the unbiased std of a pair)
    # (q1, v, 2): row 6 alone and (q2, v, 1): row 9 alone -> raw score; (q2, s, 1): rows 8,10 = [0.5, 0]
    expected = [(1 - m1) / sd1, pair(0.55), pair(0.5), -m1 / sd1, -pair(0.55), -pair(0.5), 0.0, (0.9 - m1) / sd1,
                pair(0.25), 0.5 / (1 + EPS), -pair(0.25)]  # fmt: skip
    np.testing.assert_allclose(at_grpo(**COLS), expected, rtol=1e-9, atol=1e-12)
    assert compute_advantages("at_grpo", **COLS).tolist() == at_grpo(**COLS).tolist()
    # one call per agent per run: AT-GRPO groups exactly as Dr. MAS does
    one = {"scores": [1.0, 0.0, 0.5, 0.2], "group_ids": [0] * 4, "traj_ids": [0, 0, 1, 1], "agent_ids": list("svsv")}
    np.testing.assert_array_equal(at_grpo(**one), drmas(**one))


def test_estimators_differ_where_they_should():
    g, d, p = grpo(**COLS), drmas(**COLS), pooled_calls(**COLS)
    # grpo: every call of a trajectory shares its advantage; drmas and pooled_calls do not.
    assert len({round(x, 9) for x in g[3:7]}) == 1
    assert len({round(x, 9) for x in d[3:7]}) > 1
    # drmas: each (group, agent) with >= 2 calls has mean 0 and unbiased std ~1.
    for grp in ("q1", "q2"):
        for agent in ("s", "v"):
            x = np.array([a for a, gg, aa in zip(d, GROUPS, AGENTS, strict=True) if gg == grp and aa == agent])
            if x.size > 1:
                assert abs(x.mean()) < 1e-9 and x.std(ddof=1) == pytest.approx(1.0, abs=1e-5)
    # pooled_calls: zero mean per prompt group, over calls.
    assert abs(p[:8].mean()) < 1e-9 and abs(p[8:].mean()) < 1e-9


def test_singleton_group_gets_mean_zero_std_one():
    # One trajectory per prompt (grpo) and one call per (prompt, agent) (drmas): the raw score, over 1 + eps.
    np.testing.assert_allclose(grpo([0.7, 0.3], ["a", "b"], ["t1", "t2"]), [0.7 / (1 + EPS), 0.3 / (1 + EPS)])
    np.testing.assert_allclose(drmas([0.7], ["a"], ["t"], ["s"], norm_by_std=False), [0.7])


def test_all_equal_group_gives_zero():
    np.testing.assert_allclose(drmas([1.0, 1.0, 1.0], [0, 0, 0], [0, 1, 2], ["s"] * 3), [0.0, 0.0, 0.0])


def test_group_normalize_vectorized_matches_loop():
    rng = np.random.default_rng(0)
    v = rng.normal(size=200)
    g = rng.integers(0, 30, size=200)
    out = group_normalize(v, g)
    for k in np.unique(g):
        x = v[g == k]
        want = x / (1 + EPS) if x.size == 1 else (x - x.mean()) / (x.std(ddof=1) + EPS)
        np.testing.assert_allclose(out[g == k], want, rtol=1e-9)


def test_tensor_in_tensor_out():
    s = torch.tensor(SCORES, dtype=torch.float32)
    out = compute_advantages("drmas", s, GROUPS, TRAJS, torch.tensor([0 if a == "s" else 1 for a in AGENTS]))
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    np.testing.assert_allclose(out.numpy(), drmas(**COLS), rtol=1e-5)


def test_int_ids_as_numpy_arrays():
    out = grpo(np.array(SCORES), np.array([0] * 8 + [1] * 3), np.array([1, 1, 1, 2, 2, 2, 2, 3, 4, 4, 5]))
    np.testing.assert_allclose(out, grpo(**COLS))


def test_trajectory_in_two_groups_is_an_error():
    with pytest.raises(ValueError, match="trajectory 't1' appears in more than one prompt group"):
        grpo([1.0, 0.0], ["q1", "q2"], ["t1", "t1"])


def test_bad_inputs_name_the_problem():
    with pytest.raises(ValueError, match="agent_ids has 1 entries but scores has 2"):
        drmas([1.0, 0.0], [0, 0], [0, 1], ["s"])
    with pytest.raises(ValueError, match="score at row 1 is nan"):
        pooled_calls([1.0, float("nan")], [0, 0])
    with pytest.raises(ValueError, match="agent_ids is required"):
        drmas([1.0], [0], [0], None)


def test_registry():
    assert {"grpo", "drmas", "pooled_calls", "at_grpo"} <= set(ESTIMATORS)
    assert get_estimator("drmas") is drmas
    with pytest.raises(KeyError, match="known advantage estimators: .*drmas.*grpo"):
        get_estimator("nope")

    @register_estimator("test_raw")
    def raw(scores, group_ids, traj_ids, agent_ids, *, norm_by_std=True, eps=EPS):
        return np.asarray(scores, dtype=float)

    try:
        assert compute_advantages("test_raw", [1.0, 2.0], [0, 0], [0, 1], ["a", "a"]).tolist() == [1.0, 2.0]
        with pytest.raises(ValueError, match="already registered"):
            register_estimator("test_raw")(lambda *a, **k: None)
    finally:
        ESTIMATORS.remove("test_raw")


def test_advantage_stats():
    st = advantage_stats([1.0, -1.0, 0.5], ["s", "s", "v"])
    assert st["s"] == {"mean": 0.0, "std": 1.0, "min": -1.0, "max": 1.0, "count": 2}
    assert st["v"]["count"] == 1
