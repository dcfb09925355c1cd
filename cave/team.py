"""Teams: several agents, each a role with its own LLM backend and runtime, run by a routing pattern.

A role is a YAML file in ``agents/`` (name, system prompt or prompt file, backend reference,
runtime own/shared, skills, max steps, output contract), loaded by name. A team lists roles and a
pattern, either in a team file or in a ``team:`` section of a task file::

    team:
      roles: [solver, verifier]                 # agents/solver.yaml, agents/verifier.yaml
      pattern: {name: loop, worker: solver, critic: verifier, max_rounds: 2}
      backends:
        default: {backend: local, max_in_flight: 1}

    team = load_team("team.yaml")                # or Team.build(roles=[...], pattern="loop", backends={...})
    result = await team.arun("What is 17 * 23?", seed=0)
    result.answer, result.status, result.trajectory    # ONE Trajectory: every role's steps, tagged

Patterns are small classes registered by name (``@register_pattern("loop")``): ``sequential``,
``loop`` (worker/critic with a structured verdict), ``router`` (a structured choice among named
roles) and ``custom`` (``async def run(team, task)`` by import path).

Decisions are structured, never parsed out of free text: the deciding role's runtime gets
``verdict(approve, feedback)`` or ``route(role, message)`` injected; calling it ends the role's
turn (like ``final_answer``) and the value it recorded crosses back to the host, even from a
kernel in another process. State moves between roles through named slots: ``publish("name", obj)``
in a role's code (or declared outputs) retrieves the object from that role's runtime and injects
it into the runtime of the roles that run next: the same object when both are in-process.

Every episode (``TeamRun``) gets its own runtimes; backends are shared by all the episodes of a
team, each behind a bound on in-flight requests; seeds derive per role from the episode seed, so
a team is deterministic given seeds and holds no global state. ``cave.team_ray`` runs episodes
in Ray actors with the same API.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib
import re
import string
import sys
import time
import traceback
import weakref
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from cave.agent import FINAL_VAR, Agent, FinalAnswer, RunStarted, StepFinished
from cave.llm.base import BACKENDS, LLM, Message, StreamItem, create_backend
from cave.names import KNOWN_BACKENDS, check_backend, check_runtime, did_you_mean, known_backends, unknown_field_fix
from cave.trajectory import Step, Trajectory, new_id
from cave.runtimes.base import Runtime, create_runtime

ROLE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
PUBLISHED_VAR = "_cave_published"  # name -> (sequence number, description), kept in the role's runtime
ANSWER_PREVIEW = 1500  # characters of another role's answer shown in a message


# Built-in names, known before their modules are imported (cave.task has the same lists; this module must
# not import cave.task at import time, so that cave.task can embed TeamSpec).


class TeamError(Exception):
    """A team or role definition is wrong. ``str()`` lists each problem as FILE:LINE: FIELD: message, then the fix."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class BackendStartError(RuntimeError):
    """A valid team's backend could not be created (a missing package or model file, a bad option)."""


# =============================================================================================
# Structured decisions: functions injected into the deciding role's runtime
# =============================================================================================
@dataclass
class Verdict:
    """A critic's decision on a worker's answer."""

    approve: bool
    feedback: str = ""


@dataclass
class Route:
    """A router's choice of the next role, with what that role should do."""

    role: str
    message: str = ""


def _end_turn(value: Any) -> None:
    # Same contract as cave.agent.final_answer: the value goes into the namespace of the code that
    # called us (frame 2: the agent's cell), so a host across a process boundary can retrieve it.
    sys._getframe(2).f_globals[FINAL_VAR] = value
    raise FinalAnswer(value)


def verdict(approve: bool, feedback: str = "") -> None:
    """End your turn with your decision: approve=True if the answer is correct, else False with feedback saying what is wrong."""
    if type(approve).__name__ == "bool_":  # numpy's bool, from a comparison of numpy/pandas values
        approve = bool(approve)
    if not isinstance(approve, bool):
        raise TypeError(f"verdict(approve=...) must be True or False, got {approve!r}")
    _end_turn(Verdict(approve, str(feedback)))


def make_route(choices: Sequence[str], descriptions: Mapping[str, str] | None = None) -> Callable[..., None]:
    """The ``route`` function for a router role: ``route(role, message="")`` among ``choices``."""
    allowed = tuple(choices)

    def route(role: str, message: str = "") -> None:
        if role not in allowed:
            raise ValueError(f"route({role!r}): unknown role; choose one of {', '.join(map(repr, allowed))}")
        _end_turn(Route(role, str(message)))

    listed = ", ".join(
        f"'{c}'" + (f" ({descriptions[c]})" if descriptions and descriptions.get(c) else "") for c in allowed
    )
    route.__doc__ = f"End your turn by choosing who acts next: one of {listed}; message says what they should do."
    return route


def publish(name: str, obj: Any, description: str = "") -> None:
    """Hand ``obj`` to the roles that act after you, as a variable named ``name`` in their session."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"publish(name, ...): name must be a Python identifier, got {name!r}")
    ns = sys._getframe(1).f_globals
    ns[name] = obj
    registry = ns.setdefault(PUBLISHED_VAR, {})
    seq = max((s for s, _ in registry.values()), default=0) + 1
    registry[name] = (seq, str(description))


def parse_verdict(value: Any) -> Verdict | None:
    """A Verdict from a structured value, or None when it is not one (free text is never parsed).

    >>> parse_verdict(Verdict(False, "off by one")), parse_verdict(True), parse_verdict({"approve": "reject"})
    (Verdict(approve=False, feedback='off by one'), Verdict(approve=True, feedback=''), Verdict(approve=False, feedback=''))
    >>> parse_verdict("looks right to me") is None
    True
    """
    if isinstance(value, Verdict):
        return value
    if type(value).__name__ == "Verdict" and hasattr(value, "approve"):  # a copy whose class came back by another path
        return Verdict(bool(value.approve), str(getattr(value, "feedback", "")))
    if isinstance(value, bool):
        return Verdict(value)
    if isinstance(value, Mapping) and "approve" in value:
        a = value["approve"]
        if isinstance(a, str) and a.strip().lower() in ("approve", "reject"):
            a = a.strip().lower() == "approve"
        if isinstance(a, bool):
            return Verdict(a, str(value.get("feedback", "")))
    return None


def parse_route(value: Any, choices: Sequence[str]) -> Route | None:
    """A Route among ``choices`` from a structured value (a Route, {"role": ...}, or exactly a role name).

    >>> parse_route("search", ["search", "answer"]), parse_route("I'd search", ["search"]) is None
    (Route(role='search', message=''), True)
    """
    if isinstance(value, Route) or (type(value).__name__ == "Route" and hasattr(value, "role")):
        route = Route(str(value.role), str(getattr(value, "message", "")))
    elif isinstance(value, Mapping) and "role" in value:
        route = Route(str(value["role"]), str(value.get("message", "")))
    elif isinstance(value, str):
        route = Route(value.strip())
    else:
        return None
    return route if route.role in choices else None


def summarize(value: Any, limit: int = ANSWER_PREVIEW) -> str:
    """How one role's answer appears in a message to another: text as is, objects as a bounded preview.

    >>> summarize(42), summarize("x" * 10, limit=5)
    ('42', 'xxxx…')
    """
    from cave.runtimes.describe import clip, preview, type_name

    if isinstance(value, str):
        return value if len(value) <= limit else value[: limit - 1] + "…"
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    if isinstance(value, (Verdict, Route)):
        return repr(value)
    text = repr(value)
    if len(text) <= min(limit, 400) and "\n" not in text:
        return text
    return clip(f"<{type_name(value)}: {preview(value)}>", limit)


# =============================================================================================
# Role and team definitions (pydantic)
# =============================================================================================
class SamplingSpec(BaseModel):
    """Sampling parameters of one role (unset: the team's defaults)."""

    model_config = ConfigDict(extra="forbid")

    temperature: float | None = Field(None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(None, ge=16, le=32768, description="most tokens per reply")
    seed: int | None = Field(None, description="a fixed seed for this role (default: derived from the episode seed)")


class RoleRuntimeSpec(BaseModel):
    """Where the role's code runs: its own runtime, or the runtime shared by the roles that say 'shared'."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["own", "shared"] = "own"
    kind: str | None = Field(None, description="inprocess or kernel (default: the team's runtime kind)")
    timeout: float | None = Field(None, gt=0, description="seconds per code cell (default: the team's)")
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"mode": data} if data in ("own", "shared") else {"kind": data}
        return data

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, v: str | None) -> str | None:
        return v if v is None else check_runtime(v)


class OutputContract(BaseModel):
    """What a role must produce: how its turn ends, and which runtime variables it hands on."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["answer", "text", "verdict", "route"] = Field(
        "answer",
        description="answer: final_answer(value); text: a plain reply is fine; verdict: verdict(approve, feedback); "
        "route: route(role, message)",
    )
    publishes: dict[str, str] = Field(
        default_factory=dict,
        description="runtime variables handed to the next roles after each turn: name -> description",
    )
    description: str | None = Field(None, description="told to the model: what the answer must be")

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"kind": data} if isinstance(data, str) else data

    @field_validator("publishes")
    @classmethod
    def _identifiers(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v:
            if not name.isidentifier():
                raise ValueError(f"published name {name!r} is not a Python identifier; use letters, digits and _")
        return v


class RoleSpec(BaseModel):
    """One role: a file in agents/ (``agents/solver.yaml``) or an inline mapping in a team."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="the role's name: its agent id in trajectories and training")
    description: str = Field("", description="one line: what this role does (shown to routers)")
    system: str | None = Field(None, description="the role's instructions (appended to the agent's system prompt)")
    prompt_file: str | None = Field(
        None, description="a template file with the instructions (relative to the role file)"
    )
    backend: str | None = Field(None, description="a key of the team's `backends:` or a registered backend name")
    sampling: SamplingSpec = Field(default_factory=SamplingSpec)
    runtime: RoleRuntimeSpec = Field(default_factory=RoleRuntimeSpec)
    skills: list[str] = Field(default_factory=list, description="Agent Skills folders or names")
    max_steps: int = Field(4, ge=1, le=200, description="most LLM calls in one turn of this role")
    output: OutputContract = Field(default_factory=OutputContract)
    reads: list[str] | None = Field(None, description="slots injected into this role's runtime (default: all)")
    timeout_s: float | None = Field(None, gt=0, description="wall-clock limit of one turn of this role, seconds")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not ROLE_NAME.match(v):
            raise ValueError(
                f"role name {v!r} must start with a letter and use letters, digits, - and _; e.g. 'solver'"
            )
        return v

    @model_validator(mode="after")
    def _one_prompt(self) -> RoleSpec:
        if self.system is not None and self.prompt_file is not None:
            raise ValueError("give either `system` or `prompt_file`, not both; keep the one you edit")
        if self.prompt_file is not None and not Path(self.prompt_file).is_file():
            raise ValueError(f"prompt file not found: {self.prompt_file}; paths are relative to the role file's folder")
        return self


class BackendSpec(BaseModel):
    """A backend instance of the team: keys other than these are the backend's options (e.g. ``model``)."""

    model_config = ConfigDict(extra="allow")

    backend: str = Field("local", description="a registered backend: " + ", ".join(KNOWN_BACKENDS))
    max_in_flight: int | None = Field(None, ge=1, description="bound on concurrent requests to this backend")

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"backend": data} if isinstance(data, str) else data

    @field_validator("backend")
    @classmethod
    def _known(cls, v: str) -> str:
        return check_backend(v)

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class TeamRuntimeSpec(BaseModel):
    """The default runtime of the team's roles (each role gets its own, per episode, unless it says 'shared')."""

    model_config = ConfigDict(extra="forbid")

    kind: str = Field("inprocess", description="inprocess (fast, trusted code) or kernel (own process, killable)")
    timeout: float = Field(60.0, gt=0, description="seconds per code cell")
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"kind": data} if isinstance(data, str) else data

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, v: str) -> str:
        return check_runtime(v)


