"""Team orchestration micro-benchmarks: ``python -m cave.benchmarks.perf.team [--quick] [--no-ray] [--out results.jsonl]``.

Every role runs on a Scripted backend and an in-process runtime, so what is measured is cave's
own work (the agent loop, the pattern, hand-offs, the trajectory), not a model. Printed as a
table, each number next to a baseline measured in the same process:

- team episodes per second (solver/verifier loop, 2 rounds = 4 role turns), one at a time,
  vs the same 4 turns as plain ``Agent.arun`` calls (the cost of the orchestration);
- routing overhead per hop: a router episode of 8 hops; the orchestrator's own time per turn
  (episode time minus the time inside the agents and runtime setup; target < 1 ms), and a whole
  hop (router turn + chosen role's turn) vs two plain agent turns;
- 256 concurrent episodes on one event loop: errors, wall time, episodes/s;
- a Ray pool of 2 workers vs the local pool on the same episodes (throughput; Ray start-up
  reported apart). Skipped without ray installed or with ``--no-ray``.

Real model: ``python -m cave.benchmarks.perf.team --model qwen [--problems 3]`` runs the solver/verifier
team of examples/math_team (both roles on one loaded embedded model) on its first problems twice in the
same process: with the backend's saved KV states (``kv_slots=4``, the default) and without (``kv_slots=0``:
llama.cpp holds only the last caller's prompt, so every switch between roles re-reads the whole prompt).
Reported per setting: role calls, prompt tokens, the share of prompt tokens served from the KV cache, wall
time, answers; and the wall-time ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

from cave.agent import Agent
from cave.llm.base import Scripted
from cave.team import LocalPool, Team

FENCE = "```"


# -- the workloads (module level: Ray workers import them) -------------------------------------------
def _user(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m["content"]) for m in messages if m["role"] == "user"]


def solver_reply(messages: list[dict[str, Any]]) -> str:
    revised = any("rejected" in t for t in _user(messages))
    return f"Computing.\n{FENCE}python\nx = 21 * 2\nfinal_answer(x if {revised} else x + 1)\n{FENCE}"


def verifier_reply(messages: list[dict[str, Any]]) -> str:
    ok = "answer:\n42" in _user(messages)[-1]
    return f"Checking.\n{FENCE}python\nverdict(approve={ok}, feedback='expected 42')\n{FENCE}"


def router_reply(messages: list[dict[str, Any]]) -> str:
    done = _user(messages)[-1].count("\n") - _user(messages)[-1].count("(nothing yet)")
    target = "answer" if "7. search" in _user(messages)[-1] else "search"
    return f"Next.\n{FENCE}python\nroute({target!r}, message='step {done}')\n{FENCE}"


def search_reply(messages: list[dict[str, Any]]) -> str:
    return f"Looking.\n{FENCE}python\nfinal_answer('fact')\n{FENCE}"


def answer_reply(messages: list[dict[str, Any]]) -> str:
    return f"Answering.\n{FENCE}python\nfinal_answer('42')\n{FENCE}"


def loop_team() -> Team:
    return Team.build(
        [{"use": "solver", "backend": "s"}, {"use": "verifier", "backend": "v"}],
        {"name": "loop", "max_rounds": 2},
        backends={"s": Scripted(solver_reply), "v": Scripted(verifier_reply)},
        max_in_flight=64,
    )


def router_team() -> Team:
    return Team.build(
        [{"use": "router", "backend": "r"}, {"use": "search", "backend": "s"}, {"use": "answer", "backend": "a"}],
        {"name": "router", "finish": ["answer"], "max_hops": 8},
        backends={"r": Scripted(router_reply), "s": Scripted(search_reply), "a": Scripted(answer_reply)},
    )


# -- measuring ------------------------------------------------------------------------------------
@dataclass
class Row:
    name: str
    value: float
    unit: str
    baseline: float | None = None
    baseline_name: str = ""
    note: str = ""

    @property
    def ratio(self) -> float | None:
        return self.value / self.baseline if self.baseline else None


async def plain_turns(n_episodes: int) -> float:
    """Seconds for n_episodes x the loop's 4 turns as plain Agent runs (fresh runtimes each, like a team)."""
    t0 = time.perf_counter()
    for _ in range(n_episodes):
        for reply in (solver_reply, verifier_reply, solver_reply, verifier_reply):
            agent = Agent(Scripted(reply), "inprocess", max_steps=3, stream=False)
            from cave.team import verdict

            agent.runtime.inject_function(verdict)
            await agent.arun("double check: rejected? answer:\n42")
            agent.runtime.close()
    return time.perf_counter() - t0


