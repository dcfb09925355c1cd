"""The traps probe (development data): each task's trap is real, answers are read in the forms an agent sends,
and a run is classed right / trap / wrong from its answer."""

from __future__ import annotations

import asyncio

import pandas as pd
import pytest
from cave.benchmarks.probes.traps import TASKS, main, matches, outcome, run_task, tables, totals

from cave.llm.base import Scripted


@pytest.mark.parametrize("name", list(TASKS))
def test_each_trap_gives_another_answer_than_the_oracle(name: str) -> None:
    task, given = TASKS[name], tables()
    right, naive = task.oracle(given), task.naive(given)
    assert not matches(naive, right, task.kind), f"{name}: the trap's answer is the right one"
    assert (outcome(task, right, given), outcome(task, naive, given)) == ("right", "trap")


def test_answers_are_read_in_the_forms_agents_send() -> None:
    truth = {"central": 4.0, "riverside": 2.5}
    assert matches(pd.Series({"Central": 4, " riverside": 2.5}), truth, "per_group")
    assert matches(pd.DataFrame({"branch": ["central", "Riverside"], "n": [4, 2.5]}), truth, "per_group")
    assert not matches(pd.Series({"Central": 3, "central": 1, "Riverside": 2.5}), truth, "per_group")
    assert not matches(pd.Series({"Central": 4}), truth, "per_group")
    assert matches("Kings Avenue, Quarry Hill", ["quarry hill", "kings avenue"], "names")
    assert not matches(["Quarry Hill", "quarry hill ", "Kings Avenue"], ["quarry hill", "kings avenue"], "names")
    assert matches(pd.Series([79]), 79, "number") and matches("18.33%", 18.3333, "number")
    assert not matches(True, 1, "number") and not matches("n/a", 1, "number")


def test_a_run_is_classed_from_its_answer() -> None:
    task, given = TASKS["double_parking_count"], tables()
    right = "```python\nfinal_answer(int((tickets.violation.str.strip().str.lower() == 'double parking').sum()))\n```"
    naive = "```python\nfinal_answer(int((tickets.violation == 'Double Parking').sum()))\n```"
    rows = [
        asyncio.run(run_task(task, Scripted([code], repeat_last=True), verify=0, runtime="inprocess"))
        for code in (right, naive)
    ]
    assert [r["outcome"] for r in rows] == ["right", "trap"]
    assert rows[0]["answer"] == repr(task.oracle(given)) and rows[0]["trajectory"]["steps"]
    assert all(r["status"] == "unverified" for r in rows)  # verify 0: nothing confirmed either answer
    t = totals(rows)
    assert (t["tasks"], t["right"], t["trap"], t["wrong_other"], t["success"]) == (2, 1, 1, 0, 0)


def test_the_command_names_an_unknown_task(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["no_such_task", "--model", "scripted"])
    err = capsys.readouterr().err
    assert "no_such_task" in err and "double_parking_count" in err
