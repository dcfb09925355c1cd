"""The verification probe: the run and one attempt per style, judged by the oracle and by agreement."""

from __future__ import annotations

import asyncio

from cave.benchmarks.analyst.run import scripted_policy
from cave.benchmarks.analyst.tasks import TASKS
from cave.benchmarks.probes.attempts import probe_task, summarize

from cave.llm.base import Scripted
from cave.verification import LOOK_FIRST

TASK = TASKS["top_region"]  # a name, no checks: its answer goes to the attempts


def test_a_right_answer_repeated_by_every_style_is_agreed_with() -> None:
    llm = scripted_policy(TASK, "code")
    row = asyncio.run(probe_task(TASK, llm, ["same", "look_first"], runtime="inprocess"))
    assert row["correct"] and row["status"] == "unverified" and row["decided_by_attempts"]
    assert set(row["attempts"]) == {"same", "look_first"}
    assert all(a["answered"] and a["correct"] and a["agrees"] for a in row["attempts"].values())
    (same, look) = summarize([row], ["same", "look_first"])
    assert (same["right"], same["right_agreed"], same["wrong"], look["attempt_correct"]) == (1, 1, 0, 1)
    # the run and the "same" attempt share their instructions; the look_first attempt is asked for another method
    systems = [c[0]["content"] for c in llm.calls]
    assert sum(LOOK_FIRST in s for s in systems) == 1 and LOOK_FIRST not in systems[0]


def test_a_wrong_answer_that_the_attempts_repeat_is_counted_as_agreed_wrong() -> None:
    wrong = "```python\nfinal_answer(orders.groupby('region')['amount'].sum().idxmin())\n```"
    llm = Scripted([wrong], repeat_last=True)
    row = asyncio.run(probe_task(TASK, llm, ["same"], runtime="inprocess"))
    assert not row["correct"] and row["decided_by_attempts"]
    assert row["attempts"]["same"] == {**row["attempts"]["same"], "agrees": True, "correct": False}
    (s,) = summarize([row], ["same"])
    assert (s["wrong"], s["wrong_agreed"], s["right"]) == (1, 1, 0)


def test_checked_tasks_are_not_given_attempts() -> None:
    checked = next(t for t in TASKS.values() if t.checks is not None and "db" not in t.inputs)
    row = asyncio.run(probe_task(checked, scripted_policy(checked, "code"), ["same"], runtime="inprocess"))
    assert not row["decided_by_attempts"] and row["attempts"] == {}