async def episodes_per_second(n: int) -> tuple[float, float]:
    team = loop_team()
    await team.arun("warm up")
    t0 = time.perf_counter()
    for i in range(n):
        r = await team.arun("What is 21 * 2?", seed=i)
        assert r.ok and r.answer == 42, r.trajectory.error
    team_s = time.perf_counter() - t0
    plain_s = await plain_turns(n)
    return n / team_s, n / plain_s


async def routing_overhead(n: int) -> tuple[float, float, float]:
    """(median orchestrator ms per turn, ms per hop, ms per plain agent turn x 2)."""
    team = router_team()
    await team.arun("warm up")
    per_turn, per_hop = [], []
    for i in range(n):
        r = await team.arun("Find the fact.", seed=i)
        assert r.ok and r.answer == "42", r.trajectory.error
        timing = r.trajectory.meta["timing"]
        per_turn.append(timing["overhead_per_turn_ms"])
        per_hop.append(timing["episode_s"] * 1000 / r.trajectory.meta["hops"])
    t0 = time.perf_counter()
    agents = [Agent(Scripted(search_reply), "inprocess", max_steps=2, stream=False) for _ in range(2 * n)]
    for a in agents:
        await a.arun("Find the fact.")
    plain_pair_ms = (time.perf_counter() - t0) * 1000 / n
    for a in agents:
        a.runtime.close()
    return statistics.median(per_turn), statistics.median(per_hop), plain_pair_ms


async def concurrent(n: int) -> tuple[float, int, float]:
    team = loop_team()
    t0 = time.perf_counter()
    results = await asyncio.gather(*(team.arun("What is 21 * 2?", seed=i) for i in range(n)), return_exceptions=True)
    wall = time.perf_counter() - t0
    errors = sum(1 for r in results if isinstance(r, BaseException) or not r.ok or r.answer != 42)
    return wall, errors, n / wall


def ray_vs_local(n: int, workers: int) -> tuple[float, float, float] | str:
    try:
        import ray
    except ImportError:
        return "ray not installed (pip install 'cave[scale]')"
    from cave.team.ray_pool import RayTeamPool

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    tasks = ["What is 21 * 2?"] * n
    t0 = time.perf_counter()
    pool = RayTeamPool(loop_team, num_workers=workers, init={"num_cpus": max(2, workers)})
    pool.info()  # the actors are up
    start_s = time.perf_counter() - t0
    try:
        pool.run_many(tasks[: min(n, 16)])  # warm up each worker
        t0 = time.perf_counter()
        results = pool.run_many(tasks, seeds=list(range(n)))
        ray_s = time.perf_counter() - t0
        assert all(r.ok for r in results)
    finally:
        pool.close(shutdown=True)
    local = LocalPool(loop_team())
    t0 = time.perf_counter()
    results = local.run_many(tasks, seeds=list(range(n)))
    local_s = time.perf_counter() - t0
    assert all(r.ok for r in results)
    del ray
    return n / ray_s, n / local_s, start_s


