"""Inside the runtime: ``activate_skill`` and the level-3 file functions, as methods of a picklable catalog."""

from __future__ import annotations

import importlib.util
import inspect
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cave.skills.spec import (
    _ACTIVE_KEY,
    API_NAMES,
    RESOURCE_DIRS,
    SKILL_FILE,
    SkillError,
    SkillRef,
    SkillText,
    list_files,
    safe_path,
    split_front_matter,
)

_LIBRARY_PACKAGES = ("cave", "functools", "contextlib")


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


def compose(ref: SkillRef, body: str, export_lines: list[str], files: list[str]) -> str:
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
        return SkillText(compose(ref, _read_body(ref), _export_summary(exports), list_files(Path(ref.path))))

    def skill_files(self, name: str) -> list[str]:
        """List a skill's files (paths relative to its folder: scripts/, references/, assets/, ...)."""
        return list_files(Path(self._ref(name).path))

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
