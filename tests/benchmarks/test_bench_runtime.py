"""Where BFCL's and Tau²-bench's code agents run model code: not in the benchmark's own process by default.

The code reports its process id; the calls it makes still reach the harness (BFCL's Recorder, tau2's
orchestrator) through host functions.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from cave.benchmarks.runtime import RUNTIME_CHOICES, code_runtime, default_runtime  # noqa: E402

from cave.llm.base import Scripted  # noqa: E402

pytestmark = pytest.mark.timeout(300)
PID_CODE = "import os\nprint('pid', os.getpid())\n"


def _pid(traj) -> int:
    out = next(s.execution.stdout for s in traj.steps if s.execution is not None and "pid" in s.execution.stdout)
    return int(out.split()[1])


def test_the_default_is_a_sandbox_or_a_process_kernel():
    from cave.runtimes import sandbox_problems

    assert default_runtime() == ("process" if sandbox_problems() else "sandbox")
    with code_runtime(timeout=10) as rt:
        assert type(rt).name == default_runtime()
    with pytest.raises(ValueError, match="unknown runtime"):
        code_runtime("docker")


@pytest.mark.parametrize("runtime", [None, "process", "inprocess"])
def test_bfcl_code_agent_runs_its_code_where_asked(runtime):
    pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (the [bench] extra)")
    from cave.benchmarks.bfcl import gold_calls, load_category, replies_for, run_entry

    entry = load_category("parallel")[0]
    reply = replies_for([gold_calls(entry)], "code")[0].replace("```python\n", "```python\n" + PID_CODE, 1)
    result = run_entry(entry, "code", Scripted([reply]), runtime=runtime)
    assert result.valid, (result.error, result.calls)  # the calls reached the host's Recorder
    pid = _pid(result.trajectory)
    assert (pid == os.getpid()) == (runtime == "inprocess")


def test_bfcl_multi_turn_backends_stay_live_on_the_host():
    pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (the [bench] extra)")
    from cave.benchmarks.bfcl import gold_replies, load_category, run_entry

    entry = load_category("multi_turn_base", ids=["multi_turn_base_0"])[0]
    result = run_entry(entry, "code", Scripted(gold_replies(entry, "code")), runtime="process")
    assert result.valid, (result.error, result.calls)


@pytest.mark.parametrize("runtime", [None, "inprocess"])
def test_tau2_code_agent_runs_its_code_where_asked(runtime):
    pytest.importorskip("tau2.registry", reason="tau2 is not installed (the [bench] extra)")
    from cave.benchmarks.tau2 import load_tasks, quiet_logs, run_task

    quiet_logs()
    task = {t.id: t for t in load_tasks("mock")}["create_task_1"]
    code = (
        f"I will create the task.\n```python\n{PID_CODE}t = create_task(user_id='user_1', title='Important Meeting')"
        "\nfinal_answer(f\"Created {t['task_id']}: {t['title']}.\")\n```"
    )
    user = Scripted(["Please create a task called 'Important Meeting' for user_1.", "Thanks. ###STOP###"])
    r = run_task("mock", task, "code", Scripted([code]), user, runtime=runtime)
    assert r.reward == 1.0, (r.error, r.termination)  # the tool call went through tau2's orchestrator
    assert (_pid(r.trajectory) == os.getpid()) == (runtime == "inprocess")


def test_cli_has_the_runtime_option_for_every_suite():
    from cave.benchmarks.cli import build_parser

    parser = build_parser()
    for suite in ("bfcl", "tau2", "data"):
        args = parser.parse_args([suite, "--runtime", "process"])
        assert args.runtime == "process"
        assert parser.parse_args([suite]).runtime is None  # the default: default_runtime()
    with pytest.raises(SystemExit):
        parser.parse_args(["bfcl", "--runtime", "docker"])
    assert set(RUNTIME_CHOICES) == {"sandbox", "process", "kernel", "inprocess"}


def test_cli_bfcl_runtime_reaches_the_code_agent(tmp_path):
    pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (the [bench] extra)")
    import json

    from cave.benchmarks.cli import bench_main

    code = f"```python\n{PID_CODE}final_answer('none fits')\n```"
    argv = ["bfcl", "--model", "scripted", "--model-option", f"replies={json.dumps([code])}"]
    argv += ["--model-option", "repeat_last=true", "--categories", "irrelevance", "--limit", "1", "-q"]
    assert bench_main([*argv, "--runtime", "process", "--out", str(tmp_path)]) == 0
    row = json.loads((tmp_path / "trajectories.jsonl").read_text().splitlines()[0])
    stdout = row["trajectory"]["steps"][0]["execution"]["stdout"]
    assert int(stdout.split()[1]) != os.getpid()
