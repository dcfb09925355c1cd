"""A development probe of the traps that still end `success` while wrong on unseen work: a grouping or a filter by
a text column that holds one value in several spellings (case, spaces), a list asked for once per thing over rows
that repeat it, a count of entities over duplicated rows. New domains (a library's loans, parking tickets, a bike
shop's repairs), written at stop 54 as development data: its trajectories are read while building; it is not the
held-out suite.

Each task carries its oracle and the answer its trap gives (``naive``), so the probe says per run whether the
agent fell into the trap, got it right, or was wrong another way. Answers are compared by ``matches``: numbers to 2
decimals; names by their words, case and spaces aside, a list as a set of distinct names (a name listed in two
spellings is listed twice); a per-group answer as a mapping from group (read the same way) to number.

    python -m cave.benchmarks.probes.traps -q                  # one line per task, then the totals
    python -m cave.benchmarks.probes.traps loans_per_branch     # one task, its steps printed
    python -m cave.benchmarks.probes.traps --out FILE.jsonl     # also each run's trajectory, to read
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["TASKS", "TrapTask", "main", "matches", "outcome", "tables"]


# -- the data: three seeded tables, each text column that is grouped or filtered on written in several spellings ---
def _spell(rng: np.random.Generator, values: np.ndarray, share: float = 0.25) -> np.ndarray:
    """About ``share`` of ``values`` rewritten in another spelling of the same value (lower case, upper case,
    a space after)."""
    out = values.astype(object).copy()
    for i in np.flatnonzero(rng.random(len(values)) < share):
        out[i] = (str.lower, str.upper, lambda s: s + " ")[int(rng.integers(3))](str(out[i]))
    return out


def tables(seed: int = 54) -> dict[str, pd.DataFrame]:
    """``loans``, ``tickets`` and ``repairs``: the probe's given tables (seeded)."""
    rng = np.random.default_rng(seed)
    n = 360
    loans = pd.DataFrame(
        {
            "loan_id": np.arange(5001, 5001 + n),
            "member_id": rng.integers(100, 190, n),
            "branch": _spell(
                rng, rng.choice(["Central", "Riverside", "Hillcrest", "Old Town"], n, p=[0.4, 0.25, 0.2, 0.15])
            ),
            "genre": _spell(rng, rng.choice(["Mystery", "Biography", "Science", "Poetry", "History"], n), 0.15),
            "days_out": rng.integers(1, 45, n),
            "late_fee": np.round(np.where(rng.random(n) < 0.3, rng.uniform(0.5, 12, n), 0.0), 2),
        }
    )
    m = 300
    streets = ["Elm Street", "Harbor Road", "Kings Avenue", "Mill Lane", "Park Row", "Quarry Hill"]
    tickets = pd.DataFrame(
        {
            "ticket_no": [f"T{70000 + i}" for i in range(m)],
            "street": _spell(rng, rng.choice(streets, m), 0.2),
            "violation": _spell(rng, rng.choice(["Expired Meter", "Double Parking", "No Permit", "Fire Hydrant"], m)),
            "fine": rng.choice([35, 45, 65, 115], m).astype(float),
            "paid": rng.choice(["yes", "no"], m, p=[0.7, 0.3]),
        }
    )
    tickets.loc[rng.random(m) < 0.08, "fine"] = np.nan
    k = 220
    repairs = pd.DataFrame(
        {
            "repair_id": np.arange(1, k + 1),
            "customer_id": rng.integers(1, 80, k),
            "mechanic": _spell(rng, rng.choice(["Ines", "Tomas", "Priya", "Kwame"], k), 0.2),
            "part": rng.choice(["chain", "brake pad", "tyre", "cable", "spoke"], k),
            "hours": np.round(rng.uniform(0.25, 4, k), 2),
            "cost": np.round(rng.uniform(8, 160, k), 2),
        }
    )
    dup = repairs.sample(20, random_state=seed)  # the same repairs entered twice (an export run twice)
    repairs = pd.concat([repairs, dup]).sample(frac=1, random_state=seed).reset_index(drop=True)
    return {"loans": loans, "tickets": tickets, "repairs": repairs}


def _key(s: Any) -> str:
    return re.sub(r"\s+", " ", str(s)).strip().lower()


def _norm(df: pd.DataFrame, col: str) -> pd.Series:
    return df[col].map(_key)


