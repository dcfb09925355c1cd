"""A condition that holds on every row: the answer counts a whole table, held once; the fix succeeds, the same
count sent again stands."""

import doctest
import functools

import pandas as pd

from cave.agent import Agent as _Agent
from cave.llm.base import Scripted
from cave.review import every_row

# the holds alone: the caller verifies (verify=None), so an accepted answer ends `success` (test_verify.py: agreement)
Agent = functools.partial(_Agent, verify=None)

ORDERS = pd.DataFrame({"order_id": range(6), "customer_id": [1, 2, 2, 3, 8, 9]})
CUSTOMERS = pd.DataFrame({"customer_id": [1, 2, 3]})
TASK = "How many orders reference a customer that isn't in the customers table?"


def run(*replies: str, task: str = TASK):
    agent = Agent(model=Scripted([f"```python\n{r}\n```" for r in replies], repeat_last=True), runtime="inprocess")
    agent.runtime.inject("orders", ORDERS)
    agent.runtime.inject("customers", CUSTOMERS)
    return agent.run(task)


def test_doctests():
    assert doctest.testmod(every_row).failed == 0


def test_a_mask_true_on_every_row_is_held_once_and_the_fix_succeeds():
    always = "n = orders['customer_id'].isin(customers['customer_id']).notna().sum()\nfinal_answer(int(n))"
    fixed = "n = (~orders['customer_id'].isin(customers['customer_id'])).sum()\nfinal_answer(int(n))"
    result = run(always, fixed)
    first = result.trajectory.steps[0].observation
    assert "the answer 6 is every row of 'orders' (6 rows)" in first and "holds on every row" in first
    # the line to run: the test itself, negated as the task asks (the 1.5B sent the same count again without it)
    line = "n = (~orders['customer_id'].isin(customers['customer_id'])).sum()"
    assert line in first
    ran = {"orders": ORDERS, "customers": CUSTOMERS}
    exec(line, ran)  # the line it gives is right
    assert ran["n"] == 2
    assert result.status == "success" and result.answer == 2
    again = run(always, always)  # sent again: every row may truly count, the answer stands
    assert (
        again.answer == 6
        and len(again.trajectory.steps) == 2
        and "holds on every row" not in (again.trajectory.steps[1].observation or "")
    )


def test_a_total_without_a_condition_and_a_count_of_some_rows_are_not_held():
    total = run("final_answer(len(orders))", task="How many orders are there?")
    assert total.status == "success" and len(total.trajectory.steps) == 1
    some = run(
        "final_answer(int((orders['customer_id'] > 2).sum()))", task="How many orders have a customer id above 2?"
    )
    assert some.status == "success" and some.answer == 3 and len(some.trajectory.steps) == 1


def test_a_share_of_one_where_the_task_asks_a_share_is_held():
    share = "final_answer(float(orders['customer_id'].notna().mean()))"
    result = run(share, task="What share of orders have a known customer?")
    assert "is all of the rows (a share of 1)" in result.trajectory.steps[0].observation
    assert not every_row.whole("What is the mean?", "x = (df.a > 0).mean()", 1.0, {"df": ORDERS})
