"""Skill records, SKILL.md parsing and validation (the Agent Skills standard plus cave's exports)."""

from __future__ import annotations

import ast
import os
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import yaml

SKILL_FILE = "SKILL.md"
ENTRY_POINT_GROUP = "cave.skills"
EXPORTS_FILE = "exports.py"
EXPORTS_METADATA_KEY = "cave-exports"
MAX_NAME_LENGTH = 64
MAX_DESCRIPTION_LENGTH = 1024
MAX_COMPATIBILITY_LENGTH = 500
STANDARD_FIELDS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
RESOURCE_DIRS = ("scripts", "references", "assets")
# The functions install() puts in a runtime, in prompt order.
API_NAMES = ("activate_skill", "skill_files", "read_skill_file", "skill_file_path", "run_skill_script")
# Hidden bookkeeping in the runtime namespace: {skill name: {export name: object}} of active skills.
_ACTIVE_KEY = "__cave_active_skills__"

Severity = Literal["error", "warning"]


@dataclass
class Problem:
    """Something wrong with a skill. ``error``: the skill was skipped; ``warning``: it was kept."""

    file: str
    field: str | None
    message: str
    severity: Severity = "error"

    def __str__(self) -> str:
        where = f"{self.file}: {self.field}" if self.field else self.file
        return f"{self.severity}: {where}: {self.message}"


class SkillError(Exception):
    """A skill could not be found, activated, read or run. The message says what to do."""


class SkillText(str):
    """A string that displays as itself, so a cell ending in ``activate_skill("x")`` shows readable text."""

    def __repr__(self) -> str:
        return str(self)


@dataclass
class Skill:
    """A valid skill (its front matter passed validation)."""

    name: str
    description: str
    path: Path  # the skill's folder
    body: str  # the SKILL.md body (level 2)
    license: str | None = None
    compatibility: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    allowed_tools: list[str] = field(default_factory=list)
    exports: Path | None = None  # the exports module, if any (imported only on activation)
    source: str = "user"  # "bundled", "user" or "entry point NAME"

    @property
    def skill_md(self) -> Path:
        return self.path / SKILL_FILE

    def ref(self) -> SkillRef:
        exports = str(self.exports.resolve()) if self.exports else None
        return SkillRef(self.name, str(self.path.resolve()), exports)

    def files(self) -> list[str]:
        """Every file of the skill, relative to its folder (symlinks that leave the folder excluded)."""
        return list_files(self.path.resolve())

    def export_names(self) -> list[str] | None:
        """The exported names, read statically from the module's source (nothing is imported)."""
        return static_exports(self.exports) if self.exports else None


@dataclass(frozen=True)
class SkillRef:
    """What a runtime needs to know about a skill: plain strings, so it crosses process boundaries."""

    name: str
    path: str
    exports: str | None = None


_FRONT_MATTER_RE = re.compile(r"\A---[ \t]*\r?\n(.*?)(?:\r?\n)?^---[ \t]*(?:\r?\n|\Z)", re.DOTALL | re.MULTILINE)


def split_front_matter(text: str) -> tuple[str, str] | None:
    """``(yaml_text, body)`` of a SKILL.md, or None when it has no ``---`` delimited front matter.

    >>> split_front_matter("---\\nname: x\\n---\\n# Body\\n")
    ('name: x', '# Body\\n')
    >>> split_front_matter("# no front matter") is None
    True
    """
    m = _FRONT_MATTER_RE.match(text.lstrip("\ufeff"))
    if m is None:
        return None
    return m.group(1), text.lstrip("\ufeff")[m.end() :]


def parse_allowed_tools(value: str) -> list[str]:
    """Split the space-delimited ``allowed-tools`` string; spaces inside parentheses stay in a tool.

    >>> parse_allowed_tools("Bash(git status:*) Read  Write")
    ['Bash(git status:*)', 'Read', 'Write']
    """
    tools, current, depth = [], "", 0
    for ch in value:
        depth += (ch == "(") - (ch == ")")
        if ch.isspace() and depth <= 0:
            if current:
                tools.append(current)
            current = ""
        else:
            current += ch
    if current:
        tools.append(current)
    return tools


def normalized_name(name: str) -> str:
    """A skill name as the standard's reference validator compares it: stripped, NFKC-normalized.

    >>> normalized_name(" ｄａｔａ-tools ")  # full-width letters are the ASCII ones
    'data-tools'
    """
    return unicodedata.normalize("NFKC", name.strip())