class PatternSpec(BaseModel):
    """A routing pattern by name, with its options (checked against the pattern's own options model)."""

    model_config = ConfigDict(extra="allow")

    name: str = Field("sequential", description="sequential, loop, router, custom, or a registered pattern")

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"name": data} if isinstance(data, str) else data

    @field_validator("name")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in PATTERNS:
            hint = did_you_mean(v, list(PATTERNS))
            raise ValueError(f"unknown pattern {v!r}; {hint}known patterns: {', '.join(sorted(PATTERNS))}")
        return v

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class TeamSpec(BaseModel):
    """A team: roles, how they take turns, and which backends and runtimes they use.

    Embed it in a task file as ``team: TeamSpec | None`` (validate with ``context={"base_dir": ...}``
    so role files next to the task are found), or give a path string: ``team: team.yaml``.
    """

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, description="a short label")
    source: str | None = Field(None, description="the team file this came from (set by the loader)", exclude=True)
    agents_path: list[str] = Field(default_factory=list, description="more folders with role files (relative)")
    backends: dict[str, BackendSpec] = Field(
        default_factory=dict, description="backend instances by key; roles that name the same key share one instance"
    )
    default_backend: str = Field("local", description="the backend of roles that do not name one")
    runtime: TeamRuntimeSpec = Field(default_factory=TeamRuntimeSpec)
    max_in_flight: int = Field(8, ge=1, description="default bound on concurrent requests per backend")
    max_tokens: int = Field(512, ge=16, le=32768, description="default most tokens per reply")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="default sampling temperature")
    seed: int | None = Field(None, description="base seed; each role's seed derives from it (and the episode's)")
    timeout_s: float | None = Field(None, gt=0, description="wall-clock limit of one episode, seconds")
    share_inputs: bool = Field(
        False,
        description="inject the same input objects into every runtime (zero-copy); default: each in-process "
        "runtime gets its own copy of DataFrames, arrays and containers, so one role (or one of many concurrent "
        "episodes) cannot change another's inputs",
    )
    roles: list[RoleSpec] = Field(
        description="role names (files in agents/), {use: NAME, ...overrides} or inline roles"
    )
    pattern: PatternSpec = Field(default_factory=PatternSpec)

    @model_validator(mode="before")
    @classmethod
    def _from_file(cls, data: Any, info: ValidationInfo) -> Any:
        """``team: path/to/team.yaml`` loads that file (relative to the task file's folder)."""
        if not isinstance(data, str):
            return data
        path = (_base_dir(info) / data).resolve()
        if not path.is_file():
            raise ValueError(
                f"team file not found: {path}; give a path relative to the task file, or an inline mapping"
            )
        loaded = _read_yaml(path)[0]
        if not isinstance(loaded, dict):
            raise ValueError(f"{path}:1: a team file must be a mapping with `roles:` and `pattern:`")
        return {**loaded, "source": str(path)}

    @field_validator("roles", mode="before")
    @classmethod
    def _resolve_roles(cls, v: Any, info: ValidationInfo) -> Any:
        if not isinstance(v, list) or not v:
            raise ValueError("`roles` must be a non-empty list; e.g. roles: [solver, verifier]")
        dirs = role_search_dirs(_team_dir(info), info.data.get("agents_path", []))
        return [resolve_role(item, dirs, _team_dir(info), index=i) for i, item in enumerate(v)]

    @field_validator("roles")
    @classmethod
    def _check_roles(cls, roles: list[RoleSpec], info: ValidationInfo) -> list[RoleSpec]:
        names = [r.name for r in roles]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"role names must be unique, {', '.join(dupes)} appear twice; rename one with `name:`")
        keys = set(info.data.get("backends", {})) | set((info.context or {}).get("backend_keys", ()))
        known = sorted(keys | set(known_backends()))
        default = info.data.get("default_backend", "local")
        for i, role in enumerate(roles):
            ref = role.backend or default
            if ref not in known:
                hint = did_you_mean(ref, known)
                where = (
                    f"roles.{i}.backend ({role.name})"
                    if role.backend
                    else f"default_backend (used by role {role.name})"
                )
                raise ValueError(f"{where}: unknown backend {ref!r}; {hint}known: {', '.join(known)}")
        return roles

    @field_validator("pattern")
    @classmethod
    def _check_pattern(cls, pattern: PatternSpec, info: ValidationInfo) -> PatternSpec:
        pcls = PATTERNS[pattern.name]
        try:
            options = pcls.Options.model_validate(pattern.options)
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                known = ", ".join(f for f in pcls.Options.model_fields)
                msg = f"unknown option; options of pattern {pattern.name!r}: {known}"
            elif "; " not in msg:
                msg = f"{msg}; got {err.get('input')!r}"
            raise ValueError(f"pattern.{loc}: {msg}") from None
        roles = info.data.get("roles")
        if roles:
            for loc, msg in pcls.check(options, roles):
                raise ValueError(f"pattern.{loc}: {msg}")
        return pattern

    @property
    def role_names(self) -> list[str]:
        return [r.name for r in self.roles]


def _base_dir(info: ValidationInfo) -> Path:
    return Path((info.context or {}).get("base_dir", "."))


def _team_dir(info: ValidationInfo) -> Path:
    source = info.data.get("source")
    return Path(source).parent if source else _base_dir(info)


# -- finding role files ------------------------------------------------------------------------
def bundled_agents_dir() -> Path:
    from cave.agents import ROOT

    return Path(ROOT)


def role_search_dirs(base: Path, extra: Iterable[str] = ()) -> list[Path]:
    """Where role names are looked up, first match wins: extra folders, ./agents, ., the bundled agents/."""
    dirs = [(base / p).resolve() for p in extra] + [(base / "agents").resolve(), base.resolve(), bundled_agents_dir()]
    out: list[Path] = []
    for d in dirs:
        if d not in out:
            out.append(d)
    return out


def known_roles(dirs: Iterable[Path]) -> list[str]:
    names: set[str] = set()
    for d in dirs:
        if d.is_dir():
            names |= {p.stem for p in d.glob("*.y*ml") if p.suffix in (".yaml", ".yml") and ROLE_NAME.match(p.stem)}
    return sorted(names)


def find_role_file(name: str, dirs: Sequence[Path]) -> Path:
    """The file defining role ``name``; KeyError listing the known role names when there is none."""
    if name.endswith((".yaml", ".yml")):
        for d in dirs:
            if (d / name).is_file():
                return d / name
    for d in dirs:
        for suffix in (".yaml", ".yml"):
            path = d / f"{name}{suffix}"
            if path.is_file():
                return path
    known = known_roles(dirs)
    hint = did_you_mean(name, known)
    raise KeyError(
        f"unknown role {name!r}; {hint}known roles: {', '.join(known) or '(none)'} "
        f"(role files are NAME.yaml in {', '.join(str(d) for d in dirs)})"
    )


def load_role(name_or_path: str | Path, dirs: Sequence[Path] | None = None) -> RoleSpec:
    """A role by name (searched in ``dirs``, default ./agents and the bundled agents/) or by file path."""
    path = Path(name_or_path)
    if not path.is_file():
        try:
            path = find_role_file(str(name_or_path), list(dirs or role_search_dirs(Path.cwd())))
        except KeyError as e:
            raise TeamError([f"{name_or_path}: {e.args[0]}"]) from None
    return RoleSpec.model_validate(_role_data(path))


def _role_data(path: Path) -> dict[str, Any]:
    """A role file's mapping, validated on its own (errors name that file's lines), with its prompt path resolved."""
    data, lines = _read_yaml(path)
    if not isinstance(data, dict):
        raise TeamError([f"{path}:1: a role file must be a mapping with at least `name:` and `system:`"])
    data = dict(data)
    data.setdefault("name", path.stem)
    if isinstance(data.get("prompt_file"), str):
        data["prompt_file"] = str((path.parent / data["prompt_file"]).resolve())
    try:
        RoleSpec.model_validate(data)
    except ValidationError as e:
        raise TeamError([explain(err, str(path), lines, RoleSpec) for err in e.errors()]) from None
    return data


def resolve_role(item: Any, dirs: Sequence[Path], base: Path, index: int = 0) -> Any:
    """One entry of ``roles:`` as a RoleSpec mapping: a name, ``{use: NAME, ...overrides}``, or inline."""
    if isinstance(item, RoleSpec):
        return item
    if isinstance(item, str):
        return _load_for_team(item, dirs, index)
    if not isinstance(item, dict):
        raise ValueError(
            f"roles.{index}: give a role name or a mapping, got {type(item).__name__}; e.g. roles: [solver]"
        )
    item = dict(item)
    if isinstance(item.get("prompt_file"), str):
        item["prompt_file"] = str((base / item["prompt_file"]).resolve())
    if "use" not in item:
        return item
    base_role = _load_for_team(str(item.pop("use")), dirs, index)
    for key in ("sampling", "runtime", "output"):  # nested mappings merge one level deep
        if isinstance(item.get(key), dict) and isinstance(base_role.get(key), dict):
            item[key] = {**base_role[key], **item[key]}
    if "prompt_file" in item:
        base_role.pop("system", None)
    if "system" in item:
        base_role.pop("prompt_file", None)
    return {**base_role, **item}


def _load_for_team(name: str, dirs: Sequence[Path], index: int) -> dict[str, Any]:
    try:
        return _role_data(find_role_file(name, dirs))
    except KeyError as e:
        raise ValueError(f"roles.{index}: {e.args[0]}") from None
    except TeamError as e:
        raise ValueError(f"roles.{index}: role {name!r} is invalid: " + " | ".join(e.problems)) from None


