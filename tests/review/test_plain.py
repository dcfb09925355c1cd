"""The answer a run hands back is plain Python: numpy scalars and, where a list is asked, array-likes become lists
(``cave.review.plain``), on a real in-process runtime and a real kernel."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cave import Agent, Scripted
from cave.review.plain import plain_answer

CITIES = pd.DataFrame({"city": ["a", "b", "c", "a"], "x": [1.5, 2.25, 3.0, 4.0]})


def run(code: str, task: str, runtime: str = "inprocess", **kw):
    agent = Agent(model=Scripted([f"```python\nimport numpy as np\n{code}\n```"], repeat_last=True),
                  runtime=runtime, verify=0, **kw)  # fmt: skip
    try:
        agent.runtime.inject("df", CITIES)
        return agent.run(task)
    finally:
        agent.runtime.close()


@pytest.mark.parametrize("runtime", ["inprocess", "kernel"])
def test_a_list_asked_comes_back_as_a_list_whose_text_has_its_items(runtime):
    r = run("final_answer(df['city'].unique())", "List the distinct cities.", runtime)
    assert r.answer == ["a", "b", "c"] and str(r.answer) == "['a', 'b', 'c']"
    r = run("final_answer(df['x'].nlargest(2).values)", "What are the two largest x values? Give a list.", runtime)
    assert r.answer == [4.0, 3.0] and all(type(v) is float for v in r.answer)


def test_numpy_scalars_inside_lists_and_dicts_print_as_numbers():
    r = run("final_answer({'top': [np.float64(v) for v in df['x'].head(2)], 'n': np.int64(4)})", "Give top and n.")
    assert str(r.answer) == "{'top': [1.5, 2.25], 'n': 4}"


def test_what_no_list_asks_for_keeps_its_type():
    assert type(run("final_answer(df['x'].values)", "Compute the x array.").answer) is np.ndarray
    counts = run("final_answer(df['city'].value_counts())", "Which cities appear? Give a list.").answer
    assert isinstance(counts, pd.Series)  # labelled by text: which side is asked is the contract's question
    frame = run("final_answer(df.head(2))", "List the first two rows.").answer
    assert isinstance(frame, pd.DataFrame)


def test_a_task_with_checks_gets_the_object_its_checks_passed():
    r = run("final_answer(df['x'].values)", "List the x values.", checks={"answer": {"type": "ndarray"}})
    assert r.status == "success" and type(r.answer) is np.ndarray


def test_plain_answer_edge_cases():
    assert plain_answer((np.int64(1), np.float32(0.5))) == (1, 0.5)
    assert plain_answer(pd.Index(["x", "y"]), "list") == ["x", "y"]
    assert plain_answer(pd.array([1, None], dtype="Int64"), "list")[0] == 1
    assert type(plain_answer(pd.MultiIndex.from_tuples([(1, 2)]), "list")).__name__ == "MultiIndex"
    assert plain_answer(np.array([[1, 2]]), "list").shape == (1, 2)  # not one-dimensional: left alone
    assert plain_answer(np.bool_(True)) is True and plain_answer(None) is None and plain_answer("a", "list") == "a"
