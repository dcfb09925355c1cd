"""Running an agent on DABench questions: the CSV as ``df``, the answer as ``{name: value}``, the score.

The code agent gets ``df`` injected and calls ``final_answer({name: value, ...})``; the JSON baseline gets the
rows through ``get_rows`` (``cave.benchmarks.analyst.run``, the same runner as the analyst suite) and answers
in text, ``@name[value]`` or a JSON object.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cave.benchmarks.analyst.run import Inputs, outcome, run_agent, usage_fields
from cave.benchmarks.dabench.data import Question, table
from cave.benchmarks.dabench.score import Score, response, score

from cave.llm.base import LLM, Scripted
from cave.trajectory import Trajectory

CODE_INSTRUCTIONS = (
    "Answer the question from the table given to you as `df`. Follow the constraints. "
    "Pass the answers to final_answer as a dict by answer name."
)
JSON_INSTRUCTIONS = (
    "Answer the question from the table, which you get through the tools. Follow the constraints. "
    "Give the answers as @name[value], one per answer name."
)


def prompt(q: Question, agent: str) -> str:
    """The task text: the question, its constraints and format, and how to hand the answer over."""
    names = q.names
    if agent == "code":
        how = (
            "Call final_answer with a dict of the answers: final_answer({"
            + ", ".join(f"{n!r}: ..." for n in names)
            + "})"
        )
    else:
        how = "Reply with the answers as " + " ".join(f"@{n}[value]" for n in names)
    return (
        f"{q.question}\n\nConstraints: {q.constraints}\n\nAnswer format: {q.format}\n\n"
        f"The table is {q.file_name}. {how}"
    )


@dataclass
class DABenchResult:
    question: Question
    agent: str
    model: str
    score: Score
    trajectory: Trajectory
    answer: Any = None
    text: str = ""
    duration: float = 0.0

    def record(self) -> dict[str, Any]:
        s, status = self.score, self.trajectory.status
        return {
            "suite": "dabench",
            "id": self.question.id,
            "level": self.question.level,
            "category": self.question.level,  # what the per-entry progress line shows
            "concepts": list(self.question.concepts),
            "agent": self.agent,
            "model": self.model,
            "success": s.strict,
            "rounded": s.rounded,
            "subs": s.subs,
            "sub_strict": s.sub_strict,
            "sub_rounded": s.sub_rounded,
            "false_success": status == "success" and not s.strict,
            "false_success_rounded": status == "success" and not s.rounded,
            **usage_fields(self.trajectory),
            "response": self.text[:500],
            "labels": dict(self.question.labels),
            "error": self.trajectory.error,
            "duration": round(self.duration, 3),
        }


async def arun_question(
    q: Question, data: str | Path, agent: str, llm: LLM, *, model: str = "", **kwargs: Any
) -> DABenchResult:
    try:
        frame = table(data, q.file_name)
    except FileNotFoundError:  # an incomplete copy of the data: this question is an error, the run goes on
        traj = Trajectory(task=prompt(q, agent), status="error")
        traj.error = (
            f"the table {q.file_name!r} is not in {data}/da-dev-tables: copy it from the repository's "
            "examples/DA-Agent/data/da-dev-tables, then run again with --resume"
        )
        return DABenchResult(q, agent, model, score("", q.labels), traj)
    inputs = Inputs({"df": frame}, {"df": f"the table {q.file_name}"})
    t0 = time.perf_counter()
    answer, traj = await run_agent(
        agent,
        prompt(q, agent),
        inputs,
        llm,
        code_instructions=CODE_INSTRUCTIONS,
        json_instructions=JSON_INSTRUCTIONS,
        **kwargs,
    )
    text = response(answer, q.names)
    s = score(text, q.labels)
    traj.reward = 1.0 if s.strict else 0.0
    traj.meta.update({"suite": "dabench", "agent": agent, "dabench": {"id": q.id}})
    return DABenchResult(q, agent, model, s, traj, answer, text, time.perf_counter() - t0)


def run_question(q: Question, data: str | Path, agent: str, llm: LLM, **kwargs: Any) -> DABenchResult:
    return asyncio.run(arun_question(q, data, agent, llm, **kwargs))


def answer_policy(answers: dict[str, Any], agent: str = "code") -> Scripted:
    """A Scripted backend that answers with ``answers`` (tests, and the wiring check)."""
    if agent == "code":
        return Scripted([f"```python\nfinal_answer({answers!r})\n```"], repeat_last=True)  # again for each attempt
    return Scripted([" ".join(f"@{k}[{v}]" for k, v in answers.items())])


def dabench_report(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (model, agent): strict / rounded accuracy by question, by sub-question, and ``outcome``."""
    out = []
    for model, agent in dict.fromkeys((r["model"], r["agent"]) for r in rows):
        # an entry that ended in an error (a missing table, a dead backend) says nothing about the agent
        group = [r for r in rows if r["model"] == model and r["agent"] == agent and r.get("status") != "error"]
        n, subs = max(1, len(group)), max(1, sum(r["subs"] for r in group))
        out.append(
            {
                "model": model,
                "agent": agent,
                **outcome(group),
                "strict": sum(r["success"] for r in group) / n,
                "rounded": sum(r["rounded"] for r in group) / n,
                "sub_strict": sum(r["sub_strict"] for r in group) / subs,
                "sub_rounded": sum(r["sub_rounded"] for r in group) / subs,
                "false_success_rounded": sum(r["false_success_rounded"] for r in group),
                "by_level": {
                    lv: outcome([r for r in group if r["level"] == lv])["correct"]
                    for lv in dict.fromkeys(r["level"] for r in group)
                },
            }
        )
    return out
