"""The data-intensive suite: seeded data, exact references, and the token table of the two designs."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pandas as pd
import pytest
from cave.benchmarks.cli import bench_main
from cave.benchmarks.data import SIZES, TASKS, check, make_db, run_task, sales, scripted_policy, token_table
from cave.benchmarks.data.generate import customers, logs, orders
from cave.benchmarks.rewards import reward

from cave.llm.base import Scripted


def test_generators_are_seeded_and_sized(tmp_path) -> None:
    assert sales(1000, seed=3).equals(sales(1000, seed=3))
    assert not sales(1000, seed=3).equals(sales(1000, seed=4))
    assert len(logs(10_000)) == 10_000 and len(orders(1000)) == 1000
    db = make_db(1000, 0, tmp_path / "shop.db")
    con = sqlite3.connect(db)
    assert con.execute("SELECT COUNT(*) FROM orders").fetchone()[0] == 1000
    assert con.execute("SELECT COUNT(*) FROM customers").fetchone()[0] == len(customers(1000))
    con.close()


def test_references_are_exact_and_the_checker_is_strict() -> None:
    df = sales(1000)
    t = TASKS["sales_revenue_by_region"]
    ref = t.reference(1000)
    assert ref == {k: round(float(v), 2) for k, v in df.groupby("region")["revenue"].sum().items()}
    assert check(df.groupby("region")["revenue"].sum(), ref, "table")  # a live Series
    assert check(json.dumps(ref), ref, "table")  # the JSON agent's text
    wrong = dict(ref, north=ref["north"] + 0.01)
    assert not check(wrong, ref, "table")
    assert check(pd.DataFrame({"region": list(ref), "revenue": list(ref.values())}), ref, "table")
    assert check("The slowest is payments.", "payments", "name") and not check("paymentsx", "payments", "name")


def test_token_table_with_fixed_scripted_policies() -> None:
    """Prompt tokens per size for each design: the code agent's stay flat, the JSON agent's grow with the data."""
    results = asyncio.run(token_table(SIZES, ["sales_total_revenue", "shop_top_customer"], context_window=32_768))
    table = {(r.task, r.size, r.agent): r for r in results}
    for task in ["sales_total_revenue", "shop_top_customer"]:
        code = [table[(task, n, "code")] for n in SIZES]
        js = [table[(task, n, "json")] for n in SIZES]
        assert all(r.success and not r.overflow for r in code)
        # flat: the data profile's counts and ranges gain digits with the rows (100 -> 100000), nothing else grows
        assert max(r.prompt_tokens for r in code) - min(r.prompt_tokens for r in code) <= 25
        assert all(a.prompt_tokens < b.prompt_tokens for a, b in zip(js, js[1:], strict=False))  # grows with rows
        assert js[0].success and not js[0].overflow  # 100 rows fit a 32k window
        assert js[-1].overflow and not js[-1].success  # 100k rows do not
        assert js[-1].prompt_tokens > 1000 * code[-1].prompt_tokens
    assert table[("sales_total_revenue", 1000, "json")].overflow  # ~39k tokens of rows at 1k rows


def test_real_answers_are_checked_and_rewarded() -> None:
    right = run_task("logs_error_rate", 1000, "code", scripted_policy("logs_error_rate", 1000, "code"))
    assert right.success and reward(right.trajectory) == 1.0
    wrong = run_task("logs_error_rate", 1000, "code", Scripted(["```python\nfinal_answer(12.5)\n```"]))
    assert not wrong.success and reward(wrong.trajectory) == 0.0
    # The JSON agent with a model that computes nothing: its text answer is checked the same way.
    guess = run_task(
        "logs_slowest_service",
        100,
        "json",
        Scripted(['{"tool_calls": [{"name": "get_rows", "arguments": {"dataset": "logs"}}]}', "auth"]),
    )
    assert guess.success == (TASKS["logs_slowest_service"].reference(100) == "auth")
    assert guess.trajectory.steps[0].meta["tool_calls"][0]["output"].startswith("[{")


@pytest.mark.parametrize(
    "suite_args", [["data", "--scripted", "--sizes", "100,1000", "--tasks", "sales_total_revenue"]]
)
def test_cli_writes_entries_and_summary(tmp_path, suite_args, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the table has an errors column now: room for every header
    out = tmp_path / "out"
    assert bench_main([*suite_args, "--agent", "code,json", "--out", str(out), "-q"]) == 0
    rows = [json.loads(line) for line in (out / "entries.jsonl").read_text().splitlines()]
    assert {(r["agent"], r["size"]) for r in rows} == {("code", 100), ("code", 1000), ("json", 100), ("json", 1000)}
    trajectories = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(trajectories) == 4 and all(t["trajectory"]["steps"] for t in trajectories)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"] == {"code": 1.0, "json": 0.5}
    printed = capsys.readouterr().out
    assert "Data-intensive tasks by size" in printed and "overflow" in printed


def test_cli_rejects_unknown_agent(tmp_path) -> None:
    assert bench_main(["data", "--scripted", "--agent", "xml", "--out", str(tmp_path)]) == 2


def test_a_failed_entry_says_why():
    from cave.benchmarks.data import TASKS, run_task

    from cave.llm.base import Scripted

    task = next(iter(TASKS))
    r = run_task(
        task, 100, "code", Scripted(["```python\nfinal_answer('surely not the answer')\n```"], repeat_last=True)
    )
    assert not r.success and r.record()["error"].startswith("wrong answer: got 'surely not the answer', expected")
    r = run_task(task, 100, "code", Scripted(["```python\nx = 1\n```"], repeat_last=True), max_steps=2)
    assert r.record()["error"].startswith("no answer: the run ended with status max_steps")
