"""Running the two agents on the data-intensive tasks, and the fixed scripted policies.

- ``code`` gets the data injected: ``sales`` / ``logs`` DataFrames, or ``db`` (a sqlite3
  connection to the shop database). Its prompt carries a bounded description of them.
- ``json`` gets the data the JSON way: tools whose results come back into the context
  (``get_rows(dataset)`` returns every row as JSON; ``run_sql(query)`` returns the result rows).

A run that needs more context than the backend has is stopped and reported as a context overflow
(the JSON agent checks before each call; the code agent's prompt is checked after the fact).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cave.benchmarks.data import generate as g
from cave.benchmarks.data.tasks import TASKS, DataTask, check
from cave.benchmarks.json_agent import JsonAgent, ToolSpec, sql_tool
from cave.benchmarks.runtime import code_runtime

from cave.llm.base import LLM, Scripted
from cave.trajectory import ANSWERED, Trajectory

CODE_INSTRUCTIONS = "Answer the question from the data given to you. Pass the answer itself to final_answer."
JSON_INSTRUCTIONS = "Answer the question from the data, which you get through the tools. Give the answer itself."


@dataclass
class DataResult:
    task: str
    size: int
    agent: str
    success: bool
    overflow: bool
    trajectory: Trajectory
    answer: Any = None
    duration: float = 0.0
    reason: str | None = None  # why it failed, in a line (None when it succeeded)

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens of the whole run; for an overflowed JSON run, including the call that did not fit."""
        needed = (self.trajectory.meta.get("overflow") or {}).get("prompt_tokens", 0)
        return self.trajectory.usage.prompt_tokens + needed

    def record(self) -> dict[str, Any]:
        u = self.trajectory.usage
        max_prompt = max([s.usage.prompt_tokens for s in self.trajectory.steps] + [0])
        return {
            "suite": "data",
            "id": self.task,
            "size": self.size,
            "agent": self.agent,
            "success": self.success,
            "overflow": self.overflow,
            "status": self.trajectory.status,
            "steps": len(self.trajectory.steps),
            "prompt_tokens": self.prompt_tokens,
            "max_prompt_tokens": max(max_prompt, (self.trajectory.meta.get("overflow") or {}).get("prompt_tokens", 0)),
            "completion_tokens": u.completion_tokens,
            "total_tokens": u.total_tokens,
            "answer": repr(self.answer)[:200],
            "error": self.reason,
            "duration": round(self.duration, 3),
        }


