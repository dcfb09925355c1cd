"""``cave bench databench``: its options and its runner (imports kept inside, so ``cave bench --help`` stays light)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cave.benchmarks.suite import agent_options, question_options, run_questions, summarize


def databench_options(p: Any) -> None:
    p.add_argument(
        "--data",
        required=True,
        metavar="DIR",
        type=_data_dir,
        help="a copy of the DataBench data: a QA table (question, answer, type, dataset) and DATASET/all.parquet",
    )
    p.add_argument("--seed", type=int, default=0, help="with --limit: the seed of the question sample (default: 0)")
    p.add_argument("--types", help="comma-separated answer types, e.g. number,boolean (default: all)")
    p.add_argument("--lite", action="store_true", help="DataBench lite: each dataset's sample.parquet, sample_answer")
    question_options(p)


def _data_dir(value: str) -> str:
    """--data checked when the arguments are parsed: a wrong layout is a usage error naming the expected files."""
    import argparse

    from cave.benchmarks.databench.data import DataLayoutError, qa_file

    try:
        return str(qa_file(value).parent)
    except DataLayoutError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def bench_databench(args: Any, agents: list[str], emit: Callable[..., None]) -> dict[str, Any]:
    from cave.benchmarks.analyst.run import print_outcomes
    from cave.benchmarks.databench.data import load_questions
    from cave.benchmarks.databench.run import databench_report, run_question
    from cave.benchmarks.databench.score import SEMANTICS
    from rich.console import Console

    types = [t.strip() for t in args.types.split(",")] if args.types else None
    if types and set(types) - set(SEMANTICS):
        raise SystemExit(f"--types {args.types!r}: use one or more of {', '.join(SEMANTICS)}")
    qs = load_questions(args.data, limit=args.limit, seed=args.seed, types=types)
    kwargs = {"max_steps": args.max_steps, "runtime": args.runtime, "native": args.native,
              "agent_options": agent_options(args), "lite": args.lite}  # fmt: skip
    run_one = lambda q, agent, llm, name: run_question(q, args.data, agent, llm, model=name, **kwargs)  # noqa: E731
    rows = run_questions(args, agents, emit, "databench", qs, lambda q: q.index, run_one)
    groups = databench_report(rows)
    print_outcomes(Console(), f"DataBench ({len(qs)} questions, the competition's rule)", groups,
                   {"correct": lambda gr: f"{100 * gr['correct']:.1f}%"})  # fmt: skip
    summary = summarize(rows, "category", "success", title="DataBench: accuracy by answer type")
    summary["databench"] = groups
    return summary
