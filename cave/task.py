"""The task.yaml schema: what to solve, with which model and runtime, on which inputs.

A task file is validated completely (files exist, URLs parse, import paths
look right) before anything heavy happens, and every problem is reported as
``FILE:LINE: FIELD: what is wrong`` plus the fix. ``cave schema`` prints the
JSON Schema of this model.

    task: Which region had the highest total revenue? Return a DataFrame of revenue by region.
    model: {backend: local}
    inputs:
      sales: {file: data/sales.csv, description: one row per order}
    outputs:
      by_region: {format: csv}
    max_steps: 6
"""

from __future__ import annotations

import keyword
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from cave.config import (
    ConfigError,
    ConfigFile,
    ConfigModel,
    explain,
    parse_yaml,
    problem,
    read_config,
    registered,
    validate,
)
from cave.llm.base import BACKENDS
from cave.registry import did_you_mean
from cave.review.checks import ANSWER, CheckSpec, describe_check
from cave.runtimes.base import RUNTIMES

BackendName = registered(BACKENDS)  # a registered LLM backend
RuntimeName = registered(RUNTIMES)  # a registered runtime

__all__ = [
    "InputSpec",
    "ModelSpec",
    "OutputSpec",
    "RuntimeSpec",
    "Task",
    "TaskError",
    "TaskSpec",
    "explain_error",
    "json_schema",
    "load_task",
    "parse_task",
]


class TaskError(ConfigError):
    """A task file is wrong. ``str()`` lists every problem as FILE:LINE: FIELD: message, then the fix."""


def _identifier(name: str, what: str) -> str:
    if not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(
            f"{what} name {name!r} is not a Python identifier; use letters, digits and _ (e.g. 'sales_2024')"
        )
    if unicodedata.normalize("NFKC", name) != name:  # Python would bind it under its NFKC form: another name
        raise ValueError(
            f"{what} name {name!r} is read by Python as {unicodedata.normalize('NFKC', name)!r}; "
            "write it with plain (ASCII) letters and digits"
        )
    return name


def _base_dir(info: ValidationInfo) -> Path:
    ctx = info.context or {}
    return Path(ctx.get("base_dir", "."))


class ModelSpec(ConfigModel):
    """The LLM backend. Keys other than the ones below are passed to the backend as options
    (e.g. ``model``, ``base_url``, ``api_key`` for openai; ``path`` for local; ``replies`` for scripted)."""

    model_config = ConfigDict(extra="allow")
    shorthand = "backend"

    backend: BackendName = Field(
        "local", description="one of: " + ", ".join(BACKENDS.names()) + " (or a registered name)"
    )
    max_tokens: int = Field(768, ge=16, le=32768, description="most tokens per reply")
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    stop: list[str] | None = Field(
        None, description="stop sequences, e.g. ['```\\n\\n'] to end a reply after its code block"
    )
    response_prefix: str | None = Field(
        None,
        description='text every reply starts with, e.g. "```python\\n" so a small model replies with code '
        "(the local backend and vLLM continue it; part of the prompt)",
    )

    model: str | None = Field(
        None, description="local: an embedded model (qwen, smollm2) or a .gguf path; openai: the served model's name"
    )
    base_url: str | None = Field(None, description="openai: the server's URL, e.g. http://127.0.0.1:8000/v1")
    api_key: str | None = Field(None, description="openai: the key (default: the OPENAI_API_KEY environment variable)")

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not v.lower().startswith(("http://", "https://")):  # httpx would refuse each request
            raise ValueError(f"base_url {v!r} is not an http(s) URL; e.g. http://127.0.0.1:8000/v1")
        return v

    @property
    def options(self) -> dict[str, Any]:
        """Keyword arguments for the backend: the named options that are set, and any others given."""
        named = {k: getattr(self, k) for k in ("model", "base_url", "api_key") if getattr(self, k) is not None}
        return {**named, **(self.model_extra or {})}


