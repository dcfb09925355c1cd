"""The fault suite: kernel crashes mid-episode, a misbehaving LLM backend, kill -9 of `cave run` and
--resume. Real kernels, a real SQLite store, a real HTTP server on 127.0.0.1 (nothing leaves the machine)."""

from __future__ import annotations

import pytest

from tests.reliability import scenarios
from tests.security.attempts import require_sandbox

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize("mode", ["process", "sandbox"])
def test_kernel_crashes_mid_episode_are_survived(mode):
    if mode == "sandbox":
        require_sandbox()
    r = scenarios.crash_episode(mode)
    assert r["status"] == "success", r["observations"]
    assert r["answer"] == r["expected"]  # `sales` was injected again after every restart
    assert r["faults_seen_by_agent"] == [name for name, _, _ in scenarios.CRASHES], r["observations"]
    assert r["restarts"] >= 3
    crash_obs = r["observations"][1]
    assert "restarted" in crash_obs and "registered objects" in crash_obs  # the agent is told what happened


@pytest.mark.parametrize("fault", ["error500", "slow", "drop", "down"])
def test_backend_faults_retry_then_fail_clearly_and_keep_the_steps(fault, tmp_path):
    r = scenarios.llm_fault(fault, db_dir=str(tmp_path))
    assert r["status"] == "error" and r["stored_status"] == "error", r["error"]
    assert r["steps_done"] == 2 and r["steps_stored"] == 2  # the trajectory so far is saved
    assert r["url"] in r["error"] and "gave up after 3 attempts" in r["error"]
    expected_requests = 1 if fault == "down" else 3  # "down": one request reached it before it stopped listening
    assert r["fault_requests"] == expected_requests


def test_backend_garbage_fails_at_once_with_what_it_got(tmp_path):
    r = scenarios.llm_fault("garbage", db_dir=str(tmp_path))
    assert r["status"] == "error" and r["steps_stored"] == 2
    assert "not OpenAI chat-completions JSON" in r["error"] and "502 Bad Gateway" in r["error"]
    assert r["fault_requests"] == 1  # not retried: the same server would send the same garbage


def test_backend_that_recovers_within_the_retries_finishes_the_run(tmp_path):
    r = scenarios.llm_fault("flaky", db_dir=str(tmp_path))
    assert r["status"] == "success", r["error"]
    assert r["answer"] == 3 and r["steps_stored"] == 3
    assert r["fault_requests"] == 3  # two 503s, then the good answer


@pytest.mark.parametrize("runtime", ["process", "sandbox"])
def test_kill_9_of_cave_run_loses_nothing_and_resume_finishes(runtime, tmp_path):
    if runtime == "sandbox":
        require_sandbox()
    r = scenarios.kill_and_resume(str(tmp_path), runtime=runtime)
    assert r["stored_after_kill"] == list(range(r["steps_at_kill"]))  # every completed step is in the store
    assert r["status_after_kill"] == "running" and r["status_shown"] == "interrupted"
    assert r["kernels_seen"] >= 1 and r["kernels_leaked"] == 0  # no kernel outlives a killed host
    assert r["resume_exit"] == 0, r["resume_stderr"]
    assert r["final_status"] == "success" and r["answer"] == 10
    assert r["final_steps"] == list(range(6)) and r["steps_lost"] == 0
