"""A count of rows where the task counts entities that a table repeats (cave.review.entities), through the agent."""

from __future__ import annotations

import doctest
import functools

import pandas as pd
import pytest

from cave.agent import Agent as _Agent
from cave.llm.base import Scripted
from cave.review import entities

# These tests are about the holds an answer goes through; verification by agreement is tested in
# test_verify.py. Here the caller verifies (verify=None), so an accepted answer ends `success` as a role's turn does.
Agent = functools.partial(_Agent, verify=None)

SIGNUPS = pd.DataFrame(
    {
        "user_id": [1, 2, 2, 3, 4, 4, 5],
        "email": ["a@x", None, None, "c@x", None, None, "e@x"],
        "month": [3, 3, 3, 3, 3, 3, 4],
    }
)
TASK = "How many users signed up in March?"


def run(*replies: str, table: pd.DataFrame = SIGNUPS, task: str = TASK):
    agent = Agent(model=Scripted([f"```python\n{r}\n```" for r in replies], repeat_last=True), runtime="inprocess")
    agent.runtime.inject("signups", table)
    return agent.run(task)


def test_doctests():
    assert doctest.testmod(entities).failed == 0


def test_rows_counted_for_users_that_repeat_are_held_once_and_the_distinct_count_succeeds():
    # analyst suite, march_signups: 18 signup rows sent for 15 users, `success`
    rows = "march = signups[signups.month == 3]\nfinal_answer(len(march))"
    result = run(rows, "final_answer(int(march['user_id'].nunique()))")
    assert "the task counts users, and 'signups' has 7 rows for 5 distinct user_id values" in (
        result.trajectory.steps[0].observation
    )
    assert result.status == "success" and result.answer == 4
    again = run(rows, rows)  # the same rows counted again: they do repeat users
    assert again.status == "failed_checks" and "counts rows where the task counts users" in again.trajectory.error
    assert again.answer == 6


def test_rows_that_repeat_no_user_are_not_held():
    result = run("april = signups[signups.month == 4]\nfinal_answer(len(april))")
    assert result.status == "success" and result.answer == 1 and len(result.trajectory.steps) == 1


def test_a_count_of_a_selection_written_inline_is_read_on_the_given_table():
    # analyst suite, missing_emails: signups[signups['email'].isnull()].shape[0] (18 rows for 17 users), held, then
    # sent again as it was: `success` at c9f4d9a, when only variables could be read back
    rows = "final_answer(signups[signups['email'].isnull()].shape[0])"
    result = run(rows, rows, task="How many users have no email address on file?")
    assert "count distinct ids, e.g. signups[signups['email'].isnull()]['user_id'].nunique()" in (
        result.trajectory.steps[0].observation
    )
    assert result.status == "failed_checks" and result.answer == 4
    assert "counts rows where the task counts users" in result.trajectory.error
    # a selection that cannot be evaluated on the given table alone (a name the code made): asked once, then stands
    opaque = "cut = 0\nfinal_answer(signups[signups['month'] > cut].shape[0])"
    assert run(opaque, opaque, task="How many users signed up?").status == "success"
    # the selection dropped, every user in the table counted (the 1.5B did, told only "your selection")
    everyone = run(rows, "final_answer(signups['user_id'].nunique())", task="How many users have no email address?")
    assert everyone.status == "failed_checks" and "every user in the table" in everyone.trajectory.error
    fixed = run(
        rows,
        "final_answer(signups[signups['email'].isnull()]['user_id'].nunique())",
        task="How many users have no email?",
    )
    assert fixed.status == "success" and fixed.answer == 2


@pytest.mark.parametrize(
    ("task", "code"),
    [
        (TASK, "final_answer(signups[signups.month == 3].user_id.nunique())"),  # distinct already
        ("How many rows are from March?", "final_answer(len(signups[signups.month == 3]))"),  # rows asked
        ("How many orders are there?", "final_answer(len(signups))"),  # no order id here
    ],
)
def test_counts_of_distinct_ids_rows_or_other_things_are_left_alone(task, code):
    result = run(code, task=task)
    assert len(result.trajectory.steps) == 1 and result.status == "success"


