"""The search setting: corpus, index, reward, the team's routes (scripted) and one real-model episode."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import pytest
from cave.benchmarks.search.corpus import make_corpus, split_of
from cave.benchmarks.search.index import Hit, build_index, fts_query, open_index, search
from cave.benchmarks.search.run import questions, run_code, run_json, scores, search_team
from cave.training.rewards import REWARDS, exact_match_score, f1_score, normalize_answer

from cave.llm.base import Scripted

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CAVE_HOME", str(tmp_path_factory.getbasetemp() / "cave-home"))


def test_generator_is_deterministic_and_splits_are_disjoint():
    a, b = make_corpus(0), make_corpus.__wrapped__(0)  # a fresh build, not the cached object
    assert a.passages == b.passages and a.qa == b.qa
    assert make_corpus.__wrapped__(1).passages != a.passages
    assert 2000 < len(a.passages) < 5000
    train, test = a.questions("train"), a.questions("test")
    assert {q["id"] for q in train}.isdisjoint({q["id"] for q in test})
    assert {q["question"] for q in train}.isdisjoint({q["question"] for q in test})
    assert len(train) + len(test) == len(a.qa) and all(split_of(q["id"]) == q["split"] for q in a.qa)
    assert {q["hops"] for q in test} == {1, 2}


def test_index_build_and_search_on_the_real_corpus(tmp_path):
    t0 = time.perf_counter()
    path = build_index(tmp_path / "ix.db")
    assert time.perf_counter() - t0 < 10 and path.stat().st_size > 100_000
    hits = search("Who founded Holtem Foundry?")
    assert len(hits) == 5 and all(isinstance(h, Hit) for h in hits)
    assert "The founder of Holtem Foundry was Velilo Shitasnis." in [h.text for h in hits[:3]]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert search("?!") == [] and len(search("Holtem", k=2)) == 2
    assert fts_query('x" OR y') == '"x" OR "or" OR "y"'  # no FTS syntax reaches SQLite
    assert open_index() is open_index()


def test_two_hop_answers_need_two_searches():
    c = make_corpus(0)
    text = {p.text for p in c.passages}
    for q in c.questions("test", 2)[:40]:
        first = search(q["question"], k=10)
        assert not any(q["answer"] in h.text for h in first if h.title in q["question"]), q
        assert any(q["answer"] in t for t in text)


@pytest.mark.parametrize(
    ("answer", "ref", "em"),
    [("The Teman.", "Teman", 1.0), ("teman", "Teman", 1.0), (1785, "1785", 1.0), (["1785"], "1785", 1.0),
     ("an  answer", "Answer", 1.0), ("Teman river", "Teman", 0.0), (None, "x", 0.0), ("", "", 0.0)],
)  # fmt: skip
def test_exact_match_normalization(answer, ref, em):
    assert exact_match_score(answer, ref) == em


def test_f1_and_the_registered_reward():
    assert f1_score("Velilo Shitasnis", "Velilo Shitasnis") == 1.0
    assert f1_score("Velilo", "Velilo Shitasnis") == pytest.approx(2 / 3)
    assert normalize_answer("A, the: AN!") == ""

    class R:
        answer = "the 1785"

    assert REWARDS.get("exact_match")(R(), {"answer": "1785"}) == 1.0
    with pytest.raises(KeyError, match="answer"):
        REWARDS.get("exact_match")(R(), {})


def _two_hop():
    q = next(x for x in questions("test", (2,)) if x["id"].endswith("founder-born"))
    name = re.search(r"founder of (.+) born\?", q["question"]).group(1)
    return q, name


def _episode(replies, q, runtime="inprocess"):
    return asyncio.run(run_code(search_team(Scripted(list(replies)), runtime), q))


ROUTE_SEARCH = '```python\nroute("search", message="look it up")\n```'
ROUTE_ANSWER = '```python\nroute("answer", message="answer now")\n```'


def test_scripted_search_then_search_then_answer():
    q, name = _two_hop()
    second = (
        f'```python\nf = [h for h in search("{name} founder") if "ound" in h.text][0].text\n'
        'who = f.split(" by " if " by " in f else " was ")[-1].rstrip(".")\n'
        'final_answer([h.text for h in search(who) if "born in 1" in h.text or "world in" in h.text][0])\n```'
    )
    r = _episode(
        [ROUTE_SEARCH, f'```python\nfinal_answer(search("{name}")[0].text)\n```', ROUTE_SEARCH, second, ROUTE_ANSWER,
         f'```python\nfinal_answer("{q["answer"]}")\n```'],
        q,
    )  # fmt: skip
    rec = r.record()
    assert rec["success"] and rec["searches"] == 2 and rec["f1"] == 1.0, r.trajectory.meta["calls"]
    assert [s.role for s in r.trajectory.steps] == ["router", "search", "router", "search", "router", "answer"]
    assert all(s.meta["format_ok"] for s in r.trajectory.steps)
    assert q["answer"] in r.trajectory.meta["calls"][3]["answer"]


def test_scripted_direct_answer_and_wrong_answer():
    q, _ = _two_hop()
    r = _episode([ROUTE_ANSWER, '```python\nfinal_answer("1900")\n```'], q)
    assert r.trajectory.meta["routes"] == [{"hop": 1, "role": "answer", "message": "answer now"}]
    assert r.record()["reward"] == 0.0 and r.trajectory.status == "success"


def test_scripted_invalid_route_goes_to_search_and_last_hop_answers():
    q, _ = _two_hop()
    prose = "I think we should search."  # no code: an invalid call, then the pattern's fallback
    found = '```python\nfinal_answer("nothing")\n```'
    r = _episode(
        [prose, found, ROUTE_SEARCH, found, ROUTE_SEARCH, found, ROUTE_SEARCH, '```python\nfinal_answer("x")\n```'], q
    )
    meta = r.trajectory.meta
    assert meta["missing_routes"][0]["hop"] == 1 and meta["missing_routes"][0]["to"] == "search"
    assert [x["role"] for x in meta["routes"]] == ["search", "search", "search", "answer"]  # hop 4 forces answer
    assert r.trajectory.steps[0].meta["format_ok"] is False
    assert r.answer == "x" and r.trajectory.status == "success"


@pytest.mark.parametrize("runtime", ["process", "sandbox"])
def test_search_runs_inside_a_kernel_with_live_hits(runtime):
    from cave.runtimes import sandbox_problems

    if runtime == "sandbox" and sandbox_problems():
        pytest.skip("no sandbox on this machine")
    q, name = _two_hop()
    code = f'```python\nhits = search("{name}")\nfinal_answer(type(hits[0]).__name__ + " " + hits[0].title)\n```'
    r = _episode([ROUTE_SEARCH, code, ROUTE_ANSWER, '```python\nfinal_answer("1")\n```'], q, runtime=runtime)
    assert "missing_routes" not in r.trajectory.meta, r.trajectory.meta["missing_routes"]
    assert r.trajectory.meta["calls"][1]["answer"].startswith("Hit "), r.trajectory.meta["calls"]


def test_json_baseline_scripted():
    q, name = _two_hop()
    import json

    call = json.dumps({"tool_calls": [{"name": "search", "arguments": {"query": name}}]})
    r = asyncio.run(run_json(Scripted([call, q["answer"]]), q, native=False))
    rec = r.record()
    assert rec["success"] and rec["prompt_tokens"] > 0 and "Holtem" in str(r.trajectory.steps[1].messages)
    assert scores([rec])["json/2-hop"]["em"] == 1.0


def test_task_file_and_train_config_validate():
    from cave.training.config import load_config

    from cave.team import load_team_task

    tt = load_team_task(ROOT / "examples" / "search_team" / "team_task.yaml", backends={"default": Scripted([])})
    assert tt.team.role_names == ["router", "search", "answer"]
    cfg = load_config(ROOT / "training" / "configs" / "search_smollm2.yaml")
    assert (
        cfg.reward == "exact_match" and cfg.format_penalty == 0.01 and set(cfg.agents) == {"router", "search", "answer"}
    )
    c = make_corpus(0)
    train = {x["question"]: x["answer"] for x in c.questions("train")}
    assert all(train[p["question"]] == str(p["answer"]) for p in cfg.data.prompts)


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_one_real_episode_on_the_embedded_model():
    from cave.team import make_backend

    try:
        llm = make_backend("local", model="qwen", seed=0)  # the fast 0.5B
    except Exception as e:
        pytest.skip(f"the local backend cannot be created: {type(e).__name__}: {e}")
    try:
        q = questions("test", (1,), 1)[0]
        r = asyncio.run(run_code(search_team(llm, "inprocess"), q))
    finally:
        asyncio.run(llm.aclose())
    t = r.trajectory
    assert t.steps and t.steps[0].role == "router" and t.meta["routes"], (t.status, t.error)
    assert all(s.token_ids for s in t.steps) and all("format_ok" in s.meta for s in t.steps)
    assert 0.0 <= r.record()["f1"] <= 1.0
