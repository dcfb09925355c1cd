"""``python -m cave.benchmarks.heldout``: the code agent on the frozen held-out suite; totals only.

It prints and writes totals (per suite, answer kind and trap kind): never a task's question, answer or trajectory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any


def build_parser() -> argparse.ArgumentParser:
    from cave.benchmarks.suite import agent_option, verify_option

    p = argparse.ArgumentParser(
        prog="python -m cave.benchmarks.heldout",
        description="Run the code agent on the frozen held-out suite and report totals only "
        "(per suite, answer kind and trap kind); no task text, answer or trajectory is shown or written.",
    )
    p.add_argument("--limit", type=int, default=None, help="run the first N tasks only")
    p.add_argument("--tasks", help="comma-separated task ids (default: all)")
    p.add_argument(
        "--sample",
        type=int,
        default=None,
        metavar="N",
        help="run N tasks drawn at random (seeded by --sample-seed) across every domain, instead of the first N",
    )
    p.add_argument("--sample-seed", type=int, default=0, help="the seed of --sample (default: 0)")
    p.add_argument("--model", default="local", help="the model (default: local, the embedded model)")
    p.add_argument("--model-option", action="append", default=[], metavar="KEY=VALUE", help="backend option")
    p.add_argument("--base-url", default=None, help="the backend's base URL")
    p.add_argument("--runtime", default=None, help="the code agent's runtime (default: the benches' default)")
    p.add_argument("--max-steps", type=int, default=6, help="steps per task (default: 6)")
    verify_option(p)
    agent_option(p)
    p.add_argument("--out", default=None, help="write the totals as JSON to this file")
    return p


def main(argv: list[str] | None = None) -> int:
    from cave.benchmarks.analyst.suite import agent_options
    from cave.benchmarks.heldout.run import (
        SUITE,
        accepts_verify,
        arun,
        format_fired,
        format_report,
        full_report,
        suite_sha256,
    )
    from cave.benchmarks.heldout.tasks import TASKS

    args = build_parser().parse_args(argv)
    ids = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else list(TASKS)
    unknown = [t for t in ids if t not in TASKS]
    if unknown:
        raise SystemExit(f"unknown held-out task id(s): {', '.join(unknown)}")
    if args.sample is not None:  # a spread over the domains, not the first few of them
        import random

        ids = sorted(random.Random(args.sample_seed).sample(ids, min(args.sample, len(ids))), key=ids.index)
    ids = ids[: args.limit] if args.limit is not None else ids
    options: dict[str, Any] = agent_options(args)
    if args.verify is not None:
        options["verify"] = args.verify
    if "verify" in options and not accepts_verify():
        raise SystemExit(
            "--verify needs cave.agent.Agent(verify=N), which this checkout's Agent does not accept yet; "
            "run without --verify (or on a checkout whose Agent has it)"
        )
    from cave.benchmarks.cli import make_llm

    llm = make_llm(args.model, args.model_option, args.base_url)
    out = Path(args.out) if args.out else None
    meta: dict[str, Any] = {
        "suite": SUITE,
        "suite_sha256": suite_sha256(),
        "model": args.model,
        "max_steps": args.max_steps,
        "verify": options.get("verify", "agent default"),
        "agent_options": {k: v for k, v in options.items() if k != "verify"},
        "tasks_selected": len(ids),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    rows = []
    for i, tid in enumerate(ids, 1):
        rows.append(
            asyncio.run(arun(tid, llm, max_steps=args.max_steps, runtime=args.runtime, agent_options=options or None))
        )
        print(f"{i}/{len(ids)} tasks done", file=sys.stderr, flush=True)
        if out is not None and i < len(ids):  # the totals so far (a run stopped early still reports them)
            _write(out, {**meta, "done": i, "complete": False, **full_report(rows)})
    rep = full_report(rows)
    meta["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(format_report(rep["verify_on"], f"held-out suite ({len(rows)} tasks, model {args.model})"))
    if "verify_off" in rep:
        print()
        print(format_report(rep["verify_off"], f"the same runs with verify off ({rep['verified_runs']} verified)"))
    if "kept_not_verified" in rep:
        print()
        n = rep["kept_verified_runs"]
        print(format_report(rep["kept_not_verified"], f"the same runs, the {n} kept held answers not verified"))
    for key in sorted(k for k in rep if k.startswith("verify_") and k[7:].isdigit()):
        print()
        print(format_report(rep[key], f"the same runs with verify {key[7:]} (its first attempts)"))
    print()
    print(format_fired(rep, len(rows)))
    if out is not None:
        _write(out, {**meta, "done": len(rows), "complete": True, **rep})
        print(f"\ntotals written to {out}")
    return 0


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    tmp.replace(path)


if __name__ == "__main__":
    sys.exit(main())