def test_ids_in_a_table_named_for_the_entity():
    users = pd.DataFrame({"id": [1, 1, 2], "plan": ["a", "a", "b"]})
    found = entities.repeated(
        "How many users are on plan a?", "final_answer(len(users[users.plan == 'a']))", {"users": users}
    )
    assert [(r.table, r.column, r.rows, r.distinct) for r in found] == [("users", "id", 3, 2)]


def test_labels_that_spell_one_name_several_ways_are_held_and_cannot_stand():
    # analyst users_per_country: signups['country'].value_counts() of the raw names, 43 rows for 5 countries
    messy = SIGNUPS.assign(country=["Spain", " spain", "SPAIN", "Italy", "italy ", "Italy", "Spain"])
    raw = "final_answer(signups['country'].value_counts())"
    clean = "final_answer(signups['country'].str.strip().str.title().value_counts())"
    task = "How many signups came from each country? (the country names are messy)"
    fixed = run(raw, clean, table=messy, task=task)
    assert "labels spell 2 names in several ways" in fixed.trajectory.steps[0].observation
    assert "df['country'].str.strip().str.title()" in fixed.trajectory.steps[0].observation
    assert fixed.status == "success" and fixed.answer.to_dict() == {"Spain": 4, "Italy": 3}
    kept = run(raw, raw, table=messy, task=task)
    assert kept.status == "failed_checks" and "several ways" in kept.trajectory.error


def test_labels_moved_into_a_column_are_read_there_and_a_listing_of_rows_is_left_alone():
    # the same messy labels after .reset_index(): a key column of a table with no index of its own
    import pandas as pd

    from cave.review.grouping import messy_keys

    counts = pd.Series([3, 1, 2], index=["Spain", " spain", "Italy"], name="n").rename_axis("country")
    assert "labels spell 2 names in several ways" in messy_keys(counts.reset_index())
    rows = pd.DataFrame({"country": ["Spain", "Spain", "spain "], "amount": [1, 2, 3]})  # rows: a value repeats
    assert messy_keys(rows) is None
    assert messy_keys(pd.Series([1, 2], index=["Spain", "Spain"])) is None  # repeated, not spelled apart


def test_counts_per_group_of_rows_where_the_task_counts_users_are_held_once():
    # analyst users_per_country: value_counts() of the (cleaned) country, 43 rows for 39 German users; checked task
    table = SIGNUPS.assign(country=["Spain", "Spain", "Spain", "Italy", "Italy", "Italy", "Spain"])
    rows = "final_answer(signups['country'].value_counts())"
    users = "final_answer(signups.groupby('country')['user_id'].nunique())"
    result = run(rows, users, table=table, task="How many users signed up from each country?")
    assert "(per group: .groupby(...)['user_id'].nunique())" in result.trajectory.steps[0].observation
    assert result.status == "success" and result.answer.to_dict() == {"Italy": 2, "Spain": 3}


def test_counts_per_group_as_a_table_or_a_dict_are_held_like_a_series():
    # the same count of rows per country, answered as a two-column table (.size().reset_index) or a dict
    table = SIGNUPS.assign(country=["Spain", "Spain", "Spain", "Italy", "Italy", "Italy", "Spain"])
    users = "final_answer(signups.groupby('country')['user_id'].nunique())"
    for rows in (
        "final_answer(signups.groupby('country').size().reset_index(name='count'))",
        "final_answer(signups['country'].value_counts().to_dict())",
    ):
        result = run(rows, users, table=table, task="How many users signed up from each country?")
        assert "(per group: .groupby(...)['user_id'].nunique())" in result.trajectory.steps[0].observation, rows
        assert result.status == "success" and result.answer.to_dict() == {"Italy": 2, "Spain": 3}
