"""Team files: reading, validating and explaining errors with file:line and the fix (cave.config's toolkit)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from cave import config
from cave.config import ConfigFile
from cave.llm.base import LLM
from cave.team.errors import TeamError
from cave.team.specs import BackendSpec, OutputContract, PatternSpec, RoleRuntimeSpec, RoleSpec, SamplingSpec, TeamSpec

if TYPE_CHECKING:
    from cave.team.team import Team

__all__ = ["explain", "load_team", "parse_team_file", "read_yaml", "validate_team"]

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


def load_team(path: str | Path, *, backends: Mapping[str, LLM] | None = None) -> Team:
    """Read, validate and build a team file. Raises TeamError (every problem, with file:line and the fix).

    ``backends``: LLM instances by key, used instead of creating the backends the file names under those keys.
    """
    from cave.team.team import Team

    return Team.from_file(path, backends=backends)


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
