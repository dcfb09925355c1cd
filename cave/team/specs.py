"""Role specifications and the parts of a team (the pydantic models of role files and of a team file's sections),
and reading such files with their errors as ``FILE:LINE: FIELD: problem`` + ``fix:`` (cave.config's toolkit).
The team itself, ``TeamSpec``, is in ``cave.team.files``: it resolves its roles through ``cave.team.roles``, which
reads role files with this module."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cave import config
from cave.config import ConfigFile, ConfigModel, registered
from cave.llm.base import BACKENDS
from cave.task import BackendName, RuntimeName
from cave.team.errors import TeamError
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
    "explain",
    "read_yaml",
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


# -- reading team, role and task files; their errors as file:line + fix -----------------------------------
# A cross-field check names the exact field at the start of its message: "roles.0.output: ..."
_LOC_IN_MESSAGE = re.compile(r"^((?:roles|pattern|default_backend)(?:\.[\w-]+)*)(?: \([^)]*\))?: ")

_NESTED: dict[str, type[BaseModel]] = {
    "sampling": SamplingSpec,
    "runtime": RoleRuntimeSpec,
    "output": OutputContract,
    "backends": BackendSpec,
    "pattern": PatternSpec,
    "roles": RoleSpec,
}


def read_yaml(path: str | Path, what: str = "team file") -> ConfigFile:
    """A team/role/task file read with the shared toolkit (size cap, UTF-8, no duplicate keys or alias bombs)."""
    return config.read_config(path, what=what, error=TeamError)


def _loc_in_message(msg: str) -> tuple[tuple[str, ...], str] | None:
    m = _LOC_IN_MESSAGE.match(msg)
    return (tuple(m.group(1).split(".")), msg[m.end() :]) if m else None


def explain(err: Mapping[str, Any], cfg: ConfigFile, model: type[BaseModel], prefix: tuple[str, ...] = ()) -> str:
    """One pydantic error of a team/role definition as ``FILE:LINE: FIELD: problem`` + ``fix:``."""
    return config.explain(err, cfg, model, prefix=prefix, nested=_NESTED, loc_in_message=_loc_in_message)
