"""Agent-loop overhead: ``python -m cave.benchmarks.perf.agent [--quick] [--out results.jsonl]``;
with ``--model``, real multi-step tasks on a real model (see "Real tasks" below).

What one step of the code-as-action loop costs when the model and the code are free:
the Scripted backend replays short replies (prose + one ```python block), the
in-process runtime runs them against an injected DataFrame, and everything else is
the loop: rendering the system prompt from ``describe()``, streaming the reply,
extracting code, formatting the observation, token accounting, events.

Rows:
- steps/s of one session pinned to one core (target >= 300), next to the cost of the
  parts alone (the same cells through ``runtime.aexecute``, the same replies through
  ``Scripted.complete``), so "loop overhead" is what is left;
- the same with every step committed to the SQLite store;
- 64 concurrent sessions on one event loop (each its own runtime and backend).

Real tasks: ``python -m cave.benchmarks.perf.agent --model local [--tasks sqlite,cleaning,data:...,session]
[--out FILE.json] [--baseline FILE.json]``. Runs the task files examples/sqlite and examples/cleaning
(as ``cave run`` builds their agents) and data-suite tasks (``data:TASK_ID``, the code agent on
generated data), and ``session`` (six follow-up questions in one SDK session on generated sales data: reuse
across turns) on one loaded model (``--model local`` is the default embedded model; ``local:qwen``, ``local:smollm2``,
``openai:URL[@MODEL]``), one after another, and reports per task: steps, prompt tokens, the share of
the prompt tokens of steps 2+ served from the backend's prefix cache (llama.cpp's KV cache, vLLM's
prefix caching: what a prompt layout that only grows at the end buys), wall time, status, and the
ratio of wall time to the same task in ``--baseline`` (the ``--out`` file of an earlier run, e.g. on
the commit before a prompt-layout change).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from cave.runtimes.inprocess import InProcessRuntime

from cave.agent import Agent
from cave.llm.base import LLM, Completion, Scripted, TextDelta, Usage
from cave.store import Store

STEPS_PER_RUN = 20


def replies(n: int) -> list[str]:
    """n - 1 ordinary steps, then final_answer: the shape of a real run."""
    out = [
        f"Step {i}: look at the totals.\n```python\nv{i % 5} = int(sales.units.sum()) + {i}\nprint(v{i % 5})\n```"
        for i in range(n - 1)
    ]
    out.append("Done.\n```python\nfinal_answer(v0)\n```")
    return out


def sales_frame() -> pd.DataFrame:
    return pd.DataFrame({"region": ["N", "S", "E", "W"] * 25, "units": range(100), "price": [1.5] * 100})


def new_agent(n: int, store: Store | None = None) -> Agent:
    runtime = InProcessRuntime()
    runtime.inject("sales", sales_frame(), "one row per order")
    return Agent(model=Scripted(replies(n)), runtime=runtime, max_steps=n + 1, verify=None)  # the loop's own cost


async def one_run(n: int, store: Store | None = None) -> int:
    agent = new_agent(n)
    result = await agent.arun("Compute the totals.", on_event=store.on_event if store else None)
    assert result.status == "success", result.trajectory.error
    agent.runtime.close()
    return len(result.trajectory.steps)


async def parts_only(n: int) -> None:
    """The same cells and the same replies without the loop: the floor the loop adds to."""
    agent = new_agent(n)
    messages = [{"role": "system", "content": "x" * 1200}, {"role": "user", "content": "Compute the totals."}]
    for reply in replies(n)[:-1]:
        await agent.llm.complete(messages)
        await agent.runtime.aexecute(reply.split("```python\n")[1].split("\n```")[0])


@dataclass
class Row:
    name: str
    steps_per_s: float
    ms_per_step: float
    note: str = ""


def measure(label: str, coro_factory: Any, steps: int, repeats: int, note: str = "") -> Row:
    times = []
    for _ in range(repeats + 1):  # the first is a warm-up
        t0 = time.perf_counter()
        asyncio.run(coro_factory())
        times.append(time.perf_counter() - t0)
    best = statistics.median(times[1:])
    return Row(label, steps / best, 1000 * best / steps, note)


def run(quick: bool) -> list[Row]:
    repeats = 5 if quick else 15
    n = STEPS_PER_RUN
    rows = []
    if hasattr(os, "sched_setaffinity"):  # "one core": pin this process (event loop, worker threads)
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})

    rows.append(
        measure("parts only (complete + aexecute)", lambda: parts_only(n), n - 1, repeats, "no loop: the floor")
    )

    async def runs(k: int) -> None:
        for _ in range(k):
            await one_run(n)

    rows.append(measure("1 session, full loop", lambda: runs(5), 5 * n, repeats, "Scripted + InProcessRuntime"))

    with tempfile.TemporaryDirectory() as tmp:
        store = Store(os.path.join(tmp, "cave.db"))

        async def stored(k: int) -> None:
            for _ in range(k):
                await one_run(n, store)

        rows.append(measure("1 session + SQLite store", lambda: stored(3), 3 * n, repeats, "one commit per step"))
        store.close()

    sessions = 64

    async def concurrent() -> None:
        done = await asyncio.gather(*(one_run(n) for _ in range(sessions)))
        assert sum(done) == sessions * n

    rows.append(
        measure(f"{sessions} concurrent sessions, 1 loop", concurrent, sessions * n, max(2, repeats // 3), "aggregate")
    )
    return rows


def print_table(rows: list[Row], quick: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(
        title=f"cave agent loop — {STEPS_PER_RUN}-step runs, medians ({'quick' if quick else 'full'}), one core"
    )
    for col in ("scenario", "steps/s", "ms/step", "note"):
        table.add_column(col, justify="right" if col in ("steps/s", "ms/step") else "left")
    for r in rows:
        table.add_row(r.name, f"{r.steps_per_s:,.0f}", f"{r.ms_per_step:.2f}", r.note)
    console.print(table)
    loop = next(r for r in rows if r.name.startswith("1 session, full"))
    floor = rows[0]
    overhead = loop.ms_per_step - floor.ms_per_step
    verdict = "meets" if loop.steps_per_s >= 300 else "MISSES"
    console.print(
        f"loop overhead per step beyond the parts: {overhead:.2f} ms; {loop.steps_per_s:.0f} steps/s {verdict} the 300 steps/s target"
    )


# -- real tasks on a real model ------------------------------------------------------------------------------
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEFAULT_TASKS = "sqlite,cleaning,data:sales_revenue_by_region,session"


@dataclass
class TaskRow:
    task: str
    status: str
    steps: int
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cached_share_after_step1: float  # cached / prompt tokens over steps 2+ (0 when there is one step)
    wall_s: float
    ok: bool
    baseline_wall_s: float | None = None
    wall_ratio: float | None = None  # wall_s / baseline_wall_s
    baseline_cached_share: float | None = None
    error: str | None = None
    layout: str = "stable"


def make_model(spec: str, n_ctx: int) -> Any:
    """``local`` (embedded Qwen), ``local:NAME_OR_GGUF``, or ``openai:URL[@MODEL]``."""
    from cave.llm import create_backend

    kind, _, rest = spec.partition(":")
    if kind == "local":  # the default embedded model, as `cave run` loads it; local:qwen is the 0.5B
        return create_backend("local", n_ctx=n_ctx, **({"model": rest} if rest else {}))
    if kind == "openai":
        url, _, model = rest.rpartition("@") if "@" in rest else (rest, "", "default")
        return create_backend("openai", base_url=url, model=model, context_window=n_ctx)
    raise SystemExit(f"--model {spec!r}: use local, local:NAME, or openai:URL[@MODEL]")


def task_row(name: str, traj: Any, wall: float, ok: bool, calls: list[Any]) -> TaskRow:
    steps = traj.steps
    later = steps[1:]
    later_prompt = sum(s.usage.prompt_tokens for s in later)
    usage = traj.usage
    return TaskRow(
        task=name,
        status=traj.status,
        steps=len(steps),
        llm_calls=len(calls),
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cached_tokens=usage.cached_tokens,
        cached_share_after_step1=round(sum(s.usage.cached_tokens for s in later) / later_prompt, 4)
        if later_prompt
        else 0.0,
        wall_s=round(wall, 2),
        ok=ok,
        error=traj.error,
    )


class _Counting:
    """Counts the backend calls of a run (an agent's step may make more than one: continuations, reviews) and
    keeps each reply's text, for a forced replay of the same run."""

    def __init__(self, llm: Any, replies: list[str] | None = None) -> None:
        self.llm, self.calls = llm, []
        self.replies = replies if replies is not None else []
        self._stream = llm.stream

        async def stream(messages: Any, **kwargs: Any) -> Any:
            self.calls.append(len(messages))
            async for item in self._stream(messages, **kwargs):
                if isinstance(item, Completion):
                    self.replies.append(item.text)
                yield item

        llm.stream = stream

    def close(self) -> None:
        self.llm.stream = self._stream


class ForcedReplies(LLM):
    """The model reads each prompt (one generated token: the prefill a prompt layout costs) and the reply is the
    recorded one. Two layouts replayed this way see the same replies, run the same code and end the same way:
    they differ only in what the model must read. Decoding is left out (the same replies cost the same)."""

    name = "forced"
    supports_prefix = True

    def __init__(self, llm: Any, replies: list[str]) -> None:
        self.llm, self.replies = llm, list(replies)
        self.context_window = llm.context_window

    def count_tokens(self, text: str) -> int:
        return self.llm.count_tokens(text)

    async def _stream(self, messages: list[dict[str, Any]], request: Any) -> Any:
        read = await self.llm.complete(messages, max_tokens=1, prefix=request.prefix or None)
        text = self.replies.pop(0) if self.replies else ""
        n = self.llm.count_tokens(text) if text else 0
        p = read.usage.prompt_tokens
        yield TextDelta(text)
        yield Completion(text=text, usage=Usage(p, n, p + n, read.usage.cached_tokens), finish_reason="stop")

    async def aclose(self) -> None:
        """The wrapped model stays open: it belongs to the caller."""


# A notebook-style SDK session: one agent, one runtime, follow-up questions that build on earlier answers. What
# it measures is reuse across turns: each turn's prompt holds the earlier turns and the objects they made.
SESSION_TURNS = [
    "How many orders are in `sales`?",
    "Make a DataFrame `by_region` with the total revenue per region, highest first.",
    "Which region has the highest total revenue? Answer with its name.",
    "Add a column `share` to `by_region`: each region's fraction of all revenue.",
    "Make `monthly`, the total revenue per month (YYYY-MM), in month order.",
    "Which month had the lowest revenue? Answer with the month.",
]


async def run_session(llm: Any, max_steps: int | None, data_size: int) -> Any:
    """The turns of SESSION_TURNS on one agent; returns a trajectory holding every turn's steps."""
    from cave.benchmarks.data.generate import sales

    runtime = InProcessRuntime()
    runtime.inject("sales", sales(data_size, seed=0), "one row per order")
    agent = Agent(model=llm, runtime=runtime, max_steps=max_steps or 6, stream=False, verify=None)  # the loop alone
    try:
        turns = [(await agent.arun(text)).trajectory for text in SESSION_TURNS]
    finally:
        runtime.close()
    whole = turns[0]
    for t in turns[1:]:
        whole.steps += t.steps  # usage is summed over the steps
    whole.status = "/".join(sorted({t.status for t in turns}))  # e.g. "success", or "max_steps/success"
    whole.meta["turn_status"] = [t.status for t in turns]
    return whole


async def run_real_task(
    name: str, llm: Any, max_steps: int | None, data_size: int, replies: list[str] | None = None
) -> TaskRow:
    """``replies``: filled with the text of each backend call's reply, for a forced replay."""
    counter = _Counting(llm, replies)
    t0 = time.perf_counter()
    try:
        if name == "session":
            traj = await run_session(llm, max_steps, data_size)
            return task_row(name, traj, time.perf_counter() - t0, traj.status == "success", counter.calls)
        if name.startswith("data:"):
            from cave.benchmarks.data.run import arun_task as data_task

            kwargs = {"max_steps": max_steps} if max_steps else {}
            result = await data_task(name[5:], data_size, "code", llm, **kwargs)
            return task_row(name, result.trajectory, time.perf_counter() - t0, result.success, counter.calls)
        from cave.sdk import arun_task, build_agent
        from cave.task import load_task

        path = Path(name)
        if not path.suffix:  # an example's name
            path = EXAMPLES / name / "task.yaml"
        task = load_task(path)
        agent = build_agent(task, llm=llm)
        if max_steps:
            agent.max_steps = max_steps
        try:
            outcome = await arun_task(task, store=None, agent=agent)
        finally:
            agent.runtime.close()
        traj = outcome.result.trajectory
        return task_row(path.parent.name, traj, time.perf_counter() - t0, outcome.ok, counter.calls)
    finally:
        counter.close()


def run_real(args: argparse.Namespace) -> list[TaskRow]:
    """Each task in each layout, the model decoding freely; with --forced, then each layout again on the first
    layout's recorded replies (the same code, the same outcome: only what the model reads differs)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    llm = make_model(args.model, args.n_ctx)
    baseline = _read_rows(args.baseline) if args.baseline else {}
    layouts = [x.strip() for x in args.layouts.split(",") if x.strip()]
    rows: list[TaskRow] = []
    try:
        for name in [t.strip() for t in args.tasks.split(",") if t.strip()]:
            recorded: list[str] = []
            for layout in layouts:
                replies = recorded if layout == layouts[0] else None
                rows.append(_layout_run(name, layout, llm, args, rows, baseline, replies=replies))
            if getattr(args, "forced", False) and len(layouts) > 1:
                for layout in layouts:
                    forced = ForcedReplies(llm, recorded)
                    rows.append(_layout_run(name, layout, forced, args, rows, {}, kind="forced"))
    finally:
        os.environ.pop("CAVE_PROMPT_LAYOUT", None)
        asyncio.run(llm.aclose())
    return rows


def _layout_run(
    name: str,
    layout: str,
    llm: Any,
    args: argparse.Namespace,
    rows: list[TaskRow],
    baseline: dict[str, Any],
    *,
    replies: list[str] | None = None,
    kind: str = "",
) -> TaskRow:
    os.environ["CAVE_PROMPT_LAYOUT"] = layout  # every agent the task builds takes it
    model = getattr(llm, "llm", llm)
    if hasattr(model, "forget_prefixes"):
        model.forget_prefixes()  # each run starts cold: the run before must not serve this one's prefix
    row = asyncio.run(run_real_task(name, llm, args.max_steps, args.data_size, replies))
    row.layout = f"{layout}/{kind}" if kind else layout
    first = next((r for r in rows if r.task == row.task and r.layout.partition("/")[2] == kind), None)
    if first is not None:
        # the layouts side by side, in the same process: the first layout's wall time as a ratio to this one
        first.baseline_wall_s, first.baseline_cached_share = row.wall_s, row.cached_share_after_step1
        first.wall_ratio = round(first.wall_s / row.wall_s, 3) if row.wall_s else None
    elif base := baseline.get(row.task):
        row.baseline_wall_s = base["wall_s"]
        row.wall_ratio = round(row.wall_s / base["wall_s"], 3) if base["wall_s"] else None
        row.baseline_cached_share = base.get("cached_share_after_step1")
    print(
        f"{row.task} [{row.layout}]: {row.status}, {row.steps} steps, {row.prompt_tokens} prompt tokens, "
        f"{100 * row.cached_share_after_step1:.0f}% cached after step 1, {row.wall_s:.1f} s",
        flush=True,
    )
    return row


def _read_rows(path: str) -> dict[str, dict[str, Any]]:
    """Task rows of an earlier ``--out`` file (its JSON document, or JSON lines), by task."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        doc = json.loads(text)
        rows = doc["rows"] if isinstance(doc, dict) else doc
    except json.JSONDecodeError:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    return {r["task"]: r for r in rows if isinstance(r, dict) and "task" in r}


def print_real(rows: list[TaskRow], model: str) -> None:
    head = f"{'task':<30} {'layout':<16} {'status':<14} {'steps':>5} {'calls':>5} {'prompt tok':>10} {'cached %':>8} "
    head += f"{'wall s':>7} {'vs base':>7}"
    print(f"\n# {model} - cached %: share of the prompt tokens of steps 2+ served from the prefix cache")
    print(head)
    print("-" * len(head))
    for r in rows:
        ratio = f"{r.wall_ratio:.2f}x" if r.wall_ratio is not None else "-"
        print(
            f"{r.task:<30} {r.layout:<16} {r.status:<14} {r.steps:>5} {r.llm_calls:>5} {r.prompt_tokens:>10} "
            f"{100 * r.cached_share_after_step1:>7.1f}% {r.wall_s:>7.1f} {ratio:>7}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--out", help="append results as JSON lines (with --model: write one JSON document)")
    parser.add_argument("--model", help="run real tasks on this model: local, local:smollm2, openai:URL[@MODEL]")
    parser.add_argument("--tasks", default=DEFAULT_TASKS, help="example names, task.yaml paths, data:TASK_ID")
    parser.add_argument("--max-steps", type=int, default=None, help="override each task's max_steps")
    parser.add_argument("--data-size", type=int, default=1000, help="rows of a data-suite task's generated data")
    parser.add_argument("--n-ctx", type=int, default=8192, help="context window to load the model with")
    parser.add_argument("--baseline", help="an earlier --out file: report each task's wall time as a ratio to it")
    parser.add_argument(
        "--layouts",
        default="stable",
        help="prompt layouts to run each task with, e.g. stable,rerender: the stable rows then carry the ratio "
        "of their wall time to rerender's, measured in the same process (vs base)",
    )
    parser.add_argument(
        "--forced",
        action="store_true",
        help="with two layouts: replay each task in both on the first layout's recorded replies (same code, same "
        "outcome; the model reads each prompt, decoding is left out): rows 'LAYOUT/forced'",
    )
    args = parser.parse_args(argv)
    if args.model:
        rows_real = run_real(args)
        print_real(rows_real, args.model)
        if args.out:
            import subprocess

            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                    cwd=Path(__file__).parent).stdout.strip()  # fmt: skip
            doc = {
                "bench": "agent-real",
                "model": args.model,
                "commit": commit,
                "machine": platform.node(),
                "cores": os.cpu_count(),
                "time": time.time(),
                "rows": [asdict(r) for r in rows_real],
            }
            Path(args.out).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        return 0
    rows = run(args.quick)
    print_table(rows, args.quick)
    if args.out:
        meta = {
            "bench": "agent",
            "python": platform.python_version(),
            "machine": platform.machine(),
            "time": time.time(),
        }
        with open(args.out, "a", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps({**meta, **asdict(r)}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
