"""Bad input: a malformed task file stops `cave run` before anything starts (exit status 2, file:line and
the fix); a model reply with no code, broken code or enormous output is handled by the loop."""

from __future__ import annotations

import pytest

from cave.agent import Agent
from cave.cli import main
from cave.llm.base import Scripted
from tests.reliability.scenarios import code, kernel_pids

pytestmark = pytest.mark.timeout(120)

GOOD = "task: Add one and one.\nmodel:\n  backend: scripted\n  replies: ['```python\\nfinal_answer(2)\\n```']\nruntime: process\n"

BAD = {
    "bad-yaml": ("task: [unclosed\nruntime: process\n", ":2:", "YAML syntax error"),  # where the parser noticed
    "unknown-field": (GOOD + "max_stepz: 3\n", ":6:", "unknown field `max_stepz`"),
    "wrong-type": (GOOD + "max_steps: many\n", ":6:", "max_steps"),
    "missing-file": (GOOD + "inputs:\n  sales: {file: nowhere.csv}\n", ":7:", "file not found"),
    "unknown-runtime": (GOOD.replace("runtime: process", "runtime: jail"), ":5:", "unknown runtime 'jail'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_task_file_exits_2_with_file_line_and_starts_nothing(case, tmp_path, capsys):
    text, line, message = BAD[case]
    task = tmp_path / "task.yaml"
    task.write_text(text)
    before = kernel_pids()
    status = main(["run", str(task), "--db", str(tmp_path / "cave.db"), "--quiet"])
    err = capsys.readouterr().err
    assert status == 2, err
    assert f"{task}{line}" in err and message in err, err
    assert "fix:" in err, err
    assert kernel_pids() == before  # nothing started


def test_replies_without_code_broken_code_and_huge_output_are_handled():
    llm = Scripted(
        [
            code("print('x' * 20_000_000)"),  # enormous output
            code("def broken(:", "    pass"),  # a SyntaxError
            code("1 / 0"),  # a runtime error
            "I think the answer is 2.",  # no code right after a failed cell: not the answer yet
            code("final_answer(1 + 1)"),
        ]
    )
    agent = Agent(model=llm, runtime="process", max_steps=6, observation_limit=2000, verify=None)  # bad input alone
    try:
        result = agent.run("Add one and one.")
    finally:
        agent.runtime.close()
    steps = result.trajectory.steps
    assert result.status == "success" and result.answer == 2
    assert "your last code failed" in steps[3].observation
    assert len(steps[0].observation) < 5000  # the model is shown a bounded observation
    assert "SyntaxError" in steps[1].observation
    assert "ZeroDivisionError" in steps[2].observation
    assert len(llm.calls[1][-1]["content"]) < 5000  # and so is the next prompt
