"""``cave bench bfcl|tau2|data|search|analyst|dabench|databench``: score the code agent and the JSON baseline on the same model.

    cave bench bfcl --model local --agent code,json --limit 5
    cave bench tau2 --model openai:gpt-4o-mini --base-url http://127.0.0.1:8000/v1 --domains mock --trials 2
    cave bench data --model local --sizes 100,1000
    cave bench data --scripted            # the token table: fixed scripted policies, no model

``--model`` is ``BACKEND[:MODEL]`` (``local``, ``local:smollm2``, ``openai:NAME``), with more backend
options as ``--model-option KEY=VALUE``. In ``--out``: one JSONL row per entry (``entries.jsonl``),
its trajectory (``trajectories.jsonl``: each step's reply, code, observation, tool calls and usage) and
the per-group table (``summary.json``); the table is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cave.benchmarks.analyst.suite import analyst_options, bench_analyst
from cave.benchmarks.dabench.suite import bench_dabench, dabench_options
from cave.benchmarks.databench.suite import bench_databench, databench_options
from cave.benchmarks.suite import (
    SUITES,
    Suite,
    agent_option,
    agent_options,
    common_options,
    make_llm,
    register_suite,
    runtime_option,
    summarize,
    tool_call_format,
)

from cave.command import Command


def _bfcl_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--categories",
        help="comma-separated (default: simple,multiple,parallel,parallel_multiple,irrelevance,multi_turn_base)",
    )
    runtime_option(p)
    tool_call_format(p)
    p.add_argument(
        "--single-turn-steps",
        type=int,
        default=1,
        help="replies the code agent gets on a single-turn entry (default 1: one-shot, as BFCL scores it and as "
        "the JSON baseline answers; more lets it go on after a reply that made no call)",
    )
    agent_option(p)


def _tau2_options(p: argparse.ArgumentParser) -> None:
    from cave.benchmarks.tau2 import DEFAULT_AGENT_STEPS, DEFAULT_SIM_STEPS, DEFAULT_TASK_TIMEOUT

    p.add_argument("--user-model", help="the user simulator's model (default: the same model)")
    p.add_argument("--trials", type=int, default=1, help="trials per task, for pass^k (default: 1)")
    p.add_argument("--domains", default="mock", help="comma-separated of mock,airline,retail,telecom (default: mock)")
    p.add_argument(
        "--sim-steps",
        type=int,
        default=DEFAULT_SIM_STEPS,
        help=f"orchestrator steps per simulation (default: {DEFAULT_SIM_STEPS}, sized for a small local model; "
        "tau2's own is 200: raise it for full-length conversations)",
    )
    p.add_argument(
        "--task-timeout",
        type=float,
        default=DEFAULT_TASK_TIMEOUT,
        metavar="SECONDS",
        help=f"wall-clock limit per task: past it the task is stopped and counted as an error, and the run goes on "
        f"(default: {DEFAULT_TASK_TIMEOUT:g}; 0: no limit)",
    )
    steps = p._option_string_actions["--max-steps"]  # the common option, with tau2's meaning and default
    steps.help = f"the code agent's LLM calls per user turn (default: {DEFAULT_AGENT_STEPS})"
    p.set_defaults(max_steps=DEFAULT_AGENT_STEPS)
    runtime_option(p)
    tool_call_format(p)


def _data_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sizes", default="100,1000,10000,100000", help="row counts (default: 100,1000,10000,100000)")
    p.add_argument("--tasks", help="comma-separated task ids (default: all)")
    p.add_argument(
        "--scripted", action="store_true", help="run the fixed scripted policies (the token table), no model"
    )
    p.add_argument(
        "--context-window", type=int, default=32768, help="with --scripted: the window to check overflow against"
    )
    runtime_option(p)
    tool_call_format(p)


def configure(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="suite", metavar="SUITE")
    for _, suite in SUITES.items():
        sp = sub.add_parser(suite.name, help=suite.help, description=suite.help)
        common_options(sp)
        suite.options(sp)
        sp.set_defaults(func=lambda a, s=suite: bench(a, s))
    p.set_defaults(func=lambda a: (p.print_help(sys.stderr), 2)[1])


COMMAND = Command(
    "bench",
    "benchmarks: cave bench bfcl|tau2|data|search|analyst|dabench|databench ... (the code agent and the JSON baseline)",
    configure,
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cave bench", description="Benchmark the code agent and the JSON baseline.")
    configure(p)
    return p


def bench_main(argv: list[str] | None = None) -> int:
    """``python -m cave.benchmarks.cli ARGS`` = ``cave bench ARGS``. Returns the exit code."""
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


def bench(args: argparse.Namespace, suite: Suite) -> int:
    """Run one suite. Returns the exit code (0 ok, 2 bad arguments or missing packages)."""
    from rich.console import Console
    from rich.markup import escape

    from cave.terminal import safe

    console = Console()
    agents = [a.strip() for a in args.agent.split(",") if a.strip()]
    if not agents or any(a not in ("code", "json") for a in agents):
        console.print(f"[red]--agent {args.agent!r}: use code, json or code,json[/red]")
        return 2
    resume = getattr(args, "resume", False)
    if resume and not args.out:
        console.print("[red]--resume needs --out: the folder of the run to continue[/red]")
        return 2
    out = Path(args.out or f"runs/bench/{args.suite}-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    args.out = str(out)  # suites write their own files (tau2's log) next to the entries
    args.previous_rows = previous_rows(out / "entries.jsonl", rewrite=True) if resume else []
    if resume:
        previous_rows(out / "trajectories.jsonl", rewrite=True)
    if args.previous_rows:
        console.print(f"[dim]resuming {out}: {len(args.previous_rows)} entries already done[/dim]")
    mode = "a" if resume else "w"  # a resumed run keeps what the earlier one wrote
    rows_file = (out / "entries.jsonl").open(mode)
    traj_file = (out / "trajectories.jsonl").open(mode)

    def emit(row: dict[str, Any], trajectory: Any = None) -> None:
        rows_file.write(json.dumps(row, default=str) + "\n")
        rows_file.flush()
        if trajectory is not None:  # every step's reply, code, observation and usage (prompts left out: they repeat)
            d = trajectory.to_dict()
            for step in d["steps"]:
                step.pop("messages", None)
            traj_file.write(json.dumps({"id": row["id"], "agent": row["agent"], "trajectory": d}, default=str) + "\n")
            traj_file.flush()  # a run stopped halfway keeps every finished entry's trajectory
        if not args.quiet:
            ok = row.get("valid", row.get("success"))
            mark = "[green]ok[/green]" if ok else "[red]x[/red]"
            where = row.get("category") or row.get("domain") or row.get("size")
            console.print(
                f"{mark} {row['agent']:4} {where} {row['id']}  tokens={row.get('total_tokens')}  "
                + escape(safe(row.get("error") or ""))
            )

    try:
        summary = suite.run(args, agents, emit)
    except ImportError as e:
        console.print(f"[red]{e}[/red]")
        return 2
    finally:
        rows_file.close()
        traj_file.close()
    summary["config"] = {k: v for k, v in vars(args).items() if k != "func"}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    _print_table(console, summary)
    console.print(f"[dim]entries: {out / 'entries.jsonl'}  summary: {out / 'summary.json'}[/dim]")
    if summary.get("entries") and summary.get("errors") == summary.get("entries"):
        console.print(
            "[red]every entry ended in an error: nothing was measured (is the backend up and configured?)[/red]"
        )
        return 1
    return 0


def _each_agent(agents: list[str], run: Callable[[str], Any]) -> list[dict[str, Any]]:
    """The records of ``run(agent)`` (a coroutine of a list of results) for each agent in turn."""
    rows: list[dict[str, Any]] = []
    for agent in agents:
        rows += [r.record() for r in asyncio.run(run(agent))]
    return rows


# -- the three suites ----------------------------------------------------------------------------------
def _bench_bfcl(args: argparse.Namespace, agents: list[str], emit: Callable[..., None]) -> dict[str, Any]:
    from cave.benchmarks.bfcl import DEFAULT_CATEGORIES, arun_bfcl, require_bfcl

    require_bfcl()
    categories = args.categories.split(",") if args.categories else list(DEFAULT_CATEGORIES)
    llm = make_llm(args.model, args.model_option, args.base_url)
    rows = _each_agent(
        agents,
        lambda agent: arun_bfcl(
            categories,
            agent,
            llm,
            limit=args.limit,
            max_steps=args.max_steps or 4,
            native=args.native,
            runtime=args.runtime,
            agent_options=agent_options(args),
            single_turn_steps=args.single_turn_steps,
            on_result=lambda r: emit(r.record(), r.trajectory),
        ),
    )
    return summarize(rows, "category", "valid", title="BFCL accuracy by category")


def _bench_tau2(args: argparse.Namespace, agents: list[str], emit: Callable[..., None]) -> dict[str, Any]:
    from cave.benchmarks.tau2 import DEFAULT_AGENT_STEPS, log_to_file, pass_hat_k, require_tau2
    from cave.benchmarks.tau2.progress import run_domains
    from rich.console import Console

    log = log_to_file(
        Path(args.out) / "tau2.log"
    )  # tau2's own (loguru) logging, from its import on: not on the console
    require_tau2()
    llm = make_llm(args.model, args.model_option, args.base_url)
    user_llm = make_llm(args.user_model, [], args.base_url) if args.user_model else llm
    by_domain = run_domains(
        agents,
        args.domains.split(","),
        llm,
        user_llm,
        quiet=args.quiet,
        on_result=lambda r: emit(r.record(), r.trajectory),
        limit=args.limit,
        trials=args.trials,
        agent_steps=args.max_steps or DEFAULT_AGENT_STEPS,
        native=args.native,
        max_steps=args.sim_steps,
        timeout=args.task_timeout,
        runtime=args.runtime,
    )
    rows = [r.record() for runs in by_domain.values() for r in runs]
    passes = {
        key: {f"pass^{k}": pass_hat_k(runs, k) for k in range(1, args.trials + 1)} for key, runs in by_domain.items()
    }
    summary = summarize(rows, "domain", "success", title="Tau²-bench by domain")
    for group in summary["groups"]:
        group.update(passes.get(f"{group['agent']}/{group['domain']}", {}))
    summary["log"] = str(log)
    Console().print(f"[dim]tau2's log: {log}[/dim]")
    return summary


def _bench_data(args: argparse.Namespace, agents: list[str], emit: Callable[..., None]) -> dict[str, Any]:
    from cave.benchmarks.data import TASKS, arun_task, scripted_policy

    sizes = [int(s) for s in args.sizes.split(",")]
    tasks = args.tasks.split(",") if args.tasks else list(TASKS)[: args.limit]
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise SystemExit(f"unknown data task(s) {unknown}; known: {', '.join(TASKS)}")
    llm = None if args.scripted else make_llm(args.model, args.model_option, args.base_url)
    rows = []
    for agent in agents:
        for size in sizes:
            for task in tasks:
                model = scripted_policy(task, size, agent, context_window=args.context_window) if llm is None else llm
                kwargs: dict[str, Any] = {"max_steps": args.max_steps or 6, "runtime": args.runtime}
                if agent == "json":
                    kwargs["native"] = args.native
                r = asyncio.run(arun_task(task, size, agent, model, **kwargs))
                emit(r.record(), r.trajectory)
                rows.append(r.record())
    title = "Data-intensive tasks by size" + (" (fixed scripted policies)" if args.scripted else "")
    return summarize(rows, "size", "success", title=title)


register_suite(Suite("bfcl", "BFCL function calling: accuracy by category", _bfcl_options, _bench_bfcl))
register_suite(
    Suite("tau2", "Tau²-bench: agent + simulated user, graded by tau2's evaluator", _tau2_options, _bench_tau2)
)
register_suite(Suite("data", "data-intensive tasks over generated tables of growing size", _data_options, _bench_data))


def _search_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hops", default="1,2", help="hop counts to run, e.g. 1,2 (default: 1,2); --limit is per hop")
    p.add_argument("--split", default="test", choices=("train", "test"), help="question split (default: test)")
    runtime_option(p)
    tool_call_format(p)


def _bench_search(args: argparse.Namespace, agents: list[str], emit: Callable[..., None]) -> dict[str, Any]:
    from cave.benchmarks.search.run import aevaluate, questions, scores

    qs = questions(args.split, [int(h) for h in args.hops.split(",")], args.limit)
    llm = make_llm(args.model, args.model_option, args.base_url)
    on_result = lambda r: emit(r.record(), r.trajectory)  # noqa: E731
    rows = _each_agent(
        agents, lambda agent: aevaluate(agent, llm, qs, runtime=args.runtime, native=args.native, on_result=on_result)
    )
    summary = summarize(rows, "hops", "success", title="Search team: exact match by hop count")
    by_group = scores(r for r in rows if r.get("status") != "error")
    for g in summary["groups"]:
        g.update({k: v for k, v in by_group.get(f"{g['agent']}/{g['hops']}-hop", {}).items() if k in ("f1", "seconds")})
    from rich.console import Console

    for key, s in by_group.items():
        Console().print(f"{key}: EM {s['em']:.3f}  F1 {s['f1']:.3f}  {s['seconds']:.1f} s/question  n={s['n']}")
    return summary


register_suite(
    Suite("search", "Dr. MAS search: router -> search / answer over a local BM25 index", _search_options, _bench_search)
)

register_suite(
    Suite("analyst", "analyst tasks as people write them, over seeded messy data", analyst_options, bench_analyst)
)
register_suite(
    Suite(
        "dabench",
        "InfiAgent-DABench: closed-form questions over CSV files (--data DIR)",
        dabench_options,
        bench_dabench,
    )
)
register_suite(
    Suite(
        "databench",
        "DataBench (SemEval-2025 Task 8): closed-form questions over real tables, the competition's rule (--data DIR)",
        databench_options,
        bench_databench,
    )
)


def previous_rows(path: Path, *, rewrite: bool = False) -> list[dict[str, Any]]:
    """The rows an earlier run wrote; a line cut off by a kill, or an entry that ended in ``error`` (a dead
    backend, a missing data file: nothing about the agent), is dropped and that entry runs again; with ``rewrite``
    it is dropped from the file too, so that rows appended next start on a line of their own."""
    if not path.exists():
        return []
    rows, kept = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and row.get("status") != "error":
            rows.append(row)
            kept.append(line)
    if rewrite:
        path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
    return rows


def _print_table(console: Any, summary: dict[str, Any]) -> None:
    from rich.table import Table

    key = summary["key"]
    table = Table(title=summary["title"])
    extra = sorted({k for g in summary["groups"] for k in g if k.startswith("pass^")})
    has_overflow = any("overflow" in g for g in summary["groups"])
    for col in ["agent", key, "n", "errors", "success", *extra, "prompt tok/task", "total tok/task", "steps/task"]:
        table.add_column(col, justify="left" if col in ("agent", key) else "right")
    if has_overflow:
        table.add_column("overflow", justify="right")
    for g in summary["groups"]:
        rate = "—" if g["rate"] is None else f"{100 * g['rate']:.1f}%"
        cells = [g["agent"], str(g[key]), str(g["n"]), str(g.get("errors", 0)), rate]
        cells += [f"{g.get(k, 0):.3f}" for k in extra]
        cells += [f"{g['prompt_tokens']:,.0f}", f"{g['total_tokens']:,.0f}", f"{g['steps']:.1f}"]
        if has_overflow:
            cells.append(str(g.get("overflow", 0)))
        table.add_row(*cells)
    console.print(table)
    for agent, rate in summary["overall"].items():
        console.print(f"overall {agent}: {100 * rate:.1f}% of the entries that ran")
    if summary.get("errors"):
        console.print(
            f"[yellow]{summary['errors']} of {summary['entries']} entries ended in a backend or runtime error: "
            "not scored (see the error column of entries.jsonl)[/yellow]"
        )


if __name__ == "__main__":  # python -m cave.benchmarks.cli bfcl --model local --limit 2
    raise SystemExit(bench_main())