# -- YAML with line numbers, and error messages ------------------------------------------------
def _read_yaml(path: Path) -> tuple[Any, dict[tuple[str, ...], int]]:
    text = path.read_text(encoding="utf-8")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = f"{mark.line + 1}:{mark.column + 1}" if mark else "1"
        problem = " ".join(p for p in (e.context, e.problem) if p)
        raise TeamError(
            [f"{path}:{line}: YAML syntax error: {problem}\n  fix: check the indentation and quoting"]
        ) from None
    return data, line_map(node)


def line_map(node: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], int]:
    """Field path -> 1-based line of its key (mappings) or item (sequences), from a composed YAML node."""
    out: dict[tuple[str, ...], int] = {}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            loc = (*prefix, str(key.value))
            out[loc] = key.start_mark.line + 1
            out.update(line_map(value, loc))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            loc = (*prefix, str(i))
            out[loc] = item.start_mark.line + 1
            out.update(line_map(item, loc))
    return out


_LOC_IN_MESSAGE = re.compile(r"^((?:roles|pattern|default_backend)(?:\.[\w-]+)*)(?: \([^)]*\))?: ")

_NESTED: dict[str, type[BaseModel]] = {
    "sampling": SamplingSpec,
    "runtime": RoleRuntimeSpec,
    "output": OutputContract,
    "backends": BackendSpec,
    "pattern": PatternSpec,
    "roles": RoleSpec,
}


def explain(
    err: Mapping[str, Any],
    file: str,
    lines: Mapping[tuple[str, ...], int],
    model: type[BaseModel],
    prefix: tuple[str, ...] = (),
) -> str:
    """One pydantic error as ``FILE:LINE: FIELD: problem`` + ``fix:`` (the task.py convention)."""
    loc = prefix + tuple(str(p) for p in err["loc"])
    msg = str(err["msg"]).removeprefix("Value error, ")
    m = _LOC_IN_MESSAGE.match(msg)
    if m:  # a cross-field check names the exact field in its message
        loc = prefix + tuple(m.group(1).split("."))
        msg = msg[m.end() :]
    line = next((lines[loc[:n]] for n in range(len(loc), 0, -1) if loc[:n] in lines), 1)
    field_name = ".".join(loc) or "(top level)"
    kind = err["type"]
    if kind == "missing":
        fix = f"add `{loc[-1]}: ...`" + (f" under `{'.'.join(loc[:-1])}`" if len(loc) > 1 else "")
        msg = "required field is missing"
    elif kind == "extra_forbidden":
        parent = next((_NESTED[p] for p in reversed(loc[:-1]) if p in _NESTED), model)
        known = list(parent.model_fields)
        fix = unknown_field_fix(loc[-1], known)
        msg = f"unknown field `{loc[-1]}`"
    elif "; " in msg:
        msg, fix = msg.split("; ", 1)
    else:
        fix = (
            f"got {err.get('input')!r}"
            if "input" in err and not isinstance(err.get("input"), dict)
            else "see the field's description"
        )
    return f"{file}:{line}: {field_name}: {msg}\n  fix: {fix}"


def load_team(path: str | Path, *, backends: Mapping[str, LLM] | None = None) -> Team:
    """Read, validate and build a team file. Raises TeamError (every problem, with file:line and the fix).

    ``backends``: LLM instances by key, used instead of creating the backends the file names under those keys.
    """
    return Team.from_file(path, backends=backends)


def parse_team_file(path: str | Path, **context: Any) -> TeamSpec:
    path = Path(path)
    if not path.is_file():
        raise TeamError([f"{path}: no such team file; give the path to a team.yaml"])
    data, lines = _read_yaml(path)
    if not isinstance(data, dict):
        raise TeamError([f"{path}:1: a team file must be a mapping with `roles:` and `pattern:`"])
    return validate_team(data, str(path), lines, base_dir=path.resolve().parent, **context)


def validate_team(
    data: Any, file: str, lines: Mapping[tuple[str, ...], int], *, prefix: tuple[str, ...] = (), **context: Any
) -> TeamSpec:
    context.setdefault("base_dir", ".")
    context["base_dir"] = str(context["base_dir"])
    try:
        return TeamSpec.model_validate(data, context=context)
    except ValidationError as e:
        raise TeamError([explain(err, file, lines, TeamSpec, prefix) for err in e.errors()]) from None


# =============================================================================================
# Backends behind a bound on in-flight requests
# =============================================================================================
class BoundedLLM(LLM):
    """Wraps a backend so at most ``limit`` requests are in flight at once (per event loop).

    Every episode of a team shares the wrapper, so 256 concurrent episodes on one model queue
    here instead of overloading the server (or a single-threaded llama.cpp).
    """

    def __init__(self, inner: LLM, limit: int) -> None:
        self.inner = inner
        self.limit = limit
        self.name = getattr(inner, "name", "llm")
        self.context_window = getattr(inner, "context_window", 8192)
        self.supports_tools = getattr(inner, "supports_tools", False)
        self.in_flight = 0
        self.peak = 0
        self._sems: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        sem = self._sems.get(loop)
        if sem is None:
            sem = self._sems[loop] = asyncio.Semaphore(self.limit)
        return sem

    async def stream(self, messages: list[Message], **kwargs: Any) -> AsyncIterator[StreamItem]:
        async with self._semaphore():
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            try:
                async for item in self.inner.stream(messages, **kwargs):
                    yield item
            finally:
                self.in_flight -= 1

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __getattr__(self, name: str) -> Any:  # the wrapped backend's own attributes (calls, path, ...)
        return getattr(self.inner, name)


_BACKEND_MODULES = {
    "local": "cave.llm.local",
    "openai": "cave.llm.openai",
    "transformers": "cave.llm.hf",
    "vllm": "cave.llm.vllm",
}


def make_backend(name: str, **options: Any) -> LLM:
    """``create_backend`` that first imports the module of a built-in backend not registered yet."""
    if name not in BACKENDS and name in _BACKEND_MODULES:
        try:
            importlib.import_module(_BACKEND_MODULES[name])
        except ImportError:
            pass  # create_backend's error lists what is registered
    return create_backend(name, **options)


# =============================================================================================
# Patterns
# =============================================================================================
class PatternOptions(BaseModel):
    """Options every pattern has."""

    model_config = ConfigDict(extra="forbid")

    on_role_error: Literal["fail", "skip"] = Field(
        "fail", description="a role that fails (backend error, max steps, timeout): fail the episode, or skip its turn"
    )


@dataclass
class Outcome:
    """What a pattern (or a custom ``run``) ends with. A custom run may also return a bare answer."""

    answer: Any = None
    status: str = "success"  # "success" | "max_rounds" | "max_hops" | "error" | "timeout"
    error: str | None = None


Result = Outcome  # the name the custom-pattern contract uses: ``async def run(team, task) -> Result``

PATTERNS: dict[str, type[Pattern]] = {}


def register_pattern(name: str) -> Callable[[type[Pattern]], type[Pattern]]:
    """Class decorator: make a routing pattern available by name (``pattern: NAME`` in team files)."""

    def deco(cls: type[Pattern]) -> type[Pattern]:
        PATTERNS[name] = cls
        cls.name = name
        return cls

    return deco


class Pattern:
    """A routing pattern: validated options, a static check against the team's roles, and ``run``."""

    name: ClassVar[str] = "pattern"
    Options: ClassVar[type[PatternOptions]] = PatternOptions

    def __init__(self, options: PatternOptions, team: Team) -> None:
        self.options = options
        self.team = team

    @classmethod
    def check(cls, options: Any, roles: Sequence[RoleSpec]) -> list[tuple[str, str]]:
        """Problems as (option, message) — e.g. an option naming a role the team does not have."""
        return []

    def decision(self, role: str) -> Literal["verdict", "route"] | None:
        """The structured decision ``role`` makes in this pattern (its runtime gets the matching function)."""
        return None

    def route_choices(self, role: str) -> list[str] | None:
        return None

    async def run(self, team: TeamRun, task: str) -> Outcome:
        raise NotImplementedError

    def failed(self, result: RoleResult) -> Outcome | None:
        """The episode's end when ``result`` failed and on_role_error is 'fail'; None to go on (skip)."""
        if result.ok or self.options.on_role_error == "skip":
            return None
        return Outcome(
            None,
            "error",
            f"role {result.role!r} (turn {result.call}) ended with status {result.status!r}: {result.error or 'no answer'}",
        )


def _unknown_role(option: str, name: str, roles: Sequence[RoleSpec]) -> tuple[str, str]:
    names = [r.name for r in roles]
    hint = did_you_mean(name, names)
    return option, f"unknown role {name!r}; {hint}the team's roles: {', '.join(names)}"


def _check_names(option: str, names: Iterable[str] | None, roles: Sequence[RoleSpec]) -> list[tuple[str, str]]:
    known = {r.name for r in roles}
    return [_unknown_role(option, n, roles) for n in (names or []) if n not in known]


# -- sequential --------------------------------------------------------------------------------
class SequentialOptions(PatternOptions):
    order: list[str] | None = Field(None, description="roles in turn order (default: the team's order)")
    pass_outputs: Literal["all", "previous"] = Field("all", description="which earlier answers each role reads")


@register_pattern("sequential")
class Sequential(Pattern):
    """A pipeline: each role in turn (planner -> coder -> reviewer), reading the earlier roles' answers."""

    Options = SequentialOptions
    options: SequentialOptions

    @classmethod
    def check(cls, options: SequentialOptions, roles: Sequence[RoleSpec]) -> list[tuple[str, str]]:
        return _check_names("order", options.order, roles)

    async def run(self, team: TeamRun, task: str) -> Outcome:
        order = self.options.order or team.role_names
        done: list[tuple[str, Any]] = []
        answer: Any = None
        for role in order:
            shown = done if self.options.pass_outputs == "all" else done[-1:]
            text = task
            if shown:
                text += "\n\nWork so far by the other roles:\n" + "\n".join(f"## {r}\n{summarize(a)}" for r, a in shown)
            result = await team.call(role, text, sender=done[-1][0] if done else "user")
            if (end := self.failed(result)) is not None:
                return end
            if not result.ok:
                continue
            if result.verdict is not None:  # a reviewer's verdict is recorded; the answer stays the work's
                team.trajectory.meta.setdefault("verdicts", []).append(
                    dataclasses.asdict(result.verdict) | {"role": role}
                )
            else:
                answer = result.answer
            done.append((role, result.answer))
        if not done:
            return Outcome(None, "error", f"no role of {', '.join(order)} finished its turn")
        return Outcome(answer, "success")


