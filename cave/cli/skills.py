"""``cave skills list|show``: the skills found (bundled, entry points, your folders), their fields and problems."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.text import Text

from cave.cli.common import Command, usage
from cave.skills import RESOURCE_DIRS, Problem, SkillError, SkillSet
from cave.terminal import safe

__all__ = ["COMMAND", "cmd_list", "cmd_show", "configure"]


def configure(skills: argparse.ArgumentParser) -> None:
    skills_sub = skills.add_subparsers(dest="skills_command", metavar="ACTION")
    sl = skills_sub.add_parser("list", help="skills found in PATHs, entry points and the bundled folder")
    sl.add_argument("paths", nargs="*", metavar="PATH")
    sl.set_defaults(func=lambda a: cmd_list(a.paths or None))
    ss = skills_sub.add_parser("show", help="one skill's fields, files and instructions")
    ss.add_argument("name")
    ss.add_argument("paths", nargs="*", metavar="PATH")
    ss.set_defaults(func=lambda a: cmd_show(a.name, a.paths or None))
    skills.set_defaults(func=lambda a: usage(skills))


COMMAND = Command("skills", "Agent Skills: list or show", configure)


def _console():
    from rich.console import Console

    return Console(soft_wrap=False)


def _text(value: object) -> Text:
    """A skill's own text as a table cell: control characters escaped, and no rich markup read from it (a message
    naming ``[a-z0-9-]`` or a description with ``[bold]`` shows as written)."""
    return Text(safe(value))


def _problems_table(problems: list[Problem]):
    from rich.table import Table

    table = Table(title="Problems", show_lines=False)
    for col in ("severity", "file", "field", "message"):
        table.add_column(col, overflow="fold")
    for p in problems:
        color = "red" if p.severity == "error" else "yellow"
        table.add_row(Text(p.severity, style=color), _text(p.file), _text(p.field or ""), _text(p.message))
    return table


def cmd_list(paths: list[str] | None = None) -> int:
    """`cave skills list [PATH...]`: a table of the skills found, then any problems. 1 if any is invalid."""
    from rich.table import Table

    skillset = SkillSet(paths)
    console = _console()
    table = Table(title=f"{len(skillset)} skill(s)")
    for col in ("name", "description", "exports", "source"):
        table.add_column(col, overflow="fold")
    for s in skillset:
        exports = ", ".join(s.export_names() or []) if s.exports else ""
        table.add_row(_text(s.name), _text(s.description), _text(exports), _text(s.source))
    console.print(table)
    if skillset.problems:
        console.print(_problems_table(skillset.problems))
    return 1 if skillset.errors else 0


def cmd_show(name: str, paths: list[str] | None = None) -> int:
    """`cave skills show NAME [PATH...]`: the skill's fields, files and instructions."""
    from rich.markdown import Markdown
    from rich.table import Table

    skillset = SkillSet(paths)
    console = _console()
    try:
        skill = skillset.get(name)
    except SkillError as e:
        console.print(safe(e), style="red", markup=False)
        return 1
    table = Table(title=f"skill {skill.name}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    rows = {
        "description": skill.description,
        "folder": str(skill.path),
        "source": skill.source,
        "license": skill.license or "",
        "compatibility": skill.compatibility or "",
        "allowed-tools": " ".join(skill.allowed_tools),
        "metadata": ", ".join(f"{k}={v}" for k, v in skill.metadata.items()),
        "exports": (f"{skill.exports.name}: " + ", ".join(skill.export_names() or ["?"])) if skill.exports else "",
        "files": ", ".join(f for f in skill.files() if f.split("/")[0] in RESOURCE_DIRS),
    }
    for key, value in rows.items():
        if value:
            table.add_row(key, _text(value))
    console.print(table)
    console.print(Markdown(safe(skill.body)))
    own = [p for p in skillset.problems if Path(p.file).parent == skill.path]
    if own:
        console.print(_problems_table(own))
    return 0
