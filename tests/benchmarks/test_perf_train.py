"""The pure parts of the RL-iteration benchmark (the run itself needs TRL and minutes: `python -m ...perf.train`)."""

import doctest

from cave.benchmarks.perf import train


def test_doctests():
    result = doctest.testmod(train)
    assert result.attempted >= 2 and result.failed == 0


def test_prompts_past_the_four_problems_cycle():
    assert [p["answer"] for p in train.problems(9)] == [391, 42, 30, 12, 391, 42, 30, 12, 391]


def test_the_roofline_needs_a_rate():
    assert train.update_roofline(135_000_000, None) is None
    assert round(train.update_roofline(1_000_000, 8.0)) == 1_000_000  # 8 TFLOP/s at 8 MFLOP a token