# -- loop --------------------------------------------------------------------------------------
class LoopOptions(PatternOptions):
    worker: str | None = Field(None, description="the role that answers (default: the first role)")
    critic: str | None = Field(None, description="the role that returns a verdict (default: the second role)")
    max_rounds: int = Field(2, ge=1, le=100)
    memory: bool = Field(
        False, description="roles keep their earlier turns in context (default: each turn reads only its prompt)"
    )
    on_missing_verdict: Literal["approve", "reject", "fail"] = Field(
        "approve", description="a critic that ends without a valid verdict counts as this (Dr. MAS math: approve)"
    )
    critic_prompt: str = Field(
        "The task given to the {worker}:\n{task}\n\nThe {worker}'s answer:\n{answer}\n\n"
        "Check whether this answer is correct; you may run code to check it. End your turn with "
        'verdict(approve=True) if it is correct, or verdict(approve=False, feedback="what is wrong") if not.',
        description="what the critic reads; {task} {answer} {worker} {critic} are filled in",
    )
    revise_prompt: str = Field(
        "The {critic} rejected your answer {answer}.\nFeedback: {feedback}\n\nSolve the task again and call "
        "final_answer with the corrected result.\n\nTask: {task}",
        description="what the worker reads after a rejection; {task} {answer} {feedback} {worker} {critic}",
    )
    retry_prompt: str = Field(
        "Your previous turn failed: {error}\n\nSolve the task again.\n\nTask: {task}",
        description="what the worker reads after its own failed turn (on_role_error: skip); {task} {error}",
    )


@register_pattern("loop")
class Loop(Pattern):
    """Worker and critic: the worker answers, the critic returns verdict(approve, feedback); up to max_rounds."""

    Options = LoopOptions
    options: LoopOptions

    @classmethod
    def check(cls, options: LoopOptions, roles: Sequence[RoleSpec]) -> list[tuple[str, str]]:
        problems = _check_names("worker", [options.worker] if options.worker else [], roles)
        problems += _check_names("critic", [options.critic] if options.critic else [], roles)
        worker, critic = cls.pair(options, [r.name for r in roles])
        if critic is None:
            problems.append(("critic", "the loop pattern needs two roles, a worker and a critic; add a critic role"))
        elif worker == critic:
            problems.append(("critic", f"worker and critic are both {worker!r}; name two different roles"))
        return problems

    @staticmethod
    def pair(options: LoopOptions, names: Sequence[str]) -> tuple[str, str | None]:
        worker = options.worker or names[0]
        rest = [n for n in names if n != worker]
        return worker, options.critic or (rest[0] if rest else None)

    def decision(self, role: str) -> Literal["verdict", "route"] | None:
        return "verdict" if role == self.pair(self.options, self.team.role_names)[1] else None

    async def run(self, team: TeamRun, task: str) -> Outcome:
        o = self.options
        worker, critic = self.pair(o, team.role_names)
        assert critic is not None  # checked at validation
        fill = {"task": task, "worker": worker, "critic": critic}
        answer: Any = None
        text = task
        for rnd in range(1, o.max_rounds + 1):
            team.trajectory.meta["rounds"] = rnd
            work = await team.call(worker, text, sender="user" if rnd == 1 else critic, fresh=not o.memory)
            if (end := self.failed(work)) is not None:
                return end
            if not work.ok:  # skipped: the round is lost, the worker tries again
                text = o.retry_prompt.format(**fill, error=work.error or f"it ended with status {work.status}")
                continue
            answer = work.answer
            prompt = o.critic_prompt.format(**fill, answer=summarize(answer))
            check = await team.call(critic, prompt, sender=worker, fresh=not o.memory)
            if (end := self.failed(check)) is not None:
                return end
            v = check.verdict
            if v is None:
                team.trajectory.meta.setdefault("missing_verdicts", []).append(
                    {"round": rnd, "why": check.decision_error}
                )
                if o.on_missing_verdict == "fail":
                    return Outcome(
                        answer,
                        "error",
                        f"critic {critic!r} gave no valid verdict in round {rnd}: {check.decision_error}",
                    )
                v = Verdict(o.on_missing_verdict == "approve", "")
            team.trajectory.meta.setdefault("verdicts", []).append(
                {"round": rnd, "approve": v.approve, "feedback": v.feedback}
            )
            if v.approve:
                return Outcome(answer, "success")
            text = o.revise_prompt.format(
                **fill, answer=summarize(answer), feedback=v.feedback or "(no feedback given)"
            )
        if answer is None:
            return Outcome(None, "error", f"the worker {worker!r} gave no answer in {o.max_rounds} round(s)")
        return Outcome(answer, "max_rounds")


# -- router ------------------------------------------------------------------------------------
class RouterOptions(PatternOptions):
    router: str | None = Field(None, description="the role that chooses (default: the first role)")
    choices: list[str] | None = Field(None, description="roles it chooses among (default: every other role)")
    finish: list[str] = Field(default_factory=list, description="roles whose answer ends the episode (Dr. MAS: answer)")
    allow_finish: bool = Field(
        False, description="the router may end the episode itself: route('finish', message=answer)"
    )
    max_hops: int = Field(4, ge=1, le=100, description="most router decisions in an episode")
    fallback: str | None = Field(
        None, description="a role called once when max_hops is reached without a finishing answer"
    )
    on_missing_route: str = Field(
        "fail", description="a router turn without a valid route(): 'fail', or a role to go to"
    )
    router_prompt: str = Field(
        "Task: {task}\n\nWhat the team did so far:\n{history}\n\nDecide who acts next: call route(role, message) "
        "with one of {choices}; message tells that role what to do.",
        description="what the router reads; {task} {history} {choices} are filled in",
    )
    role_prompt: str = Field(
        "{task}\n\nInstruction from the {router}: {message}\n\nWhat the team found so far:\n{history}",
        description="what the chosen role reads; {task} {message} {router} {history}",
    )


FINISH = "finish"


@register_pattern("router")
class Router(Pattern):
    """A router role picks the next role with route(role, message); a finishing role's answer ends the episode."""

    Options = RouterOptions
    options: RouterOptions

    @classmethod
    def check(cls, options: RouterOptions, roles: Sequence[RoleSpec]) -> list[tuple[str, str]]:
        names = [r.name for r in roles]
        problems = _check_names("router", [options.router] if options.router else [], roles)
        problems += _check_names("choices", options.choices, roles)
        problems += _check_names("finish", options.finish, roles)
        problems += _check_names("fallback", [options.fallback] if options.fallback else [], roles)
        if options.on_missing_route != "fail":
            problems += _check_names("on_missing_route", [options.on_missing_route], roles)
        router = options.router or names[0]
        choices = cls.choices_of(options, names)
        if router in choices:
            problems.append(("choices", f"the router {router!r} cannot choose itself; list the other roles"))
        if not choices:
            problems.append(("choices", "the router has no roles to choose from; add roles to the team"))
        if not options.finish and not options.allow_finish:
            problems.append(
                ("finish", "the router pattern needs a way to end: set finish: [answer] or allow_finish: true")
            )
        problems += [
            ("finish", f"{f!r} is not among the choices {choices}") for f in options.finish if f not in choices
        ]
        return problems

    @staticmethod
    def choices_of(options: RouterOptions, names: Sequence[str]) -> list[str]:
        router = options.router or names[0]
        return list(options.choices) if options.choices else [n for n in names if n != router]

    @property
    def router(self) -> str:
        return self.options.router or self.team.role_names[0]

    def decision(self, role: str) -> Literal["verdict", "route"] | None:
        return "route" if role == self.router else None

    def route_choices(self, role: str) -> list[str] | None:
        if role != self.router:
            return None
        choices = self.choices_of(self.options, self.team.role_names)
        return [*choices, FINISH] if self.options.allow_finish else choices

    async def run(self, team: TeamRun, task: str) -> Outcome:
        o = self.options
        router = self.router
        choices = self.route_choices(router) or []
        described = ", ".join(
            f"{c!r}"
            + (f" ({team.team.roles[c].description})" if c in team.team.roles else " (end with your answer as message)")
            for c in choices
        )
        history: list[str] = []
        last: Any = None
        for hop in range(1, o.max_hops + 1):
            team.trajectory.meta["hops"] = hop
            shown = "\n".join(history) or "(nothing yet)"
            decided = await team.call(
                router, o.router_prompt.format(task=task, history=shown, choices=described), sender="user", fresh=True
            )
            if (end := self.failed(decided)) is not None:
                return end
            route = decided.route
            if route is None:
                team.trajectory.meta.setdefault("missing_routes", []).append(
                    {"hop": hop, "why": decided.decision_error}
                )
                if o.on_missing_route == "fail":
                    return Outcome(
                        last, "error", f"router {router!r} chose no valid role at hop {hop}: {decided.decision_error}"
                    )
                route = Route(o.on_missing_route)
            team.trajectory.meta.setdefault("routes", []).append(
                {"hop": hop, "role": route.role, "message": route.message}
            )
            if route.role == FINISH:
                return Outcome(route.message, "success")
            text = o.role_prompt.format(task=task, message=route.message or "(none)", router=router, history=shown)
            result = await team.call(route.role, text, sender=router)
            if (end := self.failed(result)) is not None:
                return end
            outcome = f"{result.answer!r}" if not result.ok else summarize(result.answer, 600)
            history.append(f"{hop}. {route.role}" + (f" ({route.message})" if route.message else "") + f": {outcome}")
            if result.ok:
                last = result.answer
                if route.role in o.finish:
                    return Outcome(result.answer, "success")
        if o.fallback:
            result = await team.call(
                o.fallback,
                o.role_prompt.format(
                    task=task, message="give the final answer now", router=router, history="\n".join(history)
                ),
                sender=router,
            )
            if result.ok:
                return Outcome(result.answer, "success")
            return Outcome(last, "error", f"fallback role {o.fallback!r} failed: {result.error or result.status}")
        return Outcome(last, "max_hops")


# -- custom ------------------------------------------------------------------------------------
class CustomOptions(PatternOptions):
    function: str = Field(description="'package.module:run', an async def run(team, task) -> Result")
    options: dict[str, Any] = Field(default_factory=dict, description="free options, readable as team.options")

    @field_validator("function")
    @classmethod
    def _import_path(cls, v: str) -> str:
        mod, _, attr = v.partition(":")
        if not mod or not attr or not all(p.isidentifier() for p in mod.split(".") + attr.split(".")):
            raise ValueError(f"import path {v!r} must look like 'package.module:run'")
        return v


