"""Running the search questions: the code team (router -> search / answer) and the JSON function-calling baseline.

- ``code``: the team of ``team.yaml`` on the given model; the search role's code calls ``search(query, k)`` and gets
  live ``Hit`` objects; the answer is the object the answer role passed to final_answer.
- ``json``: one JSON function-calling agent with a ``search`` tool whose results (dicts) come back into its
  context; its answer is its final text.

Both are scored by exact match after normalization (``cave.training.rewards.exact_match_score``) with token F1 as
a metric. ``aevaluate`` is the evaluator the trainer can call on a (trained) model: rows per question, then
``scores`` for EM/F1 per hop count.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cave.benchmarks.json_agent import JsonAgent, ToolSpec
from cave.benchmarks.search.corpus import make_corpus
from cave.benchmarks.search.index import search_json
from cave.training.rewards import exact_match_score, f1_score

from cave.llm.base import LLM
from cave.trajectory import Trajectory

TEAM_FILE = Path(__file__).with_name("team.yaml")
JSON_INSTRUCTIONS = (
    "Answer the question about a made-up encyclopedia: look facts up with the search tool (you know none of them), "
    "then reply with the shortest exact answer only (a name, a year or a place), no sentence."
)
SEARCH_SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "a short query with the names you look for"},
        "k": {"type": "integer", "description": "how many passages (default 5)"},
    },
    "required": ["query"],
}


@dataclass
class SearchResult:
    question: Mapping[str, Any]
    agent: str
    answer: Any
    trajectory: Trajectory
    duration: float
    error: str | None = None

    @property
    def em(self) -> float:
        return exact_match_score(self.answer, self.question["answer"])

    @property
    def f1(self) -> float:
        return f1_score(self.answer, self.question["answer"])

    def record(self) -> dict[str, Any]:
        t, u = self.trajectory, self.trajectory.usage
        return {
            "suite": "search",
            "id": self.question["id"],
            "hops": self.question["hops"],
            "agent": self.agent,
            "success": self.em == 1.0,
            "reward": self.em,
            "f1": round(self.f1, 4),
            "status": "error" if self.error else t.status,
            "steps": len(t.steps),
            "searches": sum(1 for r in t.meta.get("routes", []) if r["role"] == "search"),
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            "total_tokens": u.total_tokens,
            "answer": repr(self.answer)[:200],
            "expected": self.question["answer"],
            "error": self.error,
            "duration": round(self.duration, 3),
        }


def questions(split: str = "test", hops: Iterable[int] = (1, 2), limit: int | None = None, seed: int = 0) -> list:
    """``limit`` questions of each hop count from ``split`` of the encyclopedia of ``seed``, in a fixed order."""
    corpus = make_corpus(seed)
    return [q for h in hops for q in corpus.questions(split, h)[:limit]]


def search_team(llm: LLM, runtime: str | None = None) -> Any:
    """The search team of ``team.yaml`` on ``llm``, its code running in ``runtime`` (default: the harness's)."""
    from cave.benchmarks.runtime import default_runtime

    from cave.team import Team

    team = Team.from_file(TEAM_FILE, backends={"default": llm})
    team.spec.runtime.kind = runtime or default_runtime()
    return team


async def run_code(team: Any, q: Mapping[str, Any], seed: int = 0) -> SearchResult:
    t0 = time.perf_counter()
    result = await team.arun(q["question"], seed=seed)
    error = result.trajectory.error if result.status == "error" else None
    return SearchResult(q, "code", result.answer, result.trajectory, time.perf_counter() - t0, error)


async def run_json(llm: LLM, q: Mapping[str, Any], *, max_steps: int = 5, native: bool | None = None) -> SearchResult:
    tool = ToolSpec("search", "Search the encyclopedia: the k passages that best match the query (BM25).", SEARCH_SCHEMA,
                    fn=search_json)  # fmt: skip
    t0 = time.perf_counter()
    result = await JsonAgent(llm, [tool], instructions=JSON_INSTRUCTIONS, max_steps=max_steps, native=native).arun(
        q["question"]
    )
    error = result.trajectory.error if result.trajectory.status == "error" else None
    return SearchResult(q, "json", result.answer, result.trajectory, time.perf_counter() - t0, error)


async def aevaluate(
    agent: str,
    llm: LLM,
    qs: list[Mapping[str, Any]],
    *,
    runtime: str | None = None,
    native: bool | None = None,
    on_result: Callable[[SearchResult], None] | None = None,
) -> list[SearchResult]:
    """Run ``agent`` ("code" or "json") on every question, one at a time; ``scores(results)`` sums them up."""
    if agent not in ("code", "json"):
        raise ValueError(f"unknown agent {agent!r}: use 'code' or 'json'")
    team = search_team(llm, runtime) if agent == "code" else None
    out = []
    for q in qs:
        try:
            r = await (run_code(team, q) if team is not None else run_json(llm, q, native=native))
        except Exception as e:  # a backend that died: reported as an error row, not a wrong answer
            r = SearchResult(q, agent, None, Trajectory(task=q["question"]), 0.0, f"{type(e).__name__}: {e}")
        r.trajectory.reward = r.em
        r.trajectory.meta.update({"suite": "search", "search": {"id": q["id"], "answer": q["answer"]}})
        out.append(r)
        if on_result is not None:
            on_result(r)
    return out


def evaluate(agent: str, llm: LLM, qs: list[Mapping[str, Any]], **kwargs: Any) -> list[SearchResult]:
    return asyncio.run(aevaluate(agent, llm, qs, **kwargs))


def scores(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """EM, F1, mean seconds and prompt tokens per "agent/hops", from ``SearchResult.record()`` rows.

    >>> scores([{"agent": "code", "hops": 1, "reward": 1.0, "f1": 1.0, "duration": 2, "prompt_tokens": 10}])
    {'code/1-hop': {'n': 1, 'em': 1.0, 'f1': 1.0, 'seconds': 2.0, 'prompt_tokens': 10.0}}
    """
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[f"{r['agent']}/{r['hops']}-hop"].append(r)
    return {
        key: {
            "n": len(rs),
            "em": sum(r["reward"] for r in rs) / len(rs),
            "f1": sum(r["f1"] for r in rs) / len(rs),
            "seconds": sum(r["duration"] for r in rs) / len(rs),
            "prompt_tokens": sum(r["prompt_tokens"] for r in rs) / len(rs),
        }
        for key, rs in groups.items()
    }
