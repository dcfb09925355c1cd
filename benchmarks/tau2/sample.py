"""pass^k on a small sample with the embedded model as agent and user: what fits a CPU in minutes.

    python -m cave.benchmarks.tau2.sample --domains airline,retail,telecom --agents code,json \\
        --limit 1 --trials 2 --task-timeout 150 --out benchmarks/results/tau2-sample-local.json

``cave bench tau2 --model local`` gives the agent and the user simulator *one* llama.cpp context: they take turns,
their prompts share no prefix, so every call evaluates its whole prompt again (4-7k tokens of policy and tools for
the agent: minutes on 2 busy cores). Here each gets its own context (``--n-ctx`` / ``--user-n-ctx``; the weights
are mmapped once), so each call evaluates only what is new since its previous call. The rest is ``cave bench
tau2``'s: ``run_domain`` per (agent, domain) with the per-task time limit and the progress display, tau2's
pass^k. The JSON file holds the command, the configuration, one record per (task, trial) and the summary.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from statistics import mean
from typing import Any

from cave.benchmarks.tau2.agents import require_tau2
from cave.benchmarks.tau2.progress import run_domains
from cave.benchmarks.tau2.run import DEFAULT_AGENT_STEPS, drain_generations, log_to_file, pass_hat_k


def summarize(runs: list[Any], trials: int) -> dict[str, Any]:
    records = [r.record() for r in runs]
    scored = [r for r in records if r["status"] != "error"]
    return {
        "runs": len(records),
        "finished": len(scored),
        "errors": len(records) - len(scored),
        "timeouts": sum(r["termination"] == "timeout" for r in records),
        **{f"pass^{k}": pass_hat_k(runs, k) for k in range(1, trials + 1)},
        "mean_reward": mean(r["reward"] for r in records) if records else 0.0,
        "mean_reward_finished": mean(r["reward"] for r in scored) if scored else None,
        "agent_tokens_per_task": mean(r["total_tokens"] for r in records) if records else 0,
        "agent_tokens_per_finished_task": mean(r["total_tokens"] for r in scored) if scored else None,
        "user_tokens_per_task": mean(r["user_total_tokens"] for r in records) if records else 0,
        "seconds_per_task": mean(r["duration"] for r in records) if records else 0,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cave.benchmarks.tau2.sample", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="qwen", help="embedded model name or .gguf path (default: %(default)s)")
    p.add_argument("--domains", default="airline,retail,telecom")
    p.add_argument("--agents", default="code,json")
    p.add_argument("--limit", type=int, default=1, help="first N tasks per domain (default: %(default)s)")
    p.add_argument("--task-ids", default=None, help="comma-separated task ids (instead of --limit)")
    p.add_argument("--trials", type=int, default=2)
    p.add_argument("--task-timeout", type=float, default=150.0, metavar="SECONDS")
    p.add_argument("--sim-steps", type=int, default=10, help="orchestrator steps per simulation")
    p.add_argument("--max-steps", type=int, default=DEFAULT_AGENT_STEPS, help="code agent: LLM calls per user turn")
    p.add_argument("--n-ctx", type=int, default=16384, help="the agent's context window")
    p.add_argument("--user-n-ctx", type=int, default=8192, help="the user simulator's context window")
    p.add_argument("--runtime", default=None, help="where the code agent's code runs (default: the sandbox default)")
    p.add_argument("--out", type=Path, required=True, help="the JSON result file")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    a = p.parse_args(argv)

    log_to_file(a.out.with_suffix(".log"))
    require_tau2()
    from cave.llm.base import create_backend

    llm = create_backend("local", model=a.model, n_ctx=a.n_ctx)
    user_llm = create_backend("local", model=a.model, n_ctx=a.user_n_ctx)
    task_ids = a.task_ids.split(",") if a.task_ids else None
    t0 = time.time()
    by_domain = run_domains(
        a.agents.split(","),
        a.domains.split(","),
        llm,
        user_llm,
        quiet=a.quiet,
        limit=None if task_ids else a.limit,
        task_ids=task_ids,
        trials=a.trials,
        agent_steps=a.max_steps,
        max_steps=a.sim_steps,
        timeout=a.task_timeout,
        runtime=a.runtime,
    )
    records = [r.record() for runs in by_domain.values() for r in runs]
    summary = {key: summarize(runs, a.trials) for key, runs in by_domain.items()}
    left = drain_generations(llm, user_llm)
    result = {
        "command": "python -m cave.benchmarks.tau2.sample " + " ".join(sys.argv[1:] if argv is None else argv),
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(a).items()},
        "model": getattr(llm, "model_name", a.model),
        "wall_seconds": round(time.time() - t0, 1),
        "summary": summary,
        "records": records,
        "generations_left_running": left,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"tau2 sample, {a.trials} trials per task ({a.out})")
    cols = (
        "agent/domain",
        "runs",
        "finished",
        "timeouts",
        "pass^1",
        f"pass^{a.trials}",
        "reward",
        "tokens/finished task",
    )
    for col in cols:
        t.add_column(col)
    for key, s in summary.items():
        t.add_row(
            key,
            str(s["runs"]),
            str(s["finished"]),
            str(s["timeouts"]),
            f"{s['pass^1']:.2f}",
            f"{s[f'pass^{a.trials}']:.2f}",
            f"{s['mean_reward']:.2f}",
            "-" if s["agent_tokens_per_finished_task"] is None else f"{s['agent_tokens_per_finished_task']:.0f}",
        )
    Console(width=160).print(t)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
