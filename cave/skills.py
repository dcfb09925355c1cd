"""Agent Skills: discovery, validation, progressive disclosure, executable exports.

A skill is a folder with a ``SKILL.md`` (YAML front matter + Markdown instructions), following the
Agent Skills standard (agentskills.io), plus one cave extension: an *exports* module (``exports.py`` in
the folder, or the file named by ``metadata: {cave-exports: path.py}``) whose ``__all__`` or ``EXPORTS``
lists functions, variables and types that land in the agent's runtime when the skill is activated.

Progressive disclosure, as the standard describes it:

- level 1, always in the system prompt: each skill's name and description (:meth:`SkillSet.prompt_section`);
- level 2, on activation: the SKILL.md body, returned by ``activate_skill("name")`` inside the runtime
  (or :meth:`SkillSet.activate` on the host, for automatic activation declared in task.yaml);
- level 3, on demand: files under ``scripts/``, ``references/``, ``assets/`` through ``skill_files``,
  ``read_skill_file``, ``skill_file_path`` and ``run_skill_script`` -- which refuse any path that would
  leave the skill's folder (``..``, absolute paths, symlinks pointing out).

The exports module is imported **on activation, inside the runtime** (never at discovery): the functions
injected by :meth:`SkillSet.install` are bound methods of a small picklable :class:`SkillCatalog`, so they
work unchanged in an in-process runtime and in a kernel in another process. Activation binds the exports
into the namespace of the code that called it, so they appear in ``runtime.describe()`` -- and so in the
agent's prompt -- from the next step on.

Invalid skills never stop a run: they are skipped and reported in :attr:`SkillSet.problems` with the
file, the field and what to change.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import yaml

__all__ = [
    "API_NAMES",
    "ENTRY_POINT_GROUP",
    "EXPORTS_FILE",
    "EXPORTS_METADATA_KEY",
    "MAX_COMPATIBILITY_LENGTH",
    "MAX_DESCRIPTION_LENGTH",
    "MAX_NAME_LENGTH",
    "Problem",
    "RESOURCE_DIRS",
    "SKILL_FILE",
    "STANDARD_FIELDS",
    "Severity",
    "Skill",
    "SkillCatalog",
    "SkillError",
    "SkillRef",
    "SkillSet",
    "SkillText",
    "bundled_root",
    "discover",
    "parse_allowed_tools",
    "parse_skill",
    "safe_path",
    "split_front_matter",
    "static_exports",
    "validate_name",
]

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
_NAME_RE = re.compile(r"[a-z0-9-]+")

Severity = Literal["error", "warning"]


# -- records ----------------------------------------------------------------------------------------
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
        return _list_files(self.path.resolve())

    def export_names(self) -> list[str] | None:
        """The exported names, read statically from the module's source (nothing is imported)."""
        return static_exports(self.exports) if self.exports else None


@dataclass(frozen=True)
class SkillRef:
    """What a runtime needs to know about a skill: plain strings, so it crosses process boundaries."""

    name: str
    path: str
    exports: str | None = None


# -- parsing and validation -------------------------------------------------------------------------
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


def validate_name(name: Any, folder_name: str) -> list[str]:
    """Messages for every rule ``name`` breaks (empty when valid).

    >>> validate_name("pdf-tools", "pdf-tools")
    []
    >>> validate_name("PDF--tools", "pdf-tools")[0]
    "must use only lowercase letters, digits and hyphens ([a-z0-9-]); got 'PDF--tools'"
    """
    if not isinstance(name, str) or not name.strip():
        return [f"must be a non-empty string; got {name!r}"]
    errors = []
    if len(name) > MAX_NAME_LENGTH:
        errors.append(f"is {len(name)} characters; the limit is {MAX_NAME_LENGTH}")
    if not _NAME_RE.fullmatch(name):
        errors.append(f"must use only lowercase letters, digits and hyphens ([a-z0-9-]); got {name!r}")
    if name.startswith("-") or name.endswith("-"):
        errors.append(f"must not start or end with a hyphen; got {name!r}")
    if "--" in name:
        errors.append(f"must not contain consecutive hyphens; got {name!r}")
    if name != folder_name:
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
                    error("metadata", f"keys must be strings; got {key!r}")
                elif not isinstance(value, str):
                    error(f"metadata.{key}", f"must be a string; got {value!r} ({type(value).__name__}): quote it")

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
        name=data["name"],
        description=" ".join(data["description"].split()),
        path=folder,
        body=body.strip("\n") + "\n",
        license=data.get("license"),
        compatibility=data.get("compatibility"),
        metadata=dict(data.get("metadata") or {}),
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


