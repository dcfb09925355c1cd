"""``cave bench analyst``: its options and its runner (imports kept inside, so ``cave bench --help`` stays light)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cave.benchmarks.suite import (
    agent_option,
    agent_options,
    models,
    runtime_option,
    summarize,
    tool_call_format,
    verify_option,
)

__all__ = ["agent_option", "agent_options", "analyst_options", "bench_analyst", "models"]


def analyst_options(p: Any) -> None:
    p.add_argument("--tasks", help="comma-separated task ids (default: all)")
    p.add_argument("--seed", type=int, default=0, help="the data's seed (default: 0)")
    p.add_argument("--scripted", action="store_true", help="run the correct scripted policies, no model")
    agent_option(p)
    verify_option(p)
    p.set_defaults(max_steps=6)
    p._option_string_actions["--model"].help += "; several: comma-separated"
    runtime_option(p)
    tool_call_format(p)


def bench_analyst(args: Any, agents: list[str], emit: Callable[..., None]) -> dict[str, Any]:
    from cave.benchmarks.analyst.run import analyst_report, print_outcomes, run_task, scripted_policy
    from cave.benchmarks.analyst.tasks import TASKS
    from rich.console import Console

    ids = args.tasks.split(",") if args.tasks else list(TASKS)[: args.limit]
    unknown = [t for t in ids if t not in TASKS]
    if unknown:
        raise SystemExit(f"unknown analyst task(s) {unknown}; known: {', '.join(TASKS)}")
    rows = []
    for name, build in [("scripted", None)] if args.scripted else models(args):
        llm = None if build is None else build()
        for agent in agents:
            for tid in ids:
                policy = llm or scripted_policy(tid, agent, seed=args.seed)
                kwargs: dict[str, Any] = {
                    "max_steps": args.max_steps,
                    "runtime": args.runtime,
                    "native": args.native,
                    "agent_options": agent_options(args),
                }
                r = run_task(tid, agent, policy, seed=args.seed, model=name, **kwargs)
                emit(r.record(), r.trajectory)
                rows.append(r.record())
    groups = analyst_report(rows)
    print_outcomes(
        Console(),
        f"Analyst tasks (seed {args.seed})",
        groups,
        {
            "correct": lambda gr: f"{100 * gr['correct']:.1f}%",
            "false succ. w/ checks": lambda gr: f"{gr['false_success_checked']}/{gr['checked']}",
        },
    )
    summary = summarize(rows, "model", "success", title="Analyst tasks: correct answers")
    summary["analyst"] = groups
    return summary