MAX_TIMEOUT_S = 7 * 24 * 3600.0  # a cell may run a week; a bigger number is a typo, not a plan
MAX_MEMORY_MB = 1 << 20  # 1 TiB
MAX_CPU_S = 10**7
# pandas reader options that allocate or skip by count: a huge value hangs the host before any model loads
_COUNT_OPTIONS = ("skiprows", "nrows", "skipfooter", "header", "chunksize")
MAX_COUNT_OPTION = 10**8


class RuntimeSpec(ConfigModel):
    """Where the agent's code runs."""

    model_config = ConfigDict(extra="forbid")

    shorthand = "kind"

    kind: RuntimeName = Field(
        "inprocess",
        description="inprocess (fast, trusted code), kernel (own process, killable), process (kernel + resource "
        "limits; not a security boundary), sandbox (process + jail, for untrusted code): see docs/threat-model.md",
    )
    timeout: float = Field(60.0, gt=0, le=MAX_TIMEOUT_S, description="seconds per code cell")
    memory_limit_mb: int | None = Field(
        None, gt=0, le=MAX_MEMORY_MB, description="kernel, process and sandbox: the kernel's memory limit"
    )
    cpu_time_limit_s: int | None = Field(
        None, gt=0, le=MAX_CPU_S, description="kernel, process and sandbox: CPU-seconds limit"
    )
    options: dict[str, Any] = Field(default_factory=dict, description="more keyword arguments for the runtime")


