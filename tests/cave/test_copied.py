"""Numbers copied from another column of a printed table than the one the task names (DABench 656: describe()'s
mean and std of Z sent as those of the X-coordinate, `success`) are held once and cannot stand when sent again."""

from __future__ import annotations

import doctest
import functools

import numpy as np
import pandas as pd

import cave.review.copied
from cave.agent import Agent as _Agent
from cave.llm.base import Scripted
from cave.review.copied import wrong_columns

# These tests are about the holds an answer goes through; verification by agreement is tested in
# test_verify.py. Here the caller verifies (verify=None), so an accepted answer ends `success` as a role's turn does.
Agent = functools.partial(_Agent, verify=None)


def test_doctests():
    result = doctest.testmod(cave.review.copied)
    assert result.attempted > 0 and result.failed == 0


def _positions() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    return pd.DataFrame(
        {"X": rng.normal(-2.6e8, 5e7, 50), "Y": rng.normal(-2e8, 1e8, 50), "Z": rng.normal(1e8, 4e7, 50)}
    )


TASK = "Perform an outlier analysis on the X-coordinate column using the Z-score method; report the mean of X."


def _run(replies: list[str]) -> object:
    agent = Agent(model=Scripted([f"```python\n{r}\n```" for r in replies], repeat_last=True), runtime="inprocess")
    agent.runtime.inject("df", _positions())
    return agent.run(TASK)


def _printed_mean(column: str) -> str:
    return str(_positions().describe()).splitlines()[2].split()[1 + "XYZ".index(column)]


def test_a_mean_copied_from_another_column_of_a_printed_table_is_held_then_the_computed_one_stands():
    result = _run(
        [
            "print(df.describe())",
            f"final_answer({{'mean_x': {_printed_mean('Z')}}})",
            "final_answer({'mean_x': round(df['X'].mean(), 2)})",
        ]
    )
    held = result.trajectory.steps[1].observation
    assert f"{_printed_mean('Z')} is the mean of 'Z' in the printed table; the task asks about 'X'" in held
    assert "df['X'].mean()" in held
    assert result.status == "success" and result.answer == {"mean_x": round(_positions()["X"].mean(), 2)}


def test_the_same_copy_again_is_no_success_and_the_right_column_is_never_held():
    copy = f"final_answer({{'mean_x': {_printed_mean('Z')}}})"
    again = _run(["print(df.describe())", copy, copy])
    assert again.status == "failed_checks" and "still copies" in again.trajectory.error
    right = _run(["print(df.describe())", f"final_answer({{'mean_x': {_printed_mean('X')}}})"])
    assert right.status == "success"  # copied from the column the task names: no hold


def test_a_statistic_term_is_no_column_name():
    seen = "                 X             Z\nmean -2.591630e+08  1.124736e+08"
    # "Z-score" does not name the column Z; "the Z column" does
    assert wrong_columns("Use the Z-score method on X.", {"m": 1.124736e08}, seen)
    assert not wrong_columns("Report the mean of the Z column and of X.", {"m": 1.124736e08}, seen)
