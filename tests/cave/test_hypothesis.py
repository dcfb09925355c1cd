"""A hypothesis test read backwards (``is_normal = p < 0.05``) is held once and cannot stand as a success."""

from __future__ import annotations

import doctest

import numpy as np
import pandas as pd
import pytest
from cave.runtimes.inprocess import InProcessRuntime

import cave.hypothesis
from cave.agent import Agent
from cave.hypothesis import backwards
from cave.llm.base import Scripted


def test_doctests():
    result = doctest.testmod(cave.hypothesis)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize(
    "code",
    [
        "is_normal = shapiro(df.x).pvalue < 0.05",
        "stat, p = shapiro(df.x)\nfinal_answer({'is_normal': 'yes' if p < 0.05 else 'no'})",
        "alpha = 0.05\nif p_value < alpha:\n    normality = 'yes'\nelse:\n    normality = 'no'",
        "if p > 0.05:\n    is_normal = False",
        "is_normal = not (p_value >= 0.05)",
        "is_normal = shapiro(df.x)[1] <= 0.05",
        "is_normal = 0.05 > p",
        "chi2, p, dof, expected = chi2_contingency(table)\nindependent = p < 0.05",
        "final_answer({'same_distribution': bool(p_val < 0.01)})",
        "isNormal = pValue < 0.05",
    ],
)
def test_readings_that_say_the_null_holds_when_p_is_below_alpha_are_found(code):
    assert backwards(code)


@pytest.mark.parametrize(
    "code",
    [
        "is_normal = p >= 0.05",
        "final_answer({'is_normal': 'no' if p < 0.05 else 'yes'})",
        "if p_value < alpha:\n    normality = 'no'\nelse:\n    normality = 'yes'",
        "significant = p < 0.05",  # the alternative, not the null
        "not_normal = p < 0.05",
        "is_stationary = adfuller(s)[1] < 0.05",  # ADF's null is a unit root: p < alpha means stationary
        "strong = r > 0.5",
        "is_normal = skew < 0.5",  # not a p-value
        "if p < 0.05:\n    print('not normal')",
        "is_normal = p <",  # does not parse
    ],
)
def test_right_readings_and_other_comparisons_are_left_alone(code):
    assert backwards(code) == []


def _run(replies: list[str]) -> object:
    rng = np.random.default_rng(0)
    agent = Agent(model=Scripted([f"```python\n{r}\n```" for r in replies]), runtime=InProcessRuntime())
    agent.runtime.inject("df", pd.DataFrame({"qty": rng.exponential(5.0, 300)}))
    return agent.run("Does qty follow a normal distribution? Use Shapiro-Wilk at alpha 0.05. Answer yes or no.")


TEST = "from scipy.stats import shapiro\np = shapiro(df['qty']).pvalue\n"


def test_an_answer_from_a_backwards_reading_is_held_once_and_the_fix_succeeds():
    # DABench 10: `is_normal = shapiro_result.pvalue < 0.05`, then "yes" for skewed data, and `success`
    result = _run([TEST + "final_answer({'is_normal': 'yes' if p < 0.05 else 'no'})",
                   TEST + "final_answer({'is_normal': 'yes' if p >= 0.05 else 'no'})"])  # fmt: skip
    first = result.trajectory.steps[0].observation
    assert "reads the hypothesis test backwards" in first and "line 3: `'yes' if p < 0.05 else 'no'`" in first
    assert result.status == "success" and result.answer == {"is_normal": "no"}


@pytest.mark.parametrize("again", ["final_answer({'is_normal': 'yes'})", "final_answer(_final_answer)"])
def test_the_same_verdict_sent_again_is_not_a_success(again):
    result = _run([TEST + "final_answer({'is_normal': 'yes' if p < 0.05 else 'no'})", again])
    assert result.status == "failed_checks" and result.answer == {"is_normal": "yes"}
    assert "reads the hypothesis test backwards" in result.trajectory.error
