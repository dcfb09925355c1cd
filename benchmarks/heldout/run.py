"""Running the code agent on the held-out tasks, and reducing the runs to totals.

The setup is the analyst suite's code agent (``cave.benchmarks.analyst.run.run_code``: the tables injected as
live DataFrames, the same instructions, ``max_steps`` 6). What comes out is totals only: a row per run holds the
task's answer kind, trap kind and domain, whether the oracle accepted the answer, how the run ended and what it
cost, never the question, the answer or the trajectory; ``report`` sums the rows per suite, answer kind and trap.

When a run's ``meta["verify"]`` holds ``status_before`` and ``seconds`` (the verification of an answer by
independent attempts), ``report`` also gives the "verify off" view: the status before verification, the seconds
without it; and with each attempt's vote and seconds, the views of every smaller ``verify``: attempts are seeded
by their position, so a run with ``verify: 3`` holds, in its first attempts, exactly the runs ``verify: 1`` makes.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from pathlib import Path
from typing import Any

from cave.benchmarks.analyst.compare import plain
from cave.benchmarks.analyst.run import Inputs, run_code
from cave.benchmarks.heldout import generate as g
from cave.benchmarks.heldout.tasks import TASKS, HeldoutTask

from cave.llm.base import LLM
from cave.review import fired

SUITE = "heldout"
HERE = Path(__file__).resolve().parent
FILES = ("generate.py", "tasks.py")  # the task definitions: frozen (tests/benchmarks/test_heldout.py)
SEED = 0  # the suite is the tasks on the data of this seed
MAX_STEPS = 6


def suite_sha256(folder: Path = HERE) -> str:
    """SHA-256 over the task definition files (name and bytes of each, in order)."""
    h = hashlib.sha256()
    for name in FILES:
        h.update(name.encode() + b"\0")
        h.update((folder / name).read_bytes())
    return h.hexdigest()


def inputs_for(task: HeldoutTask, seed: int = SEED) -> Inputs:
    """The task's tables, as the analyst suite hands them to the code agent."""
    frames = {name: g.frame(name, seed) for name in task.inputs}
    return Inputs(frames, {name: g.DESCRIPTIONS[name] for name in frames})


def accepts_verify() -> bool:
    """Whether this checkout's ``Agent`` takes ``verify``."""
    import inspect

    from cave.agent import Agent

    params = inspect.signature(Agent.__init__).parameters
    return "verify" in params


