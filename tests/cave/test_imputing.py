"""Rows dropped where the task says to fill them (DABench 523: KNN imputation of ages done as a dropna, the counts
of the 714 passengers left sent as `success`) are held once, the given table is put back, and the same drop or the
same answer again cannot stand as a success."""

from __future__ import annotations

import doctest
import functools

import numpy as np
import pandas as pd
import pytest

import cave.review.imputing
from cave.agent import Agent as _Agent
from cave.llm.base import Scripted
from cave.review.imputing import dropped_missing

# These tests are about the holds an answer goes through; verification by agreement is tested in
# test_verify.py. Here the caller verifies (verify=None), so an accepted answer ends `success` as a role's turn does.
Agent = functools.partial(_Agent, verify=None)


def test_doctests():
    result = doctest.testmod(cave.review.imputing)
    assert result.attempted > 0 and result.failed == 0


FILL_AGE = "Impute missing values in the 'Age' column with the median, and drop the 'Cabin' column."


@pytest.mark.parametrize(
    ("task", "code", "flagged"),
    [
        (FILL_AGE, "df = df.dropna(subset=['Age'])", True),
        (FILL_AGE, "df = df.dropna(subset='Age').reset_index(drop=True)", True),
        (FILL_AGE, "df = df.drop_duplicates().dropna(subset=['Age', 'Fare'])", True),
        (FILL_AGE, "df.dropna(subset=['Age'], inplace=True)", True),
        (FILL_AGE, "df = df[df['Age'].notna()]", True),
        (FILL_AGE, "df = df[~df.Age.isnull()]", True),
        (FILL_AGE, "df = df.dropna()", True),  # every row with any missing value, the ages among them
        # a table kept apart to fit the imputer on is no drop
        (FILL_AGE, "known = df.dropna(subset=['Age'])\nmodel.fit(known[['Fare']], known['Age'])", False),
        (FILL_AGE, "df = df.dropna(subset=['Embarked'])", False),  # a column the task does not say to fill
        (FILL_AGE, "df = df.dropna(axis=1)", False),  # columns, not rows
        (FILL_AGE, "df = df.dropna(how='all')", False),  # only rows with nothing at all
        (FILL_AGE, "df.dropna(subset=['Age'])", False),  # shown, not kept
        ("Drop rows with missing values, then report the mean age.", "df = df.dropna()", False),
        ("Report the mean of the 'Age' column.", "df = df.dropna(subset=['Age'])", False),
        ("Fill missing 'Age' with the median and drop rows with missing 'Embarked'.", "df = df.dropna()", False),
        (
            "Fill missing 'Age' with the median and drop rows with missing 'Embarked'.",
            "df = df.dropna(subset=['Age'])",
            True,
        ),
        ("If a value is missing, do not impute it: skip the row.", "df = df.dropna()", False),
        ("Replace the missing values in the Age column with 0.", "df = df[df.Age.notnull()]", True),
    ],
)
def test_a_drop_of_rows_the_task_says_to_fill_is_found(task, code, flagged):
    assert bool(dropped_missing(task, [code])) is flagged


def _titanic() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    age = rng.uniform(1, 70, 40).round()
    age[::4] = np.nan  # ten passengers without an age
    return pd.DataFrame({"Age": age, "Fare": rng.uniform(5, 100, 40).round(2), "Pclass": rng.integers(1, 4, 40)})


TASK = (
    "Impute missing values in the 'Age' column using the median age. Then report the number of passengers aged "
    "18 or younger. Call final_answer({'young': n})."
)
DROP = "df = df.dropna(subset=['Age'])\nfinal_answer({'young': int((df['Age'] <= 18).sum())})"
FILL = "df['Age'] = df['Age'].fillna(df['Age'].median())\nfinal_answer({'young': int((df['Age'] <= 18).sum())})"


def _run(codes: list[str], runtime: str = "inprocess") -> object:
    agent = Agent(model=Scripted([f"```python\n{c}\n```" for c in codes], repeat_last=True), runtime=runtime)
    agent.runtime.inject("df", _titanic())
    try:
        return agent.run(TASK)
    finally:
        agent.runtime.close()


def test_an_answer_from_dropped_rows_is_held_the_table_put_back_and_the_fill_succeeds():
    table = _titanic()
    filled = table.Age.fillna(table.Age.median())
    result = _run([DROP, FILL], runtime="kernel")  # a real kernel: the table is put back across the process
    first = result.trajectory.steps[0].observation
    assert "drops the rows whose 'Age' is missing" in first
    assert "df['Age'] = df['Age'].fillna(df['Age'].median())" in first  # the fill written for this table
    assert "it is back as it was given (40 rows" in first
    assert result.status == "success", result.trajectory.error
    assert result.answer == {"young": int((filled <= 18).sum())}  # all 40 passengers, the ten filled ones too


def test_the_same_drop_or_the_same_answer_again_is_no_success():
    dropped = _run([DROP, DROP])
    assert dropped.status == "failed_checks"
    assert "drops the rows whose 'Age' is missing" in dropped.trajectory.error
    young = int((_titanic().Age.dropna() <= 18).sum())
    resent = _run([DROP, f"final_answer({{'young': {young}}})"])
    assert resent.status == "failed_checks"
    assert "computed from the dropped rows" in resent.trajectory.error


def test_a_model_refusing_the_missing_values_of_the_column_to_fill_gets_the_fit_not_the_drop():
    # DABench 523: the error's own hint (drop the rows with missing values) led the 1.5B to drop them from df
    task = "Impute missing values in the 'Age' column using KNN regression on 'Fare'. Report the mean age."
    refused = "from sklearn.neighbors import KNeighborsRegressor\nKNeighborsRegressor(3).fit(df[['Fare']], df['Age'])"
    agent = Agent(model=Scripted([f"```python\n{refused}\n```"]), runtime="inprocess", max_steps=1)
    agent.runtime.inject("df", _titanic())
    observation = agent.run(task).trajectory.steps[0].observation
    assert "Input y contains NaN" in observation
    assert "the task says to fill the missing values of 'Age', not to drop them" in observation
    assert "df.loc[missing, 'Age'] = model.predict(df.loc[missing, features])" in observation
    # a task that fills nothing keeps the error's hint alone
    agent = Agent(model=Scripted([f"```python\n{refused}\n```"]), runtime="inprocess", max_steps=1)
    agent.runtime.inject("df", _titanic())
    assert "not to drop them" not in agent.run("Fit KNN regression of Age on Fare.").trajectory.steps[0].observation


def test_a_test_over_missing_values_gets_the_code_with_them_dropped_to_run():
    # DABench 530: pearsonr over ages with NaN for men and women; the note named the NaN, the nan answer went on
    df = _titanic()
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