# -- discovery ----------------------------------------------------------------------------------------
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


def _list_files(base: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        for fname in sorted(filenames):
            full = Path(dirpath, fname)
            if full.resolve().is_relative_to(base) and full.resolve().is_file():
                out.append(full.relative_to(base).as_posix())
    return out


# -- inside the runtime -----------------------------------------------------------------------------
_LIBRARY_PACKAGES = ("cave", "runtimes", "benchmarks", "training", "functools", "contextlib")


def _caller_namespace(depth: int = 2) -> dict[str, Any]:
    """The globals of the agent code that called us, skipping wrappers in library modules.

    In-process runtimes run cells with their namespace as globals; IPython kernels run them in
    ``user_ns``; both are the calling frame's ``f_globals``.
    """
    frame = sys._getframe(depth)
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        if not any(name == pkg or name.startswith(pkg + ".") for pkg in _LIBRARY_PACKAGES):
            return frame.f_globals
        frame = frame.f_back
    raise SkillError("could not find the calling namespace; use SkillCatalog.activate_into(name, globals())")


def _export_summary(exports: Mapping[str, Any]) -> list[str]:
    """Export names by kind, one line each. Signatures are left to the prompt's function list, so the
    activation text (an observation, which the agent loop may truncate) stays about as long as the body."""
    kinds: dict[str, list[str]] = {"functions": [], "types": [], "variables": []}
    for name, obj in exports.items():
        kind = "types" if inspect.isclass(obj) else "functions" if callable(obj) else "variables"
        kinds[kind].append(name)
    return [f"{kind}: {', '.join(names)}" for kind, names in kinds.items() if names]


def _import_exports(ref: SkillRef) -> dict[str, Any]:
    """Import the skill's exports module from its file and return ``{name: object}``."""
    assert ref.exports is not None
    rel = os.path.relpath(ref.exports, ref.path)
    module_name = "cave_skill_" + ref.name.replace("-", "_")
    spec = importlib.util.spec_from_file_location(module_name, ref.exports)
    if spec is None or spec.loader is None:
        raise SkillError(f"skill {ref.name!r}: cannot load {rel} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look the module up by name
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        sys.modules.pop(module_name, None)
        raise SkillError(
            f"skill {ref.name!r}: importing {rel} failed: {type(e).__name__}: {e}. "
            f"Install what it needs or fix the module; its instructions are still readable with "
            f"read_skill_file({ref.name!r}, {SKILL_FILE!r})."
        ) from e
    exports = getattr(module, "EXPORTS", None)
    if exports is None:
        names = getattr(module, "__all__", None)
        if names is None:
            raise SkillError(f"skill {ref.name!r}: {rel} defines neither __all__ nor EXPORTS; add __all__ = [...]")
        missing = [n for n in names if not hasattr(module, n)]
        if missing:
            raise SkillError(f"skill {ref.name!r}: {rel} lists {missing} in __all__ but does not define them")
        exports = {n: getattr(module, n) for n in names}
    elif not isinstance(exports, Mapping):
        raise SkillError(f"skill {ref.name!r}: EXPORTS in {rel} must be a dict of name -> object")
    try:  # out-of-process runtimes can then send these types and functions back to the host by value
        import cloudpickle

        cloudpickle.register_pickle_by_value(module)
    except Exception:
        pass
    return dict(exports)


def _compose(ref: SkillRef, body: str, export_lines: list[str], files: list[str]) -> str:
    """The level-2 text the agent reads on activation: body, then what became available."""
    parts = [f"# Skill {ref.name!r} is active\n", body.rstrip("\n")]
    if export_lines:
        parts.append(
            "\n## Now in your namespace (signatures in your function list)\n"
            + "\n".join(f"- {line}" for line in export_lines)
        )
    extra = [f for f in files if f.split("/")[0] in RESOURCE_DIRS]
    if extra:
        parts.append(
            "\n## Files (read_skill_file / skill_file_path / run_skill_script)\n" + "\n".join(f"- {f}" for f in extra)
        )
    return "\n".join(parts) + "\n"


def _read_body(ref: SkillRef) -> str:
    path = Path(ref.path) / SKILL_FILE
    if not path.is_file():
        path = Path(ref.path) / "skill.md"
    text = path.read_text(encoding="utf-8")
    parts = split_front_matter(text)
    return (parts[1] if parts else text).strip("\n") + "\n"


class SkillCatalog:
    """The skills a runtime can use. Its bound methods are what :meth:`SkillSet.install` injects.

    It holds only :class:`SkillRef` strings, so it pickles into a kernel; everything it does happens
    in the process where it is called.
    """

    def __init__(self, refs: Iterable[SkillRef]) -> None:
        self.refs = {r.name: r for r in refs}

    def _ref(self, name: str) -> SkillRef:
        if name not in self.refs:
            known = ", ".join(sorted(self.refs)) or "(none)"
            raise SkillError(f"no skill named {name!r}; available skills: {known}")
        return self.refs[name]

    def activate_skill(self, name: str, quiet: bool = False) -> str | None:
        """Activate a skill: return its instructions and add its functions and types to your namespace.

        Print the returned text before using the skill. quiet=True returns None instead.
        """
        return self.activate_into(name, _caller_namespace(), quiet)

    def activate_into(self, name: str, namespace: dict[str, Any], quiet: bool = False) -> SkillText | None:
        """Activate ``name`` with its exports bound into ``namespace`` (what activate_skill does)."""
        ref = self._ref(name)
        active = namespace.setdefault(_ACTIVE_KEY, {})
        if name in active:  # re-activation re-binds the same objects: instances keep their types
            exports = active[name]
        else:
            exports = _import_exports(ref) if ref.exports else {}
            clash = [n for n in exports if n in API_NAMES]
            if clash:
                raise SkillError(f"skill {name!r} exports {clash}, which would hide the skills API; rename them")
            active[name] = exports
        namespace.update(exports)
        if quiet:
            return None
        return SkillText(_compose(ref, _read_body(ref), _export_summary(exports), _list_files(Path(ref.path))))

    def skill_files(self, name: str) -> list[str]:
        """List a skill's files (paths relative to its folder: scripts/, references/, assets/, ...)."""
        return _list_files(Path(self._ref(name).path))

    def skill_file_path(self, name: str, path: str) -> str:
        """Absolute path of a file inside a skill's folder (e.g. an asset to open); refuses paths leaving it."""
        target = safe_path(self._ref(name).path, path)
        if not target.exists():
            raise SkillError(f"skill {name!r} has no file {path!r}; its files: {self.skill_files(name)}")
        return str(target)

    def read_skill_file(self, name: str, path: str, max_chars: int | None = 100_000) -> str:
        """Read a text file of a skill, e.g. read_skill_file("sql", "references/sqlite.md")."""
        target = Path(self.skill_file_path(name, path))
        if not target.is_file():
            raise SkillError(f"{path!r} in skill {name!r} is a folder; its files: {self.skill_files(name)}")
        try:
            text = target.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise SkillError(
                f"{path!r} in skill {name!r} is not text; use skill_file_path({name!r}, {path!r}) and open it"
            ) from None
        if max_chars is not None and len(text) > max_chars:
            text = text[:max_chars] + f"\n[... truncated at {max_chars} of {len(text)} characters]\n"
        return SkillText(text)

    def run_skill_script(self, name: str, path: str, *args: Any, timeout: float = 120.0) -> str:
        """Run a script from a skill's scripts/ folder with arguments; returns its stdout.

        .py runs with this Python, .sh with bash, other files must be executable. The working
        directory is the current one; SKILL_DIR is set to the skill's folder.
        """
        ref = self._ref(name)
        target = safe_path(ref.path, path)
        scripts = (Path(ref.path) / "scripts").resolve()
        if not target.is_relative_to(scripts):
            raise SkillError(f"refused {path!r}: only files under scripts/ can be run; use read_skill_file to read")
        if not target.is_file():
            listed = [f for f in self.skill_files(name) if f.startswith("scripts/")]
            raise SkillError(f"skill {name!r} has no script {path!r}; its scripts: {listed}")
        if target.suffix == ".py":
            cmd = [sys.executable, str(target)]
        elif target.suffix == ".sh":
            cmd = ["bash", str(target)]
        elif os.access(target, os.X_OK):
            cmd = [str(target)]
        else:
            raise SkillError(f"{path!r} is neither .py, .sh nor executable; cannot run it")
        env = {**os.environ, "SKILL_DIR": ref.path}
        try:
            done = subprocess.run(
                cmd + [str(a) for a in args], capture_output=True, text=True, timeout=timeout, env=env, check=False
            )
        except subprocess.TimeoutExpired:
            raise SkillError(f"{path!r} of skill {name!r} ran past {timeout} s and was killed") from None
        if done.returncode != 0:
            tail = (done.stderr or done.stdout)[-2000:]
            raise SkillError(f"{path!r} of skill {name!r} exited with status {done.returncode}:\n{tail}")
        return SkillText(done.stdout)


# -- the host-side set ------------------------------------------------------------------------------
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
        return _compose(skill.ref(), skill.body, lines, skill.files())
