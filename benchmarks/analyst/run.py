"""Running the two agents on tasks over tables: the analyst suite's runner (DABench's too).

- ``code`` gets the data injected as live objects: DataFrames by name, and ``db``, a SQLAlchemy engine on a
  SQLite file. Its prompt describes them (columns, dtypes); a task's ``checks`` go to ``Agent(checks=...)``.
- ``json`` gets the data the JSON way: ``get_rows(table)`` returns every row of a table as JSON records,
  ``run_sql(query)`` the rows of a SQLite query (on the database file, or on the frames loaded into an in-memory
  SQLite, so it can aggregate before it reads); the results come back into its context.

An entry's ``success`` is the oracle's verdict on the answer; ``false_success`` is a run that ended with status
``success`` (final_answer called, every check passed) whose answer is wrong: the failure a user cannot see.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from cave.benchmarks.analyst import generate as g
from cave.benchmarks.analyst.compare import describe
from cave.benchmarks.analyst.tasks import TASKS, AnalystTask
from cave.benchmarks.data.run import CODE_INSTRUCTIONS, JSON_INSTRUCTIONS, failure_reason
from cave.benchmarks.json_agent import JsonAgent, ToolSpec, sql_tool
from cave.benchmarks.runtime import code_runtime

from cave.llm.base import LLM, Scripted
from cave.trajectory import Trajectory

DESCRIPTIONS = {
    "customers": "our customers",
    "orders": "every order, 2024-2025 (amount in dollars)",
    "sales": "product sales, first half of 2025",
    "requests": "a week of API requests",
    "signups": "the signups export from the CRM",
    "payments": "payments received",
    "traffic": "daily site traffic and revenue, 2025",
}
DB_DESCRIPTION = "SQLAlchemy engine on the shop's SQLite database (tables customers, orders)"
STATUSES = ("success", "no_code", "max_steps", "failed_checks", "context_overflow", "error")


# -- what one entry is handed ----------------------------------------------------------------------------
@dataclass
class Inputs:
    """The objects of one entry: DataFrames by name, and optionally a SQLite file the agent gets as ``db``."""

    frames: dict[str, pd.DataFrame] = field(default_factory=dict)
    descriptions: dict[str, str] = field(default_factory=dict)
    db_path: Path | None = None
    db_description: str = DB_DESCRIPTION
    db_tables: str = "customers(customer_id, name, city), orders(order_id, customer_id, date, product, region, amount)"
    _dir: Any = None

    @classmethod
    def for_task(cls, task: AnalystTask, seed: int = 0) -> Inputs:
        frames = {name: g.FRAMES[name](seed) for name in task.inputs if name != "db"}
        inputs = cls(frames, {name: DESCRIPTIONS[name] for name in frames})
        if "db" in task.inputs:
            inputs._dir = tempfile.TemporaryDirectory(prefix="cave-analyst-")
            inputs.db_path = g.make_db(seed, Path(inputs._dir.name) / "shop.db")
        return inputs

    def close(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()


async def run_code(question: str, inputs: Inputs, llm: LLM, **setup: Any) -> tuple[Any, Trajectory]:
    """The code agent on ``question`` with ``inputs`` injected as live objects; ``setup``: ``code_agent``'s
    keyword arguments (``checks``, ``instructions``, ``max_steps``, ``runtime``, ``agent_options``: more ``Agent``
    keyword arguments, e.g. ``review=True`` or ``response_prefix``)."""
    with code_agent(inputs, llm, **setup) as agent:
        result = await agent.arun(question)
    return result.answer, result.trajectory


@contextmanager
def code_agent(
    inputs: Inputs,
    llm: LLM,
    *,
    checks: dict[str, Any] | None = None,
    instructions: str = CODE_INSTRUCTIONS,
    max_steps: int = 6,
    runtime: str | None = None,
    agent_options: dict[str, Any] | None = None,
) -> Iterator[Any]:
    """The code agent with ``inputs`` injected as live objects in a fresh runtime of kind ``runtime`` (the tables
    by name, ``db`` an engine on the database file); the runtime and the engine are closed on leaving."""
    from cave.agent import Agent

    rt = code_runtime(runtime, timeout=120)
    engine = None
    try:
        for name, frame in inputs.frames.items():
            rt.inject(name, frame, description=inputs.descriptions.get(name))
        if inputs.db_path is not None:
            from sqlalchemy import create_engine

            if hasattr(rt, "expose"):
                rt.expose([str(inputs.db_path.parent)])  # the sandbox shows the kernel the database's folder
            engine = create_engine(f"sqlite:///{inputs.db_path}")
            rt.inject("db", engine, description=inputs.db_description)
        yield Agent(
            model=llm,
            runtime=rt,
            max_steps=max_steps,
            instructions=instructions,
            checks=checks,
            stream=False,
            **(agent_options or {}),
        )
    finally:
        rt.close()
        if engine is not None:
            engine.dispose()


def json_tools(inputs: Inputs) -> tuple[list[ToolSpec], Callable[[], None]]:
    """``get_rows(table)`` over the frames, ``run_sql(query)`` over the database; and what closes them."""
    tools, con = [], None
    if inputs.frames:
        frames = inputs.frames

        def get_rows(table: str) -> list[dict[str, Any]]:
            if table not in frames:
                raise ValueError(f"no table {table!r}; the tables are {', '.join(frames)}")
            return json.loads(frames[table].to_json(orient="records", date_format="iso"))

        listing = "; ".join(
            f"{n} ({inputs.descriptions.get(n, '')}: {', '.join(map(str, f.columns))})" for n, f in frames.items()
        )
        schema = {
            "type": "object",
            "properties": {"table": {"type": "string", "enum": list(frames)}},
            "required": ["table"],
        }
        tools.append(
            ToolSpec("get_rows", f"All rows of a table as JSON records. Tables: {listing}.", schema, fn=get_rows)
        )
    if inputs.db_path is not None or inputs.frames:
        # the database file, or the frames as SQL tables in memory: the baseline can aggregate before reading
        con = sqlite3.connect(inputs.db_path or ":memory:", check_same_thread=False)
        for name, frame in inputs.frames.items():
            frame.to_sql(name, con, index=False)
        where = (
            inputs.db_tables
            if inputs.db_path is not None
            else "; ".join(f"{n}({', '.join(map(str, f.columns))})" for n, f in inputs.frames.items())
        )

        tools.append(sql_tool(con, f"Run a SQLite query on the tables ({where}); returns the rows."))
    return tools, (con.close if con is not None else lambda: None)


async def run_json(
    question: str,
    inputs: Inputs,
    llm: LLM,
    *,
    instructions: str = JSON_INSTRUCTIONS,
    max_steps: int = 6,
    native: bool | None = None,
) -> tuple[Any, Trajectory]:
    """The JSON function-calling baseline on ``question``, the data reachable through tools."""
    tools, close = json_tools(inputs)
    try:
        agent = JsonAgent(llm, tools, instructions=instructions, max_steps=max_steps, native=native)
        result = await agent.arun(question)
        return result.answer, result.trajectory
    finally:
        close()


async def run_agent(
    agent: str,
    question: str,
    inputs: Inputs,
    llm: LLM,
    *,
    checks: dict[str, Any] | None = None,
    code_instructions: str = CODE_INSTRUCTIONS,
    json_instructions: str = JSON_INSTRUCTIONS,
    max_steps: int = 6,
    runtime: str | None = None,
    native: bool | None = None,
    agent_options: dict[str, Any] | None = None,
) -> tuple[Any, Trajectory]:
    """One run of ``agent`` (``code`` or ``json``). A task's checks bind the code agent only: the JSON agent's
    answer is text, which has no type or columns to check."""
    if agent == "code":
        return await run_code(
            question,
            inputs,
            llm,
            checks=checks,
            instructions=code_instructions,
            max_steps=max_steps,
            runtime=runtime,
            agent_options=agent_options,
        )
    if agent == "json":
        return await run_json(question, inputs, llm, instructions=json_instructions, max_steps=max_steps, native=native)
    raise ValueError(f"unknown agent {agent!r}: use 'code' or 'json'")


# -- one task ----------------------------------------------------------------------------------------------
@dataclass
class AnalystResult:
    task: AnalystTask
    agent: str
    model: str
    seed: int
    correct: bool
    trajectory: Trajectory
    answer: Any = None
    reference: Any = None
    duration: float = 0.0
    reason: str | None = None

    @property
    def false_success(self) -> bool:
        return self.trajectory.status == "success" and not self.correct

    def record(self) -> dict[str, Any]:
        return {
            "suite": "analyst",
            "id": self.task.id,
            "category": self.task.category,
            "kind": self.task.kind,
            "has_checks": self.task.checks is not None,
            "agent": self.agent,
            "model": self.model,
            "seed": self.seed,
            "success": self.correct,
            "false_success": self.false_success,
            **usage_fields(self.trajectory),
            "answer": describe(self.answer),
            "expected": describe(self.reference),
            "error": self.reason,
            "duration": round(self.duration, 3),
        }


def usage_fields(traj: Trajectory) -> dict[str, Any]:
    u = traj.usage
    return {
        "status": traj.status,
        "steps": len(traj.steps),
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.total_tokens,
    }


async def arun_task(
    task: AnalystTask | str, agent: str, llm: LLM, *, seed: int = 0, model: str = "", **kwargs: Any
) -> AnalystResult:
    task = TASKS[task] if isinstance(task, str) else task
    inputs = Inputs.for_task(task, seed)
    t0 = time.perf_counter()
    try:
        answer, traj = await run_agent(agent, task.question, inputs, llm, checks=task.check_specs(seed), **kwargs)
    finally:
        inputs.close()
    reference = task.reference(seed)
    correct = task.check(answer, seed)
    traj.reward = 1.0 if correct else 0.0
    traj.meta.update({"suite": "analyst", "agent": agent, "analyst": {"task": task.id, "seed": seed}})
    window = int(getattr(llm, "context_window", 0) or 0)
    reason = None if correct else failure_reason(traj, answer, reference, traj.status == "context_overflow", window)
    return AnalystResult(task, agent, model, seed, correct, traj, answer, reference, time.perf_counter() - t0, reason)


def run_task(task: AnalystTask | str, agent: str, llm: LLM, **kwargs: Any) -> AnalystResult:
    return asyncio.run(arun_task(task, agent, llm, **kwargs))


def scripted_policy(task: AnalystTask | str, agent: str, *, seed: int = 0) -> Scripted:
    """A Scripted backend playing a correct policy: the task's solution (code), or fetch the data, then
    state the oracle's answer as JSON (json)."""
    task = TASKS[task] if isinstance(task, str) else task
    if agent == "code":  # repeated: the independent attempts that verify the answer solve it the same way
        return Scripted([f"```python\n{task.solution}\n```"], repeat_last=True)
    if "db" in task.inputs:
        call = {"name": "run_sql", "arguments": {"query": "SELECT * FROM orders"}}
    else:
        call = {"name": "get_rows", "arguments": {"table": task.inputs[0]}}
    ref = task.reference(seed)
    answer = ref.to_json(orient="records", date_format="iso") if isinstance(ref, pd.DataFrame) else json.dumps(ref)
    return Scripted([json.dumps({"tool_calls": [call]}), answer], context_window=32_768)


