"""Checks on outputs: `success` means the result passed what the task asks, verified on the live objects."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from cave import Agent, Scripted
from cave.review.checks import CheckSpec, report
from cave.task import TaskError, parse_task

FRAME = pd.DataFrame({"region": ["b", "a", "c"], "revenue": [2.0, 3.0, None]})


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"type": "DataFrame"}, []),
        ({"type": "dict"}, ["by: is a DataFrame; expected a dict"]),
        ({"columns": ["region", "revenue"], "exact_columns": True}, []),
        ({"columns": ["region", "total"]}, ["by: lacks column(s) ['total']; it has ['region', 'revenue']"]),
        ({"rows": 3}, []),
        ({"rows": {"min": 4}}, ["by: has 3 rows; expected at least 4"]),
        ({"rows": {"max": 2}}, ["by: has 3 rows; expected at most 2"]),
        ({"sorted_by": {"column": "region"}}, ["by: is not sorted by 'region' ascending; fix: by = by.sort_values"]),
        ({"no_nulls": True}, ["by: has missing values in ['revenue']"]),
        ({"no_nulls": ["region"]}, []),
        ({"unique": ["region"]}, []),
        ({"dtypes": {"revenue": "number", "region": "string"}}, []),
        ({"dtypes": {"region": "number"}}, ["by: column 'region' is "]),
        ({"assert": ["value['revenue'].max() == 3", "len(value) == n"]}, []),
        ({"assert": ["len(value) > n"]}, ["by: assert len(value) > n: is false"]),
        ({"assert": ["value.nope"]}, ["by: assert value.nope: raised AttributeError"]),
    ],
)
def test_each_kind_of_check(spec, expected):
    got = report({"by": FRAME, "n": 3}, {"by": CheckSpec.model_validate(spec).wire()})
    assert len(got) == len(expected) and all(g.startswith(e) for g, e in zip(got, expected, strict=True)), got


def test_missing_objects_and_the_answer():
    assert report({}, {"answer": {"type": "int"}, "x": {}}) == [
        "answer: final_answer(...) was not called; create it before calling final_answer",
        "x: no variable named 'x'; create it before calling final_answer",
    ]
    assert report({"_final_answer": 3.0000001}, {"answer": {"equals": 3}}) == []
    assert report({"_final_answer": 4}, {"answer": {"equals": 3}}) == ["answer: is 4; expected 3"]


UNSORTED = "```python\nimport pandas as pd\nby = pd.DataFrame({'r': ['a', 'b'], 'v': [1, 3]})\nfinal_answer(by)\n```"
FIXED = "```python\nby = by.sort_values('v', ascending=False).reset_index(drop=True)\nfinal_answer(by)\n```"
CHECKS = {"by": {"columns": ["r", "v"], "sorted_by": {"column": "v", "descending": True}}}


@pytest.mark.parametrize("runtime", ["inprocess", "kernel"])
def test_a_failed_check_is_fed_back_and_the_run_goes_on(runtime):
    if runtime == "kernel":
        pytest.importorskip("jupyter_client")
    agent = Agent(Scripted([UNSORTED, FIXED]), runtime, checks=CHECKS)
    try:
        result = agent.run("make `by`, highest v first")
        assert result.status == "success" and result.trajectory.meta["checks"] == {"passed": ["by"]}
        first, second = result.trajectory.steps
        assert (
            "final_answer was NOT accepted" in first.observation
            and "is not sorted by 'v' descending" in first.observation
        )
        assert list(agent.runtime.retrieve("by")["v"]) == [3, 1]
    finally:
        agent.runtime.close()


def test_the_last_answer_failing_ends_in_failed_checks():
    agent = Agent(Scripted([UNSORTED], repeat_last=True), max_steps=2, checks=CHECKS)
    result = agent.run("make `by`")
    assert result.status == "failed_checks" and not result.ok
    assert "is not sorted by 'v' descending" in result.trajectory.error


def test_with_checks_a_reply_without_code_is_not_the_answer():
    agent = Agent(
        Scripted(["The answer is 42.", "```python\nfinal_answer(42)\n```"]), checks={"answer": {"equals": 42}}
    )
    result = agent.run("what is 6 * 7?")
    assert result.status == "success" and result.answer == 42
    assert "This task checks the objects" in result.trajectory.steps[0].observation


def test_task_files_validate_checks_with_lines():
    with pytest.raises(TaskError) as e:
        parse_task("task: x\nchecks:\n  by:\n    sorted_by: {column: v}\n    dtypes: {v: numeric}\n")
    assert "<task>:5: checks.by.dtypes: dtypes.v: unknown kind 'numeric'" in str(e.value)
    with pytest.raises(TaskError, match="<task>:3: checks.by.assert: assert 'value >' is not a Python expression"):
        parse_task("task: x\nchecks:\n  by: {assert: ['value >']}\n")
    task = parse_task("task: x\nchecks:\n  answer: {type: int}\n")
    assert "Your result is checked before it is accepted:\n- the final answer: a int" in task.prompt()


def test_cave_run_reports_failed_checks_exit_1_and_success_exit_0(tmp_path):
    def run(replies: list[str]) -> tuple[int, dict]:
        task = tmp_path / "t.yaml"
        task.write_text(
            "task: make by\nmax_steps: 2\n"
            f"model: {{backend: scripted, replies: {json.dumps(replies)}, repeat_last: true}}\n"
            "checks:\n  by: {sorted_by: {column: v, descending: true}}\n"
        )
        out = subprocess.run(
            [sys.executable, "-m", "cave", "run", str(task), "--json", "--db", str(tmp_path / "r.db")],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        return out.returncode, json.loads(out.stdout)

    code, summary = run([UNSORTED])
    assert code == 1 and summary["status"] == "failed_checks" and summary["checks"]["failed"]
    code, summary = run([UNSORTED, FIXED])
    assert code == 0 and summary["status"] == "success" and summary["checks"] == {"passed": ["by"]}
