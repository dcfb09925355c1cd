"""The SQLite trajectory store: step-by-step writes, reading back, crash safety, resume."""

from __future__ import annotations

import functools
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from cave.runtimes.inprocess import InProcessRuntime

from cave.agent import Agent as _Agent
from cave.llm.base import Scripted
from cave.store import Store

# These tests are about the run store; verification by agreement is tested in test_verify.py. Here the caller
# verifies (verify=None), so an accepted answer ends `success` as a role's turn does.
Agent = functools.partial(_Agent, verify=None)

ROOT = Path(__file__).resolve().parents[2]


def code(src: str) -> str:
    return f"Next.\n```python\n{src}\n```"


def test_steps_read_back_as_the_same_trajectory(tmp_path):
    store = Store(tmp_path / "cave.db")
    llm = Scripted([code("x = 2\nprint(x)"), code("1 / 0"), code("final_answer({'x': x})")])
    agent = Agent(model=llm, runtime=InProcessRuntime())
    result = agent.run("compute", on_event=store.on_event)
    loaded = store.load(result.run_id)
    assert loaded.status == "success" and loaded.final_answer == {"x": 2}
    assert loaded.task == "compute"
    assert len(loaded.steps) == 3
    for mine, back in zip(result.trajectory.steps, loaded.steps, strict=True):
        assert back.index == mine.index and back.kind == mine.kind
        assert back.completion == mine.completion and back.code == mine.code
        assert back.observation == mine.observation
        assert back.usage == mine.usage
        assert back.messages == mine.messages  # the exact prompt of every call
        assert back.execution.ok == mine.execution.ok
    assert loaded.steps[1].execution.error.type == "ZeroDivisionError"
    assert loaded.usage == result.usage
    run = store.get_run(result.run_id[:6])  # a prefix is enough
    assert run["n_steps"] == 3 and run["total_tokens"] == result.usage.total_tokens
    # Messages are stored once per run, not once per prompt.
    with sqlite3.connect(tmp_path / "cave.db") as con:
        n_messages = con.execute("select count(*) from messages").fetchone()[0]
        n_blocks = con.execute("select count(*) from executions").fetchone()[0]
    assert n_messages < sum(len(s.messages) for s in result.trajectory.steps)
    assert n_blocks == 3
    lines = (tmp_path / result.run_id / "trajectory.jsonl").read_text().splitlines()
    assert [json.loads(line)["index"] for line in lines] == [0, 1, 2]
    store.close()


def test_list_runs_and_unknown_ids(tmp_path):
    with Store(tmp_path / "cave.db") as store:
        ids = []
        for answer in (1, 2):
            agent = Agent(model=Scripted([code(f"final_answer({answer})")]), runtime=InProcessRuntime())
            ids.append(agent.run("t", on_event=store.on_event).run_id)
        rows = store.list_runs()
        assert [r["id"] for r in rows] == ids[::-1]  # newest first
        assert rows[0]["status"] == "success" and rows[0]["final_answer"] == 2
        with pytest.raises(KeyError, match="recent runs"):
            store.get_run("zzzz")


def test_one_default_location_wherever_you_run_from(tmp_path, monkeypatch):
    monkeypatch.delenv("CAVE_RUNS", raising=False)
    monkeypatch.setenv("CAVE_HOME", str(tmp_path / "home"))
    for cwd in (tmp_path, tmp_path / "elsewhere"):
        cwd.mkdir(exist_ok=True)
        monkeypatch.chdir(cwd)
        with Store() as store:
            assert store.path == tmp_path / "home" / "runs" / "cave.db" and store.path.is_file()
    monkeypatch.setenv("CAVE_RUNS", str(tmp_path / "mine"))
    with Store() as store:
        assert store.path == tmp_path / "mine" / "cave.db"