@register_pattern("custom")
class Custom(Pattern):
    """A user function ``async def run(team, task) -> Result`` (``team``: the episode's TeamRun)."""

    Options = CustomOptions
    options: CustomOptions

    def __init__(self, options: CustomOptions, team: Team) -> None:
        super().__init__(options, team)
        from cave.task import import_callable

        try:
            self.fn: Callable[[TeamRun, str], Awaitable[Any]] = import_callable(options.function, team.base_dir)
        except Exception as e:
            raise TeamError(
                [
                    f"{team.where('pattern', 'function')}: pattern.function: cannot import {options.function!r}: {type(e).__name__}: {e}\n  fix: make the module importable from the team file's folder"
                ]
            ) from None
        if not asyncio.iscoroutinefunction(self.fn):
            raise TeamError(
                [
                    f"{team.where('pattern', 'function')}: pattern.function: {options.function} is not an async function\n  fix: define it as `async def run(team, task) -> Result`"
                ]
            )

    async def run(self, team: TeamRun, task: str) -> Outcome:
        try:
            value = await self.fn(team, task)
        except Exception as e:
            role, call = team.current or team.last or ("(none)", 0)
            step = team.trajectory.steps[-1].index if team.trajectory.steps else None
            team.trajectory.meta["traceback"] = traceback.format_exc(limit=-8)
            return Outcome(
                None,
                "error",
                f"custom pattern {self.options.function} raised {type(e).__name__}: {e} (last role: {role!r} turn {call}, last step: {step})",
            )
        return value if isinstance(value, Outcome) else Outcome(value, "success")


# =============================================================================================
# Results and events
# =============================================================================================
@dataclass
class RoleResult:
    """One turn of one role."""

    role: str
    call: int  # 1-based turn number of this role in the episode
    answer: Any
    status: str  # the agent's status ("success", "no_code", "max_steps", "error"), or "timeout"
    error: str | None = None
    steps: list[Step] = field(default_factory=list)  # this turn's steps as stored in the team trajectory
    verdict: Verdict | None = None
    route: Route | None = None
    decision_error: str | None = None  # why a deciding role's decision is missing or malformed
    published: list[str] = field(default_factory=list)
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status in ("success", "no_code")

    def record(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "call": self.call,
            "status": self.status,
            "error": self.error,
            "steps": [s.index for s in self.steps],
            "answer": summarize(self.answer, 300),
            "decision": dataclasses.asdict(self.verdict or self.route) if (self.verdict or self.route) else None,
            "decision_error": self.decision_error,
            "published": self.published,
            "duration": round(self.duration, 6),
        }


@dataclass
class TeamResult:
    answer: Any
    status: str
    trajectory: Trajectory
    slots: dict[str, Any] = field(default_factory=dict)  # published objects: the live objects when in-process
    runtimes: dict[str, Runtime] | None = None  # kept only with keep_runtimes=True; close() them

    @property
    def ok(self) -> bool:
        return self.status == "success"

    @property
    def team_run_id(self) -> str:
        return self.trajectory.team_run_id or self.trajectory.run_id

    @property
    def usage(self) -> Any:
        return self.trajectory.usage

    def close(self) -> None:
        for rt in {id(r): r for r in (self.runtimes or {}).values()}.values():
            rt.close()
        self.runtimes = None

    def portable(self) -> TeamResult:
        """A copy that can cross a process boundary (Ray): no runtimes, unpicklable slots replaced by a note."""
        import cloudpickle

        slots = {}
        for name, value in self.slots.items():
            try:
                cloudpickle.dumps(value)
                slots[name] = value
            except Exception as e:
                slots[name] = f"<not transferable: {type(value).__name__}: {e}>"
        return TeamResult(self.answer, self.status, self.trajectory, slots, None)


@dataclass(slots=True)
class TeamStarted:
    trajectory: Trajectory


@dataclass(slots=True)
class RoleStarted:
    role: str
    call: int
    task: str


@dataclass(slots=True)
class RoleEvent:
    """An agent event of one role's turn (StepFinished carries the step as stored in the team trajectory)."""

    role: str
    call: int
    event: Any


@dataclass(slots=True)
class RoleFinished:
    result: RoleResult


@dataclass(slots=True)
class Handoff:
    slot: str
    source: str
    target: str
    seconds: float


@dataclass(slots=True)
class TeamFinished:
    result: TeamResult


TeamEvent = TeamStarted | RoleStarted | RoleEvent | RoleFinished | Handoff | TeamFinished


# =============================================================================================
# The team and one episode of it
# =============================================================================================
def derive_seed(base: int | None, *parts: object) -> int | None:
    """A stable per-role seed (not Python's salted hash), or None when there is no base seed.

    >>> derive_seed(0, "solver") == derive_seed(0, "solver") != derive_seed(0, "verifier")
    True
    """
    if base is None:
        return None
    return zlib.crc32(":".join(map(str, (base, *parts))).encode()) & 0x7FFFFFFF


