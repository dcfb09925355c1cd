"""A scipy test over columns with missing values returns nan; the runtime notes it, and the observation carries
the code with the missing values dropped (both columns' rows together for a paired test), ready to run."""

from __future__ import annotations

import doctest
import functools

import numpy as np
import pandas as pd

import cave.review.nan_tests
from cave.agent import Agent as _Agent
from cave.llm.base import Scripted

Agent = functools.partial(_Agent, verify=None)  # the caller verifies: the observation is what is tested


def test_doctests():
    result = doctest.testmod(cave.review.nan_tests)
    assert result.attempted > 0 and result.failed == 0


def _passengers() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    age = rng.uniform(1, 70, 40).round()
    age[::4] = np.nan  # ten passengers without an age
    return pd.DataFrame({"Age": age, "Fare": rng.uniform(5, 100, 40).round(2)})


def test_a_test_over_missing_values_gets_the_code_with_them_dropped_to_run():
    df = _passengers()
    code = "from scipy.stats import pearsonr\nr, p = pearsonr(df['Age'], df['Fare'])\nprint(r)"
    agent = Agent(model=Scripted([f"```python\n{code}\n```", "done"]), runtime="inprocess", max_steps=1)
    agent.runtime.inject("df", df)
    observation = agent.run("Correlate age and fare.").trajectory.steps[0].observation
    fixed = "r, p = pearsonr(df[['Age', 'Fare']].dropna()['Age'], df[['Age', 'Fare']].dropna()['Fare'])"
    assert "returned nan because" in observation and fixed in observation
    from scipy.stats import pearsonr

    ns: dict = {"df": df, "pearsonr": pearsonr}
    exec(fixed, ns)  # the line it offers computes a real correlation
    assert np.isfinite(ns["r"])
