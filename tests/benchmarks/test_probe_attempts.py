"""The verification probe: the run, then the verification verify: N makes of its answer, judged by the oracle."""

from __future__ import annotations

import asyncio

import pytest
from cave.benchmarks.analyst.run import scripted_policy
from cave.benchmarks.analyst.tasks import TASKS
from cave.benchmarks.probes.attempts import main, probe_task, summarize

from cave.llm.base import Scripted

TASK = TASKS["top_region"]  # a name, no checks: its answer goes to the attempts


def test_a_right_answer_the_attempt_repeats_is_confirmed() -> None:
    row = asyncio.run(probe_task(TASK, scripted_policy(TASK, "code"), runtime="inprocess"))
    assert row["correct"] and row["status"] == "unverified" and row["decided_by_attempts"]
    assert row["attempts"] == {**row["attempts"], "votes": [True], "agrees": True, "correct": True, "answered": True}
    s = summarize([row])
    assert (s["right"], s["right_agreed"], s["wrong"], s["attempt_correct"], s["no_answer"]) == (1, 1, 0, 1, 0)
    assert row["attempts"]["verdicts"] == [True] and (s["attempts_right"], s["attempts_answered"]) == (1, 1)


def test_a_wrong_answer_that_the_attempts_repeat_is_a_confirmed_wrong_one() -> None:
    wrong = "```python\nfinal_answer(orders.groupby('region')['amount'].sum().idxmin())\n```"
    row = asyncio.run(probe_task(TASK, Scripted([wrong], repeat_last=True), verify=3, runtime="inprocess"))
    assert not row["correct"] and row["decided_by_attempts"]
    assert row["attempts"]["votes"] == [True, True] and row["attempts"]["agrees"]  # early exit: 2 of 3 agree
    s = summarize([row])
    assert (s["wrong"], s["wrong_agreed"], s["right"]) == (1, 1, 0)
    assert row["attempts"]["verdicts"] == [False, False] and (s["attempts_right"], s["attempts_answered"]) == (0, 2)


def test_an_attempt_with_no_answer_is_run_again_and_counted() -> None:
    right = scripted_policy(TASK, "code").replies[0]
    script = [right, "I think it is the west region.", "Still thinking.", right]  # the first attempt: prose
    row = asyncio.run(probe_task(TASK, Scripted(script, repeat_last=True), runtime="inprocess", max_steps=2))
    assert row["attempts"]["votes"][0] is None and row["attempts"]["agrees"]
    prose, answered = row["attempts"]["trajectories"]  # kept, to read why the first attempt reached no answer
    assert prose["status"] != "unverified" and answered["final_answer"] == "west" == row["trajectory"]["final_answer"]
    assert summarize([row])["no_answer"] == 1 and row["attempts"]["verdicts"] == [None, True]


def test_checked_tasks_are_not_given_attempts() -> None:
    checked = next(t for t in TASKS.values() if t.checks is not None and "db" not in t.inputs)
    row = asyncio.run(probe_task(checked, scripted_policy(checked, "code"), runtime="inprocess"))
    assert not row["decided_by_attempts"] and row["attempts"] is None


def test_the_command_names_what_is_wrong(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--tasks", "no_such_task", "--model", "scripted"])
    assert "no_such_task" in capsys.readouterr().err