# -- the tasks ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrapTask:
    name: str
    trap: str  # spellings_group, spellings_filter, distinct_list, entities, duplicates
    kind: str  # number, names, per_group
    inputs: tuple[str, ...]
    question: str
    oracle: Callable[[Mapping[str, pd.DataFrame]], Any]
    naive: Callable[[Mapping[str, pd.DataFrame]], Any]  # the answer the trap gives


def _per(df: pd.DataFrame, by: str, col: str, how: str, key: Callable[[Any], Any] = _key) -> dict[str, float]:
    return {str(k): float(v) for k, v in df.assign(_g=df[by].map(key)).groupby("_g")[col].agg(how).items()}


def _same_key(s: Any) -> Any:
    return s


def _unpaid_hydrant_45(tickets: pd.DataFrame, violation: pd.Series) -> pd.Series:
    return (violation == "fire hydrant") & (tickets.fine == 45) & (tickets.paid == "no")


TASKS: dict[str, TrapTask] = {
    t.name: t
    for t in [
        TrapTask(
            "loans_per_branch",
            "spellings_group",
            "per_group",
            ("loans",),
            "How many loans did each branch make? One number per branch.",
            lambda t: _per(t["loans"], "branch", "loan_id", "count"),
            lambda t: _per(t["loans"], "branch", "loan_id", "count", _same_key),
        ),
        TrapTask(
            "avg_days_per_genre",
            "spellings_group",
            "per_group",
            ("loans",),
            "What is the average number of days a book is kept out, per genre?",
            lambda t: _per(t["loans"], "genre", "days_out", "mean"),
            lambda t: _per(t["loans"], "genre", "days_out", "mean", _same_key),
        ),
        TrapTask(
            "median_fine_by_violation",
            "spellings_group",
            "per_group",
            ("tickets",),
            "Give the median fine by violation type.",
            lambda t: _per(t["tickets"], "violation", "fine", "median"),
            lambda t: _per(t["tickets"], "violation", "fine", "median", _same_key),
        ),
        TrapTask(
            "hours_by_mechanic",
            "spellings_group",
            "per_group",
            ("repairs",),
            "Total repair hours logged by each mechanic (count a repair entered twice once).",
            lambda t: _per(t["repairs"].drop_duplicates(), "mechanic", "hours", "sum"),
            lambda t: _per(t["repairs"], "mechanic", "hours", "sum", _same_key),
        ),
        TrapTask(
            "central_late_fees",
            "spellings_filter",
            "number",
            ("loans",),
            "What is the total in late fees charged at the Central branch?",
            lambda t: float(t["loans"].loc[_norm(t["loans"], "branch") == "central", "late_fee"].sum()),
            lambda t: float(t["loans"].loc[t["loans"].branch == "Central", "late_fee"].sum()),
        ),
        TrapTask(
            "double_parking_count",
            "spellings_filter",
            "number",
            ("tickets",),
            "How many tickets were written for double parking?",
            lambda t: int((_norm(t["tickets"], "violation") == "double parking").sum()),
            lambda t: int((t["tickets"].violation == "Double Parking").sum()),
        ),
        TrapTask(
            "poetry_share",
            "spellings_filter",
            "number",
            ("loans",),
            "What percentage of all loans were poetry books?",
            lambda t: float((_norm(t["loans"], "genre") == "poetry").mean() * 100),
            lambda t: float((t["loans"].genre == "Poetry").mean() * 100),
        ),
        TrapTask(
            "unpaid_hydrant_fines",
            "spellings_filter",
            "number",
            ("tickets",),
            "How much is owed in unpaid fire hydrant fines?",
            lambda t: float(
                t["tickets"]
                .loc[(_norm(t["tickets"], "violation") == "fire hydrant") & (t["tickets"].paid == "no"), "fine"]
                .sum()
            ),
            lambda t: float(
                t["tickets"].loc[(t["tickets"].violation == "Fire Hydrant") & (t["tickets"].paid == "no"), "fine"].sum()
            ),
        ),
        TrapTask(
            "streets_unpaid_hydrant",
            "distinct_list",
            "names",
            ("tickets",),
            "List the streets with an unpaid fire hydrant ticket of $45.",
            lambda t: sorted(
                set(_norm(t["tickets"], "street")[_unpaid_hydrant_45(t["tickets"], _norm(t["tickets"], "violation"))])
            ),
            lambda t: list(
                t["tickets"].street[_unpaid_hydrant_45(t["tickets"], t["tickets"].violation.map(_key))].unique()
            ),
        ),
        TrapTask(
            "genres_of_member",
            "distinct_list",
            "names",
            ("loans",),
            "Which genres has member 130 borrowed?",
            lambda t: sorted(set(_norm(t["loans"], "genre")[t["loans"].member_id == 130])),
            lambda t: list(t["loans"].loc[t["loans"].member_id == 130, "genre"].unique()),
        ),
        TrapTask(
            "branches_with_long_loans",
            "distinct_list",
            "names",
            ("loans",),
            "Which branches had a loan kept out longer than 40 days?",
            lambda t: sorted(set(_norm(t["loans"], "branch")[t["loans"].days_out > 40])),
            lambda t: list(t["loans"].loc[t["loans"].days_out > 40, "branch"].unique()),
        ),
        TrapTask(
            "repair_customers",
            "entities",
            "number",
            ("repairs",),
            "How many customers brought a bike in for a brake pad repair?",
            lambda t: int(t["repairs"].loc[t["repairs"].part == "brake pad", "customer_id"].nunique()),
            lambda t: int((t["repairs"].part == "brake pad").sum()),
        ),
        TrapTask(
            "members_with_fees",
            "entities",
            "number",
            ("loans",),
            "How many members have paid a late fee?",
            lambda t: int(t["loans"].loc[t["loans"].late_fee > 0, "member_id"].nunique()),
            lambda t: int((t["loans"].late_fee > 0).sum()),
        ),
        TrapTask(
            "mean_repair_cost",
            "duplicates",
            "number",
            ("repairs",),
            "What is the average cost of a repair? Some repairs were entered twice; count each once.",
            lambda t: float(t["repairs"].drop_duplicates().cost.mean()),
            lambda t: float(t["repairs"].cost.mean()),
        ),
        TrapTask(
            "chain_repairs",
            "duplicates",
            "number",
            ("repairs",),
            "How many chain repairs were done? The table has some repairs entered twice.",
            lambda t: int((t["repairs"].drop_duplicates().part == "chain").sum()),
            lambda t: int((t["repairs"].part == "chain").sum()),
        ),
    ]
}


