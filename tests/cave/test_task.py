"""task.yaml: the schema, the error messages (file:line, field, fix), loading inputs."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from cave.inputs import resolve_inputs
from cave.task import TaskError, json_schema, load_task

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*/task.yaml"))


def write(tmp_path: Path, text: str, name: str = "task.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def errors_of(path: Path) -> str:
    with pytest.raises(TaskError) as info:
        load_task(path)
    return str(info.value)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.parent.name for p in EXAMPLES])
def test_shipped_examples_are_valid_and_their_inputs_load(path):
    task = load_task(path)
    inputs = resolve_inputs(task)
    assert inputs
    assert task.spec.outputs
    assert task.spec.model.backend == "local"  # they run on the embedded model


def test_at_least_three_examples_ship_with_data():
    assert {"sales", "sqlite", "cleaning"} <= {p.parent.name for p in EXAMPLES}


def test_minimal_task_gets_defaults(tmp_path):
    task = load_task(write(tmp_path, "task: say hi\n"))
    assert task.spec.model.backend == "local" and task.spec.runtime.kind == "inprocess"
    assert task.spec.max_steps == 8 and task.prompt() == "say hi"


def test_shorthands_and_backend_options(tmp_path):
    task = load_task(
        write(
            tmp_path,
            """
            task: t
            model: {backend: openai, base_url: "http://127.0.0.1:8000/v1", model: qwen, max_tokens: 100}
            runtime: kernel
            """,
        )
    )
    assert task.spec.runtime.kind == "kernel"
    assert task.spec.model.options == {"base_url": "http://127.0.0.1:8000/v1", "model": "qwen"}
    assert task.spec.model.max_tokens == 100


def test_prompt_names_the_outputs(tmp_path):
    task = load_task(
        write(
            tmp_path,
            """
            task: do it
            outputs:
              summary: {description: a DataFrame of totals}
              answer: {variable: final_answer}
            """,
        )
    )
    assert (
        task.prompt()
        == "do it\n\nBefore calling final_answer, store your results in these variables:\n- `summary`: a DataFrame of totals"
    )


# -- errors: file, line, field, fix --------------------------------------------------------------
def test_yaml_syntax_error_gives_line_and_column(tmp_path):
    path = write(tmp_path, "task: ok\ninputs:\n  sales: [file: x\nmax_steps: 3\n")
    msg = errors_of(path)
    assert msg.startswith(f"{path}:") and "YAML syntax error" in msg and "fix:" in msg
    assert msg.split(":")[1] in {"3", "4"}


def test_missing_task_field(tmp_path):
    path = write(tmp_path, "max_steps: 3\n")
    msg = errors_of(path)
    assert f"{path}:1: task: required field is missing" in msg
    assert "fix: add `task: " in msg


def test_unknown_field_suggests_the_closest_one(tmp_path):
    path = write(tmp_path, "task: t\ninputs:\n  sales:\n    fiel: data.csv\n")
    msg = errors_of(path)
    assert f"{path}:4: inputs.sales.fiel: unknown field `fiel`" in msg
    assert "did you mean `file`?" in msg


def test_top_level_typo(tmp_path):
    msg = errors_of(write(tmp_path, "task: t\nmax_step: 3\n"))
    assert ":2: max_step: unknown field" in msg and "did you mean `max_steps`?" in msg


def test_missing_input_file_points_at_its_line(tmp_path):
    path = write(tmp_path, "task: t\ninputs:\n  sales:\n    file: data/nope.csv\n")
    msg = errors_of(path)
    assert f"{path}:4: inputs.sales.file: file not found: {tmp_path / 'data' / 'nope.csv'}" in msg
    assert "fix: paths are relative to the task file's folder" in msg


def test_wrong_types_and_ranges(tmp_path):
    msg = errors_of(write(tmp_path, "task: t\nmax_steps: many\nmodel:\n  temperature: 9\n"))
    assert ":2: max_steps:" in msg and ":4: model.temperature:" in msg  # every problem, not only the first


def test_unknown_backend_and_runtime(tmp_path):
    msg = errors_of(write(tmp_path, "task: t\nmodel:\n  backend: olama\nruntime: docker\n"))
    assert ":3: model.backend: unknown backend 'olama'" in msg and "local" in msg
    assert ":4: runtime" in msg and "unknown runtime 'docker'" in msg


def test_input_needs_exactly_one_source(tmp_path):
    msg = errors_of(write(tmp_path, "task: t\ninputs:\n  x: {url: 'sqlite://', value: 3}\n  y: {}\n"))
    assert "give exactly one of file, url, function, value" in msg
    assert msg.count("give exactly one") == 2


def test_bad_names_and_import_paths(tmp_path):
    msg = errors_of(write(tmp_path, "task: t\ninputs:\n  my-table: {value: 1}\n"))
    assert ":2: inputs: input name 'my-table' is not a Python identifier" in msg
    msg = errors_of(write(tmp_path, "task: t\ninputs:\n  f: {function: not a path}\n"))
    assert ":3: inputs.f.function: import path 'not a path' must look like 'package.module:function'" in msg


def test_sqlite_url_is_checked(tmp_path):
    msg = errors_of(write(tmp_path, "task: t\ninputs:\n  db: {url: 'sqlite:///missing.db'}\n  e: {url: 'not a url'}\n"))
    assert "SQLite database not found" in msg and "not a SQLAlchemy URL" in msg


def test_empty_and_non_mapping_files(tmp_path):
    assert "must be a mapping" in errors_of(write(tmp_path, "- a\n- b\n"))
    assert "no such task file" in errors_of(tmp_path / "absent.yaml")
    assert "task text is empty" in errors_of(write(tmp_path, "task: '   '\n"))


# -- inputs --------------------------------------------------------------------------------------
def test_inputs_load_as_live_objects(tmp_path):
    (tmp_path / "data").mkdir()
    pd.DataFrame({"a": [1, 2]}).to_csv(tmp_path / "data" / "t.csv", index=False)
    pd.DataFrame({"b": [3.0]}).to_parquet(tmp_path / "data" / "t.parquet")
    (tmp_path / "data" / "t.jsonl").write_text('{"c": 1}\n{"c": 2}\n')
    import sqlite3

    con = sqlite3.connect(tmp_path / "data" / "db.sqlite")
    con.execute("create table t (x int)")
    con.commit()
    con.close()
    (tmp_path / "helpers.py").write_text("def double(x: int) -> int:\n    '''Twice x.'''\n    return 2 * x\n")
    path = write(
        tmp_path,
        """
        task: t
        inputs:
          csv: {file: data/t.csv}
          pq: {file: data/t.parquet}
          js: {file: data/t.jsonl}
          db: {url: "sqlite:///data/db.sqlite", description: a database}
          double: {function: "helpers:double"}
          limit: {value: [1, 2]}
        """,
    )
    inputs = resolve_inputs(load_task(path))
    assert list(inputs["csv"][0]["a"]) == [1, 2]
    assert list(inputs["pq"][0]["b"]) == [3.0]
    assert list(inputs["js"][0]["c"]) == [1, 2]
    from sqlalchemy import inspect

    assert inspect(inputs["db"][0]).get_table_names() == ["t"]
    assert inputs["db"][1] == "a database"
    assert inputs["double"][0](4) == 8
    assert inputs["limit"][0] == [1, 2]


def test_input_that_fails_to_load_points_at_its_line(tmp_path):
    (tmp_path / "bad.parquet").write_text("not parquet")
    (tmp_path / "x.txt").write_text("hello")
    path = write(
        tmp_path, "task: t\ninputs:\n  a: {file: bad.parquet}\n  b:\n    file: x.txt\n  c: {function: 'nosuchmod:f'}\n"
    )
    with pytest.raises(TaskError) as info:
        resolve_inputs(load_task(path))
    msg = str(info.value)
    assert f"{path}:3: inputs.a:" in msg
    assert f"{path}:4: inputs.b:" in msg and "set `format: csv|parquet|json`" in msg
    assert f"{path}:6: inputs.c: ModuleNotFoundError" in msg


def test_json_schema_export():
    schema = json_schema()
    assert schema["title"] == "cave task file"
    assert {"task", "model", "runtime", "inputs", "outputs", "skills", "max_steps", "seed"} <= set(schema["properties"])
    assert schema["required"] == ["task"]
    json.dumps(schema)  # serializable


# -- task files that used to fail late: refused at validation, before any input loads or model starts ------------
def _cave_run(path: Path, tmp_path: Path, capsys) -> tuple[int, str]:
    from cave.cli import main

    status = main(["run", str(path), "--db", str(tmp_path / "cave.db"), "--quiet"])
    return status, capsys.readouterr().err


SCRIPTED = "task: t\nmodel:\n  backend: scripted\n"
LATE = {
    # (task file, the line, the field, what is said)
    "no-replies": (SCRIPTED, 2, "model.replies", "replies are missing"),
    "empty-replies": (SCRIPTED + "  replies: []\n", 4, "model.replies", "replies are empty"),
    "replies-a-string": (SCRIPTED + "  replies: 'final_answer(1)'\n", 4, "model.replies", "replies are a str"),
    "a-reply-a-number": (SCRIPTED + "  replies:\n    - 'x'\n    - 7\n", 6, "model.replies.1", "not a int"),
    "a-reply-a-mapping": (SCRIPTED + "  replies: [{text: hi}]\n", 4, "model.replies.0", "not a dict"),
    "model-a-text-file": ("task: t\nmodel:\n  backend: local\n  model: notes.gguf\n", 4, "model.model", "not a GGUF"),
    "path-a-folder": ("task: t\nmodel:\n  backend: local\n  path: folder\n", 4, "model.path", "without config.json"),
    "model-a-fifo": ("task: t\nmodel: {backend: local, model: pipe.gguf}\n", 2, "model.model", "neither"),
    "path-a-number": ("task: t\nmodel: {backend: local, path: 7}\n", 2, "model.path", "not a model name"),
    "in-memory-db-in-a-kernel": (
        SCRIPTED + "  replies: ['x']\nruntime: process\ninputs:\n  db: {url: 'sqlite://'}\n",
        7,
        "inputs.db.url",
        "in-memory SQLite",
    ),
    "output-variable-a-path": (
        SCRIPTED + "  replies: ['x']\noutputs:\n  table:\n    variable: ../../x\n",
        7,
        "outputs.table.variable",
        "not a Python identifier",
    ),
    "unknown-backend-option": (SCRIPTED + "  replies: ['x']\n  repeat: true\n", 5, "model.repeat", "takes no option"),
    "base-url-not-http": (
        "task: t\nmodel: {backend: openai, base_url: 'localhost:8000'}\n",
        2,
        "model.base_url",
        "http",
    ),
    "output-variable-a-dunder-path": (
        SCRIPTED + "  replies: ['x']\noutputs:\n  t: {variable: 'os.path'}\n",
        6,
        "outputs.t.variable",
        "not a Python identifier",
    ),
}


@pytest.mark.parametrize("case", sorted(LATE))
def test_a_task_file_that_would_fail_late_exits_2_at_validation(case, tmp_path, capsys, monkeypatch):
    import os

    monkeypatch.chdir(tmp_path)  # local model paths are read from the current folder, as the backend reads them
    (tmp_path / "notes.gguf").write_text("not a model")
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "pipe.gguf")  # opening it would block: it must not be opened
    text, line, field, said = LATE[case]
    path = write(tmp_path, text)
    msg = errors_of(path)
    assert f"{path}:{line}: {field}: " in msg and said in msg and "fix:" in msg, msg
    status, err = _cave_run(path, tmp_path, capsys)
    assert status == 2 and f"{path}:{line}: {field}: " in err, err


def test_good_scripted_and_local_model_files_still_load(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.gguf").write_bytes(b"GGUF" + bytes(16))
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text("{}")
    for model in ("backend: local\n  model: m.gguf", "backend: local\n  path: hf", "backend: local\n  model: qwen"):
        load_task(write(tmp_path, f"task: t\nmodel:\n  {model}\n"))
    task = load_task(write(tmp_path, SCRIPTED + "  replies: ['a', 'b']\noutputs:\n  x: {variable: final_answer}\n"))
    assert task.spec.model.options["replies"] == ["a", "b"]


def test_an_input_the_runtime_cannot_take_is_a_task_error_at_its_line(tmp_path, capsys):
    # the runtime itself refuses the engine (no in-memory check at validation for a runtime given by options)
    from cave.sdk import build_runtime

    path = write(tmp_path, SCRIPTED + "  replies: ['x']\nruntime: kernel\ninputs:\n  db: {url: 'sqlite:///:memory:'}\n")
    with pytest.raises(TaskError, match="in-memory SQLite"):
        load_task(path)

    class Refusing:
        def inject(self, name, value, description=None):
            raise RuntimeError("cannot copy this object")

        def close(self):
            self.closed = True

    import cave.sdk as sdk

    task = load_task(write(tmp_path, SCRIPTED + "  replies: ['x']\ninputs:\n  limit: {value: 3}\n", "t2.yaml"))
    refusing = Refusing()
    original = sdk.create_runtime
    sdk.create_runtime = lambda kind, **options: refusing
    try:
        with pytest.raises(TaskError) as info:
            build_runtime(task)
    finally:
        sdk.create_runtime = original
    assert f"{task.path}:6: inputs.limit: runtime 'inprocess' cannot take this input" in str(info.value)
    assert refusing.closed  # nothing outlives a run that never started


def test_code_inputs_are_imported_last_and_never_for_a_file_with_other_problems(tmp_path, capsys):
    marker = tmp_path / "imported.txt"
    (tmp_path / "helper_mod.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\ndef f():\n    return 1\n")
    bad = write(
        tmp_path,
        SCRIPTED + "  replies: ['x']\ninputs:\n  f: {function: 'helper_mod:f'}\n  data: {file: nowhere.csv}\n",
    )
    status, err = _cave_run(bad, tmp_path, capsys)
    assert status == 2 and "inputs.data.file: file not found" in err
    assert not marker.exists(), "a task file with problems ran the code it names"
    skills = write(
        tmp_path,
        SCRIPTED + "  replies: ['x']\nactivate_skills: [no-such-skill]\ninputs:\n  f: {function: 'helper_mod:f'}\n",
        "s.yaml",
    )
    status, err = _cave_run(skills, tmp_path, capsys)
    assert status == 2 and not marker.exists(), err
    (tmp_path / "d.csv").write_text("a\n1\n")
    order = write(
        tmp_path,
        SCRIPTED + "  replies: ['x']\ninputs:\n  f: {function: 'helper_mod:f'}\n  d: {file: d.csv}\n",
        "o.yaml",
    )
    inputs = resolve_inputs(load_task(order))
    assert list(inputs) == ["f", "d"] and marker.exists()  # loaded (data first), returned in the file's order


def test_a_team_task_file_gets_the_same_checks(tmp_path):
    from cave.team import TeamError, load_team_task

    team = "team:\n  roles: [solver, verifier]\n  pattern: loop\n"
    checks = {
        "task: t\nruntime: process\ninputs:\n  db: {url: 'sqlite://'}\n": ":4: inputs.db.url: an in-memory SQLite",
        "task: t\noutputs:\n  o: {variable: '../o'}\n": ":3: outputs.o.variable: output variable name '../o' is not",
    }
    for text, said in checks.items():
        path = write(tmp_path, text + team)
        with pytest.raises(TeamError) as info:
            load_team_task(path)
        assert f"{path}{said}" in str(info.value)


def test_a_database_the_sandbox_cannot_see_exits_2_at_its_line(tmp_path, capsys):
    import sqlite3

    from tests.security.attempts import require_sandbox

    require_sandbox()
    con = sqlite3.connect(tmp_path / "shop.db")
    con.execute("create table t (x int)")
    con.commit()
    con.close()
    path = write(tmp_path, SCRIPTED + "  replies: ['x']\nruntime: sandbox\ninputs:\n  db: {url: 'sqlite:///shop.db'}\n")
    status, err = _cave_run(path, tmp_path, capsys)
    assert status == 2, err
    assert f"{path}:7: inputs.db: runtime 'sandbox' cannot take this input" in err and "ro_paths" in err, err


def test_a_code_input_is_not_imported_for_a_wrong_backend_option_and_its_exit_is_an_error(tmp_path, capsys):
    """A backend's option names are checked with the file (they were found only when the backend was built, after
    a `function:` input had run its module); a module that calls sys.exit() when imported (a script) is an error
    at its input's line, where it ended `cave run` with its own status and no word."""
    marker = tmp_path / "imported.txt"
    (tmp_path / "helper_mod.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\ndef f():\n    return 1\n")
    wrong = write(
        tmp_path, SCRIPTED + "  replies: ['x']\n  repeat_lst: true\ninputs:\n  f: {function: 'helper_mod:f'}\n"
    )
    status, err = _cave_run(wrong, tmp_path, capsys)
    assert status == 2 and f"{wrong}:5: model.repeat_lst: backend 'scripted' takes no option" in err, err
    assert "did you mean 'repeat_last'?" in err and not marker.exists()
    (tmp_path / "script_mod.py").write_text("import sys\nsys.exit(0)\n")
    exits = write(tmp_path, SCRIPTED + "  replies: ['x']\ninputs:\n  f: {function: 'script_mod:main'}\n", "e.yaml")
    status, err = _cave_run(exits, tmp_path, capsys)
    assert status == 2 and f"{exits}:6: inputs.f: SystemExit: 0" in err and "fix:" in err, err