async def arun(
    task: HeldoutTask | str,
    llm: LLM,
    *,
    seed: int = SEED,
    max_steps: int = MAX_STEPS,
    runtime: str | None = None,
    agent_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One run of the code agent on ``task``: its row (totals' material only, see the module's doc)."""
    task = TASKS[task] if isinstance(task, str) else task
    t0 = time.perf_counter()
    row: dict[str, Any] = {"kind": task.kind, "trap": task.trap or "none", "domain": task.domain}
    try:
        answer, traj = await run_code(
            task.question,
            inputs_for(task, seed),
            llm,
            checks=task.check_specs(seed),
            max_steps=max_steps,
            runtime=runtime,
            agent_options=agent_options,
        )
    except Exception as e:  # a crash of the harness or the backend: counted, never shown with the task
        row.update(correct=False, status=f"crash:{type(e).__name__}", steps=0, prompt_tokens=0, completion_tokens=0)
        row.update(seconds=time.perf_counter() - t0, verify=None)
        return row
    try:
        correct = bool(task.check(plain(answer), seed))  # a pandas array as its list (the frozen reader)
    except Exception:
        correct = False
    usage = traj.usage
    verify = traj.meta.get("verify")
    if not (
        isinstance(verify, dict)
        and isinstance(verify.get("status_before"), str)
        and isinstance(verify.get("seconds"), (int, float))
    ):
        verify = None
    row.update(
        correct=correct,
        status=str(traj.status),
        steps=len(traj.steps),
        prompt_tokens=int(usage.prompt_tokens or 0),
        completion_tokens=int(usage.completion_tokens or 0),
        seconds=time.perf_counter() - t0,
        verify=None if verify is None else _verify_row(verify),
        holds=sorted({m for s in traj.steps for b in s.meta.get("blocks", ()) for m in b.get("held_by", ())}),
        notes=fired.run_notes(traj.steps),
    )
    return row


def _verify_row(verify: dict[str, Any]) -> dict[str, Any]:
    """What a row keeps of a run's verification: the status before it, its seconds, and each attempt's vote
    (agrees: True / False, None for no answer) and seconds, when recorded."""
    row: dict[str, Any] = {"status_before": verify["status_before"], "seconds": float(verify["seconds"])}
    attempts = verify.get("attempts")
    if isinstance(verify.get("n"), int) and isinstance(attempts, list) and all("seconds" in a for a in attempts):
        row.update(
            n=verify["n"], votes=[a.get("agrees") for a in attempts], attempt_seconds=[a["seconds"] for a in attempts]
        )
    return row


def hold_totals(rows: list[dict[str, Any]], key: str = "holds") -> dict[str, Any]:
    """Per hold (the marks it leaves in a run's meta), or per note with ``key="notes"`` (the names
    ``cave.review.fired`` records): the runs it fired in, and how many of those ended correct and how many
    ``success`` (is it right where it speaks?); totals only.

    >>> hold_totals([{"notes": ["loop"], "correct": True, "status": "success"}, {"correct": False, "status": "x"}], "notes")
    {'loop': {'runs': 1, 'correct': 1, 'success': 1}}
    """
    fired_in: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        for mark in r.get(key) or ():
            fired_in.setdefault(mark, []).append(r)
    return {
        mark: {
            "runs": len(rs),
            "correct": sum(r["correct"] for r in rs),
            "success": sum(r["status"] == "success" for r in rs),
        }
        for mark, rs in sorted(fired_in.items())
    }


def format_fired(rep: dict[str, Any], rows: int) -> str:
    """The holds' and notes' totals as a text table: per name, the runs it fired in, and of those the right and the
    ``success`` ones; the ones that never fired are not listed (there is no list of every note to compare with)."""
    lines = [f"holds and notes that fired ({rows} runs): runs / ended correct / ended success"]
    for label in ("holds", "notes"):
        fired_here = rep.get(label) or {}
        width = max([14, *(len(k) for k in fired_here)])
        lines += ["", f"{label}:"]
        lines += [f"  {k:<{width}} {t['runs']:>4} {t['correct']:>4} {t['success']:>4}" for k, t in fired_here.items()]
        if not fired_here:
            lines.append("  (none)")
    return "\n".join(lines)


# -- totals --------------------------------------------------------------------------------------------------------
def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What a group of runs did: correct %, ``success`` % and the wrong answers among them, ``unverified`` %, the
    other statuses (and how many right answers ended in each status but ``success``), and the mean steps, tokens
    and seconds per task."""
    n = len(rows)
    d = max(1, n)
    statuses = Counter(r["status"] for r in rows)
    success = [r for r in rows if r["status"] == "success"]
    correct = [r for r in rows if r["correct"]]
    wrong_success = sum(not r["correct"] for r in success)
    return {
        "tasks": n,
        "correct_pct": round(100 * len(correct) / d, 1),
        "success_pct": round(100 * len(success) / d, 1),
        "wrong_among_success": wrong_success,
        "wrong_among_success_pct": round(100 * wrong_success / max(1, len(success)), 1),
        "correct_ending_success_pct": round(
            100 * sum(r["status"] == "success" for r in correct) / max(1, len(correct)), 1
        ),
        "unverified_pct": round(100 * statuses.get("unverified", 0) / d, 1),
        "other_statuses": {s: c for s, c in sorted(statuses.items()) if s not in ("success", "unverified")},
        "unverified_why": _why_unverified([r for r in rows if r["status"] == "unverified"]),
        "right_unverified_why": _why_unverified([r for r in correct if r["status"] == "unverified"]),
        # where the right answers that did not end success went (a status total, no task named)
        "right_by_status": dict(sorted(Counter(r["status"] for r in correct if r["status"] != "success").items())),
        "steps": round(sum(r["steps"] for r in rows) / d, 2),
        "prompt_tokens": round(sum(r["prompt_tokens"] for r in rows) / d, 1),
        "completion_tokens": round(sum(r["completion_tokens"] for r in rows) / d, 1),
        "seconds_per_task": round(sum(r["seconds"] for r in rows) / d, 2),
    }


def _why_unverified(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Why runs ended ``unverified``, counted: the answer broke the task's contract (no attempt ran), an attempt
    disagreed, or no attempt reached an answer.

    >>> _why_unverified([{"verify": {"votes": []}}, {"verify": {"votes": [None, False]}}, {"verify": {"votes": [None]}}])
    {'contract': 1, 'disagreed': 1, 'no_answer': 1}
    """
    why: Counter[str] = Counter()
    for r in rows:
        votes = (r.get("verify") or {}).get("votes")
        why["contract" if not votes else "disagreed" if False in votes else "no_answer"] += 1
    return dict(sorted(why.items()))


def report(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals for the suite, per answer kind and per kind of trap ("none": the tasks without one)."""

    def by(key: str) -> dict[str, Any]:
        return {k: totals([r for r in rows if r[key] == k]) for k in sorted({r[key] for r in rows})}

    return {"suite": totals(rows), "by_kind": by("kind"), "by_trap": by("trap")}


def verify_off(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows as they were before verification: its status before, its seconds taken off."""
    out = []
    for r in rows:
        v = r.get("verify")
        if v:
            r = {**r, "status": v["status_before"], "seconds": max(0.0, r["seconds"] - v["seconds"])}
        out.append(r)
    return out


def kept_failed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows as they would have ended had an answer that kept what the review held it for not gone to
    verification (before 2026-11-28): ``failed_checks``, without the attempts' seconds."""
    out = []
    for r in rows:
        v = r.get("verify")
        if v and v["status_before"] == "failed_checks":
            r = {**r, "status": "failed_checks", "seconds": max(0.0, r["seconds"] - v["seconds"])}
        out.append(r)
    return out


def verify_as(rows: list[dict[str, Any]], n: int) -> list[dict[str, Any]] | None:
    """The rows as ``verify: n`` (n at most the runs' own) would have ended them: the majority rule replayed on
    the first attempts' votes, the seconds of the attempts it needed. None when a verified row lacks its votes.

    >>> row = {"status": "success", "seconds": 30.0, "verify": {"status_before": "success", "seconds": 20.0,
    ...        "n": 3, "votes": [False, True, True], "attempt_seconds": [5.0, 7.0, 8.0]}}
    >>> [(r["status"], r["seconds"]) for r in verify_as([row], 1)]
    [('unverified', 15.0)]
    """
    from cave.review.agreement import decide

    out = []
    for r in rows:
        v = r.get("verify")
        if v and v.get("votes"):
            if "n" not in v or n > v["n"]:
                return None
            k = next((k for k in range(1, len(v["votes"]) + 1) if decide(v["votes"][:k], n)), None)
            if k is None:
                return None
            status = "success" if decide(v["votes"][:k], n) == "verified" else "unverified"
            spent = v["seconds"] - sum(v["attempt_seconds"]) + sum(v["attempt_seconds"][:k])
            r = {**r, "status": status, "seconds": max(0.0, r["seconds"] - v["seconds"] + spent)}
        out.append(r)
    return out


def full_report(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``report``, and where any run was verified the "verify off" view, the view of each smaller ``verify``, and
    where held answers that kept their problems were verified, the view without that (``kept_not_verified``)."""
    out = {"verify_on": report(rows), "holds": hold_totals(rows), "notes": hold_totals(rows, "notes")}
    if any(r.get("verify") for r in rows):
        out["verify_off"] = report(verify_off(rows))
        out["verified_runs"] = sum(bool(r.get("verify")) for r in rows)
        kept = sum((r.get("verify") or {}).get("status_before") == "failed_checks" for r in rows)
        if kept:  # the same runs, the held answers that kept their problems not verified (the earlier rule)
            out["kept_verified_runs"] = kept
            out["kept_not_verified"] = report(kept_failed(rows))
        most = max((r["verify"].get("n", 0) for r in rows if r.get("verify")), default=0)
        for n in range(1, most):
            view = verify_as(rows, n)
            if view is not None:
                out[f"verify_{n}"] = report(view)
    return out


COLUMNS = (
    ("tasks", "n", "{}"),
    ("correct_pct", "correct%", "{:.1f}"),
    ("success_pct", "success%", "{:.1f}"),
    ("wrong_among_success", "wrong/succ", "{}"),
    ("unverified_pct", "unverif%", "{:.1f}"),
    ("steps", "steps", "{:.1f}"),
    ("prompt_tokens", "prompt tok", "{:,.0f}"),
    ("completion_tokens", "compl tok", "{:,.0f}"),
    ("seconds_per_task", "s/task", "{:.1f}"),
)


def format_report(rep: dict[str, Any], title: str) -> str:
    """The totals as text tables (no task's question, answer or trajectory is in ``rep``)."""
    lines = [title]
    groups = [("suite", {SUITE: rep["suite"]}), ("answer kind", rep["by_kind"]), ("trap", rep["by_trap"])]
    width = max(14, *(len(k) for _, grp in groups for k in grp))
    head = f"{'':<{width}} " + " ".join(f"{c[1]:>10}" for c in COLUMNS) + "  other statuses"
    for label, grp in groups:
        lines += ["", f"by {label}:" if label != "suite" else "suite:", head]
        for key, t in grp.items():
            cells = " ".join(f"{c[2].format(t[c[0]]):>10}" for c in COLUMNS)
            right = t.get("right_by_status", {})
            other = ", ".join(f"{s} {n}" + (f" ({right[s]} right)" if right.get(s) else "")
                              for s, n in t["other_statuses"].items()) or "-"  # fmt: skip
            lines.append(f"{key:<{width}} {cells}  {other}")
    return "\n".join(lines)
