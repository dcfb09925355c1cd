"""The Python SDK: `from cave import Agent, Runtime`, inject / run / retrieve, task files from Python."""

from __future__ import annotations

import asyncio
import json
import textwrap

import pandas as pd
from cave.runtimes.inprocess import InProcessRuntime

import cave
from cave import Agent, Runtime, Scripted, Trajectory
from cave.sdk import run_task, write_value


def test_public_names():
    for name in ("Agent", "Runtime", "Scripted", "Trajectory", "Store", "run_task", "load_task", "final_answer"):
        assert getattr(cave, name) is not None
    assert set(cave.__all__) >= {"Agent", "Runtime", "Scripted", "Trajectory"}


def test_runtime_factory_by_name():
    rt = Runtime("inprocess")
    assert isinstance(rt, InProcessRuntime) and isinstance(rt, Runtime)
    assert not isinstance(42, Runtime)
    rt.close()


def test_inject_run_retrieve_a_dataframe():
    sales = pd.DataFrame({"region": ["N", "S", "N"], "units": [1, 2, 3]})
    reply = "```python\nsummary = sales.groupby('region', as_index=False).units.sum()\nfinal_answer(summary)\n```"
    agent = Agent(model=Scripted([reply, reply]), runtime="inprocess")  # the answer, then one independent attempt
    agent.runtime.inject("sales", sales, description="orders")
    result = agent.run("Units by region, in `summary`")
    summary = agent.runtime.retrieve("summary")
    assert isinstance(summary, pd.DataFrame) and result.answer is summary
    assert result.ok and result.status == "success" and isinstance(result.trajectory, Trajectory)
    assert result.usage.total_tokens == result.trajectory.usage.total_tokens > 0


def test_async_edge_and_multi_turn_state():
    async def main() -> list[object]:
        agent = Agent(
            model=Scripted(
                [
                    "```python\nseen = [1]\nfinal_answer(len(seen))\n```",
                    "```python\nseen.append(2)\nfinal_answer(seen)\n```",
                ]
            ),
            runtime=Runtime("inprocess"),
            verify=None,  # multi-turn state is the point here; the caller verifies
        )
        a = await agent.arun("first")
        b = await agent.arun("second")
        return [a.answer, b.answer]

    assert asyncio.run(main()) == [1, [1, 2]]


def test_run_task_from_python(tmp_path):
    pd.DataFrame({"x": [1, 2, 3]}).to_csv(tmp_path / "d.csv", index=False)
    (tmp_path / "task.yaml").write_text(
        textwrap.dedent(
            """
            task: double x
            model:
              backend: scripted
              replies: ["```python\\ndoubled = df.assign(x=df.x * 2)\\nfinal_answer(int(doubled.x.sum()))\\n```"]
            inputs:
              df: {file: d.csv}
            outputs:
              doubled: {}
            """
        )
    )
    from cave.store import Store

    with Store(tmp_path / "runs" / "cave.db") as store:
        outcome = run_task(tmp_path / "task.yaml", store=store)
    assert outcome.ok and outcome.result.answer == 12
    saved = pd.read_parquet(outcome.outputs[0].path)
    assert list(saved.x) == [2, 4, 6]
    assert outcome.summary["outputs"]["doubled"].endswith("doubled.parquet")


def test_write_value_formats(tmp_path):
    df = pd.DataFrame({0: [1], "b": ["x"]})
    assert write_value(df, tmp_path / "a").suffix == ".parquet"  # non-string column names are handled
    assert pd.read_csv(write_value(df, tmp_path / "b", "csv")).shape == (1, 2)
    assert write_value({"k": (1, 2)}, tmp_path / "c").read_text().strip().startswith("{")
    assert write_value(pd.Series([1, 2], name="s"), tmp_path / "d").suffix == ".parquet"
    import numpy as np

    assert write_value(np.int64(3), tmp_path / "e").read_text().strip() == "3"