# -- comparing ----------------------------------------------------------------------------------------------------
def _number(x: Any) -> float | None:
    if isinstance(x, bool):
        return None
    if hasattr(x, "item") and getattr(x, "size", 2) == 1:
        x = x.item()
    if isinstance(x, pd.Series | pd.DataFrame | list | tuple) and len(x) == 1:
        return _number(
            x.iloc[0] if isinstance(x, pd.Series) else x.iloc[0, -1] if isinstance(x, pd.DataFrame) else x[0]
        )
    try:
        f = float(str(x).replace(",", "").rstrip("%")) if isinstance(x, str) else float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _mapping(x: Any) -> dict[str, float] | None:
    """A per-group answer as {group (read case and spaces aside): number}; None when it is not one. Two spellings of
    one group stay two entries (a grouping that kept them apart is wrong)."""
    from cave.benchmarks.data.tasks import as_table

    x = as_table(x)
    if x is None:
        return None
    out: dict[str, float] = {}
    for k, v in x.items():
        n = _number(v)
        if n is None:
            return None
        out[_key(k) + "\0" * sum(_key(k) == _key(o) for o in out)] = n  # a second spelling: another entry
    return out


def _names(x: Any) -> list[str] | None:
    if isinstance(x, pd.DataFrame) and x.shape[1] == 1:
        x = x.iloc[:, 0]
    if isinstance(x, pd.Series | pd.Index | np.ndarray | pd.api.extensions.ExtensionArray):
        x = list(x)
    if isinstance(x, str):
        x = [p for p in re.split(r",|\n|;", x.strip("[]")) if p.strip(" '\"")]
    if not isinstance(x, list | tuple | set):
        return None
    return [_key(str(i).strip(" '\"")) for i in x]


