"""Running an agent on DataBench questions: the dataset's table as ``df``, the answer read as the competition reads
a response (``str(answer)``), scored by its rule.

The code agent gets ``df`` injected and calls ``final_answer(value)``; the JSON baseline gets the rows through
``get_rows`` (``cave.benchmarks.analyst.run``) and answers in text. Both are told the answer's type, as the
organizers' baseline prompt is (its function signature names it).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cave.benchmarks.analyst.run import Inputs, outcome, run_agent, usage_fields
from cave.benchmarks.databench.data import Question, table
from cave.benchmarks.databench.score import compare, response_text

from cave.llm.base import LLM, Scripted
from cave.trajectory import Trajectory

ANSWER_TYPES = {
    "boolean": "True or False",
    "category": "one value, written as the table writes it (a name, a word or a date)",
    "number": "one number",
    "list[category]": "a Python list of values, written as the table writes them",
    "list[number]": "a Python list of numbers",
}
CODE_INSTRUCTIONS = "Answer the question from the table given to you as `df`. Pass the answer to final_answer."
JSON_INSTRUCTIONS = "Answer the question from the table, which you get through the tools. Reply with the answer only."


def prompt(q: Question, agent: str) -> str:
    """The task text: the question, the type of the answer, and how to hand it over."""
    # no `final_answer(...)` in the text: a task that spells out its call is read as naming its own form, and the
    # review would not read the kind of answer the question asks for (a list, a number, yes or no)
    how = "Pass it to final_answer." if agent == "code" else "Reply with the answer alone."
    return f"{q.question}\n\nThe answer is {ANSWER_TYPES[q.type]}. {how}"


@dataclass
class DataBenchResult:
    question: Question
    agent: str
    model: str
    correct: bool
    trajectory: Trajectory
    response: str = ""
    duration: float = 0.0

    def record(self) -> dict[str, Any]:
        status = self.trajectory.status
        return {
            "suite": "databench",
            "id": self.question.index,
            "category": self.question.type,  # what the per-entry progress line shows
            "dataset": self.question.dataset,
            "agent": self.agent,
            "model": self.model,
            "success": self.correct,
            "false_success": status == "success" and not self.correct,
            **usage_fields(self.trajectory),
            "response": self.response[:500],
            "truth": self.question.answer,
            "error": self.trajectory.error,
            "duration": round(self.duration, 3),
        }


async def arun_question(
    q: Question, data: str | Path, agent: str, llm: LLM, *, model: str = "", lite: bool = False, **kwargs: Any
) -> DataBenchResult:
    try:
        frame = table(data, q.dataset, lite=lite)
    except FileNotFoundError as e:  # an incomplete copy of the data: this question is an error, the run goes on
        traj = Trajectory(task=prompt(q, agent), status="error")
        traj.error = f"{e}: copy it into the data folder, then run again with --resume"
        return DataBenchResult(q, agent, model, False, traj)
    inputs = Inputs({"df": frame}, {"df": f"the table of dataset {q.dataset}"})
    t0 = time.perf_counter()
    answer, traj = await run_agent(
        agent, prompt(q, agent), inputs, llm, code_instructions=CODE_INSTRUCTIONS,
        json_instructions=JSON_INSTRUCTIONS, **kwargs,
    )  # fmt: skip
    # a run that reached no answer has none to score (its text is a summary, not a response)
    text = response_text(answer) if traj.called_final_answer or agent != "code" else ""
    truth = q.sample_answer if lite and q.sample_answer is not None else q.answer
    correct = bool(text) and compare(text, truth, q.type)
    traj.reward = 1.0 if correct else 0.0
    traj.meta.update({"suite": "databench", "agent": agent, "databench": {"id": q.index, "dataset": q.dataset}})
    return DataBenchResult(q, agent, model, correct, traj, text, time.perf_counter() - t0)


def run_question(q: Question, data: str | Path, agent: str, llm: LLM, **kwargs: Any) -> DataBenchResult:
    return asyncio.run(arun_question(q, data, agent, llm, **kwargs))


def answer_policy(code: str) -> Scripted:
    """A Scripted code agent that runs ``code`` (ending in final_answer) for each question (tests, the wiring)."""
    return Scripted([f"```python\n{code}\n```"], repeat_last=True)


def databench_report(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (model, agent): ``outcome`` (accuracy by the competition's rule), and accuracy by answer type."""
    out = []
    for model, agent in dict.fromkeys((r["model"], r["agent"]) for r in rows):
        group = [r for r in rows if r["model"] == model and r["agent"] == agent and r.get("status") != "error"]
        by_type = {t: outcome([r for r in group if r["category"] == t])["correct"]
                   for t in dict.fromkeys(r["category"] for r in group)}  # fmt: skip
        out.append({"model": model, "agent": agent, **outcome(group), "by_type": by_type})
    return out
