"""The host-side set of skills: selection, the prompt section, installing the API into a runtime."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cave.skills.catalog import SkillCatalog, compose
from cave.skills.discovery import discover
from cave.skills.spec import API_NAMES, Problem, Skill, SkillError


class SkillSet:
    """Skills discovered from folders, entry points and the bundled skills/ folder.

    ``SkillSet(["./my-skills"])`` scans the user folders first, then the ``cave.skills`` entry
    points, then the bundled folder. Invalid skills land in :attr:`problems`, never raise.
    """

    def __init__(
        self,
        paths: Iterable[str | os.PathLike[str]] | None = None,
        *,
        bundled: bool = True,
        entry_points: bool = True,
    ) -> None:
        self.skills, self.problems = discover(paths, bundled=bundled, entry_points=entry_points)
        self.auto_activate: list[str] = []

    @classmethod
    def from_skills(cls, skills: Iterable[Skill], problems: Iterable[Problem] = ()) -> SkillSet:
        self = cls.__new__(cls)
        self.skills, self.problems = sorted(skills, key=lambda s: s.name), list(problems)
        self.auto_activate = []
        return self

    def __iter__(self):
        return iter(self.skills)

    def __len__(self) -> int:
        return len(self.skills)

    def __contains__(self, name: object) -> bool:
        return any(s.name == name for s in self.skills)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.skills]

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    def get(self, name: str) -> Skill:
        for skill in self.skills:
            if skill.name == name:
                return skill
        hint = ""
        broken = [p for p in self.errors if Path(p.file).parent.name == name or Path(p.file).name == name]
        if broken:
            hint = " (a skill folder of that name is invalid: " + "; ".join(str(p) for p in broken) + ")"
        known = ", ".join(self.names) or "(none)"
        raise SkillError(f"no skill named {name!r}{hint}; available skills: {known}")

    def select(self, names: Iterable[str], activate: Iterable[str] = ()) -> SkillSet:
        """Only the named skills (e.g. ``skills: [sql, report]`` in task.yaml).

        ``activate`` names skills to activate automatically (``activate_skills:`` in task.yaml): their
        instructions go into the system prompt and their exports into the runtime when it is installed.
        """
        activate = list(activate)
        chosen = {n: self.get(n) for n in [*names, *activate]}
        selected = SkillSet.from_skills(chosen.values(), self.problems)
        selected.auto_activate = activate
        return selected

    def catalog(self) -> SkillCatalog:
        return SkillCatalog(s.ref() for s in self.skills)

    # level 1
    def prompt_section(self) -> str:
        """Names and descriptions of the skills, with how to use them; "" when there are none."""
        if not self.skills:
            return ""
        lines = [
            "## Skills",
            "Skills are packaged instructions with ready-made functions. When a task matches a skill, first run "
            '`print(activate_skill("<name>"))`: it returns the instructions and adds the skill\'s functions to '
            "your namespace. `skill_files(name)`, `read_skill_file(name, path)` and "
            "`run_skill_script(name, path, *args)` reach its extra files.",
            "",
            "<available_skills>",
        ]
        lines += [f"- {s.name}: {s.description}" for s in self.skills]
        lines.append("</available_skills>")
        for name in self.auto_activate:  # level 2 up front for skills the task activates itself
            lines += ["", f"## Skill {name} (already active: its functions are in your namespace)", self.get(name).body]
        return "\n".join(lines) + "\n"

    # levels 2 and 3 inside a runtime
    def install(self, runtime: Any) -> None:
        """Inject ``activate_skill`` and the level-3 file functions into ``runtime`` (no-op without skills)."""
        if not self.skills:
            return
        expose = getattr(runtime, "expose", None)  # a sandbox shows the kernel only the host paths it is told
        if expose is not None:
            expose([str(s.path) for s in self.skills])
        catalog = self.catalog()
        for api in API_NAMES:
            runtime.inject_function(getattr(catalog, api), name=api)  # the docstring is the description
        for name in self.auto_activate:
            self.activate(name, runtime)

    def activate(self, name: str, runtime: Any) -> str:
        """Activate a skill in ``runtime`` from the host (automatic activation); returns its level-2 text.

        The exports module is imported inside the runtime, exactly as when the agent calls
        ``activate_skill``. Raises :class:`SkillError` when that fails.
        """
        skill = self.get(name)
        if "activate_skill" not in getattr(runtime, "registered", {}):
            self.install(runtime)
        execution = runtime.execute(f"activate_skill({name!r}, quiet=True)")
        if not execution.ok:
            why = execution.error or f"timed out after {execution.duration:.1f} s"
            raise SkillError(f"activating skill {name!r} in the runtime failed:\n{why}")
        names = skill.export_names()
        lines = [f"names: {', '.join(names)}"] if names else []
        return compose(skill.ref(), skill.body, lines, skill.files())
