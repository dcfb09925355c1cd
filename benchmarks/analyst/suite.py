"""``cave bench analyst``: its options and its runner (imports kept inside, so ``cave bench --help`` stays light)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def analyst_options(p: Any) -> None:
    from cave.benchmarks.cli import _runtime_option, _tool_call_format

    p.add_argument("--tasks", help="comma-separated task ids (default: all)")
    p.add_argument("--seed", type=int, default=0, help="the data's seed (default: 0)")
    p.add_argument("--scripted", action="store_true", help="run the correct scripted policies, no model")
    agent_option(p)
    p.set_defaults(max_steps=6)
    p._option_string_actions["--model"].help += "; several: comma-separated"
    _runtime_option(p)
    _tool_call_format(p)


def agent_option(p: Any) -> None:
    p.add_argument(
        "--agent-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="code agent option (repeatable; YAML values), e.g. review=true or 'response_prefix=```python\n'",
    )


def agent_options(args: Any) -> dict[str, Any]:
    """``--agent-option KEY=VALUE`` -> keyword arguments of ``Agent`` (values read as YAML scalars)."""
    import yaml

    out: dict[str, Any] = {}
    for item in args.agent_option or []:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise SystemExit(f"--agent-option {item!r}: write KEY=VALUE, e.g. review=true")
        if key in ("response_prefix", "instructions"):  # text as given, with \n escapes
            out[key] = value.encode().decode("unicode_escape")
            continue
        try:
            out[key] = yaml.safe_load(value) if value.strip() else value
        except yaml.YAMLError:
            out[key] = value
    return out


def models(args: Any) -> list[tuple[str, Any]]:
    """``--model a,b`` -> [(name, llm)], built lazily (one embedded model loaded at a time)."""
    from cave.benchmarks.cli import make_llm

    return [(m, lambda m=m: make_llm(m, args.model_option, args.base_url)) for m in args.model.split(",") if m]


def bench_analyst(args: Any, agents: list[str], emit: Callable[..., None]) -> dict[str, Any]:
    from cave.benchmarks.analyst.run import analyst_report, print_outcomes, run_task, scripted_policy
    from cave.benchmarks.analyst.tasks import TASKS
    from cave.benchmarks.cli import summarize
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