class Workspace:
    """The data of one (task, size): DataFrames in memory, the shop database in a temporary file."""

    def __init__(self, task: DataTask, n: int, seed: int = 0) -> None:
        self.task, self.n, self.seed = task, n, seed
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self.db_path: Path | None = None
        if task.dataset == "shop":
            self._dir = tempfile.TemporaryDirectory(prefix="cave-data-")
            self.db_path = g.make_db(n, seed, Path(self._dir.name) / "shop.db")

    def frame(self) -> Any:
        return g.sales(self.n, self.seed) if self.task.dataset == "sales" else g.logs(self.n, self.seed)

    def connect(self) -> sqlite3.Connection:
        assert self.db_path is not None
        return sqlite3.connect(self.db_path, check_same_thread=False)  # the agent's cells may run on another thread

    def close(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()


async def run_code(
    task: DataTask, ws: Workspace, llm: LLM, *, max_steps: int = 6, runtime: str | None = None
) -> tuple[Any, Trajectory]:
    from cave.agent import Agent

    runtime = code_runtime(runtime, timeout=120)
    if ws.db_path is not None and hasattr(runtime, "expose"):
        runtime.expose([str(ws.db_path.parent)])  # the sandbox shows the kernel the database's folder
    con = None
    try:
        if task.dataset == "shop":
            con = ws.connect()
            runtime.inject("db", con, description="sqlite3 connection to the shop database (tables customers, orders)")
        else:
            runtime.inject(task.dataset, ws.frame(), description=f"the {task.dataset} data")
        agent = Agent(model=llm, runtime=runtime, max_steps=max_steps, instructions=CODE_INSTRUCTIONS, stream=False)
        result = await agent.arun(task.question)
        return result.answer, result.trajectory
    finally:
        if con is not None:
            con.close()
        runtime.close()


def json_tools(task: DataTask, ws: Workspace) -> tuple[list[ToolSpec], Any]:
    if task.dataset == "shop":
        con = ws.connect()
        desc = "Run a SQL query on the shop database (tables customers(customer_id, name, city), orders(order_id, customer_id, amount, date)); returns the rows."
        return [sql_tool(con, desc)], con
    frame = ws.frame()

    def get_rows(dataset: str) -> list[dict[str, Any]]:
        if dataset != task.dataset:
            raise ValueError(f"no dataset {dataset!r}; the dataset is {task.dataset!r}")
        return frame.to_dict("records")

    schema = {
        "type": "object",
        "properties": {"dataset": {"type": "string", "enum": [task.dataset]}},
        "required": ["dataset"],
    }
    cols = ", ".join(frame.columns)
    return [
        ToolSpec(
            "get_rows", f"All rows of the {task.dataset} data as JSON records (columns: {cols}).", schema, fn=get_rows
        )
    ], None


async def run_json(
    task: DataTask, ws: Workspace, llm: LLM, *, max_steps: int = 6, native: bool | None = None
) -> tuple[Any, Trajectory]:
    tools, con = json_tools(task, ws)
    try:
        agent = JsonAgent(llm, tools, instructions=JSON_INSTRUCTIONS, max_steps=max_steps, native=native)
        result = await agent.arun(task.question)
        return result.answer, result.trajectory
    finally:
        if con is not None:
            con.close()


async def arun_task(
    task: DataTask | str, size: int, agent: str, llm: LLM, *, seed: int = 0, **kwargs: Any
) -> DataResult:
    task = TASKS[task] if isinstance(task, str) else task
    runtime = kwargs.pop("runtime", None)  # the code agent's; the JSON agent's tools run on the host
    ws = Workspace(task, size, seed)
    t0 = time.perf_counter()
    try:
        if agent == "code":
            answer, traj = await run_code(task, ws, llm, runtime=runtime, **kwargs)
        elif agent == "json":
            answer, traj = await run_json(task, ws, llm, **kwargs)
        else:
            raise ValueError(f"unknown agent {agent!r}: use 'code' or 'json'")
    finally:
        ws.close()
    window = int(getattr(llm, "context_window", 0) or 0)
    overflow = traj.status == "context_overflow" or any(window and s.usage.prompt_tokens > window for s in traj.steps)
    reference = task.reference(size, seed)
    success = not overflow and check(answer, reference, task.kind)
    traj.reward = 1.0 if success else 0.0
    traj.meta.update({"suite": "data", "agent": agent, "data": {"task": task.id, "size": size, "seed": seed}})
    reason = None if success else failure_reason(traj, answer, reference, bool(overflow), window)
    return DataResult(task.id, size, agent, success, bool(overflow), traj, answer, time.perf_counter() - t0, reason)


def failure_reason(traj: Trajectory, answer: Any, reference: Any, overflow: bool, window: int) -> str:
    """Why an entry failed, in one line: what a reader of the table needs next to its `x`.

    >>> failure_reason(Trajectory(status="success"), 41, 42, False, 0)
    'wrong answer: got 41, expected 42'
    >>> failure_reason(Trajectory(status="max_steps"), None, 42, False, 0)
    'no answer: the run ended with status max_steps'
    """
    if overflow:
        biggest = max([s.usage.prompt_tokens for s in traj.steps] + [0])
        return f"context overflow: a prompt of {biggest} tokens in a window of {window}"
    if traj.status not in ANSWERED:
        return f"no answer: the run ended with status {traj.status}" + (f" ({traj.error})" if traj.error else "")

    def short(x: Any) -> str:
        text = repr(x)
        return text if len(text) <= 60 else text[:57] + "..."

    return f"wrong answer: got {short(answer)}, expected {short(reference)}"


def run_task(task: DataTask | str, size: int, agent: str, llm: LLM, **kwargs: Any) -> DataResult:
    return asyncio.run(arun_task(task, size, agent, llm, **kwargs))


# -- the fixed scripted policies (for the token table) ----------------------------------------------------
def scripted_policy(
    task: DataTask | str, size: int, agent: str, *, seed: int = 0, context_window: int = 32_768
) -> Scripted:
    """A Scripted backend that plays a fixed, correct policy, so token counts reflect the design only.

    code: one step that computes the answer from the injected data and passes it to final_answer.
    json: fetch the data with the tool (all rows; for the shop, the joined rows), then state the answer.
    """
    task = TASKS[task] if isinstance(task, str) else task
    if agent == "code":
        reply = f"```python\n{task.code}\nfinal_answer(result)\n```"
        return Scripted([reply], context_window=context_window, repeat_last=True)  # and again for each attempt
    if task.dataset == "shop":
        call = {"name": "run_sql", "arguments": {"query": task.json_query}}
    else:
        call = {"name": "get_rows", "arguments": {"dataset": task.dataset}}
    answer = json.dumps(task.reference(size, seed))
    return Scripted([json.dumps({"tool_calls": [call]}), answer], context_window=context_window)


async def token_table(
    sizes: tuple[int, ...] = g.SIZES, tasks: list[str] | None = None, *, context_window: int = 32_768, seed: int = 0
) -> list[DataResult]:
    """Both agents' fixed scripted policies on every (task, size): the context cost of each design."""
    results = []
    for task_id in tasks or list(TASKS):
        for size in sizes:
            for agent in ("code", "json"):
                llm = scripted_policy(task_id, size, agent, seed=seed, context_window=context_window)
                results.append(await arun_task(task_id, size, agent, llm, seed=seed))
    return results