def validate_name(name: Any, folder_name: str) -> list[str]:
    """Messages for every rule ``name`` breaks (empty when valid). As the standard's reference validator reads it:
    NFKC-normalized, lowercase letters (any script), digits and hyphens, equal to the (normalized) folder name.

    >>> validate_name("pdf-tools", "pdf-tools"), validate_name("数据分析", "数据分析"), validate_name("café", "café")
    ([], [], [])
    >>> validate_name("PDF--tools", "pdf-tools")[0]
    "must be lowercase; got 'PDF--tools'"
    >>> validate_name("pdf_tools", "pdf_tools")[0]
    "must use only letters, digits and hyphens (no spaces, underscores or dots); got 'pdf_tools'"
    """
    if not isinstance(name, str) or not name.strip():
        return [f"must be a non-empty string; got {name!r}"]
    name = normalized_name(name)
    errors = []
    if len(name) > MAX_NAME_LENGTH:
        errors.append(f"is {len(name)} characters; the limit is {MAX_NAME_LENGTH}")
    if name != name.lower():
        errors.append(f"must be lowercase; got {name!r}")
    if not all(c.isalnum() or c == "-" for c in name):
        errors.append(f"must use only letters, digits and hyphens (no spaces, underscores or dots); got {name!r}")
    if name.startswith("-") or name.endswith("-"):
        errors.append(f"must not start or end with a hyphen; got {name!r}")
    if "--" in name:
        errors.append(f"must not contain consecutive hyphens; got {name!r}")
    if name != unicodedata.normalize("NFKC", folder_name):  # the folder as named, not stripped
        errors.append(f"must equal the folder name {folder_name!r}; rename the folder or the skill (got {name!r})")
    return errors


def _validate(data: dict[str, Any], folder: Path, file: str) -> list[Problem]:
    """Check every front-matter field of the standard (and cave's exports key)."""
    problems: list[Problem] = []

    def error(fld: str, msg: str) -> None:
        problems.append(Problem(file, fld, msg))

    def warn(fld: str, msg: str) -> None:
        problems.append(Problem(file, fld, msg, "warning"))

    if "name" not in data:
        error("name", f"is required; add `name: {folder.name}` (it must equal the folder name)")
    else:
        for msg in validate_name(data["name"], folder.name):
            error("name", msg)

    desc = data.get("description")
    if "description" not in data:
        error("description", "is required: say what the skill does and when to use it (at most 1024 characters)")
    elif not isinstance(desc, str) or not desc.strip():
        error("description", f"must be a non-empty string; got {desc!r}")
    elif len(desc) > MAX_DESCRIPTION_LENGTH:
        error(
            "description",
            f"is {len(desc)} characters; the limit is {MAX_DESCRIPTION_LENGTH}: move details into the body",
        )

    if "license" in data and not isinstance(data["license"], str):
        error("license", f"must be a string (a license name or a bundled file); got {data['license']!r}")

    if "compatibility" in data:
        comp = data["compatibility"]
        if not isinstance(comp, str) or not comp.strip():
            error("compatibility", f"must be a non-empty string when present; got {comp!r}")
        elif len(comp) > MAX_COMPATIBILITY_LENGTH:
            error("compatibility", f"is {len(comp)} characters; the limit is {MAX_COMPATIBILITY_LENGTH}")

    if "metadata" in data:
        meta = data["metadata"]
        if not isinstance(meta, dict):
            error("metadata", f"must be a mapping of strings to strings; got {type(meta).__name__}")
        else:
            for key, value in meta.items():
                if not isinstance(key, str):
                    warn("metadata", f"the standard wants string keys; got {key!r}, kept as {str(key)!r}")
                if not isinstance(value, str):  # kept as written (the reference parser reads every value as text)
                    warn(f"metadata.{key}", f"the standard wants a string; got {value!r} ({type(value).__name__}), "
                         "kept as its text: quote it")  # fmt: skip

    if "allowed-tools" in data:
        tools = data["allowed-tools"]
        if isinstance(tools, list) and all(isinstance(t, str) for t in tools):
            warn("allowed-tools", "the standard uses a space-delimited string (e.g. `Read Bash(git:*)`); list accepted")
        elif not isinstance(tools, str):
            error("allowed-tools", f"must be a space-delimited string of tool names; got {tools!r}")

    for key in data:
        if key not in STANDARD_FIELDS:
            warn(
                str(key),
                f"is not a field of the Agent Skills standard ({', '.join(STANDARD_FIELDS)}); "
                "ignored: move it under `metadata:`",
            )
    return problems


def _exports_path(folder: Path, metadata: Mapping[str, Any], file: str) -> tuple[Path | None, list[Problem]]:
    """The skill's exports module: ``metadata[cave-exports]`` if given, else ``exports.py`` if present."""
    declared = metadata.get(EXPORTS_METADATA_KEY) if isinstance(metadata, Mapping) else None
    if not isinstance(declared, str):
        default = folder / EXPORTS_FILE
        return (default if default.is_file() else None), []
    fld = f"metadata.{EXPORTS_METADATA_KEY}"
    try:
        path = safe_path(folder, declared)
    except SkillError as e:
        return None, [Problem(file, fld, str(e))]
    if path.suffix != ".py" or not path.is_file():
        return None, [Problem(file, fld, f"{declared!r} must name an existing .py file inside the skill folder")]
    return path, []