class Team:
    """A validated team: its roles, pattern and backends. ``arun`` runs one episode; many may run at once."""

    def __init__(
        self,
        spec: TeamSpec,
        *,
        base_dir: str | Path | None = None,
        backends: Mapping[str, LLM] | None = None,
        lines: Mapping[tuple[str, ...], int] | None = None,
        file: str | None = None,
    ) -> None:
        self.spec = spec
        self.base_dir = Path(base_dir or (Path(spec.source).parent if spec.source else Path.cwd())).resolve()
        self.file = file or spec.source
        self.lines = dict(lines or {})
        self.roles: dict[str, RoleSpec] = {r.name: r for r in spec.roles}
        self._given: dict[str, LLM] = dict(backends or {})
        self._backends: dict[str, BoundedLLM] = {}
        self._owned: set[str] = set()
        self._skills: dict[str, Any] = {}
        self._instructions: dict[str, str] = {}
        pcls = PATTERNS[spec.pattern.name]
        self.pattern: Pattern = pcls(pcls.Options.model_validate(spec.pattern.options), self)

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        roles: Sequence[str | RoleSpec | Mapping[str, Any]],
        pattern: str | Mapping[str, Any] = "sequential",
        *,
        backends: Mapping[str, LLM | str | Mapping[str, Any]] | None = None,
        base_dir: str | Path | None = None,
        **fields: Any,
    ) -> Team:
        """A team from Python: ``Team.build(["solver", "verifier"], {"name": "loop"}, backends={"default": llm})``.

        ``backends`` values are LLM instances (shared by every role that names the key) or backend specs.
        """
        instances = {k: v for k, v in (backends or {}).items() if isinstance(v, LLM)}
        specs = {k: v for k, v in (backends or {}).items() if not isinstance(v, LLM)}
        if "default" in instances and "default_backend" not in fields:
            fields["default_backend"] = "default"
        data = {"roles": list(roles), "pattern": pattern, "backends": specs, **fields}
        base = Path(base_dir or Path.cwd())
        spec = validate_team(data, "<team>", {}, base_dir=base, backend_keys=list(instances))
        return cls(spec, base_dir=base, backends=instances)

    @classmethod
    def from_file(cls, path: str | Path, *, backends: Mapping[str, LLM] | None = None) -> Team:
        spec = parse_team_file(path, backend_keys=list(backends or {}))
        lines = _read_yaml(Path(path))[1]
        return cls(spec, base_dir=Path(path).resolve().parent, backends=backends, lines=lines, file=str(path))

    def where(self, *loc: str) -> str:
        line = next((self.lines[loc[:n]] for n in range(len(loc), 0, -1) if loc[:n] in self.lines), 1)
        return f"{self.file or '<team>'}:{line}"

    @property
    def role_names(self) -> list[str]:
        return list(self.roles)

    def role(self, name: str) -> RoleSpec:
        try:
            return self.roles[name]
        except KeyError:
            hint = did_you_mean(name, list(self.roles))
            raise KeyError(f"unknown role {name!r}; {hint}the team's roles: {', '.join(self.roles)}") from None

    # -- backends ------------------------------------------------------------------------------
    def backend_key(self, role: str) -> str:
        return self.role(role).backend or self.spec.default_backend

    def backend(self, key: str) -> BoundedLLM:
        """The shared, bounded backend instance for ``key`` (created on first use: loading a model is heavy)."""
        if key in self._backends:
            return self._backends[key]
        spec = self.spec.backends.get(key)
        if key in self._given:
            inner = self._given[key]
        else:
            spec = spec or BackendSpec(backend=key)
            inner = make_backend(spec.backend, **spec.options)
            self._owned.add(key)
        limit = spec.max_in_flight if spec is not None and spec.max_in_flight else self.spec.max_in_flight
        self._backends[key] = BoundedLLM(inner, limit)
        return self._backends[key]

    def load_backends(self) -> None:
        """Create every backend the roles use now, so a missing model fails before the episode starts."""
        for role in self.roles:
            key = self.backend_key(role)
            try:
                self.backend(key)
            except Exception as e:  # not bad input: the file was valid, the backend did not start
                raise BackendStartError(
                    f"{self.where('backends', key)}: backend {key!r} (role {role}) did not start: "
                    f"{type(e).__name__}: {e}; check its options, or install what it needs"
                ) from e

    async def aclose(self) -> None:
        """Close the backends this team created (not the ones it was given)."""
        for key in list(self._owned):
            b = self._backends.pop(key, None)
            if b is not None:
                await b.aclose()
        self._owned.clear()

    # -- per-role configuration ----------------------------------------------------------------
    def instructions(self, role: str) -> str:
        """The role's instructions: its prompt (template filled in) plus its output contract."""
        if role in self._instructions:
            return self._instructions[role]
        spec = self.role(role)
        text = spec.system or ""
        if spec.prompt_file:
            text = Path(spec.prompt_file).read_text(encoding="utf-8")
        choices = self.pattern.route_choices(role) or []
        values = {
            "role": role,
            "description": spec.description,
            "roles": ", ".join(self.roles),
            "choices": ", ".join(f"{c} ({self.roles[c].description})" if c in self.roles else c for c in choices),
        }
        parts = [string.Template(text).safe_substitute(values).strip()] if text.strip() else []
        decision = self.decision(role)
        if decision == "verdict":
            parts.append(
                'End your turn by calling verdict(approve=True) or verdict(approve=False, feedback="...") in a code block; do not call final_answer.'
            )
        elif decision == "route":
            parts.append(
                f"End your turn by calling route(role, message) in a code block, with role one of: {values['choices']}. Do not call final_answer."
            )
        if spec.output.description:
            parts.append(f"Your answer: {spec.output.description}")
        if spec.output.publishes:
            listed = "\n".join(f"- `{n}`: {d}" for n, d in spec.output.publishes.items())
            parts.append("Leave these variables in your session; they are handed to the roles after you:\n" + listed)
        self._instructions[role] = "\n\n".join(parts)
        return self._instructions[role]

    def decision(self, role: str) -> Literal["verdict", "route"] | None:
        kind = self.role(role).output.kind
        return kind if kind in ("verdict", "route") else self.pattern.decision(role)

    def skills(self, role: str) -> Any:
        spec = self.role(role)
        if not spec.skills:
            return None
        if role not in self._skills:
            from cave import skills as skills_mod

            folders = [str(self.base_dir / s) for s in spec.skills if (self.base_dir / s).exists()]
            names = [s for s in spec.skills if not (self.base_dir / s).exists()]
            found = skills_mod.SkillSet(folders)
            wanted = set(names) | {
                s.name for s in found if any(Path(s.path).resolve().is_relative_to(Path(f).resolve()) for f in folders)
            }
            try:
                self._skills[role] = found.select(sorted(wanted))
            except skills_mod.SkillError as e:
                raise TeamError([f"{self.where('roles')}: role {role}: skills: {e}"]) from None
        return self._skills[role]

    # -- running -------------------------------------------------------------------------------
    async def arun(
        self,
        task: str,
        *,
        seed: int | None = None,
        inputs: Mapping[str, Any] | None = None,
        on_event: Callable[[TeamEvent], None] | None = None,
        keep_runtimes: bool = False,
        team_run_id: str | None = None,
    ) -> TeamResult:
        """One episode. Never raises for a role's or pattern's failure: see ``status`` and ``trajectory.error``."""
        run = TeamRun(self, task, seed=seed, inputs=inputs, on_event=on_event, team_run_id=team_run_id)
        return await run.execute(keep_runtimes=keep_runtimes)

    def run(self, task: str, **kwargs: Any) -> TeamResult:
        """Sync edge of ``arun``."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(task, **kwargs))
        raise RuntimeError("Team.run() was called inside a running event loop; use `await team.arun(...)` there")

    async def arun_many(
        self,
        tasks: Sequence[str],
        *,
        seeds: Sequence[int | None] | None = None,
        inputs: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None,
        max_episodes: int | None = None,
    ) -> list[TeamResult]:
        """Many episodes at once on this event loop (e.g. N rollouts x a batch), results in order."""
        return await LocalPool(self, max_episodes=max_episodes).arun_many(tasks, seeds=seeds, inputs=inputs)


def _per_episode(value: Any, n: int) -> list[Any]:
    if value is None or isinstance(value, Mapping):
        return [value] * n
    value = list(value)
    if len(value) != n:
        raise ValueError(f"got {len(value)} per-episode values for {n} tasks; give one per task")
    return value


class LocalPool:
    """Episodes of one team on this event loop, at most ``max_episodes`` at once (None: no bound).

    The same API as ``cave.team_ray.RayTeamPool``, so rollouts can switch between them.
    """

    def __init__(self, team: Team, *, max_episodes: int | None = None) -> None:
        self.team = team
        self.max_episodes = max_episodes

    async def arun(self, task: str, *, seed: int | None = None, inputs: Mapping[str, Any] | None = None) -> TeamResult:
        return await self.team.arun(task, seed=seed, inputs=inputs)

    async def arun_many(
        self,
        tasks: Sequence[str],
        *,
        seeds: Sequence[int | None] | None = None,
        inputs: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None,
    ) -> list[TeamResult]:
        n = len(tasks)
        seed_list, input_list = _per_episode(seeds, n), _per_episode(inputs, n)
        sem = asyncio.Semaphore(self.max_episodes) if self.max_episodes else None

        async def one(i: int) -> TeamResult:
            if sem is None:
                return await self.team.arun(tasks[i], seed=seed_list[i], inputs=input_list[i])
            async with sem:
                return await self.team.arun(tasks[i], seed=seed_list[i], inputs=input_list[i])

        return list(await asyncio.gather(*(one(i) for i in range(n))))

    def run_many(self, tasks: Sequence[str], **kwargs: Any) -> list[TeamResult]:
        return asyncio.run(self.arun_many(tasks, **kwargs))

    def close(self) -> None:
        pass


@dataclass
class Slot:
    name: str
    value: Any
    owner: str  # the role that published it ("host" for the caller)
    description: str
    version: int
    runtime: Runtime | None  # where it lives; None when the host published it


class TeamRun:
    """One episode: its own runtimes and agents, the slots, and the one Trajectory every role writes to.

    Custom patterns receive this object: ``await team.call(role, text)``, ``team.publish(...)``,
    ``team.slots``, ``team.retrieve(role, name)``, ``team.role_names``, ``team.options``.
    """

    def __init__(
        self,
        team: Team,
        task: str,
        *,
        seed: int | None = None,
        inputs: Mapping[str, Any] | None = None,
        on_event: Callable[[TeamEvent], None] | None = None,
        team_run_id: str | None = None,
    ) -> None:
        self.team = team
        self.task = task
        self.seed = seed if seed is not None else team.spec.seed
        self.inputs = dict(inputs or {})
        self.on_event = on_event
        self.id = team_run_id or new_id()
        self.trajectory = Trajectory(run_id=self.id, task=task, team_run_id=self.id)
        self.trajectory.meta.update(
            team=team.spec.name,
            pattern=team.spec.pattern.name,
            roles=team.role_names,
            seed=self.seed,
            calls=[],
            messages=[],
        )
        self.runtimes: dict[str, Runtime] = {}
        self.agents: dict[str, Agent] = {}
        self.slots: dict[str, Slot] = {}
        self.current: tuple[str, int] | None = None  # (role, turn) running now, for error reports
        self.last: tuple[str, int] | None = None  # the latest role turn started
        self._calls: dict[str, int] = {}
        self._shared: Runtime | None = None
        self._seen: dict[tuple[int, str], int] = {}  # (runtime id, name) -> publish sequence already taken
        self._delivered: dict[tuple[int, str], int] = {}  # (runtime id, slot) -> slot version injected
        self._version = 0
        self._role_time = 0.0
        self._setup_time = 0.0

    # -- what custom patterns use ---------------------------------------------------------------
    @property
    def role_names(self) -> list[str]:
        return self.team.role_names

    @property
    def options(self) -> dict[str, Any]:
        return dict(getattr(self.team.pattern.options, "options", {}) or {})

    def emit(self, event: TeamEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)

    def message(self, sender: str, recipient: str, text: str) -> None:
        """Record a text message between roles (kept in trajectory.meta["messages"])."""
        self.trajectory.meta["messages"].append(
            {"from": sender, "to": recipient, "text": text, "at": len(self.trajectory.steps)}
        )

    def publish(
        self, name: str, value: Any, description: str = "", *, owner: str = "host", runtime: Runtime | None = None
    ) -> None:
        """Put ``value`` in slot ``name``; roles get it injected before their next turn."""
        self._version += 1
        self.slots[name] = Slot(name, value, owner, description, self._version, runtime)

    async def retrieve(self, role: str, name: str) -> Any:
        """A variable from ``role``'s runtime (the live object in-process, a copy from a kernel)."""
        return await _retrieve(await self.runtime(role), name)

    async def call(self, role: str, text: str, *, fresh: bool = False, sender: str = "user") -> RoleResult:
        """One turn of ``role`` on ``text``. Never raises for the role's own failure: see ``RoleResult.status``."""
        spec = self.team.role(role)
        t_setup = time.perf_counter()
        agent = await self._agent(role)
        await self._deliver(role)
        self._setup_time += time.perf_counter() - t_setup
        if fresh:
            agent.history = []
        n = self._calls[role] = self._calls.get(role, 0) + 1
        self.current = self.last = (role, n)
        self.message(sender, role, text)
        self.emit(RoleStarted(role, n, text))
        steps: list[Step] = []
        box: dict[str, Trajectory] = {}
        decision = self.team.decision(role)
        choices = self.team.pattern.route_choices(role) or []

        def on_agent_event(ev: Any) -> None:
            if isinstance(ev, RunStarted):
                ev.trajectory.team_run_id = self.id  # the agent tags its steps with it
                box["t"] = ev.trajectory
            elif isinstance(ev, StepFinished):
                ev = StepFinished(self._add_step(ev.step, role, n, box.get("t"), decision, choices))
                steps.append(ev.step)
            self.emit(RoleEvent(role, n, ev))

        t0 = time.perf_counter()
        try:
            coro = agent.arun(text, on_event=on_agent_event)
            res = await (asyncio.wait_for(coro, spec.timeout_s) if spec.timeout_s else coro)
            answer, status, error = res.answer, res.status, res.trajectory.error
        except TimeoutError:
            answer, status, error = None, "timeout", f"role {role!r} ran past its turn limit of {spec.timeout_s:g} s"
        duration = time.perf_counter() - t0
        self._role_time += duration
        result = RoleResult(role, n, answer, status, error, steps, duration=duration)
        self._decide(result, decision, choices)
        t_pub = time.perf_counter()
        result.published = await self._collect(role, result)
        self._setup_time += time.perf_counter() - t_pub
        self.trajectory.meta["calls"].append(result.record())
        self.current = None
        self.emit(RoleFinished(result))
        return result

    # -- internals -----------------------------------------------------------------------------
    async def execute(self, *, keep_runtimes: bool = False) -> TeamResult:
        self.emit(TeamStarted(self.trajectory))
        t0 = time.perf_counter()
        try:
            coro = self.team.pattern.run(self, self.task)
            limit = self.team.spec.timeout_s
            outcome = await (asyncio.wait_for(coro, limit) if limit else coro)
        except TimeoutError:
            outcome = Outcome(
                None, "timeout", f"the episode ran past its limit of {self.team.spec.timeout_s:g} s{self._where()}"
            )
        except Exception as e:  # a runtime that does not start, a bug in a pattern: the episode ends, reported
            self.trajectory.meta["traceback"] = traceback.format_exc(limit=-8)
            outcome = Outcome(None, "error", f"{type(e).__name__}: {e}{self._where()}")
        except BaseException:
            self._close_runtimes()
            raise
        elapsed = time.perf_counter() - t0
        traj = self.trajectory
        traj.status, traj.final_answer, traj.error = outcome.status, outcome.answer, outcome.error
        traj.finished_at = time.time()
        hops = len(traj.meta["calls"])
        overhead = max(0.0, elapsed - self._role_time - self._setup_time)
        traj.meta["timing"] = {
            "episode_s": elapsed,
            "roles_s": self._role_time,
            "setup_s": self._setup_time,
            "turns": hops,
            "overhead_per_turn_ms": overhead / hops * 1000 if hops else 0.0,
        }
        traj.meta["slots"] = {
            s.name: {"owner": s.owner, "description": s.description, "version": s.version} for s in self.slots.values()
        }
        result = TeamResult(outcome.answer, outcome.status, traj, {s.name: s.value for s in self.slots.values()})
        if keep_runtimes:
            result.runtimes = dict(self.runtimes)
        else:
            self._close_runtimes()
        self.emit(TeamFinished(result))
        return result

    def _where(self) -> str:
        if self.current is None:
            return ""
        step = self.trajectory.steps[-1].index if self.trajectory.steps else None
        return f" (in role {self.current[0]!r} turn {self.current[1]}, last step {step})"

    def _close_runtimes(self) -> None:
        for rt in {id(r): r for r in self.runtimes.values()}.values():
            try:
                rt.close()
            except Exception:  # closing is best-effort; a dead kernel is already closed
                pass

    async def runtime(self, role: str) -> Runtime:
        if role in self.runtimes:
            return self.runtimes[role]
        spec, team_rt = self.team.role(role).runtime, self.team.spec.runtime
        if spec.mode == "shared" and self._shared is not None:
            self.runtimes[role] = self._shared
            return self._shared
        kind = spec.kind or team_rt.kind
        options = {**team_rt.options, **spec.options, "timeout": spec.timeout or team_rt.timeout}
        rt = create_runtime(kind, **options)
        self.runtimes[role] = rt  # closed with the episode even if starting it fails
        astart = getattr(rt, "astart", None)
        if astart is not None:  # start a kernel now, off the event loop's critical path
            await astart()
        for name, value in self.inputs.items():
            if callable(value) and not isinstance(value, type):
                rt.inject_function(value, name=name)
            else:
                private = value if self.team.spec.share_inputs or not _in_process(rt) else private_copy(value)
                await _inject(rt, name, private, None)
        if spec.mode == "shared":
            self._shared = rt
        self.runtimes[role] = rt
        return rt

    async def _agent(self, role: str) -> Agent:
        if role in self.agents:
            return self.agents[role]
        spec, team = self.team.role(role), self.team
        rt = await self.runtime(role)
        agent = Agent(
            model=team.backend(team.backend_key(role)),
            runtime=rt,
            max_steps=spec.max_steps,
            max_tokens=spec.sampling.max_tokens or team.spec.max_tokens,
            temperature=spec.sampling.temperature if spec.sampling.temperature is not None else team.spec.temperature,
            seed=spec.sampling.seed if spec.sampling.seed is not None else derive_seed(self.seed, role),
            timeout=spec.runtime.timeout or team.spec.runtime.timeout,
            skills=team.skills(role),
            instructions=team.instructions(role),
            role=role,
            stream=self.on_event is not None,  # text deltas only matter to a live display
        )
        decision = team.decision(role)
        if decision == "verdict":
            rt.inject_function(verdict, description="end your turn with your decision on the answer")
        elif decision == "route":
            choices = team.pattern.route_choices(role) or []
            descriptions = {c: team.roles[c].description for c in choices if c in team.roles}
            rt.inject_function(
                make_route(choices, descriptions), name="route", description="end your turn: who acts next"
            )
        rt.inject_function(publish, description="hand an object to the roles after you")
        self.agents[role] = agent
        return agent

    def _add_step(
        self, step: Step, role: str, call: int, agent_traj: Trajectory | None, decision: str | None, choices: list[str]
    ) -> Step:
        """Copy an agent's step into the team trajectory: one index sequence, tagged with role and team run."""
        meta = {**step.meta, "call": call, "agent_run_id": step.run_id}
        kind = step.kind
        ended = agent_traj is not None and agent_traj.status != "running"
        if decision and ended:  # the step that should carry the structured decision
            value = agent_traj.final_answer if agent_traj.status == "success" else None
            parsed = parse_verdict(value) if decision == "verdict" else parse_route(value, choices)
            meta["format_ok"] = parsed is not None
            if parsed is not None and kind == "action":
                kind = decision
        elif ended and self.team.role(role).output.kind == "answer":  # the contract asks for final_answer()
            meta["format_ok"] = agent_traj.status == "success"
        copy = dataclasses.replace(
            step, index=len(self.trajectory.steps), role=role, run_id=self.id, team_run_id=self.id, kind=kind, meta=meta
        )
        self.trajectory.steps.append(copy)
        return copy

    def _decide(self, result: RoleResult, decision: str | None, choices: list[str]) -> None:
        if decision is None:
            return
        if result.status != "success":
            result.decision_error = f"missing: the turn ended with status {result.status!r} without calling {'verdict' if decision == 'verdict' else 'route'}()"
            return
        if decision == "verdict":
            result.verdict = parse_verdict(result.answer)
        else:
            result.route = parse_route(result.answer, choices)
        if result.verdict is None and result.route is None:
            shown = repr(result.answer)[:200] if isinstance(result.answer, str) else summarize(result.answer, 200)
            result.decision_error = f"malformed: final value {shown} is not a {decision}"

    async def _collect(self, role: str, result: RoleResult) -> list[str]:
        """Take what the role published (publish() calls and declared outputs) from its runtime into slots."""
        rt = self.runtimes[role]
        spec = self.team.role(role)
        names: list[str] = []
        try:
            registry = await _retrieve(rt, PUBLISHED_VAR)
        except KeyError:
            registry = {}
        for name, (seq, description) in dict(registry).items():
            if self._seen.get((id(rt), name)) == seq:
                continue
            self._seen[(id(rt), name)] = seq
            self.publish(name, await _retrieve(rt, name), description, owner=role, runtime=rt)
            names.append(name)
        missing = []
        for name, description in spec.output.publishes.items():
            if name in names:
                continue
            try:
                self.publish(name, await _retrieve(rt, name), description, owner=role, runtime=rt)
                names.append(name)
            except KeyError:
                missing.append(name)
        if len(missing) == 1 and list(spec.output.publishes) == missing and result.status == "success":
            # One declared output, not left in the session, but final_answer(value) was called: the
            # value is the result the contract asks for. Bind it under the declared name and hand it on.
            name = missing.pop()
            await _inject(rt, name, result.answer, spec.output.publishes[name])
            self.publish(name, result.answer, spec.output.publishes[name], owner=role, runtime=rt)
            names.append(name)
            self.trajectory.meta.setdefault("outputs_from_answer", []).append(
                {"role": role, "call": result.call, "name": name}
            )
        if missing:
            if result.steps:
                result.steps[-1].meta["format_ok"] = False
            if result.ok:  # the contract was not met: the pattern treats the turn as failed
                result.status = "missing_output"
                result.error = (
                    f"the turn ended without {', '.join(missing)}: leave the result in a variable of that name"
                )
            result.decision_error = (
                result.decision_error + "; " if result.decision_error else ""
            ) + f"declared outputs not found: {', '.join(missing)}"
            self.trajectory.meta.setdefault("missing_outputs", []).append(
                {"role": role, "call": result.call, "names": missing}
            )
        return names

    async def _deliver(self, role: str) -> None:
        """Inject the slots this role reads and has not got yet (same runtime: nothing to move)."""
        rt = self.runtimes[role]
        reads = self.team.role(role).reads
        for slot in list(self.slots.values()):
            if (reads is not None and slot.name not in reads) or slot.runtime is rt:
                continue
            key = (id(rt), slot.name)
            if self._delivered.get(key) == slot.version:
                continue
            t0 = time.perf_counter()
            note = f"handed over by {slot.owner}" + (f": {slot.description}" if slot.description else "")
            await _inject(rt, slot.name, slot.value, note)
            self._delivered[key] = slot.version
            self.emit(Handoff(slot.name, slot.owner, role, time.perf_counter() - t0))