class InputSpec(ConfigModel):
    """One object injected into the runtime: exactly one of file, url, function, value."""

    model_config = ConfigDict(extra="forbid")

    file: str | None = Field(None, description="CSV/TSV/Parquet/JSON(L) file, loaded as a pandas DataFrame")
    url: str | None = Field(
        None, description="SQLAlchemy URL, injected as an Engine (sqlite paths are relative to the task file)"
    )
    function: str | None = Field(None, description="a Python callable by import path, 'package.module:function'")
    value: Any = Field(None, description="a literal value (number, string, list, mapping)")
    format: Literal["auto", "csv", "parquet", "json"] = Field("auto", description="file format; auto = by extension")
    read_options: dict[str, Any] = Field(default_factory=dict, description="keyword arguments for the pandas reader")
    description: str | None = Field(None, description="shown to the model next to the name")

    @field_validator("read_options")
    @classmethod
    def _bounded_counts(cls, v: dict[str, Any]) -> dict[str, Any]:
        for key in _COUNT_OPTIONS:
            n = v.get(key)
            if n is None or isinstance(n, list):
                continue
            if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_COUNT_OPTION:
                raise ValueError(
                    f"read_options.{key} is {n!r}; give a whole number between 0 and {MAX_COUNT_OPTION:,} "
                    "(or a list of row numbers)"
                )
        return v

    @model_validator(mode="after")
    def _exactly_one(self) -> InputSpec:
        given = [k for k in ("file", "url", "function", "value") if getattr(self, k) is not None]
        if len(given) != 1:
            got = ", ".join(given) if given else "none"
            raise ValueError(f"give exactly one of file, url, function, value (got: {got})")
        return self

    @field_validator("file")
    @classmethod
    def _file_exists(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is None:
            return v
        path = (_base_dir(info) / v).resolve()
        if not path.is_file():
            raise ValueError(f"file not found: {path}; paths are relative to the task file's folder")
        return v

    @field_validator("url")
    @classmethod
    def _url_parses(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is None:
            return v
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            url = make_url(v)
        except ArgumentError:
            raise ValueError(
                f"not a SQLAlchemy URL: {v!r}; e.g. 'sqlite:///data/shop.db' or 'postgresql://user@host/db'"
            ) from None
        if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
            path = (_base_dir(info) / url.database).resolve()
            if not path.is_file():
                raise ValueError(
                    f"SQLite database not found: {path}; sqlite paths are relative to the task file's folder"
                )
        return v

    @field_validator("function")
    @classmethod
    def _import_path(cls, v: str | None) -> str | None:
        if v is None:
            return v
        mod, _, attr = v.partition(":")
        if not mod or not attr or not all(p.isidentifier() for p in mod.split(".") + attr.split(".")):
            raise ValueError(f"import path {v!r} must look like 'package.module:function'")
        return v


class OutputSpec(ConfigModel):
    """A runtime variable saved after the run (DataFrames to Parquet/CSV, other values to JSON)."""

    model_config = ConfigDict(extra="forbid")

    variable: str | None = Field(
        None, description="runtime variable to save (default: the output's name); 'final_answer' for the answer"
    )
    format: Literal["auto", "parquet", "csv", "json", "pickle"] = Field(
        "auto", description="auto: DataFrames to Parquet, the rest to JSON"
    )
    description: str | None = Field(None, description="told to the model: what this variable must hold")
    required: bool = Field(True, description="a missing required output fails the run (exit status 1)")

    @field_validator("variable")
    @classmethod
    def _variable_name(cls, v: str | None) -> str | None:
        return v if v is None else _identifier(v, "output variable")


class TaskSpec(ConfigModel):
    """A task file."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(description="what the agent must do, in plain words")
    name: str | None = Field(None, description="a short label for listings")
    model: ModelSpec = Field(default_factory=ModelSpec, description="LLM backend; default: the embedded local model")
    runtime: RuntimeSpec = Field(default_factory=RuntimeSpec)
    inputs: dict[str, InputSpec] = Field(default_factory=dict, description="objects injected into the runtime, by name")
    skills: list[str] = Field(
        default_factory=list, description="Agent Skills folders (relative to the task file) or names"
    )
    activate_skills: list[str] = Field(
        default_factory=list,
        description="skill names to activate at the start (instructions in the prompt, exports in the runtime)",
    )
    outputs: dict[str, OutputSpec] = Field(default_factory=dict, description="runtime variables to retrieve and save")
    checks: dict[str, CheckSpec] = Field(
        default_factory=dict,
        description="what the results must look like, by runtime variable (`answer`: the final answer); checked "
        "after final_answer, fed back to the agent when they fail; `success` only when every check passes",
    )
    max_steps: int = Field(8, ge=1, le=200, description="most LLM calls before the run stops with status max_steps")
    seed: int | None = Field(None, description="sampling seed, for reproducible runs")
    instructions: str | None = Field(None, description="extra text appended to the system prompt")
    verify: int = Field(
        1,
        ge=0,
        le=9,
        description="when the task declares no checks: independent attempts (fresh runtime with the given inputs, "
        "own seed) that must agree with the answer, by majority, before the run ends `success`; an answer nothing "
        "confirmed ends `unverified` (0: verification off, so every answer without checks ends `unverified`)",
    )
    review: bool | Literal["auto"] = Field(
        "auto",
        description="before an answer is accepted (when there are no checks), show the model a summary of it "
        "beside the task once, to confirm or fix it: auto (only answers that look wrong: empty, None, NaN, "
        "all values the same, True/False for a yes/no question), true (every answer) or false",
    )

    @field_validator("task")
    @classmethod
    def _not_empty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("the task text is empty; say what the agent must do")
        return v.strip()

    @field_validator("checks", mode="before")
    @classmethod
    def _check_names(cls, v: Any) -> Any:
        if isinstance(v, dict):
            for name in v:
                if str(name) != ANSWER:
                    _identifier(str(name), "checked variable")
        return v

    @field_validator("inputs", "outputs", mode="before")
    @classmethod
    def _names(cls, v: Any, info: ValidationInfo) -> Any:
        if isinstance(v, dict):  # checked before the entries, so a bad name is reported with the entries' errors
            for name in v:
                _identifier(str(name), str(info.field_name)[:-1])
        return v


@dataclass
class Task:
    """A validated task file: the spec plus where it came from (for relative paths and error lines)."""

    spec: TaskSpec
    path: Path | None = None
    lines: dict[tuple[str, ...], int] | None = None  # field path -> line, for errors found after validation

    @property
    def base_dir(self) -> Path:
        return self.path.parent if self.path else Path.cwd()

    def where(self, *loc: str) -> str:
        """'FILE:LINE' of a field, for error messages."""
        line = (self.lines or {}).get(tuple(loc)) or (self.lines or {}).get(tuple(loc[:-1]))
        return f"{self.path or '<task>'}:{line or 1}"

    def prompt(self) -> str:
        """The task text the model reads, with the outputs it must leave behind."""
        text = self.spec.task
        if self.spec.outputs:
            lines = []
            for name, out in self.spec.outputs.items():
                var = out.variable or name
                if var == "final_answer":
                    continue
                lines.append(f"- `{var}`" + (f": {out.description}" if out.description else ""))
            if lines:
                text += "\n\nBefore calling final_answer, store your results in these variables:\n" + "\n".join(lines)
        if self.spec.checks:
            rules = [f"- {describe_check(name, spec)}" for name, spec in self.spec.checks.items()]
            text += "\n\nYour result is checked before it is accepted:\n" + "\n".join(rules)
        return text


# -- loading -------------------------------------------------------------------------------------
_EXAMPLES = {"task": "task: Summarize sales by region and return a DataFrame", "file": "file: data/sales.csv"}
_NESTED: dict[str, type[BaseModel]] = {}  # filled below the models: field name -> model of its entries


def load_task(path: str | Path) -> Task:
    """Read and validate a task file. Raises TaskError (every problem, with file:line and the fix)."""
    cfg = read_config(path, what="task file", example="see examples/", error=TaskError)
    return _validate(cfg)


def parse_task(text: str, path: Path | None = None) -> Task:
    cfg = parse_yaml(text, str(path) if path else "<task>", TaskError)
    cfg.path = path.resolve() if path else None
    return _validate(cfg)


def explain_error(err: Any, cfg: ConfigFile) -> str:
    """One pydantic error of a task file (a TaskSpec) as ``FILE:LINE: FIELD: problem`` + ``fix:``."""
    return explain(err, cfg, TaskSpec, nested=_NESTED, examples=_EXAMPLES)


def _validate(cfg: ConfigFile) -> Task:
    if not isinstance(cfg.data, dict):
        raise TaskError(
            [problem(cfg.name, 1, None, "a task file must be a mapping", "start with `task: <what to do>`")]
        )
    base = cfg.path.parent if cfg.path else Path.cwd()
    spec = validate(TaskSpec, cfg, context={"base_dir": str(base)}, nested=_NESTED, examples=_EXAMPLES, error=TaskError)
    problems = cross_checks(spec, cfg)
    if problems:
        raise TaskError(problems)
    return Task(spec, cfg.path, cfg.lines)


# -- checks across fields: what would otherwise fail only once the run started --------------------------------
# Each returns problems in the house format, found before any input is loaded, module imported or model loaded.
_KERNEL_RUNTIMES = ("kernel", "process", "sandbox")  # runtimes whose code runs in another process


def cross_checks(spec: TaskSpec, cfg: ConfigFile) -> list[str]:
    """Problems no single field shows: the backend's options, inputs the chosen runtime cannot receive."""
    return _backend_problems(spec.model, cfg) + _input_problems(spec, cfg)


def _backend_problems(model: ModelSpec, cfg: ConfigFile) -> list[str]:
    problems = _option_problems(model, cfg)
    if problems:
        return problems
    if model.backend == "scripted":
        return _scripted_problems(model, cfg)
    if model.backend == "local":
        return _local_model_problems(model, cfg)
    return []


def _option_problems(model: ModelSpec, cfg: ConfigFile) -> list[str]:
    """Options the backend does not take (found when the backend was built: after the inputs, so after a
    `function:` input had imported its module)."""
    import inspect

    try:
        params = inspect.signature(BACKENDS.get(model.backend)).parameters
    except (TypeError, ValueError):  # a backend without a signature: it checks its own options
        return []
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return []
    known = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return [
        problem(
            cfg.name,
            cfg.line("model", key),
            f"model.{key}",
            f"backend {model.backend!r} takes no option {key!r}",
            f"{did_you_mean(key, known)}its options: {', '.join(known)} (and max_tokens, temperature, stop, "
            "response_prefix for every backend)",
        )
        for key in model.options
        if key not in known
    ]


def _scripted_problems(model: ModelSpec, cfg: ConfigFile) -> list[str]:
    replies = (model.model_extra or {}).get("replies")
    fix = 'give the replies in order, e.g. replies: ["```python\\nfinal_answer(1)\\n```"]'
    if not isinstance(replies, list) or not replies:
        got = "missing" if replies is None else f"a {type(replies).__name__}" if replies != [] else "empty"
        return [
            problem(
                cfg.name,
                cfg.line("model", "replies"),
                "model.replies",
                f"the scripted backend's replies are {got}",
                fix,
            )
        ]
    return [
        problem(
            cfg.name,
            cfg.line("model", "replies", str(i)),
            f"model.replies.{i}",
            f"a reply is text, not a {type(r).__name__}",
            fix,
        )
        for i, r in enumerate(replies)
        if not isinstance(r, str)
    ]


def _local_model_problems(model: ModelSpec, cfg: ConfigFile) -> list[str]:
    options = model.options
    key = "path" if "path" in options else "model"
    value = options.get(key)
    if value is None:
        return []
    where = cfg.line("model", key)
    fix = "give an embedded model (qwen, smollm2), a .gguf file, or a folder with an HF checkpoint (config.json)"
    if not isinstance(value, str):
        return [problem(cfg.name, where, f"model.{key}", f"{value!r} is not a model name or a path", fix)]
    what = _local_model_problem(value)
    return [problem(cfg.name, where, f"model.{key}", what, fix)] if what else []


def _local_model_problem(value: str) -> str | None:
    """What is wrong with a local model given by name or path (relative to the current folder, as the backend
    reads it), or None. Reads at most 4 bytes, of a regular file only."""
    from cave.llm import models

    if models.resolve_name(value):
        return None
    path = Path(value).expanduser()
    if path.is_dir():
        return None if (path / "config.json").is_file() else f"{path} is a folder without config.json"
    if not path.is_file():  # also a FIFO or a device: never opened
        return f"{path} is neither an embedded model nor a file"
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        return f"cannot read {path}: {e.strerror or e}"
    return None if magic == b"GGUF" else f"{path} is not a GGUF file (it does not start with GGUF)"


def _input_problems(spec: TaskSpec, cfg: ConfigFile) -> list[str]:
    if spec.runtime.kind not in _KERNEL_RUNTIMES:
        return []
    problems = []
    for name, given in spec.inputs.items():
        if given.url is not None and _in_memory_sqlite(given.url):
            problems.append(
                problem(
                    cfg.name,
                    cfg.line("inputs", name, "url"),
                    f"inputs.{name}.url",
                    f"an in-memory SQLite database cannot be shared with runtime {spec.runtime.kind!r} (its code runs "
                    "in another process, which would get a new, empty database)",
                    "give a file-backed URL (sqlite:///data/shop.db, relative to the task file) or use runtime: inprocess",
                )
            )
    return problems


def _in_memory_sqlite(url: str) -> bool:
    from sqlalchemy.engine import make_url

    u = make_url(url)
    return u.get_backend_name() == "sqlite" and (
        u.database in (None, "", ":memory:") or "memory" in str(u.query.get("mode", ""))
    )


_NESTED.update(model=ModelSpec, runtime=RuntimeSpec, inputs=InputSpec, outputs=OutputSpec, checks=CheckSpec)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of task files (what ``cave schema`` prints)."""
    schema = TaskSpec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "cave task file"
    return schema
