"""DataBench (SemEval-2025 Task 8) through ``cave bench databench``: the competition's compare rule, the data folder,
and real runs of the code agent (scripted replies, a real in-process runtime) scored on ``str(answer)``."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from cave.benchmarks.cli import bench_main
from cave.benchmarks.databench.data import DataLayoutError, load_questions, qa_file
from cave.benchmarks.databench.run import answer_policy, prompt, run_question
from cave.benchmarks.databench.score import compare, response_text

from cave.llm.base import Scripted

QA = [  # (question, answer, type, dataset, sample_answer)
    ("Is there a product priced above 10?", "True", "boolean", "001_Shop", "True"),
    ("Which city has the most orders?", "Lima", "category", "001_Shop", "Lima"),
    ("What is the mean price?", "6.5", "number", "001_Shop", "5.0"),
    ("List the distinct cities.", "['Lima', 'Oslo', 'Pune']", "list[category]", "001_Shop", "['Lima', 'Oslo']"),
    ("What are the two highest prices?", "[12.0, 8.0]", "list[number]", "001_Shop", "[8.0, 2.0]"),
]


@pytest.fixture
def data(tmp_path):
    shop = pd.DataFrame({"city": ["Lima", "Oslo", "Lima", "Pune"], "price": [2.0, 8.0, 4.0, 12.0]})
    (tmp_path / "001_Shop").mkdir()
    shop.to_parquet(tmp_path / "001_Shop" / "all.parquet")
    shop.head(2).to_parquet(tmp_path / "001_Shop" / "sample.parquet")
    qa = pd.DataFrame(QA, columns=["question", "answer", "type", "dataset", "sample_answer"])
    qa.to_parquet(tmp_path / "qa.parquet")
    return tmp_path


def test_the_rule_reads_responses_as_the_competition_does():
    assert compare("3.149", "3.14", "number") and not compare("3.15", "3.14", "number")  # truncated to 2 places
    assert compare("yes", "True", "boolean") and not compare("False", "True", "boolean")
    assert compare("['b', 'a']", "['a', 'b']", "list[category]")
    assert not compare("['a' 'b']", "['a', 'b']", "list[category]")  # numpy's text of an array has no commas
    assert not compare("[np.float64(1.5)]", "[1.5]", "list[number]")  # numpy 2's repr inside a list
    assert compare("None", "nan", "category") and not compare("", "x", "category")
    assert response_text(pd.Series([1, 2]).tolist()) == "[1, 2]"
    with pytest.raises(ValueError, match="not one of the competition's"):
        compare("1", "1", "integer")


def test_data_folder_layout_sampling_and_errors(data, tmp_path_factory):
    assert qa_file(data).name == "qa.parquet"
    assert [q.type for q in load_questions(data)] == [t for _, _, t, _, _ in QA]
    assert [q.index for q in load_questions(data, limit=2, seed=0)] == sorted(
        q.index for q in load_questions(data, limit=2, seed=0)
    )
    assert [q.type for q in load_questions(data, types=["number"])] == ["number"]
    empty = tmp_path_factory.mktemp("empty")
    with pytest.raises(DataLayoutError, match="no QA table"):
        qa_file(empty)
    assert "one number" in prompt(load_questions(data, types=["number"])[0], "code")


@pytest.mark.parametrize(
    "code, right",
    [
        ("final_answer(bool((df['price'] > 10).any()))", [True, False, False, False, False]),
        ("final_answer(df['city'].value_counts().idxmax())", [False, True, False, False, False]),
        ("final_answer(df['price'].mean())", [False, False, True, False, False]),
        # pandas 3's .unique() of text is an ArrowStringArray: handed back as a list, its text has the items
        ("final_answer(df['city'].unique())", [False, False, False, True, False]),
        ("final_answer(df['price'].nlargest(2).values)", [False, False, False, False, True]),
    ],
)
def test_the_code_agent_is_scored_on_the_text_of_its_answer(data, code, right):
    got = [
        run_question(q, data, "code", answer_policy(code), runtime="inprocess").correct for q in load_questions(data)
    ]
    assert got == right


def test_lite_reads_the_sample_table_and_its_answers(data):
    q = load_questions(data, types=["number"])[0]
    r = run_question(q, data, "code", answer_policy("final_answer(df['price'].mean())"), runtime="inprocess", lite=True)
    assert r.correct and r.record()["response"] == "5.0"


def test_cli_runs_reports_and_resumes(data, tmp_path, monkeypatch, capsys):
    import cave.benchmarks.suite as suite

    monkeypatch.setenv("COLUMNS", "200")
    llm = Scripted(["```python\nfinal_answer(df['price'].mean())\n```"], repeat_last=True)
    monkeypatch.setattr(suite, "make_llm", lambda *a, **k: llm)
    out = tmp_path / "out"
    argv = ["databench", "--data", str(data), "--runtime", "inprocess", "--verify", "0", "--out", str(out), "-q"]
    assert bench_main([*argv, "--types", "number,boolean"]) == 0
    rows = [json.loads(line) for line in (out / "entries.jsonl").read_text().splitlines()]
    assert [(r["category"], r["success"]) for r in rows] == [("boolean", False), ("number", True)]
    assert json.loads((out / "summary.json").read_text())["databench"][0]["by_type"] == {"boolean": 0.0, "number": 1.0}
    assert "DataBench (2 questions" in capsys.readouterr().out
    calls = len(llm.calls)
    assert bench_main([*argv, "--resume"]) == 0
    asked = " ".join(str(m.get("content")) for call in llm.calls[calls:] for m in call)
    assert "mean price" not in asked and "priced above 10" not in asked  # the finished questions are not run again
    assert all(q in asked for q in ("Which city", "distinct cities", "two highest prices"))
    ids = sorted(json.loads(line)["id"] for line in (out / "entries.jsonl").read_text().splitlines())
    assert ids == [0, 1, 2, 3, 4]


def test_cli_rejects_a_wrong_data_folder_and_types(tmp_path, data):
    with pytest.raises(SystemExit):
        bench_main(["databench", "--data", str(tmp_path / "nowhere")])
    with pytest.raises(SystemExit, match="--types"):
        bench_main(["databench", "--data", str(data), "--types", "integer", "--out", str(tmp_path / "o")])


def test_a_missing_table_is_an_error_and_the_run_goes_on(data):
    (data / "001_Shop" / "all.parquet").unlink()
    r = run_question(load_questions(data)[0], data, "code", answer_policy("final_answer(1)"), runtime="inprocess")
    assert r.trajectory.status == "error" and "001_Shop" in r.trajectory.error and "--resume" in r.trajectory.error
