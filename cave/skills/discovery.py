"""Finding skills: your folders, the ``cave.skills`` entry-point group, the bundled folder."""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable
from pathlib import Path

from cave.skills.spec import ENTRY_POINT_GROUP, SKILL_FILE, Problem, Skill, parse_skill


def bundled_root() -> Path:
    """The skills/ folder shipped with cave."""
    from cave.bundled_skills import ROOT

    return Path(ROOT)


def _scan(root: Path, source: str) -> tuple[list[Skill], list[Problem]]:
    """Skills in ``root``: the folder itself if it holds a SKILL.md, else each sub-folder that does."""
    if not root.exists():
        return [], [Problem(str(root), None, "skills folder does not exist; check the path in task.yaml or the SDK")]
    if not root.is_dir():
        return [], [Problem(str(root), None, "not a folder; give a skill folder or a folder of skill folders")]
    if (root / SKILL_FILE).is_file() or (root / "skill.md").is_file():
        skill, problems = parse_skill(root, source)
        return ([skill] if skill else []), problems
    skills: list[Skill] = []
    problems: list[Problem] = []
    for sub in sorted(root.iterdir()):
        if not sub.is_dir() or sub.name.startswith((".", "_")):
            continue
        if (sub / SKILL_FILE).is_file() or (sub / "skill.md").is_file():
            skill, found = parse_skill(sub, source)
            problems += found
            if skill:
                skills.append(skill)
    return skills, problems


def _entry_point_folders() -> tuple[list[tuple[Path, str]], list[Problem]]:
    """Folders named by installed packages in the ``cave.skills`` entry-point group.

    An entry point may name a package (its folder is used), a str/Path, a list of them, or a
    zero-argument callable returning any of those.
    """
    from importlib.metadata import entry_points

    folders: list[tuple[Path, str]] = []
    problems: list[Problem] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        where = f"entry point {ep.name!r} ({ep.value})"
        try:
            target = ep.load()
            if callable(target) and not isinstance(target, type):
                target = target()
            items = target if isinstance(target, list | tuple) else [target]
            for item in items:
                if inspect.ismodule(item):
                    paths = list(getattr(item, "__path__", [])) or [os.path.dirname(item.__file__ or "")]
                    item = paths[0]
                folders.append((Path(item), f"entry point {ep.name}"))
        except Exception as e:  # a broken package must not break the run
            problems.append(Problem(where, None, f"could not load: {type(e).__name__}: {e}"))
    return folders, problems


def discover(
    paths: Iterable[str | os.PathLike[str]] | None = None, *, bundled: bool = True, entry_points: bool = True
) -> tuple[list[Skill], list[Problem]]:
    """Find skills. Precedence on equal names: user paths, then entry points, then the bundled folder."""
    sources: list[tuple[Path, str]] = [(Path(p).expanduser(), "user") for p in paths or []]
    problems: list[Problem] = []
    if entry_points:
        found, problems = _entry_point_folders()
        sources += found
    if bundled:
        sources.append((bundled_root(), "bundled"))
    by_name: dict[str, Skill] = {}
    for root, source in sources:
        skills, found = _scan(root, source)
        problems += found
        for skill in skills:
            if skill.name in by_name:
                kept = by_name[skill.name]
                msg = f"skill {skill.name!r} is shadowed by {kept.path} ({kept.source}); this copy is ignored"
                problems.append(Problem(str(skill.skill_md), "name", msg, "warning"))
            else:
                by_name[skill.name] = skill
    return sorted(by_name.values(), key=lambda s: s.name), problems
