"""Role files: finding a role by name (./agents, the team's folder, the bundled roles) and loading it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cave.registry import did_you_mean
from cave.team.errors import TeamError
from cave.team.specs import ROLE_NAME, RoleSpec, explain, read_yaml

__all__ = ["bundled_agents_dir", "find_role_file", "known_roles", "load_role", "resolve_role", "role_search_dirs"]


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
    """The role names defined in ``dirs``: YAML files that are role definitions (task and team files are not)."""
    names: set[str] = set()
    for d in dirs:
        if d.is_dir():
            names |= {
                p.stem
                for p in d.glob("*.y*ml")
                if p.suffix in (".yaml", ".yml") and ROLE_NAME.match(p.stem) and _is_role_file(p)
            }
    return sorted(names)


def _is_role_file(path: Path) -> bool:
    try:
        data = read_yaml(path, "role file").data
    except TeamError:
        return False
    return isinstance(data, dict) and ("system" in data or "prompt_file" in data) and not {"task", "team"} & set(data)


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
    cfg = read_yaml(path, "role file")
    data = cfg.data
    if not isinstance(data, dict):
        raise TeamError([f"{path}:1: a role file must be a mapping with at least `name:` and `system:`"])
    data = dict(data)
    data.setdefault("name", path.stem)
    if isinstance(data.get("prompt_file"), str):
        data["prompt_file"] = str((path.parent / data["prompt_file"]).resolve())
    try:
        RoleSpec.model_validate(data)
    except ValidationError as e:
        raise TeamError([explain(err, cfg, RoleSpec) for err in e.errors()]) from None
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
