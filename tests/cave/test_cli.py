"""The `cave` command: run (display modes, outputs, exit codes), schema, runs list/show, skills."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from cave.cli import main

SCRIPTED = """
name: scripted-sales
task: Total units per region, as a DataFrame named by_region.
model:
  backend: scripted
  replies:
    - |
      Look at the data.
      ```python
      print(sales.shape)
      ```
    - |
      Aggregate.
      ```python
      by_region = sales.groupby("region", as_index=False)["units"].sum()
      final_answer(by_region)
      ```
    - |
      An independent attempt (verify: 1, the default) solves it again.
      ```python
      by_region = sales.groupby("region")["units"].sum().reset_index()
      final_answer(by_region)
      ```
inputs:
  sales:
    file: sales.csv
    description: one row per order
outputs:
  by_region: {format: csv}
  as_parquet: {variable: by_region}
  answer: {variable: final_answer, format: json}
max_steps: 4
"""


@pytest.fixture
def task(tmp_path: Path) -> Path:
    pd.DataFrame({"region": ["N", "S", "N"], "units": [1, 2, 3]}).to_csv(tmp_path / "sales.csv", index=False)
    path = tmp_path / "task.yaml"
    path.write_text(textwrap.dedent(SCRIPTED).lstrip())
    return path


def test_run_shows_steps_and_saves_outputs(task, tmp_path, capsys):
    db = tmp_path / "runs" / "cave.db"
    assert main(["run", str(task), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "step 1" in out and "step 2" in out and "print(sales.shape)" in out and "(3, 2)" in out
    assert "success" in out
    run_dir = next(p for p in db.parent.iterdir() if p.is_dir())
    saved = pd.read_csv(run_dir / "outputs" / "by_region.csv")
    assert dict(zip(saved.region, saved.units, strict=True)) == {"N": 4, "S": 2}
    pd.testing.assert_frame_equal(pd.read_parquet(run_dir / "outputs" / "as_parquet.parquet"), saved)
    assert json.loads((run_dir / "outputs" / "answer.json").read_text()) == [
        {"region": "N", "units": 4},
        {"region": "S", "units": 2},
    ]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "success" and summary["steps"] == 2 and summary["ok"] is True
    assert summary["usage"]["total_tokens"] > 0
    assert len((run_dir / "trajectory.jsonl").read_text().splitlines()) == 2


def test_json_mode_prints_one_object(task, tmp_path, capsys):
    assert main(["run", str(task), "--db", str(tmp_path / "c.db"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["status"] == "success"
    assert summary["answer"] == [{"region": "N", "units": 4}, {"region": "S", "units": 2}]
    assert set(summary["outputs"]) == {"by_region", "as_parquet", "answer"}


def test_quiet_mode_prints_only_the_answer(task, tmp_path, capsys):
    assert main(["run", str(task), "--db", str(tmp_path / "c.db"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "region" in out and "step" not in out


def test_missing_required_output_fails_the_run(tmp_path, capsys):
    path = tmp_path / "t.yaml"
    path.write_text(
        "task: t\nverify: 0\nmodel: {backend: scripted, replies: [REPLIES]}\noutputs:\n  nothing: {}\n".replace(
            "REPLIES", ", ".join(['"```python\\nfinal_answer(1)\\n```"'] * 7)
        )
    )  # final_answer is held back twice while `nothing` is missing (each echo sampled again twice), then it stands
    assert main(["run", str(path), "--db", str(tmp_path / "c.db"), "--json"]) == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["status"] == "unverified" and summary["ok"] is False  # verify: 0 and no checks: unverified
    assert "no variable named 'nothing'" in summary["outputs"]["nothing"]["error"]


def test_max_steps_exits_1_and_the_flag_overrides_the_task(tmp_path, capsys):
    path = tmp_path / "t.yaml"
    replies = '["```python\\nx = 1\\n```", "summary"]'
    path.write_text(f"task: t\nmodel: {{backend: scripted, replies: {replies}}}\nmax_steps: 5\n")
    assert main(["run", str(path), "--db", str(tmp_path / "c.db"), "--json", "--max-steps", "1"]) == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["status"] == "max_steps" and summary["answer"] == "summary" and summary["steps"] == 2


def test_bad_task_exits_2_before_any_model_loads(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("task: t\nmodel: {backend: local}\ninputs:\n  sales: {file: missing.csv}\n")
    probe = (
        "import sys\nfrom cave.cli import main\nrc = main(sys.argv[1:])\n"
        "assert 'llama_cpp' not in sys.modules, 'the model was loaded'\nsys.exit(rc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, "run", str(path), "--db", str(tmp_path / "c.db")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert f"{path}:4: inputs.sales.file: file not found" in done.stderr
    assert "fix:" in done.stderr


def test_input_that_cannot_be_read_exits_2(tmp_path, capsys):
    (tmp_path / "bad.parquet").write_text("nope")
    path = tmp_path / "t.yaml"
    path.write_text("task: t\nmodel: {backend: scripted, replies: [x]}\ninputs:\n  x: {file: bad.parquet}\n")
    assert main(["run", str(path), "--db", str(tmp_path / "c.db")]) == 2
    assert f"{path}:4: inputs.x:" in capsys.readouterr().err


def test_usage_errors_exit_2(tmp_path, capsys):
    assert main(["run", "--db", str(tmp_path / "c.db")]) == 2
    assert main(["run", "--resume", "nope", "--db", str(tmp_path / "c.db")]) == 2
    assert "not found" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["run", "x.yaml", "--quiet", "--json"])
    assert info.value.code == 2


def test_schema_prints_json_schema(capsys):
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["title"] == "cave task file" and "inputs" in schema["properties"]


def test_runs_list_and_show(task, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # rich wraps table cells to the terminal width
    db = tmp_path / "c.db"
    assert main(["run", str(task), "--db", str(db), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["runs", "list", "--db", str(db), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["status"] == "success" and row["n_steps"] == 2 and row["name"] == "scripted-sales"
    assert main(["runs", "list", "--db", str(db)]) == 0
    assert row["id"] in capsys.readouterr().out
    assert main(["runs", "show", row["id"][:6], "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "print(sales.shape)" in out and "success" in out
    assert main(["runs", "show", row["id"], "--db", str(db), "--json"]) == 0
    traj = json.loads(capsys.readouterr().out)
    assert [s["code"] for s in traj["steps"]][0] == "print(sales.shape)"
    assert "messages" not in traj["steps"][0]
    assert main(["runs", "show", row["id"], "--db", str(db), "--steps"]) == 0
    assert "(3, 2)" in capsys.readouterr().out
    assert main(["runs", "list", "--db", str(tmp_path / "absent.db")]) == 2


def test_skills_commands_call_the_skills_module(tmp_path, capsys):
    skill = tmp_path / "skills" / "tidy-data"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: tidy-data\ndescription: Tidy a table.\n---\n# Tidy\nMelt wide tables.\n"
    )
    assert main(["skills", "list", str(tmp_path / "skills")]) == 0
    assert "tidy-data" in capsys.readouterr().out
    assert main(["skills", "show", "tidy-data", str(tmp_path / "skills")]) == 0
    assert "Melt wide tables" in capsys.readouterr().out


def test_python_dash_m_cave_works(tmp_path):
    done = subprocess.run([sys.executable, "-m", "cave", "schema"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and json.loads(done.stdout)["title"] == "cave task file"


def test_team_task_files_go_to_the_team_runner():
    from cave.cli.run import _team_runner, team_main

    root = Path(__file__).resolve().parents[2]
    assert _team_runner(str(root / "examples" / "sales" / "task.yaml")) is None
    team_file = root / "examples" / "math_team" / "team_task.yaml"
    if team_file.is_file():
        assert _team_runner(str(team_file)) is team_main


def test_run_on_the_kernel_runtime(task, tmp_path, capsys):
    pytest.importorskip("jupyter_client")
    text = task.read_text().replace("max_steps: 4", "max_steps: 4\nruntime: {kind: kernel, timeout: 30}")
    task.write_text(text)
    assert main(["run", str(task), "--db", str(tmp_path / "c.db"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["status"] == "success"
    assert summary["answer"] == [{"region": "N", "units": 4}, {"region": "S", "units": 2}]
    saved = pd.read_csv(summary["outputs"]["by_region"])
    assert list(saved.units) == [4, 2]


def test_schema_documents_backend_options_and_limits(capsys):
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    model = schema["$defs"]["ModelSpec"]["properties"]
    assert {"model", "base_url", "api_key"} <= set(model)
    memory = schema["$defs"]["RuntimeSpec"]["properties"]["memory_limit_mb"]["description"]
    assert "process" in memory and "sandbox" in memory


def test_a_backend_connection_error_is_shown_once(tmp_path):
    task = tmp_path / "t.yaml"
    task.write_text('task: hi\nmodel: {backend: openai, base_url: "http://127.0.0.1:9/v1", model: x}\nmax_steps: 2\n')
    out = subprocess.run(
        [sys.executable, "-m", "cave", "run", str(task), "--db", str(tmp_path / "r.db")],
        capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "300"},
    )  # fmt: skip
    assert out.returncode == 1
    assert (out.stdout + out.stderr).count("gave up after") == 1
