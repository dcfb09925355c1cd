"""perf.agent's real-task mode on a scripted model: rows per task and layout, the session task's turns."""

from __future__ import annotations

import argparse
import asyncio

from cave.benchmarks.perf import agent as perf_agent
from cave.benchmarks.perf.agent import SESSION_TURNS, run_real_task

from cave.llm.base import Scripted

SOLUTIONS = {  # one step per turn: each answer in the form its turn asks (the task's contract is checked)
    "Which region": "final_answer(str(sales.region.iloc[0]))",
    "Make a DataFrame `by_region`": "by_region = sales.groupby('region', as_index=False)['revenue'].sum()"
    ".sort_values('revenue', ascending=False)\nfinal_answer(by_region)",
    "Add a column `share`": "by_region['share'] = by_region.revenue / by_region.revenue.sum()\nfinal_answer(by_region)",
    "Make `monthly`": "monthly = sales.groupby(sales.date.str[:7])['revenue'].sum()\nfinal_answer(monthly)",
    "Which month": "final_answer(str(monthly.idxmin()))",
}


def _answers(messages: list[dict]) -> str:
    asked = [m["content"] for m in messages if m["role"] == "user"][-1]
    code = next((c for k, c in SOLUTIONS.items() if k in asked), "final_answer(int(len(sales)))")
    return f"```python\n{code}\n```"


def test_session_task_runs_every_turn_in_one_session() -> None:
    llm = Scripted(_answers)
    row = asyncio.run(run_real_task("session", llm, max_steps=3, data_size=50))
    assert row.task == "session" and row.status == "success" and row.ok
    assert row.steps == len(SESSION_TURNS) == len(llm.calls)
    # each turn's prompt holds the earlier turns: the conversation only grows
    sizes = [len(messages) for messages in llm.calls]
    assert sizes == sorted(sizes) and sizes[-1] > sizes[0]
    assert row.prompt_tokens > 0


def test_layouts_run_side_by_side(monkeypatch) -> None:
    monkeypatch.setattr(perf_agent, "make_model", lambda spec, n_ctx: Scripted(_answers))
    args = argparse.Namespace(
        model="scripted", tasks="session", layouts="stable,rerender", max_steps=2, data_size=20, n_ctx=4096,
        baseline=None, forced=True,
    )  # fmt: skip
    rows = perf_agent.run_real(args)
    assert [(r.task, r.layout) for r in rows] == [
        ("session", "stable"),
        ("session", "rerender"),
        ("session", "stable/forced"),
        ("session", "rerender/forced"),
    ]
    assert rows[0].wall_ratio is not None and rows[0].baseline_wall_s == rows[1].wall_s
    assert rows[2].wall_ratio is not None and rows[2].baseline_wall_s == rows[3].wall_s
    assert rows[2].status == rows[3].status == "success" and rows[2].steps == rows[3].steps == len(SESSION_TURNS)


def test_forced_replies_replay_a_run_and_read_each_prompt() -> None:
    # the wrapped model reads every prompt (one token), the reply is the recorded one, whatever the model says
    model = Scripted(lambda messages: "something else")
    replies: list[str] = []
    first = asyncio.run(run_real_task("session", Scripted(_answers), 3, 30, replies))
    forced = perf_agent.ForcedReplies(model, replies)
    again = asyncio.run(run_real_task("session", forced, 3, 30))
    assert (again.status, again.steps) == (first.status, first.steps) == ("success", len(SESSION_TURNS))
    assert len(model.calls) == len(SESSION_TURNS) and forced.replies == []
