"""A development probe of verification: do independent attempts repeat the run's wrong answers?

Agreement confirms an answer when an independent attempt gives the same one. It can only tell right from wrong
where the attempts are not wrong in the same way as the run. This probe measures that on the analyst suite
(development data): each task's run (verification off), then one attempt per style (``cave.verification
.ATTEMPT_STYLES``: "same" is asked as the run was, others with a method of their own), each judged by the oracle
and by agreement with the run's answer. Only answers that verification would decide get attempts (no task
checks, the contract kept).

    python -m cave.benchmarks.probes.attempts --out runs/probes/attempts.jsonl           # the 19 without checks
    python -m cave.benchmarks.probes.attempts --tasks top3_customers --styles look_first  # one task

Per style it prints how often the attempt agrees with a right answer (right answers that would end ``success``)
and with a wrong one (wrong answers that would end ``success``): a better style raises the first or lowers the
second without costing the other.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["main", "probe_task", "summarize"]


async def probe_task(
    task: Any, llm: Any, styles: list[str], *, seed: int = 0, max_steps: int = 6, runtime: str | None = None
) -> dict[str, Any]:
    """The run (``verify=0``) and its verification by each style of attempt, for one analyst task: statuses, oracle
    verdicts, votes (``runtime``: the code runtime's kind, default the benches' own)."""
    from cave.benchmarks.analyst.compare import describe
    from cave.benchmarks.analyst.run import Inputs
    from cave.benchmarks.data.run import CODE_INSTRUCTIONS
    from cave.benchmarks.runtime import code_runtime

    from cave.agent import Agent

    inputs = Inputs.for_task(task, seed)
    rt = code_runtime(runtime, timeout=120)
    engine = None
    t0 = time.perf_counter()
    try:
        for name, frame in inputs.frames.items():
            rt.inject(name, frame, description=inputs.descriptions.get(name))
        if inputs.db_path is not None:
            from sqlalchemy import create_engine

            if hasattr(rt, "expose"):
                rt.expose([str(inputs.db_path.parent)])
            engine = create_engine(f"sqlite:///{inputs.db_path}")
            rt.inject("db", engine, description=inputs.db_description)
        agent = Agent(
            model=llm,
            runtime=rt,
            max_steps=max_steps,
            instructions=CODE_INSTRUCTIONS,
            checks=task.check_specs(seed),
            stream=False,
            verify=0,
        )
        result = await agent.arun(task.question)
        traj = result.trajectory
        row: dict[str, Any] = {
            "id": task.id,
            "status": traj.status,
            "correct": bool(task.check(result.answer, seed)),
            "answer": describe(result.answer),
            "seconds": round(time.perf_counter() - t0, 1),
            "attempts": {},
        }
        # what verification would decide: an answer without task checks whose contract was kept
        row["decided_by_attempts"] = traj.status == "unverified" and not traj.meta.get("contract_problems")
        if not row["decided_by_attempts"]:
            return row
        for style in styles:
            row["attempts"][style] = await _decide(agent, task, result.answer, style, seed)
        return row
    finally:
        await asyncio.to_thread(rt.close)
        inputs.close()
        if engine is not None:
            engine.dispose()


async def _decide(agent: Any, task: Any, answer: Any, style: str, seed: int) -> dict[str, Any]:
    """Verification of ``answer`` by attempts of one style, as ``verify: 1`` decides it (an attempt that reaches no
    answer is run again, ``agreement.decide``): whether it was confirmed, and the first answering attempt's verdict."""
    from cave.benchmarks.analyst.compare import describe

    from cave.review import agreement
    from cave.verification import ANSWERED_BY_CODE

    form = agent._agreement_form(task.question)
    t0 = time.perf_counter()
    votes: list[bool | None] = []
    first: Any = None
    steps = 0
    outcome = None
    while outcome is None:
        other = await agent._attempt(task.question, len(votes), style)
        steps += len(other.trajectory.steps)
        answered = other.status in ANSWERED_BY_CODE
        votes.append(agreement.same(answer, other.answer, **form) if answered else None)
        if answered and first is None:
            first = other
        outcome = agreement.decide(votes, 1)
    return {
        "votes": votes,
        "answered": first is not None,
        "agrees": outcome == "verified",
        "correct": bool(first is not None and task.check(first.answer, seed)),
        "answer": describe(first.answer) if first is not None else None,
        "steps": steps,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def summarize(rows: list[dict[str, Any]], styles: list[str]) -> list[dict[str, Any]]:
    """Per style, over the runs whose answer the attempts decide: right answers an attempt agrees with, wrong
    answers it agrees with, and the attempt's own accuracy.

    >>> rows = [{"correct": True, "decided_by_attempts": True, "attempts": {"same": {"agrees": True, "correct": True,
    ...          "answered": True, "seconds": 30}}},
    ...         {"correct": False, "decided_by_attempts": True, "attempts": {"same": {"agrees": True,
    ...          "correct": False, "answered": True, "seconds": 50}}}]
    >>> s = summarize(rows, ["same"])[0]
    >>> (s["right_agreed"], s["right"], s["wrong_agreed"], s["wrong"], s["attempt_correct"], s["seconds"])
    (1, 1, 1, 1, 1, 40.0)
    """
    decided = [r for r in rows if r.get("decided_by_attempts")]
    out = []
    for style in styles:
        got = [(r, r["attempts"][style]) for r in decided if style in r["attempts"]]
        right = [a for r, a in got if r["correct"]]
        wrong = [a for r, a in got if not r["correct"]]
        out.append(
            {
                "style": style,
                "decided": len(got),
                "right": len(right),
                "right_agreed": sum(a["agrees"] for a in right),
                "wrong": len(wrong),
                "wrong_agreed": sum(a["agrees"] for a in wrong),
                "answered": sum(a["answered"] for _, a in got),
                "attempt_correct": sum(a["correct"] for _, a in got),
                "seconds": round(sum(a["seconds"] for _, a in got) / max(1, len(got)), 1),
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    from cave.benchmarks.analyst.tasks import TASKS

    from cave.llm import create_backend
    from cave.verification import ATTEMPT_STYLES

    p = argparse.ArgumentParser(prog="python -m cave.benchmarks.probes.attempts", description=__doc__.split("\n")[0])
    p.add_argument("--tasks", nargs="*", help="analyst task ids (default: those without checks)")
    p.add_argument("--styles", default="same,look_first", help=f"comma-separated, of {sorted(ATTEMPT_STYLES)}")
    p.add_argument("--model", default="local")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="JSONL, one line per task; tasks already in it are not run again")
    args = p.parse_args(argv)
    styles = [s for s in args.styles.split(",") if s]
    unknown = [s for s in styles if s not in ATTEMPT_STYLES]
    if unknown:
        p.error(f"unknown style(s) {unknown}: use {sorted(ATTEMPT_STYLES)}")
    ids = args.tasks or [tid for tid, t in TASKS.items() if t.checks is None]  # checked tasks get no attempts
    missing = [i for i in ids if i not in TASKS]
    if missing:
        p.error(f"unknown task(s) {missing}; the analyst suite has {len(TASKS)}: {', '.join(TASKS)}")
    rows: list[dict[str, Any]] = []
    if args.out and args.out.exists():
        rows = [json.loads(line) for line in args.out.read_text().splitlines() if line.strip()]
    done = {r["id"] for r in rows}
    llm = create_backend(args.model)
    for tid in ids:
        if tid in done:
            continue
        row = asyncio.run(probe_task(TASKS[tid], llm, styles, seed=args.seed))
        rows.append(row)
        votes = " ".join(f"{s}:{'agree' if a['agrees'] else 'differ'}" for s, a in row["attempts"].items())
        print(f"{tid:28} {'right' if row['correct'] else 'wrong':5} {row['status']:14} {votes}", flush=True)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            with args.out.open("a") as f:
                f.write(json.dumps(row) + "\n")
    print(f"\n{len(rows)} tasks, {sum(r['correct'] for r in rows)} right; decided by attempts:")
    for s in summarize(rows, styles):
        print(
            f"  {s['style']:11} right answers agreed {s['right_agreed']}/{s['right']}, wrong answers agreed "
            f"{s['wrong_agreed']}/{s['wrong']}, attempt right {s['attempt_correct']}/{s['decided']} "
            f"(answered {s['answered']}), {s['seconds']} s/attempt"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
