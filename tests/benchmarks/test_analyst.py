"""The analyst suite: seeded data, oracles, the tolerant-but-honest comparison, checks, the CLI.

Every task is run with scripted policies: its correct solution must score correct, a plausible wrong answer
must score wrong (and, where the wrong answer passes the task's checks, be counted as a false success).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
from cave.benchmarks.analyst import generate as g
from cave.benchmarks.analyst.compare import same
from cave.benchmarks.analyst.run import analyst_report, run_task, scripted_policy
from cave.benchmarks.analyst.tasks import CATEGORIES, TASKS
from cave.benchmarks.cli import bench_main

from cave.llm.base import Scripted


def test_the_suite_covers_what_analysts_do() -> None:
    assert len(TASKS) >= 24
    assert {t.category for t in TASKS.values()} == set(CATEGORIES)
    assert {t.kind for t in TASKS.values()} >= {"number", "count", "share", "name", "names", "table", "frame"}
    assert sum("db" in t.inputs for t in TASKS.values()) >= 5
    with_checks = [t for t in TASKS.values() if t.checks]
    assert len(TASKS) / 4 <= len(with_checks) <= len(TASKS) / 2  # about a third carry checks


def test_data_is_seeded_and_messy() -> None:
    assert all(a.equals(b) for a, b in zip(g.tables(1).values(), g.tables(1).values(), strict=True))
    assert not g.orders(1).equals(g.orders(2))
    s = g.signups(0)
    assert s.duplicated().sum() == 14 and s["email"].isna().any() and (s["email"] != s["email"].str.strip()).any()
    assert (~g.orders(0)["customer_id"].isin(g.customers(0)["customer_id"])).sum() == 12  # orphan keys
    assert g.payments(0)["amount"].str.contains(r"\$").any() and g.payments(0)["amount"].isna().any()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_which_questions_have_one_clear_answer(seed) -> None:
    """The Q1->Q2 riser is the same by revenue, by units and by percentage: the question has one reading."""
    s = g.sales(seed).assign(q=lambda d: pd.to_datetime(d["date"]).dt.quarter)
    s["revenue"] = s["units"] * s["unit_price"]
    by = s.pivot_table(index="product", columns="q", values=["revenue", "units"], aggfunc="sum")
    winner = TASKS["product_rise"].reference(seed)
    assert (by["units"][2] - by["units"][1]).idxmax() == winner
    assert (by["revenue"][2] / by["revenue"][1]).idxmax() == winner
    p95 = g.requests(seed).groupby("service")["latency_ms"].quantile(0.95).sort_values()
    assert p95.iloc[-1] > 1.1 * p95.iloc[-2]  # no near tie for the worst service


def _wrong(task, seed: int = 0) -> str:
    """Code for a plausible wrong answer: the right shape, the wrong content (so it passes shape checks)."""
    ref = task.reference(seed)
    if task.kind == "frame":  # cleaned, but the emails keep their capitals
        return task.solution.replace(".str.strip().str.lower()", ".str.strip()")
    if task.kind == "table":
        first = next(iter(ref))
        value = {first: ref[first] * 1.1 + 5}
        return f"final_answer({ {**ref, **value}!r})"
    if task.kind == "names":
        other = next(n for n in task.candidates(seed) if n not in ref)
        return f"final_answer({[*ref[:-1], other]!r})"
    if task.kind == "name":
        return f"final_answer({next(c for c in task.candidates(seed) if c != ref)!r})"
    if task.kind == "month":
        month = int(ref[5:]) % 12 + 1
        return f"final_answer('2025-{month:02d}')"
    if task.kind == "count":
        return f"final_answer({ref + 1})"
    if task.kind == "share":
        return f"final_answer({ref + 0.03})"
    return f"final_answer({ref * 1.02 + 1})"


@pytest.mark.parametrize("task_id", list(TASKS))
def test_each_task_scores_a_right_and_a_wrong_answer(task_id) -> None:
    task = TASKS[task_id]
    right = run_task(task, "code", scripted_policy(task, "code"), runtime="inprocess")
    assert right.correct and right.trajectory.status == "success", right.reason
    # a literal typed into final_answer is held once (no output showed it); sent again, it stands
    wrong_reply = Scripted([f"```python\n{_wrong(task)}\n```"], repeat_last=True)
    wrong = run_task(task, "code", wrong_reply, runtime="inprocess", max_steps=2)
    assert not wrong.correct and wrong.reason and wrong.reason.startswith(("wrong answer", "no answer"))
    assert wrong.false_success == (wrong.trajectory.status == "success")
    if task.checks:  # the wrong answer has the right shape: it passes the checks, a false success
        assert wrong.false_success, wrong.reason
    json_right = run_task(task, "json", scripted_policy(task, "json"))
    assert json_right.correct, json_right.reason


def test_checks_refuse_a_wrong_shape() -> None:
    """Five names where three were asked: the row-count check refuses it, so the run cannot end in success."""
    llm = Scripted(["```python\nfinal_answer(list(customers['name'][:5]))\n```"], repeat_last=True)
    r = run_task("top_customers_2025", "code", llm, runtime="inprocess", max_steps=2)
    assert r.trajectory.status == "failed_checks" and not r.correct and not r.false_success
    assert "rows" in r.trajectory.error


def test_the_comparison_is_tolerant_but_honest() -> None:
    t = TASKS["revenue_per_month_2025"]
    ref = t.reference(0)
    as_frame = pd.DataFrame({"total": list(ref.values()), "month": pd.PeriodIndex(list(ref), freq="M")})
    assert same(as_frame, ref, "table", keys="month")  # key and value columns found whatever their order
    assert same({f"{k}-01": round(v, 2) for k, v in ref.items()}, ref, "table", keys="month")
    assert not same(dict(list(ref.items())[:-1]), ref, "table", keys="month")  # a missing month
    assert same("avg is 96.75", 96.7517, "number") and not same(96.2, 96.7517, "number")
    assert same(0.1748, 0.17475, "share") and same("17.5%", 0.17475, "share") and not same(0.2, 0.17475, "share")
    assert same(12.0, 12, "count") and not same(12.5, 12, "count")
    assert same("July", "2025-07", "month") and same(pd.Timestamp("2025-07-31"), "2025-07", "month")
    assert same(7, "2025-07", "month") and not same("June 2025", "2025-07", "month")
    names = list(g.REGIONS)
    assert same("The West region led.", "west", "name", candidates=names)
    assert not same("west, then north", "west", "name", candidates=names)  # names two: not an answer
    assert not same(["west", "north"], "west", "name", candidates=names)
    people = ["Ada Moss", "Gus Hart", "Kai Shaw", "Bo Reed"]
    top = ["Gus Hart", "Kai Shaw", "Ada Moss"]
    assert same(pd.DataFrame({"total": [3, 2, 1], "name": top}), top, "names", candidates=people)
    assert same(pd.Series([3.0, 2.0, 1.0], index=top), top, "names", candidates=people)
    assert same("Top: gus hart, Kai Shaw and Ada Moss", top, "names", candidates=people)
    assert not same(people, top, "names", candidates=people)
    clean = TASKS["clean_signups"].reference(0)
    shuffled = clean.sample(frac=1, random_state=1)[["signup_date", "user_id", "email"]].assign(extra=1)
    assert same(shuffled, clean, "frame") and not same(shuffled.iloc[1:], clean, "frame")
    assert same(clean.assign(signup_date=clean["signup_date"].dt.strftime("%Y-%m-%d")), clean, "frame")


def test_report_counts_false_successes_and_statuses() -> None:
    rows = [
        {"model": "m", "agent": "code", "category": "sql", "has_checks": True, "success": False,
         "false_success": True, "status": "success", "steps": 2, "prompt_tokens": 100, "duration": 1.0},
        {"model": "m", "agent": "code", "category": "join", "has_checks": False, "success": True,
         "false_success": False, "status": "no_code", "steps": 1, "prompt_tokens": 50, "duration": 3.0},
    ]  # fmt: skip
    (g_,) = analyst_report(rows)
    assert g_["correct"] == 0.5 and g_["false_success"] == 1 and g_["false_success_checked"] == 1
    assert g_["statuses"] == {"success": 1, "no_code": 1} and g_["seconds"] == 2.0
    assert g_["by_category"] == {"sql": 0.0, "join": 1.0}


def test_cli_scripted_run(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    out = tmp_path / "out"
    argv = ["analyst", "--scripted", "--agent", "code,json", "--runtime", "inprocess", "--out", str(out), "-q"]
    assert bench_main([*argv, "--tasks", "sql_biggest_city,clean_signups", "--seed", "1"]) == 0
    rows = [json.loads(line) for line in (out / "entries.jsonl").read_text().splitlines()]
    assert {(r["agent"], r["id"], r["success"], r["seed"]) for r in rows} == {
        (a, t, True, 1) for a in ("code", "json") for t in ("sql_biggest_city", "clean_signups")
    }
    assert len((out / "trajectories.jsonl").read_text().splitlines()) == 4
    summary = json.loads((out / "summary.json").read_text())
    assert [(gr["agent"], gr["correct"], gr["checked"]) for gr in summary["analyst"]] == [
        ("code", 1.0, 1),
        ("json", 1.0, 1),
    ]
    assert "Analyst tasks (seed 1)" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="unknown analyst task"):
        bench_main([*argv, "--tasks", "nope"])


def test_cave_bench_analyst_help() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cave", "bench", "analyst", "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "--tasks" in done.stdout and "--scripted" in done.stdout


def test_agent_options_reach_the_code_agent():
    import argparse

    from cave.benchmarks.analyst.suite import agent_option, agent_options

    p = argparse.ArgumentParser()
    agent_option(p)
    args = p.parse_args(["--agent-option", "review=true", "--agent-option", "response_prefix=```python\\n"])
    assert agent_options(args) == {"review": True, "response_prefix": "```python\n"}
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        agent_options(p.parse_args(["--agent-option", "review"]))


def test_verify_reaches_the_code_agent_of_the_analyst_and_dabench_suites():
    import argparse

    from cave.benchmarks.suite import agent_option, agent_options, verify_option

    p = argparse.ArgumentParser()
    agent_option(p)
    verify_option(p)
    assert agent_options(p.parse_args(["--verify", "3", "--agent-option", "review=true"])) == {
        "verify": 3,
        "review": True,
    }
    assert "verify" not in agent_options(p.parse_args([]))  # the agent's own default
    with pytest.raises(SystemExit, match="attempts >= 0"):
        agent_options(p.parse_args(["--verify", "-1"]))
    for suite in ("analyst", "dabench"):
        done = subprocess.run(
            [sys.executable, "-m", "cave", "bench", suite, "--help"], capture_output=True, text=True, timeout=60
        )
        assert "--verify N" in done.stdout, suite