def test_a_run_whose_process_died_shows_as_interrupted(tmp_path):
    """`kill -9` leaves `running` in the database; the store sees the owner is gone and says how to go on."""
    import subprocess
    import sys

    from cave.trajectory import Trajectory

    db = tmp_path / "r.db"
    child = subprocess.run(
        [sys.executable, "-c",
         "import sys\nfrom cave.store import Store\nfrom cave.trajectory import Trajectory\n"
         "s = Store(sys.argv[1]); t = Trajectory(task='x', run_id='deadbeef'); s.start_run(t)\nprint('ok')",
         str(db)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert child.stdout.strip() == "ok", child.stderr
    with Store(db) as store:
        store.start_run(Trajectory(task="mine", run_id="alive0001"))
        rows = {r["id"]: r for r in store.list_runs()}
        assert rows["deadbeef"]["status"] == "interrupted"
        assert "cave run --resume deadbeef" in rows["deadbeef"]["error"]
        assert rows["alive0001"]["status"] == "running"  # this process is alive


SLOW_TASK = """
name: slow-counter
task: count to six, one step at a time
model:
  backend: scripted
  repeat_last: true
  replies:
    - |
      One more.
      ```python
      import time
      time.sleep(0.4)
      try:
          counter += 1
      except NameError:
          counter = 1
      print(counter)
      if counter >= 6:
          final_answer(counter)
      ```
outputs:
  counter: {format: json}
checks:  # the task's own check verifies the answer (no independent attempt needed)
  answer: {assert: ["value == 6"]}
max_steps: 10
"""


def _steps_in(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
            return con.execute("select count(*) from steps").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def test_sigkill_after_step_k_keeps_steps_1_to_k_and_resume_finishes(tmp_path):
    task = tmp_path / "task.yaml"
    task.write_text(textwrap.dedent(SLOW_TASK).lstrip())
    db = tmp_path / "runs" / "cave.db"
    cmd = [sys.executable, "-m", "cave", "run", str(task), "--db", str(db), "--quiet"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while _steps_in(db) < 3 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL

    with Store(db) as store:
        (run,) = store.list_runs()
        assert (
            run["status"] == "interrupted" and "cave run --resume" in run["error"]
        )  # never finished; its process is gone
        killed = store.load(run["id"])
        k = len(killed.steps)
        assert k >= 3
        assert [s.index for s in killed.steps] == list(range(k))
        assert [s.execution.stdout for s in killed.steps] == [f"{i}\n" for i in range(1, k + 1)]
        assert all(s.messages for s in killed.steps)
    jsonl = db.parent / run["id"] / "trajectory.jsonl"
    # the database is the source of truth: a kill between its commit and the JSONL's append leaves that one out
    assert len(jsonl.read_text().splitlines()) in (k - 1, k)

    # Resume: the runtime is rebuilt by replaying the stored cells (counter == k), then the loop goes on.
    done = subprocess.run(
        [sys.executable, "-m", "cave", "run", "--resume", run["id"][:8], "--db", str(db), "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["status"] == "success" and summary["answer"] == 6
    assert json.loads(Path(summary["outputs"]["counter"]).read_text()) == 6
    with Store(db) as store:
        final = store.load(run["id"])
        assert final.status == "success"
        assert [s.index for s in final.steps] == list(range(6))  # 6 steps in all: k before the kill, 6 - k after
        assert [s.execution.stdout for s in final.steps] == [f"{i}\n" for i in range(1, 7)]
        # The resumed steps continued the stored conversation.
        assert final.steps[k].messages[-1]["content"].endswith(killed.steps[k - 1].observation)
    lines = [json.loads(x) for x in jsonl.read_text().splitlines()]  # the resumed run wrote any line left out
    assert [x["index"] for x in lines] == list(range(6)) and all(x["messages"] for x in lines)


def test_a_resumed_run_writes_the_jsonl_line_a_kill_left_out(tmp_path):
    import dataclasses

    db = tmp_path / "cave.db"
    llm = Scripted([code("x = 2\nprint(x)"), code("x += 1\nprint(x)"), code("final_answer(x)")])
    with Store(db) as store:
        result = Agent(model=llm, runtime=InProcessRuntime()).run("compute", on_event=store.on_event)
    jsonl = db.parent / result.run_id / "trajectory.jsonl"
    lines = jsonl.read_text().splitlines()
    jsonl.write_text("\n".join(lines[:-1]) + "\n")  # killed after the database's commit, before the append
    with Store(db) as store:  # the resumed process: its next step writes the missing line first
        last = store.load(result.run_id).steps[-1]
        store.add_step(dataclasses.replace(last, index=last.index + 1))
    back = [json.loads(x) for x in jsonl.read_text().splitlines()]
    assert [x["index"] for x in back] == [0, 1, 2, 3]
    assert back[2] == {**json.loads(lines[2]), "duration": back[2]["duration"]}  # the same line, read from the db


def test_resume_refuses_a_finished_run(tmp_path):
    task = tmp_path / "task.yaml"
    task.write_text('task: t\nmodel:\n  backend: scripted\n  replies: ["```python\\nfinal_answer(1)\\n```"]\n')
    db = tmp_path / "cave.db"
    from cave.cli import main

    assert main(["run", str(task), "--db", str(db), "--quiet"]) == 0
    with Store(db) as store:
        run_id = store.list_runs()[0]["id"]
    assert main(["run", "--resume", run_id, "--db", str(db), "--quiet"]) == 2