def private_copy(value: Any) -> Any:
    """A copy of a data input that a role may mutate freely; other objects (engines, models) are shared.

    >>> data = {"a": [1, 2]}
    >>> c = private_copy(data); c["a"].append(3); data
    {'a': [1, 2]}
    """
    import copy

    module = type(value).__module__.split(".")[0]
    if module in ("pandas", "numpy") and hasattr(value, "copy"):
        return value.copy()
    if isinstance(value, (list, dict, set, tuple)):
        try:
            return copy.deepcopy(value)
        except Exception:  # something inside cannot be copied: share it, as with any other object
            return value
    return value


def _in_process(rt: Runtime) -> bool:
    return getattr(rt, "name", "") == "inprocess"


async def _retrieve(rt: Runtime, name: str) -> Any:
    if _in_process(rt):
        return rt.retrieve(name)
    aretrieve = getattr(rt, "aretrieve", None)  # the kernel runtime's async verbs never block the loop
    return await aretrieve(name) if aretrieve else await asyncio.to_thread(rt.retrieve, name)


async def _inject(rt: Runtime, name: str, value: Any, description: str | None) -> None:
    if _in_process(rt):
        rt.inject(name, value, description)
        return
    ainject = getattr(rt, "ainject", None)
    await (ainject(name, value, description) if ainject else asyncio.to_thread(rt.inject, name, value, description))


# =============================================================================================
# Team task files and the command line
# =============================================================================================
@dataclass
class TeamTask:
    """A task file with a ``team:`` section: the task (cave.task.Task) and the team built from it."""

    task: Any  # cave.task.Task
    team: Team


def load_team_task(path: str | Path, *, backends: Mapping[str, LLM] | None = None) -> TeamTask:
    """Read a task file whose ``team:`` section (inline, or a path to a team file) defines the agents.

    Works whether or not cave.task's TaskSpec has a ``team`` field yet: the section is validated
    here either way, and every problem is reported as FILE:LINE: FIELD with the fix.
    """
    from cave.task import Task, TaskSpec

    path = Path(path)
    if not path.is_file():
        raise TeamError([f"{path}: no such task file; give the path to a team_task.yaml (see examples/math_team)"])
    data, lines = _read_yaml(path)
    if not isinstance(data, dict) or "team" not in data:
        raise TeamError([f"{path}:1: a team task file needs `task:` and a `team:` section (roles and a pattern)"])
    data = dict(data)
    team_data = data.pop("team") if "team" not in TaskSpec.model_fields else data["team"]
    context = {"base_dir": str(path.resolve().parent), "backend_keys": list(backends or {})}
    problems: list[str] = []
    spec = None
    try:
        if isinstance(team_data, str):  # `team: team.yaml`: errors name that file's lines
            spec = parse_team_file(path.resolve().parent / team_data, backend_keys=list(backends or {}))
            spec.source = str((path.resolve().parent / team_data).resolve())
        else:
            spec = validate_team(team_data, str(path), lines, prefix=("team",), **context)
    except TeamError as e:
        problems += e.problems
    try:
        task_spec = TaskSpec.model_validate(data, context=context)
    except ValidationError as e:
        problems += [explain(err, str(path), lines, TaskSpec) for err in e.errors() if err["loc"][:1] != ("team",)]
    if problems:
        raise TeamError(problems)
    assert spec is not None
    task = Task(task_spec, path.resolve(), lines)
    team_file = spec.source or str(path)
    team_lines = lines if not spec.source else _read_yaml(Path(spec.source))[1]
    prefix_lines = {k[1:]: v for k, v in team_lines.items() if k[:1] == ("team",)} if not spec.source else team_lines
    base = Path(spec.source).parent if spec.source else path.resolve().parent
    return TeamTask(task, Team(spec, base_dir=base, backends=backends, lines=prefix_lines, file=team_file))


