"""Team and role specifications (the pydantic models of team files, role files and ``team:`` sections)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from cave.config import ConfigModel, registered
from cave.llm.base import BACKENDS
from cave.registry import did_you_mean
from cave.task import BackendName, RuntimeName
from cave.team.patterns import PATTERNS

__all__ = [
    "BackendSpec",
    "OutputContract",
    "PatternSpec",
    "ROLE_NAME",
    "RoleRuntimeSpec",
    "RoleSpec",
    "SamplingSpec",
    "TeamRuntimeSpec",
    "TeamSpec",
]

ROLE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")


class SamplingSpec(ConfigModel):
    """Sampling parameters of one role (unset: the team's defaults)."""

    model_config = ConfigDict(extra="forbid")

    temperature: float | None = Field(None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(None, ge=16, le=32768, description="most tokens per reply")
    seed: int | None = Field(None, description="a fixed seed for this role (default: derived from the episode seed)")
    response_prefix: str | None = Field(
        None,
        description='text every reply of this role starts with, e.g. "```python\\n" so a small model writes code '
        "(part of the prompt: never trained)",
    )


class RoleRuntimeSpec(ConfigModel):
    """Where the role's code runs: its own runtime, or the runtime shared by the roles that say 'shared'."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["own", "shared"] = "own"
    kind: RuntimeName | None = Field(None, description="a runtime name (default: the team's runtime kind)")
    timeout: float | None = Field(None, gt=0, description="seconds per code cell (default: the team's)")
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"mode": data} if data in ("own", "shared") else {"kind": data}
        return data


class OutputContract(ConfigModel):
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
    shorthand = "kind"

    @field_validator("publishes")
    @classmethod
    def _identifiers(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v:
            if not name.isidentifier():
                raise ValueError(f"published name {name!r} is not a Python identifier; use letters, digits and _")
        return v


class RoleSpec(ConfigModel):
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


class BackendSpec(ConfigModel):
    """A backend instance of the team: keys other than these are the backend's options (e.g. ``model``)."""

    model_config = ConfigDict(extra="allow")

    shorthand = "backend"

    backend: BackendName = Field("local", description="a registered backend: " + ", ".join(BACKENDS.names()))
    max_in_flight: int | None = Field(None, ge=1, description="bound on concurrent requests to this backend")

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class TeamRuntimeSpec(ConfigModel):
    """The default runtime of the team's roles (each role gets its own, per episode, unless it says 'shared')."""

    model_config = ConfigDict(extra="forbid")

    shorthand = "kind"

    kind: RuntimeName = Field("inprocess", description="inprocess (fast, trusted code), kernel, process or sandbox")
    timeout: float = Field(60.0, gt=0, description="seconds per code cell")
    options: dict[str, Any] = Field(default_factory=dict)


class PatternSpec(ConfigModel):
    """A routing pattern by name, with its options (checked against the pattern's own options model)."""

    model_config = ConfigDict(extra="allow")

    shorthand = "name"

    name: registered(PATTERNS) = Field(
        "sequential", description="sequential, loop, router, custom, or a registered pattern"
    )

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class TeamSpec(ConfigModel):
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
        from cave.team.files import read_yaml

        loaded = read_yaml(path).data
        if not isinstance(loaded, dict):
            raise ValueError(f"{path}:1: a team file must be a mapping with `roles:` and `pattern:`")
        return {**loaded, "source": str(path)}

    @field_validator("roles", mode="before")
    @classmethod
    def _resolve_roles(cls, v: Any, info: ValidationInfo) -> Any:
        if not isinstance(v, list) or not v:
            raise ValueError("`roles` must be a non-empty list; e.g. roles: [solver, verifier]")
        from cave.team.roles import resolve_role, role_search_dirs

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
        known = sorted(keys | set(BACKENDS.names()))
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
