"""The architecture holds: layers import only downward, and cave installs nothing but ``cave``.

Layers, lowest first (DESIGN.md):
  0 toolkit   cave.registry, cave.config, cave.terminal, cave.command   (import no other cave module)
  1 runtimes  cave.runtimes                                 (where code runs)
  2 agent     cave.* (llm, agent, team, task, store, ...)   (the agent layer)
  3 users     cave.training, cave.benchmarks                (users of the agent layer)
  4 cli       cave.cli                                      (the command line, above everything)
An import counts wherever it is written (module level or inside a function): a lazy import upward is still an
upward dependency. cave.benchmarks may use cave.training (perf benchmarks of the trainer), not the reverse.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAPPING = {"cave": "cave", "cave.runtimes": "runtimes", "cave.training": "training", "cave.benchmarks": "benchmarks"}
TOOLKIT = {"cave.registry", "cave.config", "cave.terminal", "cave.command"}


def layer(module: str) -> int:
    if module in TOOLKIT:
        return 0
    if module == "cave.runtimes" or module.startswith("cave.runtimes."):
        return 1
    if module.startswith(("cave.training", "cave.benchmarks")):
        return 3
    if module in ("cave.cli", "cave.__main__") or module.startswith("cave.cli."):
        return 4
    return 2


def modules() -> dict[str, Path]:
    """Every Python module of the installed packages, by its import name."""
    out: dict[str, Path] = {}
    for package, folder in MAPPING.items():
        base = ROOT / folder
        for path in base.rglob("*.py"):
            rel = path.relative_to(base)
            if package == "cave" and rel.parts[0] in {"runtimes", "training", "benchmarks"}:
                continue
            if "configs" in rel.parts or not (path.parent / "__init__.py").exists():
                continue  # scripts inside data folders (skills/*/scripts) are not modules of cave
            parts = [*package.split("."), *rel.with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def imports_of(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    guards = [n for n in ast.walk(tree) if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)]
    type_only = {id(inner) for guard in guards for inner in ast.walk(guard)}
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue  # imports for annotations only: no dependency at run time
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            found.add(name)
            found.update(f"{name}.{a.name}" for a in node.names)  # `from cave import team` imports cave.team
    return found


def test_layers_import_only_downward():
    mods = modules()
    assert "cave.runtimes.kernel" in mods and "cave.team.episode" in mods and "cave.cli.run" in mods
    upward = []
    for module, path in sorted(mods.items()):
        for target in sorted(imports_of(path, module)):
            if not (target == "cave" or target.startswith("cave.")):
                continue
            real = next((m for m in (target, target.rpartition(".")[0]) if m in mods), None)
            if real is None or real == "cave":
                continue
            if layer(real) > layer(module) and not (module.startswith("cave.benchmarks") and layer(real) == 3):
                upward.append(f"{module} (layer {layer(module)}) imports {real} (layer {layer(real)})")
            if module.startswith("cave.training") and real.startswith("cave.benchmarks"):
                upward.append(f"{module} imports {real}: training must not depend on the benchmarks")
    assert not upward, "imports against the layering:\n" + "\n".join(upward)


def test_old_top_level_names_are_gone_from_the_code():
    bad = []
    for module, path in modules().items():
        for target in imports_of(path, module):
            if target.split(".")[0] in {"runtimes", "training", "benchmarks", "agents", "skills"}:
                bad.append(f"{path.relative_to(ROOT)}: import {target}")
    assert not bad, "import them as cave.X:\n" + "\n".join(bad)


def test_library_modules_do_not_import_argparse_or_rich():
    """The command line and the display live with the CLI; the agent layer below it is a library."""
    bad = []
    for module, path in modules().items():
        if layer(module) > 2:
            continue
        for target in imports_of(path, module):
            if target.split(".")[0] in {"argparse", "rich"}:
                bad.append(f"{module} imports {target}")
    assert not bad, "\n".join(bad)


def test_pyproject_lists_every_package_of_the_tree():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(project["tool"]["setuptools"]["packages"])
    in_tree = {m for m, p in modules().items() if p.name == "__init__.py"}
    assert in_tree - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert {"cave.agents", "cave.bundled_skills"} <= listed
    assert all(p == "cave" or p.startswith("cave.") for p in listed)


@pytest.mark.slow
def test_the_wheel_installs_only_cave(tmp_path):
    """A built wheel has one top-level package, ``cave``, with the role files and skills inside it."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    (wheel,) = tmp_path.glob("cave-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"cave"}
    for needed in ("cave/agents/solver.yaml", "cave/bundled_skills/sql/SKILL.md", "cave/runtimes/kernel.py",
                   "cave/training/configs/math_smollm2.yaml", "cave/team/episode.py"):  # fmt: skip
        assert needed in names, needed
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[cave.commands]" in text and "cave.training.cli:COMMAND" in text


def test_the_install_exposes_no_other_top_level_name(tmp_path):
    """From a folder outside the repository, only ``cave`` is importable from this project (``agents`` would shadow
    the OpenAI Agents SDK, ``training``/``benchmarks``/``runtimes`` any project's own folders)."""
    code = (
        "import importlib.util, json, sys\n"
        "root = sys.argv[1]\n"
        "out = {}\n"
        "for name in ('runtimes', 'training', 'benchmarks', 'agents', 'skills'):\n"
        "    spec = importlib.util.find_spec(name)\n"
        "    out[name] = bool(spec and spec.origin and spec.origin.startswith(root))\n"
        "import cave.runtimes, cave.training, cave.benchmarks, cave.agents, cave.bundled_skills\n"
        "out['cave.runtimes'] = cave.runtimes.__file__.startswith(root)\n"
        "print(json.dumps(out))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([sys.executable, "-c", code, str(ROOT)], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    import json

    found = json.loads(res.stdout)
    assert found.pop("cave.runtimes") is True
    assert not any(found.values()), f"importable outside cave: {[k for k, v in found.items() if v]}"
