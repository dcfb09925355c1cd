"""Conditions a task states that no code applies (``conditions.unapplied``), and rows it says are entered twice."""

from __future__ import annotations

import pandas as pd

from cave.review.bounds import unapplied as unapplied_bounds
from cave.review.conditions import unapplied

TICKETS = pd.DataFrame(
    {
        "street": ["Elm Street", "Mill Lane", "Elm Street"],
        "violation": ["Fire Hydrant", "No Permit", "fire hydrant "],
        "paid": ["yes", "no", "no"],
        "fine": [115.0, 45.0, 65.0],
    }
)


def test_a_value_the_task_names_whose_column_no_code_reads():
    task = "List the streets with an unpaid fire hydrant ticket."
    found = unapplied(
        task, ["t = TICKETS[TICKETS['paid'] == 'no']", "final_answer(t['street'].unique())"], {"t": TICKETS}
    )
    assert found == ["'fire hydrant': a value of t['violation'], which is never read"]
    applied = "t = TICKETS[(TICKETS.paid == 'no') & TICKETS.violation.str.lower().str.contains('hydrant')]"
    assert unapplied(task, [applied], {"t": TICKETS}) == []


def test_a_yes_no_column_named_by_its_negation_and_never_read():
    found = unapplied("Total of the unpaid fines?", "TICKETS.fine.sum()", {"t": TICKETS})
    assert found == ["'unpaid': t['paid'] (yes/no) is never read"]
    assert unapplied("Total of the unpaid fines?", "TICKETS.query('paid == \"no\"').fine.sum()", {"t": TICKETS}) == []


def test_no_analyst_solution_is_held_for_a_condition_or_a_duplicate():
    """A correct solution is never held: every analyst task's solution, on three seeds."""
    from cave.benchmarks.analyst import generate
    from cave.benchmarks.analyst.tasks import TASKS

    held = []
    for seed in (0, 1, 2):
        for task in TASKS.values():
            tables = {name: generate.FRAMES[name](seed) for name in task.inputs if name != "db"}
            found = unapplied(task.question, [task.solution], tables) + unapplied_bounds(task.question, [task.solution])
            held += [(seed, task.id, found)] if found else []
    assert held == []