def matches(answer: Any, truth: Any, kind: str, *, distinct: bool = True) -> bool:
    """Whether ``answer`` says what ``truth`` says, for a task of ``kind`` (``distinct``: a list of names must list
    each once; off to recognise the answer a trap gives, which may repeat them).

    >>> matches(12.004, 12, "number"), matches(["Elm Street", "elm street "], ["elm street"], "names")
    (True, False)
    >>> matches(pd.Series({"Central": 3, "central": 1}), {"central": 4}, "per_group")
    False
    """
    if kind == "number":
        a, b = _number(answer), _number(truth)
        return a is not None and b is not None and round(a, 2) == round(b, 2)
    if kind == "names":
        a, b = _names(answer), _names(truth)
        return a is not None and b is not None and (len(a) == len(set(a)) or not distinct) and set(a) == set(b)
    a, b = _mapping(answer), _mapping(truth)
    return a is not None and b is not None and a.keys() == b.keys() and all(round(a[k], 2) == round(b[k], 2) for k in a)


def outcome(task: TrapTask, answer: Any, given: Mapping[str, pd.DataFrame]) -> str:
    """'right', 'trap' (the answer the trap gives) or 'wrong' (wrong another way)."""
    if matches(answer, task.oracle(given), task.kind):
        return "right"
    naive = task.naive(given)
    if task.kind == "names" and (names := _names(answer)) is not None and len(names) > len(set(names)):
        return "trap"  # a name listed twice (in one spelling or two) is the trap of a list asked for once per thing
    return "trap" if matches(answer, naive, task.kind, distinct=False) else "wrong"


# -- running ------------------------------------------------------------------------------------------------------
async def run_task(
    task: TrapTask, llm: Any, *, verify: int | None = None, runtime: str | None = None
) -> dict[str, Any]:
    from cave.benchmarks.analyst.run import Inputs, run_code

    given = tables()
    frames = {name: given[name] for name in task.inputs}
    options = {} if verify is None else {"verify": verify}
    t0 = time.time()
    answer, traj = await run_code(task.question, Inputs(frames, {k: "" for k in frames}), llm, runtime=runtime,
                                  agent_options=options)  # fmt: skip
    return {
        "name": task.name,
        "trap": task.trap,
        "kind": task.kind,
        "outcome": outcome(task, answer, given),
        "status": traj.status,
        "answer": repr(answer)[:300],
        "steps": len(traj.steps),
        "seconds": round(time.time() - t0, 1),
        "unverified": traj.meta.get("unverified"),
        "trajectory": traj.to_dict(),
    }


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts over the runs: right, fell into the trap, wrong otherwise; successes and the wrong ones among them."""
    success = [r for r in rows if r["status"] == "success"]
    return {
        "tasks": len(rows),
        "right": sum(r["outcome"] == "right" for r in rows),
        "trap": sum(r["outcome"] == "trap" for r in rows),
        "wrong_other": sum(r["outcome"] == "wrong" for r in rows),
        "success": len(success),
        "wrong_among_success": sum(r["outcome"] != "right" for r in success),
        "right_ending_success": sum(r["outcome"] == "right" for r in success),
        "seconds_per_task": round(sum(r["seconds"] for r in rows) / max(1, len(rows)), 1),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        prog="python -m cave.benchmarks.probes.traps", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("names", nargs="*", help="task names (default: all)")
    parser.add_argument("--model", default="local", help="BACKEND[:MODEL] (default: local)")
    parser.add_argument("--verify", type=int, default=None, help="attempts that must agree (default: the agent's)")
    parser.add_argument("--runtime", default=None, help="sandbox, process, kernel or inprocess (default: the bench's)")
    parser.add_argument("--out", default=None, help="a JSONL file for each run's record and trajectory")
    parser.add_argument("-q", "--quiet", action="store_true", help="no steps, one line per task")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in TASKS]
    if unknown:
        parser.error(f"no such task: {', '.join(unknown)}; the tasks are {', '.join(TASKS)}")
    from cave.llm import create_backend

    llm = create_backend(args.model)
    rows = []
    for task in (TASKS[n] for n in args.names or TASKS):
        row = asyncio.run(run_task(task, llm, verify=args.verify, runtime=args.runtime))
        rows.append(row)
        print(f"{task.name:28} {task.trap:16} {row['outcome']:6} {row['status']:12} {row['seconds']:6.0f}s {row['answer'][:80]}",
              flush=True)  # fmt: skip
        if not args.quiet:
            for step in row["trajectory"]["steps"]:
                print(f"--- step {step['index']}:\n{(step.get('code') or step.get('completion') or '')[:1200]}")
                print(">>>", str(step.get("observation"))[:800])
        if args.out:
            with open(args.out, "a", encoding="utf-8") as f:
                f.write(json.dumps(row, default=str) + "\n")
    summary = totals(rows)
    print("TOTAL", json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
