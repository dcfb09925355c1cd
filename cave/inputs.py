"""A task's inputs loaded: files as DataFrames, database URLs as engines, import paths as callables.

Runs after the task file validated (``cave.task``) and before any model loads, so a file that does not parse or a
database that does not answer is reported at its line in the task file, with the fix.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

from cave.task import InputSpec, Task, TaskError

__all__ = ["FILE_FORMATS", "import_callable", "open_engine", "read_table", "resolve_inputs"]

FILE_FORMATS = {
    ".csv": "csv",
    ".tsv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".json": "json",
    ".jsonl": "json",
}


def resolve_inputs(task: Task) -> dict[str, tuple[Any, str | None]]:
    """Load every input: files as DataFrames, URLs as engines, import paths as callables.

    Raises TaskError pointing at the input's line when loading fails.
    """
    out: dict[str, tuple[Any, str | None]] = {}
    problems = []
    # Data first, code last: a `function:` input imports its module (runs its top-level code in this process), so
    # every other problem of the task file is reported before any of it runs.
    ordered = sorted(task.spec.inputs.items(), key=lambda item: item[1].function is not None)
    for name, spec in ordered:
        try:
            out[name] = (_load_input(spec, task.base_dir), spec.description)
        except (Exception, SystemExit) as e:  # report every input that fails, not only the first; a module that
            # calls sys.exit() when imported (a script) ended `cave run` with its status and no word
            problems.append(
                f"{task.where('inputs', name)}: inputs.{name}: {type(e).__name__}: {_first_line(e)}\n"
                f"  fix: {_input_fix(spec)}"
            )
    if problems:
        raise TaskError(problems)
    return {name: out[name] for name in task.spec.inputs}


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else ""


def _input_fix(spec: InputSpec) -> str:
    if spec.file:
        return "check the file's contents and format, or set `format:` / `read_options:` (passed to pandas)"
    if spec.url:
        return "check the URL and that the database driver is installed"
    if spec.function:
        return (
            "check that the module is importable from the task's folder or installed, and the name exists "
            "(a module that runs a script when imported: move the function into a module without top-level code)"
        )
    return "check the value"


def _load_input(spec: InputSpec, base: Path) -> Any:
    if spec.file is not None:
        return read_table(base / spec.file, spec.format, spec.read_options)
    if spec.url is not None:
        return open_engine(spec.url, base)
    if spec.function is not None:
        return import_callable(spec.function, base)
    return spec.value


def read_table(path: Path, fmt: str = "auto", options: dict[str, Any] | None = None) -> Any:
    import pandas as pd

    options = dict(options or {})
    if fmt == "auto":
        fmt = FILE_FORMATS.get(path.suffix.lower(), "")
        if not fmt:
            raise ValueError(f"cannot tell the format of {path.name}; set `format: csv|parquet|json`")
    if fmt == "csv":
        if path.suffix.lower() == ".tsv":
            options.setdefault("sep", "\t")
        return pd.read_csv(path, **options)
    if fmt == "parquet":
        return pd.read_parquet(path, **options)
    if path.suffix.lower() == ".jsonl":
        options.setdefault("lines", True)
    return pd.read_json(path, **options)


def open_engine(url: str, base: Path) -> Any:
    """An Engine for ``url``, connected once now: a wrong password, a missing driver or a file that is not a
    database fails here, at validation, instead of in the agent's first query (engines connect lazily)."""
    from sqlalchemy import create_engine, inspect
    from sqlalchemy.engine import make_url

    u = make_url(url)
    if u.get_backend_name() == "sqlite" and u.database and u.database != ":memory:":
        path = (base / u.database).resolve()
        if not path.is_file():
            raise FileNotFoundError(f"no database file at {path}")
        u = u.set(database=str(path))
    engine = create_engine(u)
    try:
        inspect(engine).get_table_names()  # reads the catalog: a garbage file is "not a database" here
    except Exception:
        engine.dispose()
        raise
    return engine


def import_callable(path: str, base: Path) -> Any:
    mod_name, _, attr = path.partition(":")
    # Helpers shipped next to the task file are importable.
    if str(base) not in sys.path:
        sys.path.insert(0, str(base))
    obj: Any = importlib.import_module(mod_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{path} is a {type(obj).__name__}, not a callable")
    return obj
