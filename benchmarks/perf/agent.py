"""Agent-loop overhead: ``python -m cave.benchmarks.perf.agent [--quick] [--out results.jsonl]``.

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
from typing import Any

import pandas as pd
from cave.runtimes.inprocess import InProcessRuntime

from cave.agent import Agent
from cave.llm.base import Scripted
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
    return Agent(model=Scripted(replies(n)), runtime=runtime, max_steps=n + 1)


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--out", help="append results as JSON lines")
    args = parser.parse_args(argv)
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