@dataclass
class TeamOutcome:
    result: TeamResult
    outputs: list[Any] = field(default_factory=list)  # cave.sdk.SavedOutput
    run_dir: Path | None = None

    @property
    def ok(self) -> bool:
        return self.result.ok and not any(o.error and o.required for o in self.outputs)

    def summary(self) -> dict[str, Any]:
        """The JSON summary ``cave run --json`` prints (the single-agent summary's keys, plus roles)."""
        r, traj = self.result, self.result.trajectory
        return {
            "run_id": traj.run_id,
            "team_run_id": r.team_run_id,
            "status": r.status,
            "ok": self.ok,
            "answer": summarize(r.answer, 4000)
            if not isinstance(r.answer, (bool, int, float, str, type(None)))
            else r.answer,
            "error": traj.error,
            "steps": len(traj.steps),
            "roles": {role: len(traj.by_role(role)) for role in traj.meta.get("roles", [])},
            "usage": traj.usage.to_dict(),
            "duration_s": round((traj.finished_at or time.time()) - traj.started_at, 3),
            "outputs": {o.name: o.path if o.path else {"error": o.error, "required": o.required} for o in self.outputs},
            "run_dir": str(self.run_dir) if self.run_dir else None,
        }


def is_team_task(path: str | Path) -> bool:
    """True when a task file has a ``team:`` section (``cave run`` hands it to ``team_main``)."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and "team" in data


async def arun_team_task(
    tt: TeamTask | str | Path,
    *,
    store: Any = None,
    on_event: Callable[[TeamEvent], None] | None = None,
    seed: int | None = None,
) -> TeamOutcome:
    """What ``cave run team_task.yaml`` does: inputs into every role's runtime, run, save outputs.

    ``store`` (a cave.store.Store) records the ONE team trajectory step by step.
    """
    from cave.sdk import SavedOutput, write_value
    from cave.task import resolve_inputs

    if not isinstance(tt, TeamTask):
        tt = load_team_task(tt)
    task, team = tt.task, tt.team
    inputs = {name: value for name, (value, _) in resolve_inputs(task).items()}
    team.load_backends()
    seed = seed if seed is not None else task.spec.seed

    def handle(ev: TeamEvent) -> None:
        if store is not None:
            if isinstance(ev, TeamStarted):
                store.prepare(
                    ev.trajectory.run_id, task_path=str(task.path) if task.path else None, name=task.spec.name
                )
                store.start_run(ev.trajectory)
            elif isinstance(ev, RoleEvent) and isinstance(ev.event, StepFinished):
                store.add_step(ev.event.step)
            elif isinstance(ev, TeamFinished):
                store.finish_run(ev.result.trajectory)
        if on_event is not None:
            on_event(ev)

    try:
        result = await team.arun(task.prompt(), seed=seed, inputs=inputs, on_event=handle, keep_runtimes=True)
    finally:
        await team.aclose()
    try:
        run_dir = store.run_dir(result.trajectory.run_id) if store is not None else None
        if run_dir is not None:
            (run_dir / "outputs").mkdir(parents=True, exist_ok=True)
        outputs = [
            await _save_output(result, name, out, run_dir, write_value, SavedOutput)
            for name, out in task.spec.outputs.items()
        ]
    finally:
        result.close()
    return TeamOutcome(result, outputs, run_dir)


async def _save_output(
    result: TeamResult, name: str, out: Any, run_dir: Path | None, write_value: Any, saved: Any
) -> Any:
    var = out.variable or name
    try:
        if var == "final_answer":
            if result.status not in ("success", "max_rounds", "max_hops"):
                raise KeyError(f"the team ended with status {result.status!r}")
            value = result.answer
        else:
            value = await _find_output(result, var)
        path = write_value(value, run_dir / "outputs" / name, out.format) if run_dir else None
        return saved(name, str(path) if path else None, required=out.required)
    except Exception as e:
        msg = str(e.args[0]) if isinstance(e, KeyError) and e.args else f"{type(e).__name__}: {e}"
        return saved(name, None, msg, out.required)


async def _find_output(result: TeamResult, var: str) -> Any:
    """An output variable: a published slot first, then any role's runtime (last to run first)."""
    if var in result.slots:
        return result.slots[var]
    seen = set()
    calls = result.trajectory.meta.get("calls", [])
    for role in [c["role"] for c in reversed(calls)] + list(result.runtimes or {}):
        rt = (result.runtimes or {}).get(role)
        if rt is None or id(rt) in seen:
            continue
        seen.add(id(rt))
        try:
            return await _retrieve(rt, var)
        except KeyError:
            continue
    raise KeyError(f"no role left a variable named {var!r} and nothing was published under that name")


# -- the live display --------------------------------------------------------------------------
ROLE_COLORS = ("cyan", "magenta", "green", "yellow", "blue", "red")


class TeamDisplay:
    """Prints each role's steps as they happen, tagged and colored by role (used by ``cave run``)."""

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console

        self.console = console or Console()
        self._colors: dict[str, str] = {}

    def color(self, role: str) -> str:
        return self._colors.setdefault(role, ROLE_COLORS[len(self._colors) % len(ROLE_COLORS)])

    def __call__(self, ev: TeamEvent) -> None:
        from rich.markup import escape
        from rich.syntax import Syntax

        c = self.console
        if isinstance(ev, TeamStarted):
            c.rule(f"team run {ev.trajectory.team_run_id} · {ev.trajectory.meta.get('pattern')}")
        elif isinstance(ev, RoleStarted):
            col = self.color(ev.role)
            first = ev.task.strip().splitlines()[0] if ev.task.strip() else ""
            c.print(f"[bold {col}]▶ {ev.role}[/] turn {ev.call}: [dim]{escape(first[:100])}[/]")
        elif isinstance(ev, RoleEvent) and isinstance(ev.event, StepFinished):
            step, col = ev.event.step, self.color(ev.role)
            head = f"[{col}]{ev.role}[/] step {step.index} ({step.kind}, {step.usage.total_tokens} tok, {step.duration:.2f}s)"
            c.print(head)
            if step.code:
                c.print(Syntax(step.code, "python", theme="ansi_dark", line_numbers=False))
            elif step.completion:
                c.print(f"  [dim]{escape(step.completion.strip()[:300])}[/]")
            if step.observation:
                c.print(f"  [dim]{escape(step.observation.strip()[:400])}[/]")
        elif isinstance(ev, Handoff):
            c.print(f"  [bold]⇢ {ev.slot}[/]: {ev.source} → {ev.target} ({ev.seconds * 1000:.1f} ms)")
        elif isinstance(ev, RoleFinished):
            r, col = ev.result, self.color(ev.result.role)
            decided = r.verdict or r.route
            extra = f" → {decided}" if decided else (f" [red]({r.decision_error})[/]" if r.decision_error else "")
            c.print(f"[{col}]■ {r.role}[/] turn {r.call}: {r.status}{escape(extra)}")
        elif isinstance(ev, TeamFinished):
            self.summary(ev.result)

    def summary(self, result: TeamResult) -> None:
        from rich.table import Table

        t = Table(title=f"team run {result.team_run_id}: {result.status}")
        for col in ("role", "turns", "steps", "tokens", "seconds"):
            t.add_column(col, justify="right" if col != "role" else "left")
        traj = result.trajectory
        for role in traj.meta.get("roles", []):
            steps = traj.by_role(role)
            calls = [c for c in traj.meta.get("calls", []) if c["role"] == role]
            t.add_row(
                role,
                str(len(calls)),
                str(len(steps)),
                str(sum(s.usage.total_tokens for s in steps)),
                f"{sum(c['duration'] for c in calls):.2f}",
            )
        self.console.print(t)
        self.console.print(
            f"answer: {summarize(result.answer, 500)}" + (f"\n[red]error: {traj.error}[/]" if traj.error else "")
        )


def team_main(
    path: str | Path,
    *,
    store: Any = None,
    seed: int | None = None,
    console: Any = None,
    mode: Literal["rich", "quiet", "json"] = "rich",
) -> int:
    """``cave run team_task.yaml``: run the team, showing each role's steps as they happen.

    ``mode``: "rich" (the live display), "quiet" (the answer only) or "json" (one JSON summary).
    Exit status as ``cave run``: 0 success with every required output saved, 1 not, 2 bad input, 130 interrupted.
    """
    import json

    from rich.console import Console

    from cave.task import TaskError

    console = console or Console(highlight=False)
    errors = Console(stderr=True, highlight=False) if mode != "rich" else console
    try:
        tt = load_team_task(path)
    except (TeamError, TaskError) as e:
        errors.print(f"error: {e}", style="red", markup=False)
        return 2
    display = TeamDisplay(console) if mode == "rich" else None
    try:
        outcome = asyncio.run(arun_team_task(tt, store=store, on_event=display, seed=seed))
    except (TeamError, TaskError) as e:  # inputs that do not load: before any model is loaded
        errors.print(f"error: {e}", style="red", markup=False)
        return 2
    except BackendStartError as e:
        errors.print(f"error: cannot start the run: {e}", style="red", markup=False)
        return 1
    except KeyboardInterrupt:
        errors.print("interrupted", style="yellow")
        return 130
    if mode == "json":
        print(json.dumps(outcome.summary(), default=repr))
    elif mode == "quiet":
        if not outcome.result.ok:
            errors.print(
                f"team run ended with status {outcome.result.status}: {outcome.result.trajectory.error}", markup=False
            )
        print(summarize(outcome.result.answer, 4000))
    for o in outcome.outputs:
        if mode == "rich" or o.error:
            where = o.path or (f"error: {o.error}" if o.error else "not saved (no store given)")
            errors.print(f"output {o.name}: {where}", markup=False)
    if mode == "rich" and outcome.run_dir:
        console.print(f"run dir: {outcome.run_dir}", markup=False)
    return 0 if outcome.ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cave.team team_task.yaml [--seed N] [--store DB]``."""
    p = argparse.ArgumentParser(prog="python -m cave.team", description="Run a team task file with a live display.")
    p.add_argument("task_file")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--store", default=None, help="SQLite file to record the trajectory in (default: none)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("-q", "--quiet", action="store_true", help="print only the answer")
    out.add_argument("--json", action="store_true", help="print one JSON summary")
    args = p.parse_args(argv)
    store = None
    if args.store:
        from cave.store import Store

        store = Store(args.store)
    try:
        mode = "json" if args.json else "quiet" if args.quiet else "rich"
        return team_main(args.task_file, store=store, seed=args.seed, mode=mode)
    finally:
        if store is not None:
            store.close()


if __name__ == "__main__":
    raise SystemExit(main())