def metadata_text(yaml_text: str, parsed: Any) -> dict[str, str]:
    r"""The front matter's ``metadata`` as strings, each value as written (``version: 1.10`` is ``"1.10"``, not the
    float 1.1): what the standard's reference parser reads. A nested value is kept as its flow text.

    >>> metadata_text("name: x\nmetadata:\n  version: 1.10\n  internal: true\n  tags: [a, b]\n", {"version": 1.1})
    {'version': '1.10', 'internal': 'true', 'tags': '[a, b]'}
    """
    if not isinstance(parsed, dict):
        return {}
    try:
        raw = yaml.load(yaml_text, Loader=yaml.BaseLoader).get("metadata")  # every scalar as its text
    except (yaml.YAMLError, AttributeError):
        raw = None
    if not isinstance(raw, dict):
        return {str(k): str(v) for k, v in parsed.items()}
    return {str(k): v if isinstance(v, str) else _flow(v) for k, v in raw.items()}


def _flow(value: Any) -> str:
    """A nested YAML value of strings as flow text: ``[a, b]``, ``{k: v}``."""
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    return str(value)


def parse_skill(folder: str | os.PathLike[str], source: str = "user") -> tuple[Skill | None, list[Problem]]:
    """Parse and validate one skill folder. Returns ``(skill or None, problems)``; never raises.

    Nothing of the skill is imported: the exports module is only located.
    """
    folder = Path(folder)
    skill_md = folder / SKILL_FILE
    if not skill_md.is_file() and (folder / "skill.md").is_file():
        skill_md = folder / "skill.md"  # the reference parser accepts the lower-case name too
    file = str(skill_md)
    if not skill_md.is_file():
        return None, [Problem(str(folder), None, f"no {SKILL_FILE} in this folder; a skill folder needs one")]
    try:
        text = skill_md.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return None, [Problem(file, None, f"cannot read: {e}")]

    parts = split_front_matter(text)
    if parts is None:
        msg = "missing YAML front matter: the file must start with a line `---`, the fields, then a line `---`"
        return None, [Problem(file, "front matter", msg)]
    yaml_text, body = parts
    try:
        data = yaml.safe_load(yaml_text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 2}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        hint = "; quote values that contain ': ' or start with a special character"
        return None, [Problem(file, "front matter", f"invalid YAML{where}: {problem}{hint}")]
    if not isinstance(data, dict):
        got = "nothing" if data is None else type(data).__name__
        return None, [Problem(file, "front matter", f"must be a YAML mapping of fields; got {got}")]

    problems = _validate(data, folder, file)
    exports, export_problems = _exports_path(folder, data.get("metadata") or {}, file)
    problems += export_problems
    if any(p.severity == "error" for p in problems):
        return None, problems
    tools = data.get("allowed-tools")
    skill = Skill(
        name=normalized_name(data["name"]),
        description=" ".join(data["description"].split()),
        path=folder,
        body=body.strip("\n") + "\n",
        license=data.get("license"),
        compatibility=data.get("compatibility"),
        metadata=metadata_text(yaml_text, data.get("metadata")),
        allowed_tools=parse_allowed_tools(tools) if isinstance(tools, str) else list(tools or []),
        exports=exports,
        source=source,
    )
    return skill, problems


def static_exports(path: str | os.PathLike[str]) -> list[str] | None:
    """The names a module exports, read from its source without importing it (None if not literal)."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    for node in tree.body:
        if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = {t.id for t in targets if isinstance(t, ast.Name)}
        if "EXPORTS" in names and isinstance(node.value, ast.Dict):
            return [k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        if "__all__" in names and isinstance(node.value, ast.List | ast.Tuple):
            return [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return None


# -- level 3: safe paths ----------------------------------------------------------------------------
def safe_path(root: str | os.PathLike[str], relative: str) -> Path:
    """Resolve ``relative`` inside ``root``, refusing anything that could leave it.

    Refused: absolute paths, ``~``, any ``..`` component, and paths whose resolution (symlinks
    followed) ends outside ``root``.

    >>> try:
    ...     safe_path("/tmp", "../etc/passwd")
    ... except SkillError as e:
    ...     print(e)
    refused path '../etc/passwd': '..' is not allowed; give a path inside the skill folder, e.g. 'references/guide.md'
    """
    if not isinstance(relative, str) or not relative.strip() or "\x00" in relative:
        raise SkillError(f"refused path {relative!r}: give a non-empty path relative to the skill folder")
    posix = relative.replace("\\", "/")
    hint = "give a path inside the skill folder, e.g. 'references/guide.md'"
    if posix.startswith(("/", "~")) or Path(relative).is_absolute() or re.match(r"^[A-Za-z]:", posix):
        raise SkillError(f"refused path {relative!r}: absolute paths are not allowed; {hint}")
    if ".." in PurePosixPath(posix).parts:
        raise SkillError(f"refused path {relative!r}: '..' is not allowed; {hint}")
    base = Path(root).resolve()
    target = (base / posix).resolve()
    if not target.is_relative_to(base):
        raise SkillError(f"refused path {relative!r}: it resolves outside the skill folder (a symlink?); {hint}")
    return target


def list_files(base: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        for fname in sorted(filenames):
            full = Path(dirpath, fname)
            if full.resolve().is_relative_to(base) and full.resolve().is_file():
                out.append(full.relative_to(base).as_posix())
    return out