def test_task_skills_are_installed_and_listed(tmp_path):
    from cave.sdk import build_agent
    from cave.task import load_task

    skill = tmp_path / "skills" / "tidy-data"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: tidy-data\ndescription: Reshape wide tables to long ones.\n---\nUse melt(df).\n"
    )
    (skill / "exports.py").write_text(
        "__all__ = ['melt']\n\ndef melt(df):\n    '''Wide to long.'''\n    return df.melt()\n"
    )
    reply = "```python\nprint(activate_skill('tidy-data'))\nlong = melt(wide)\nfinal_answer(len(long))\n```"
    (tmp_path / "task.yaml").write_text(
        textwrap.dedent(
            f"""
            task: make it long
            model: {{backend: scripted, replies: [{json.dumps(reply)}, {json.dumps(reply)}]}}
            inputs:
              wide: {{value: {{a: [1, 2], b: [3, 4]}}}}
            skills: [skills]
            """
        )
    )
    task = load_task(tmp_path / "task.yaml")
    agent = build_agent(task)
    agent.runtime.inject("wide", pd.DataFrame({"a": [1, 2], "b": [3, 4]}))
    result = agent.run(task.prompt())
    assert result.status == "success" and result.answer == 4
    system = agent.llm.calls[0][0]["content"]
    assert "tidy-data: Reshape wide tables to long ones." in system
    assert "activate_skill(" in system
    assert "Use melt(df)." in result.trajectory.steps[0].execution.stdout


def test_activate_skills_in_the_task_file_activates_before_the_first_step(tmp_path):
    from cave.sdk import build_agent
    from cave.task import load_task

    skill = tmp_path / "skills" / "tidy-data"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: tidy-data\ndescription: Reshape wide tables to long ones.\n---\nUse melt(df).\n"
    )
    (skill / "exports.py").write_text(
        "__all__ = ['melt']\n\ndef melt(df):\n    '''Wide to long.'''\n    return df.melt()\n"
    )
    reply = "```python\nfinal_answer(len(melt(wide)))\n```"  # no activate_skill call: the task activated it
    (tmp_path / "task.yaml").write_text(
        textwrap.dedent(
            f"""
            task: make it long
            model: {{backend: scripted, replies: [{json.dumps(reply)}, {json.dumps(reply)}]}}
            skills: [skills]
            activate_skills: [tidy-data]
            """
        )
    )
    task = load_task(tmp_path / "task.yaml")
    agent = build_agent(task)
    agent.runtime.inject("wide", pd.DataFrame({"a": [1, 2], "b": [3, 4]}))
    result = agent.run(task.prompt())
    assert result.status == "success" and result.answer == 4
    system = agent.llm.calls[0][0]["content"]
    assert "Skill tidy-data (already active" in system and "Use melt(df)." in system  # level 2 up front
    assert "melt(df)" in system  # the export is in the function list of the very first prompt


def test_activate_skills_naming_an_unknown_skill_is_a_task_error(tmp_path):
    import pytest

    from cave.sdk import build_agent
    from cave.task import TaskError, load_task

    (tmp_path / "task.yaml").write_text("task: t\nmodel: {backend: scripted, replies: [x]}\nactivate_skills: [nope]\n")
    with pytest.raises(TaskError, match="no skill named 'nope'"):
        build_agent(load_task(tmp_path / "task.yaml"))


def test_sdk_runs_are_stored(tmp_path, monkeypatch):
    from cave import Agent, Scripted, Store

    monkeypatch.setenv("CAVE_RUNS", str(tmp_path / "runs"))
    result = Agent(Scripted(["```python\nfinal_answer(3)\n```"] * 2), store=True).run("three")
    (tmp_path / "task.yaml").write_text(
        'task: four\nmodel: {backend: scripted, replies: ["```python\\nfinal_answer(4)\\n```"], repeat_last: true}\n'
    )
    outcome = run_task(tmp_path / "task.yaml")  # like `cave run`: recorded in the default store
    with Store() as store:
        runs = {r["id"]: r for r in store.list_runs()}
    assert runs[result.run_id]["status"] == "success" and runs[outcome.result.run_id]["task"].startswith("four")