async def measure(quick: bool) -> list[Row]:
    n = 30 if quick else 200
    rows: list[Row] = []
    team_eps, plain_eps = await episodes_per_second(n)
    rows.append(
        Row(
            "loop episodes/s, one at a time (4 turns)",
            team_eps,
            "ep/s",
            plain_eps,
            "4 plain Agent runs",
            f"{n} episodes",
        )
    )
    turn_ms, hop_ms, pair_ms = await routing_overhead(n // 2)
    rows.append(
        Row("router: orchestrator overhead per turn", turn_ms, "ms", 1.0, "target", "median over episodes of 8 hops")
    )
    rows.append(Row("router: one hop (router + chosen role)", hop_ms, "ms", pair_ms, "2 plain Agent runs"))
    wall, errors, eps = await concurrent(256)
    rows.append(Row("256 concurrent loop episodes, one loop", wall, "s", None, "", f"{errors} errors, {eps:.0f} ep/s"))
    return rows


def print_table(rows: list[Row], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for col in ("measurement", "value", "baseline", "ratio", "notes"):
        table.add_column(col, justify="left" if col in ("measurement", "notes") else "right")
    for r in rows:
        base = f"{r.baseline:.3g} {r.unit} ({r.baseline_name})" if r.baseline is not None else "—"
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else "—"
        table.add_row(r.name, f"{r.value:.3g} {r.unit}", base, ratio, r.note)
    console = Console()
    if not console.is_terminal:  # a pipe or a log file: do not wrap the table at 80 columns
        console = Console(width=140)
    console.print(table)


def run_real(model: str, problems: int) -> list[dict[str, Any]]:
    """The math team on a real model, with and without saved KV states (see the module docstring)."""
    from pathlib import Path

    from cave.team import arun_team_task, load_team_task, make_backend

    root = Path(__file__).resolve().parents[2]
    path = root / "examples" / "math_team" / "team_task.yaml"
    lines = (root / "examples" / "math_team" / "data" / "problems.jsonl").read_text().splitlines()[:problems]
    questions = [json.loads(line)["question"] for line in lines]
    rows = []
    for slots in (0, 4):
        llm = make_backend("local", model=model, seed=0, kv_slots=slots)
        calls = prompt = cached = 0
        answers = []
        t0 = time.perf_counter()
        for q in questions:
            tt = load_team_task(path, backends={"default": llm})
            tt.task.spec.task = q
            outcome = asyncio.run(arun_team_task(tt))
            traj = outcome.result.trajectory
            calls += len(traj.steps)
            prompt += sum(s.usage.prompt_tokens for s in traj.steps if s.usage)
            cached += sum(s.usage.cached_tokens for s in traj.steps if s.usage)
            answers.append(outcome.result.answer)
        wall = time.perf_counter() - t0
        asyncio.run(llm.aclose())
        rows.append(
            {
                "kv_slots": slots,
                "calls": calls,
                "prompt_tokens": prompt,
                "cached_share": cached / max(prompt, 1),
                "wall_s": wall,
                "answers": [str(a) for a in answers],
            }  # fmt: skip
        )
    return rows


def print_real(rows: list[dict[str, Any]], model: str) -> None:
    from rich.console import Console
    from rich.table import Table

    base = rows[0]["wall_s"]
    table = Table(title=f"math team (solver + verifier on one model: {model}): saved KV states on / off")
    for col in ("kv_slots", "role calls", "prompt tokens", "cached share", "wall s", "vs kv_slots=0", "answers"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            str(r["kv_slots"]), str(r["calls"]), f"{r['prompt_tokens']:,}", f"{r['cached_share']:.0%}",
            f"{r['wall_s']:.1f}", f"{r['wall_s'] / base:.2f}x", ", ".join(r["answers"]),
        )  # fmt: skip
    Console(width=140).print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cave.benchmarks.perf.team", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer episodes (well under a minute)")
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray pool comparison")
    parser.add_argument("--workers", type=int, default=2, help="Ray workers (default 2)")
    parser.add_argument("--out", default=None, help="append the rows as JSON lines to this file")
    parser.add_argument(
        "--model", help="run the math team on this embedded model (e.g. qwen) with and without saved KV states"
    )
    parser.add_argument("--problems", type=int, default=3, help="with --model: problems to run (default 3)")
    args = parser.parse_args(argv)
    if args.model:
        rows_real = run_real(args.model, args.problems)
        print_real(rows_real, args.model)
        if args.out:
            with open(args.out, "a", encoding="utf-8") as f:
                for r in rows_real:
                    f.write(json.dumps({"bench": "team-real", "model": args.model, **r, "time": time.time()}) + "\n")
        return 0

    rows = asyncio.run(measure(args.quick))
    if not args.no_ray:
        n = 64 if args.quick else 512
        got = ray_vs_local(n, args.workers)
        if isinstance(got, str):
            rows.append(Row("Ray pool throughput", float("nan"), "ep/s", None, "", f"skipped: {got}"))
        else:
            ray_eps, local_eps, start_s = got
            note = f"{n} episodes, {args.workers} workers; Ray start-up {start_s:.1f} s not included"
            rows.append(Row("Ray pool throughput", ray_eps, "ep/s", local_eps, "local pool, one loop", note))
    print_table(rows, f"cave teams — Scripted backends ({'quick' if args.quick else 'full'} run)")
    if args.out:
        meta = {"python": platform.python_version(), "cpus": os.cpu_count(), "argv": sys.argv[1:], "time": time.time()}
        with open(args.out, "a", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps({"bench": "team", **asdict(r), "ratio": r.ratio, **meta}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