# -- the report ----------------------------------------------------------------------------------------------
def outcome(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What a group of entries did: correct rate, false successes, how runs ended, cost per entry."""
    n = max(1, len(rows))
    statuses = Counter(r["status"] for r in rows)
    return {
        "n": len(rows),
        "correct": sum(bool(r["success"]) for r in rows) / n,
        "false_success": sum(bool(r["false_success"]) for r in rows),
        "statuses": {s: statuses[s] for s in (*STATUSES, *sorted(set(statuses) - set(STATUSES))) if statuses[s]},
        "steps": sum(r["steps"] for r in rows) / n,
        "prompt_tokens": sum(r["prompt_tokens"] for r in rows) / n,
        "seconds": sum(r["duration"] for r in rows) / n,
    }


def analyst_report(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (model, agent): ``outcome`` over every entry, false successes on the tasks that carry checks,
    and the correct rate by category."""
    out = []
    for model, agent in dict.fromkeys((r["model"], r["agent"]) for r in rows):
        group = [r for r in rows if r["model"] == model and r["agent"] == agent]
        checked = [r for r in group if r["has_checks"]]
        cats = dict.fromkeys(r["category"] for r in group)
        out.append(
            {
                "model": model,
                "agent": agent,
                **outcome(group),
                "checked": len(checked),
                "false_success_checked": sum(bool(r["false_success"]) for r in checked),
                "by_category": {c: outcome([r for r in group if r["category"] == c])["correct"] for c in cats},
            }
        )
    return out


def print_outcomes(
    console: Any, title: str, groups: list[dict[str, Any]], extra: dict[str, Callable[[dict[str, Any]], str]]
) -> None:
    """The outcome table: one row per (model, agent), ``extra`` columns (name -> cell) after n."""
    from rich.table import Table

    table = Table(title=title)
    statuses = [s for s in STATUSES if any(s in g["statuses"] for g in groups)]
    statuses += sorted({s for g in groups for s in g["statuses"]} - set(statuses))
    for col in ["model", "agent", "n", *extra, "false success", *statuses, "steps", "prompt tok", "s/task"]:
        table.add_column(col, justify="left" if col in ("model", "agent") else "right")
    for gr in groups:
        table.add_row(
            gr["model"],
            gr["agent"],
            str(gr["n"]),
            *(cell(gr) for cell in extra.values()),
            str(gr["false_success"]),
            *(str(gr["statuses"].get(s, 0)) for s in statuses),
            f"{gr['steps']:.1f}",
            f"{gr['prompt_tokens']:,.0f}",
            f"{gr['seconds']:.1f}",
        )
    console.print(table)
