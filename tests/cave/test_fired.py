"""Which notes a run's steps carried (cave.review.fired), as the held-out harness counts them: a runtime note read
by its mark, an error's hint, a review note after a step, a repeated cell; and the harness's totals per name."""

from __future__ import annotations

import doctest
import functools

import pandas as pd
from cave.benchmarks.heldout.run import format_fired, hold_totals
from cave.runtimes.inprocess import InProcessRuntime

import cave.review.fired
from cave.agent import Agent as _Agent
from cave.llm.base import Scripted

Agent = functools.partial(_Agent, verify=None)


def code(src: str) -> str:
    return f"Here.\n```python\n{src}\n```"


def test_doctests():
    result = doctest.testmod(cave.review.fired)
    assert result.attempted > 0 and result.failed == 0


def test_every_runtime_mark_names_one_kind():
    marks = list(cave.review.fired.RUNTIME_MARKS.values())
    assert len(set(marks)) == len(marks) and all(marks)
    for name, mark in cave.review.fired.RUNTIME_MARKS.items():
        assert cave.review.fired.runtime_notes(f"Note (line 1): ... {mark} ...") == [name]


def test_a_run_records_the_notes_its_steps_carried():
    clinic = pd.DataFrame({"species": ["Dog", " dog", "DOG", "Cat"], "fee": [10.0, 20.0, 30.0, 99.0]})
    selection = code("dogs = clinic[clinic['species'] == 'Dog']\nprint(dogs['fee'].mean())")
    replies = [
        code("print(clinic['species'].title())"),  # AttributeError: the hint that names .str
        selection,  # the spelling note
        selection,  # the same cell again: the repeat note, and the spelling note again
        code("final_answer(round(clinic[clinic['species'].str.strip().str.lower() == 'dog']['fee'].mean(), 2))"),
    ]
    agent = Agent(model=Scripted(replies, repeat_last=True), runtime=InProcessRuntime())
    agent.runtime.inject("clinic", clinic)
    result = agent.run("What is the average fee of visits for dogs?")
    assert result.status == "success" and result.answer == 20.0
    steps = result.trajectory.steps
    assert "error_hint" in steps[0].meta["blocks"][0]["noted"] and "Hint: string methods" in steps[0].observation
    assert steps[1].meta["blocks"][0]["noted"] == ["runtime.spelling"] and "noted" not in steps[1].meta
    assert steps[2].meta["noted"] == ["repeat"]
    assert "noted" not in steps[3].meta["blocks"][0]  # the answer's block carried no note
    names = cave.review.fired.run_notes(steps)
    assert {"error_hint", "repeat", "runtime.spelling"} <= set(names)


def test_the_harness_totals_holds_and_notes_per_name():
    rows = [
        {"correct": True, "status": "success", "holds": ["contract_holds"], "notes": ["loop", "runtime.spelling"]},
        {"correct": False, "status": "success", "holds": [], "notes": ["loop"]},
        {"correct": False, "status": "unverified"},  # an older row without the fields counts for nothing
    ]
    notes = hold_totals(rows, "notes")
    assert notes == {
        "loop": {"runs": 2, "correct": 1, "success": 2},
        "runtime.spelling": {"runs": 1, "correct": 1, "success": 1},
    }
    table = format_fired({"holds": hold_totals(rows), "notes": notes}, len(rows))
    assert "3 runs" in table and "contract_holds" in table and "runtime.spelling" in table
    assert format_fired({}, 0).count("(none)") == 2


def test_an_error_is_counted_with_the_help_its_observation_shows():
    from cave.runtimes.base import ExecError, Execution

    from cave import prompts

    tb = 'File "<cell-2>", line 5\n    p = sales[sales["units"].idxmax()]["product"]\nKeyError: 3'
    label = Execution(error=ExecError(type="KeyError", message="3", traceback=tb))  # both rules match this error
    shown = prompts.format_execution(label)
    # a row label taken for a column: the line rewritten, and not the general KeyError hint
    assert "your line, rewritten" in shown and "pandas 3 reads" not in shown
    assert cave.review.fired.block_notes(label) == ["line_fix"]
    name = Execution(error=ExecError(type="NameError", message="name 'pd' is not defined"))
    assert "Hint: add `import pandas as pd`" in prompts.format_execution(name)
    assert cave.review.fired.block_notes(name, ["a guard note"]) == ["error_hint", "guard"]
