"""``cave bench dabench``: its options and its runner (imports kept inside, so ``cave bench --help`` stays light)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cave.benchmarks.suite import agent_options, question_options, run_questions, summarize


def dabench_options(p: Any) -> None:
    p.add_argument(
        "--data",
        required=True,
        metavar="DIR",
        type=_data_dir,
        help="a copy of InfiAgent-DABench's examples/DA-Agent/data (da-dev-questions.jsonl, da-dev-labels.jsonl, "
        "da-dev-tables/)",
    )
    p.add_argument("--seed", type=int, default=0, help="with --limit: the seed of the question sample (default: 0)")
    p.add_argument("--level", help="comma-separated of easy,medium,hard (default: all)")
    p.add_argument("--ids", type=_ids, help="comma-separated question ids, e.g. 19,56,57 (default: all)")
    question_options(p)


def _ids(value: str) -> list[int]:
    import argparse

    try:
        return [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: write question ids as numbers, e.g. 19,56,57") from None


def _data_dir(value: str) -> str:
    """--data checked when the arguments are parsed: a wrong layout is a usage error naming the expected files."""
    import argparse

    from cave.benchmarks.dabench.data import DataLayoutError, resolve

    try:
        return str(resolve(value))
    except DataLayoutError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def bench_dabench(args: Any, agents: list[str], emit: Callable[..., None]) -> dict[str, Any]:
    from cave.benchmarks.analyst.run import print_outcomes
    from cave.benchmarks.dabench.data import LEVELS, load_questions
    from cave.benchmarks.dabench.run import dabench_report, run_question
    from rich.console import Console

    levels = args.level.split(",") if args.level else None
    if levels and set(levels) - set(LEVELS):
        raise SystemExit(f"--level {args.level!r}: use one or more of {', '.join(LEVELS)}")
    qs = load_questions(args.data, levels=levels, limit=args.limit, seed=args.seed, ids=args.ids)
    kwargs = {
        "max_steps": args.max_steps,
        "runtime": args.runtime,
        "native": args.native,
        "agent_options": agent_options(args),
    }
    run_one = lambda q, agent, llm, name: run_question(q, args.data, agent, llm, model=name, **kwargs)  # noqa: E731
    rows = run_questions(args, agents, emit, "dabench", qs, lambda q: q.id, run_one)
    groups = dabench_report(rows)
    pct = lambda key: lambda gr: f"{100 * gr[key]:.1f}%"  # noqa: E731
    print_outcomes(
        Console(),
        f"InfiAgent-DABench ({len(qs)} questions)",
        groups,
        {
            "strict": pct("strict"),
            "rounded": pct("rounded"),
            "sub strict": pct("sub_strict"),
            "sub rounded": pct("sub_rounded"),
        },
    )
    summary = summarize(rows, "model", "success", title="InfiAgent-DABench: accuracy by question (strict)")
    summary["dabench"] = groups
    return summary
