"""BFCL on bfcl-eval's own checkers: gold replays score 100% for both agents, wrong calls score 0.

Needs the [bench] extra (bfcl-eval); skipped with the reason when it is not installed.
"""

from __future__ import annotations

import copy
import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (the [bench] extra: scripts/install.sh bench)")

from cave.benchmarks.bfcl import gold_calls, gold_replies, load_category, replies_for, run_entry  # noqa: E402
from cave.benchmarks.bfcl.score import score  # noqa: E402
from cave.benchmarks.bfcl.stubs import Recorder, make_stub, py_name  # noqa: E402
from cave.benchmarks.rewards import reward  # noqa: E402

from cave.llm.base import Completion, Scripted, Usage  # noqa: E402

SINGLE = ["simple", "multiple", "parallel", "parallel_multiple", "irrelevance"]
SAMPLE = 6  # entries per category: the first ones plus a spread, kept small for run time


def sample(category: str) -> list:
    entries = load_category(category)
    picks = sorted({*range(3), *range(0, len(entries), max(1, len(entries) // (SAMPLE - 3)))})[:SAMPLE]
    return [entries[i] for i in picks]


@pytest.mark.parametrize("agent", ["code", "json"])
@pytest.mark.parametrize("category", SINGLE + ["multi_turn_base", "multi_turn_miss_func"])
def test_gold_calls_score_100_percent(category: str, agent: str) -> None:
    for entry in sample(category):
        result = run_entry(entry, agent, Scripted(gold_replies(entry, agent)))
        assert result.valid, (entry.id, result.error, result.calls)
        assert result.trajectory.status in ("success", "no_code")
        assert result.trajectory.usage.prompt_tokens > 0  # usage is recorded per step for both agents


def _wrong(entry) -> list:
    """Deliberately wrong calls: a changed argument value (single-turn), any call (irrelevance),
    the last call of every turn left out (multi-turn)."""
    if entry.category == "irrelevance":
        doc = entry.functions[0]
        fill = {"integer": 7, "float": 7.5, "string": "x", "boolean": True, "array": ["x"], "dict": {"k": "v"}}
        props = doc["parameters"]["properties"]
        args = {p: fill.get(props[p]["type"], "x") for p in doc["parameters"].get("required", [])}
        return [[{"name": doc["name"], "arguments": args}]]
    if entry.multi_turn:
        return [turn[:-1] for turn in gold_calls(entry)]
    calls = copy.deepcopy(gold_calls(entry))
    args = calls[0]["arguments"]
    key = next(iter(args))
    v = args[key]
    args[key] = (
        (not v)
        if isinstance(v, bool)
        else v + 1000
        if isinstance(v, (int, float))
        else ["zz-wrong"]
        if isinstance(v, list)
        else "zz-wrong"
    )
    return [calls]


@pytest.mark.parametrize("agent", ["code", "json"])
@pytest.mark.parametrize("category", SINGLE + ["multi_turn_base"])
def test_wrong_calls_score_0(category: str, agent: str) -> None:
    for entry in sample(category)[:3]:
        turns = _wrong(entry)
        result = run_entry(entry, agent, Scripted(replies_for(turns, agent)))
        assert not result.valid, (entry.id, result.calls)
        assert result.error


class NativeScripted(Scripted):
    supports_tools = True


def test_json_agent_native_tool_calls_score_100_percent() -> None:
    for category in ["parallel_multiple", "multi_turn_base"]:
        for entry in sample(category)[:3]:
            gold = gold_calls(entry)
            replies = []
            for turn in gold if entry.multi_turn else [gold]:
                calls = [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {
                            "name": c["name"].replace(".", "_"),
                            "arguments": __import__("json").dumps(c["arguments"]),
                        },
                    }
                    for i, c in enumerate(turn)
                ]
                replies += [
                    Completion("", usage=Usage(5, 5, 10), tool_calls=calls),
                    Completion("Done.", usage=Usage(5, 1, 6)),
                ]
            result = run_entry(entry, "json", NativeScripted(replies))
            assert result.valid, (entry.id, result.error)
            assert result.trajectory.steps[0].meta["format"] == "native"


def test_stubs_keep_positional_and_keyword_arguments() -> None:
    entry = load_category("simple", ids=["simple_python_0"])[0]
    rec = Recorder()
    stub = make_stub(entry.functions[0], rec)  # calculate_triangle_area(base, height, unit=None)
    stub(10, height=5)
    with pytest.raises(TypeError, match="calculate_triangle_area"):
        stub(1, 2, 3, 4)  # too many arguments fail like a real function, and are not recorded
    assert rec.calls == [{"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}]
    assert score(entry, rec.calls)["valid"]


def test_positional_gold_calls_are_named_by_the_schema() -> None:
    # multi_turn_base_0 has the gold call "sort('final_report.pdf')" (positional).
    entry = load_category("multi_turn_base", ids=["multi_turn_base_0"])[0]
    assert any(
        c == {"name": "sort", "arguments": {"file_name": "final_report.pdf"}} for t in gold_calls(entry) for c in t
    )
    result = run_entry(entry, "code", Scripted(gold_replies(entry, "code")))
    assert result.valid


def test_scoring_one_entry_twice_starts_from_fresh_backends() -> None:
    # The checker caches backend instances by name; unique ids keep two scorings apart.
    entry = load_category("multi_turn_base", ids=["multi_turn_base_1"])[0]
    turns = [[[c] for c in t] for t in gold_calls(entry)]
    assert score(entry, turns)["valid"]
    assert score(entry, turns)["valid"]


def test_bfcl_reward_rescores_a_stored_trajectory() -> None:
    entry = sample("parallel")[1]
    result = run_entry(entry, "code", Scripted(gold_replies(entry, "code")))
    assert reward(result.trajectory) == 1.0
    bad = run_entry(entry, "code", Scripted(replies_for(_wrong(entry), "code")))
    assert reward(bad.trajectory) == 0.0


def test_cli_bfcl_runs_and_writes_results(tmp_path) -> None:
    from cave.benchmarks.cli import bench_main

    out = tmp_path / "bfcl"
    argv = [
        "bfcl",
        "--model",
        "scripted",
        "--model-option",
        'replies=["No function fits."]',
        "--model-option",
        "repeat_last=true",
    ]
    assert (
        bench_main(
            [
                *argv,
                "--agent",
                "code,json",
                "--categories",
                "simple,irrelevance",
                "--limit",
                "2",
                "--out",
                str(out),
                "-q",
            ]
        )
        == 0
    )
    import json

    rows = [json.loads(line) for line in (out / "entries.jsonl").read_text().splitlines()]
    assert len(rows) == 8
    # A model that never calls anything passes irrelevance and fails simple.
    assert all(r["valid"] == (r["category"] == "irrelevance") for r in rows)
    assert json.loads((out / "summary.json").read_text())["overall"] == {"code": 0.5, "json": 0.5}


def test_code_agent_prompt_describes_every_function() -> None:
    entry = load_category("multi_turn_base", ids=["multi_turn_base_0"])[0]  # file system + twitter: ~30 functions
    llm = Scripted(gold_replies(entry, "code"))
    run_entry(entry, "code", llm)
    system = llm.calls[0][0]["content"]
    assert "more names not shown" not in system
    missing = [f["name"] for f in entry.functions if f"- {f['name']}(" not in system]
    assert not missing


def test_code_agent_options_reach_the_agent() -> None:
    # `cave bench bfcl --agent-option 'response_prefix=```python\n'`: every call of the code agent starts in a block
    entry = load_category("simple", 1)[0]
    reply = gold_replies(entry, "code")[0]
    llm = Scripted([reply[reply.index("```python\n") :]])  # code only: the reply starts with the prefix
    result = run_entry(entry, "code", llm, agent_options={"response_prefix": "```python\n"})
    assert result.valid and llm.prefixes == ["```python\n"]


def test_a_model_that_describes_the_call_in_prose_is_sent_back_and_then_calls() -> None:
    entry = load_category("simple", 1)[0]
    name = py_name(entry.functions[0]["name"])
    llm = Scripted([f"I call `{name}` with the given arguments; it returns the area.", *gold_replies(entry, "code")])
    result = run_entry(entry, "code", llm, single_turn_steps=2)
    assert result.valid and len(result.trajectory.steps) == 2
    assert "was not called" in result.trajectory.steps[0].observation


def test_single_turn_is_one_shot_by_default() -> None:
    # As BFCL scores it and as the JSON baseline answers: the first reply is the answer, calls or not.
    entry = load_category("simple", 1)[0]
    name = py_name(entry.functions[0]["name"])
    llm = Scripted([f"I call `{name}` with the given arguments; it returns the area.", *gold_replies(entry, "code")])
    result = run_entry(entry, "code", llm)
    assert not result.valid and len(result.trajectory.steps) == 1 and len(llm.calls) == 1


def test_a_failed_cell_is_scored_on_the_calls_it_wrote() -> None:
    # irrelevance: the model calls the unrelated function with a variable it never defined. The call never ran,
    # but the reply made it (BFCL's AST checker reads it from the text): wrong, not "no call, so right".
    entry = load_category("irrelevance", 1)[0]
    name = py_name(entry.functions[0]["name"])
    result = run_entry(entry, "code", Scripted([f"```python\n{name}(undefined_value)\nfinal_answer('done')\n```"]))
    assert not result.valid
    assert [c["name"] for c in result.calls] == [entry.functions[0]["name"]]
    assert list(result.calls[0]["arguments"].values()) == ["undefined_value"]
    # ... and the same reply without the call, right
    ok = run_entry(entry, "code", Scripted(["```python\nprint(undefined_value)\n```"]))
    assert ok.valid and ok.calls == []
