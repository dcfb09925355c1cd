"""Score the math team on data/problems.jsonl: N episodes per problem, as RL rollouts would run them.

    python examples/math_team/evaluate.py [--samples 4] [--limit 8] [--temperature 0.7]

Every episode is a plain team run (``Team.arun_many``: all episodes at once on one event loop, the
shared model behind its in-flight bound). Prints avg@k (mean success over the k samples) and pass@k
(any of k correct) as Dr. MAS reports them, plus the share of episodes the verifier approved.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
from pathlib import Path

from cave.team import load_team_task

HERE = Path(__file__).resolve().parent


def correct(answer: object, expected: float) -> bool:
    """Numerically equal (to 1e-6, relative), whatever type the model returned the number as."""
    try:
        value = float(str(answer).strip().strip("$").replace(",", ""))
    except ValueError:
        return False
    return math.isclose(value, expected, rel_tol=1e-6, abs_tol=1e-6)


async def evaluate(samples: int, limit: int | None, temperature: float | None) -> dict[str, float]:
    tt = load_team_task(HERE / "team_task.yaml")
    team = tt.team
    if temperature is not None:  # sampling, so the k samples of a problem can differ
        for role in team.roles.values():
            role.sampling.temperature = temperature
    problems = [json.loads(line) for line in (HERE / "data" / "problems.jsonl").read_text().splitlines() if line]
    problems = problems[:limit] if limit else problems
    tasks = [p["question"] + " Return the number." for p in problems for _ in range(samples)]
    seeds = [k for _ in problems for k in range(samples)]
    try:
        results = await team.arun_many(tasks, seeds=seeds)
    finally:
        await team.aclose()
    scores = [
        correct(r.answer, p["answer"])
        for r, p in zip(results, [p for p in problems for _ in range(samples)], strict=True)
    ]
    per_problem = [scores[i * samples : (i + 1) * samples] for i in range(len(problems))]
    approved = [any(v["approve"] for v in r.trajectory.meta.get("verdicts", [])) for r in results]
    return {
        "problems": len(problems),
        "samples": samples,
        f"avg@{samples}": sum(sum(s) / samples for s in per_problem) / len(problems),
        f"pass@{samples}": sum(any(s) for s in per_problem) / len(problems),
        "approved": sum(approved) / len(results),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--samples", type=int, default=4)
    p.add_argument("--limit", type=int, default=None, help="only the first N problems")
    p.add_argument("--temperature", type=float, default=None, help="override every role's temperature")
    args = p.parse_args()
    print(json.dumps(asyncio.run(evaluate(args.samples, args.limit, args.temperature)), indent=2))


if __name__ == "__main__":
    main()
