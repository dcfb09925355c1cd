"""A development probe of verification: do independent attempts repeat the run's wrong answers?

Agreement confirms an answer when independent attempts give the same one, so it tells right from wrong only where
the attempts are not wrong in the same way as the run. This probe measures that on the analyst suite (development
data; its trajectories may be read): each task's run with verification off, then the verification that
``verify: N`` would make of its answer (``Verifying._confirm``: an attempt that reaches no answer is run again),
the first answering attempt judged by the oracle too. Only answers that verification decides get attempts (no task
checks, the contract kept). Each line of ``--out`` keeps the run's trajectory and its
attempts', to read why an attempt failed or repeated an error.

    python -m cave.benchmarks.probes.attempts --out runs/probes/attempts.jsonl      # the 19 tasks without checks
    python -m cave.benchmarks.probes.attempts --tasks top_region --verify 3         # one task, three attempts

It prints how many right answers the attempts confirm (they would end ``success``) and how many wrong ones (false
successes), the attempts' own accuracy and how often one reached no answer.
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
    task: Any, llm: Any, *, verify: int = 1, seed: int = 0, max_steps: int = 6, runtime: str | None = None
) -> dict[str, Any]:
    """The run (``verify=0``) and the verification ``verify`` attempts make of its answer, for one analyst task:
    statuses, oracle verdicts, votes (``runtime``: the code runtime's kind, default the benches' own)."""
    from cave.benchmarks.analyst.run import Inputs, code_agent

    inputs = Inputs.for_task(task, seed)
    t0 = time.perf_counter()
    options = {"verify": 0}  # the run unverified: this probe verifies it
    try:
        with code_agent(inputs, llm, checks=task.check_specs(seed), max_steps=max_steps, runtime=runtime,
                        agent_options=options) as agent:  # fmt: skip
            return await _probe(agent, task, seed, verify, t0)
    finally:
        inputs.close()


async def _probe(agent: Any, task: Any, seed: int, verify: int, t0: float) -> dict[str, Any]:
    from cave.benchmarks.analyst.compare import describe

    result = await agent.arun(task.question)
    traj = result.trajectory
    row: dict[str, Any] = {
        "id": task.id,
        "status": traj.status,
        "correct": bool(task.check(result.answer, seed)),
        "answer": describe(result.answer),
        "seconds": round(time.perf_counter() - t0, 1),
        "attempts": None,
        "trajectory": traj.to_dict(),  # development data: read freely
    }
    # what verification would decide: an answer without task checks whose contract was kept
    row["decided_by_attempts"] = traj.status == "unverified" and not traj.meta.get("contract_problems")
    if row["decided_by_attempts"]:
        row["attempts"] = await _decide(agent, task, result.answer, verify, seed, accepted=not traj.meta.get("kept"))
    return row


async def _decide(
    agent: Any, task: Any, answer: Any, verify: int, seed: int, *, accepted: bool = True
) -> dict[str, Any]:
    """Verification of ``answer`` as ``verify`` attempts decide it (``Verifying._confirm``: an attempt that reaches
    no answer is run again; ``accepted``: the review accepted the run's answer, as ``Verifying._verify`` passes it):
    whether it was confirmed, and the first answering attempt's verdict."""
    from cave.benchmarks.analyst.compare import describe

    from cave.verification import ANSWERED_BY_CODE

    t0 = time.perf_counter()
    outcome, votes, records, results = await agent._confirm(task.question, answer, verify, accepted=accepted)
    # every attempt judged (None: it reached no answer): how often an attempt is right, not only the first
    verdicts = [bool(task.check(r.answer, seed)) if r.status in ANSWERED_BY_CODE else None for r in results]
    first = next((i for i, v in enumerate(verdicts) if v is not None), None)
    return {
        "votes": votes,
        "answered": first is not None,
        "agrees": outcome == "verified",
        "correct": first is not None and verdicts[first],
        "verdicts": verdicts,
        "answer": describe(results[first].answer) if first is not None else None,
        "steps": sum(r["steps"] for r in records),
        "seconds": round(time.perf_counter() - t0, 1),
        "trajectories": [r.trajectory.to_dict() for r in results],
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Over the runs whose answer the attempts decide: right answers confirmed, wrong answers confirmed, the
    first answering attempt's accuracy, attempts that reached no answer, seconds of verification per run.

    >>> a = {"agrees": True, "correct": True, "answered": True, "votes": [None, True], "seconds": 30}
    >>> rows = [{"correct": True, "decided_by_attempts": True, "attempts": a},
    ...         {"correct": False, "decided_by_attempts": True, "attempts": {**a, "votes": [True], "correct": False,
    ...          "seconds": 50}}, {"correct": True, "decided_by_attempts": False, "attempts": None}]
    >>> s = summarize(rows)
    >>> (s["right_agreed"], s["right"], s["wrong_agreed"], s["wrong"], s["attempt_correct"], s["no_answer"], s["seconds"])
    (1, 1, 1, 1, 1, 1, 40.0)
    """
    got = [r for r in rows if r.get("decided_by_attempts") and r.get("attempts")]
    right = [r["attempts"] for r in got if r["correct"]]
    wrong = [r["attempts"] for r in got if not r["correct"]]
    return {
        "decided": len(got),
        "right": len(right),
        "right_agreed": sum(a["agrees"] for a in right),
        "wrong": len(wrong),
        "wrong_agreed": sum(a["agrees"] for a in wrong),
        "answered": sum(a["answered"] for a in right + wrong),
        "attempt_correct": sum(a["correct"] for a in right + wrong),
        "no_answer": sum(v is None for a in right + wrong for v in a["votes"]),
        "attempts_right": sum(v is True for a in right + wrong for v in a.get("verdicts", ())),
        "attempts_answered": sum(v is not None for a in right + wrong for v in a.get("verdicts", ())),
        "seconds": round(sum(a["seconds"] for a in right + wrong) / max(1, len(got)), 1),
    }


def main(argv: list[str] | None = None) -> int:
    from cave.benchmarks.analyst.tasks import TASKS

    from cave.llm import create_backend

    p = argparse.ArgumentParser(prog="python -m cave.benchmarks.probes.attempts", description=__doc__.split("\n")[0])
    p.add_argument("--tasks", nargs="*", help="analyst task ids (default: those without checks)")
    p.add_argument("--verify", type=int, default=1, help="attempts, as verify: N (default 1)")
    p.add_argument("--model", default="local")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="JSONL, one line per task; tasks already in it are not run again")
    args = p.parse_args(argv)
    if args.verify < 1:
        p.error("--verify must be at least 1")
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
        row = asyncio.run(probe_task(TASKS[tid], llm, verify=args.verify, seed=args.seed))
        rows.append(row)
        a = row["attempts"]
        votes = "" if a is None else f"{'confirmed' if a['agrees'] else 'not confirmed'} (votes {a['votes']})"
        print(f"{tid:28} {'right' if row['correct'] else 'wrong':5} {row['status']:14} {votes}", flush=True)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            with args.out.open("a") as f:
                f.write(json.dumps(row) + "\n")
    s = summarize(rows)
    print(
        f"\n{len(rows)} tasks, {sum(r['correct'] for r in rows)} right; {s['decided']} decided by attempts "
        f"(verify {args.verify}): right answers confirmed {s['right_agreed']} of {s['right']}, wrong answers confirmed "
        f"{s['wrong_agreed']} of {s['wrong']}; first answering attempt right {s['attempt_correct']} of "
        f"{s['answered']} (all attempts: {s['attempts_right']} of {s['attempts_answered']} answers right); "
        f"{s['no_answer']} attempts reached no answer; {s['seconds']} s of verification per run"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
