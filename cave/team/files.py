"""Team files: the ``TeamSpec`` schema (roles resolved by name through cave.team.roles), reading and validating a
team file, with every problem as ``FILE:LINE: FIELD: problem`` + ``fix:`` (cave.config's toolkit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from cave.config import ConfigFile, ConfigModel
from cave.llm.base import BACKENDS
from cave.registry import did_you_mean
from cave.team.errors import TeamError
from cave.team.patterns import PATTERNS
from cave.team.roles import resolve_role, role_search_dirs
from cave.team.specs import BackendSpec, PatternSpec, RoleSpec, TeamRuntimeSpec, explain, read_yaml

__all__ = ["TeamSpec", "explain", "parse_team_file", "read_yaml", "validate_team"]


def parse_team_file(path: str | Path, **context: Any) -> TeamSpec:
    cfg = read_yaml(path)
    if not isinstance(cfg.data, dict):
        raise TeamError([f"{path}:1: a team file must be a mapping with `roles:` and `pattern:`"])
    return validate_team(cfg, base_dir=Path(path).resolve().parent, **context)


def validate_team(cfg: ConfigFile, *, prefix: tuple[str, ...] = (), data: Any = None, **context: Any) -> TeamSpec:
    """Validate ``data`` (default: the whole file) as a team; errors name ``cfg``'s lines under ``prefix``."""
    context.setdefault("base_dir", ".")
    context["base_dir"] = str(context["base_dir"])
    try:
        return TeamSpec.model_validate(cfg.data if data is None else data, context=context)
    except ValidationError as e:
        raise TeamError([explain(err, cfg, TeamSpec, prefix) for err in e.errors()]) from None


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
        loaded = read_yaml(path).data
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
