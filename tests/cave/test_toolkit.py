"""The toolkit every layer shares: the Registry, the config-file reader, terminal-safe text."""

from __future__ import annotations

import doctest
import importlib
import os
import pkgutil
import subprocess
import sys

import cave.runtimes.coercion
import cave.runtimes.describe
import cave.runtimes.suggest
import cave.runtimes.tagged
import cave.training.forward
import pytest

import cave
import cave.command
import cave.config
import cave.history
import cave.prompts
import cave.registry
import cave.review.answers
import cave.review.checks
import cave.review.guard
import cave.review.misreadings
import cave.review.recovery
import cave.team.episode
import cave.terminal
from cave.config import ConfigError, ConfigModel, parse_yaml, read_config
from cave.registry import DuplicateName, Registry, UnknownName


def _modules_with_examples() -> list:
    """Every cave module with an example that runs (not all +SKIP), so a new module's examples run without a list to
    update; the runtimes and training live in their own top-level folders (cave.runtimes, cave.training) and are
    walked too."""
    found = []
    packages = [
        (cave.__path__, "cave."),
        (cave.runtimes.__path__, "cave.runtimes."),
        (cave.training.__path__, "cave.training."),
    ]
    for path, prefix in packages:
        for info in pkgutil.walk_packages(path, prefix):
            if info.name.endswith("__main__"):  # runs the CLI on import
                continue
            module = importlib.import_module(info.name)
            examples = [e for test in doctest.DocTestFinder().find(module) for e in test.examples]
            if any(not e.options.get(doctest.SKIP) for e in examples):
                found.append(module)
    return found


@pytest.mark.parametrize("module", _modules_with_examples(), ids=lambda m: m.__name__)
def test_doctests(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


# -- Registry --------------------------------------------------------------------------------------------------
def test_registry_rejects_duplicates_and_suggests_names():
    reg: Registry[int] = Registry("widget")
    reg.add("alpha", 1)
    reg.add("alpha", 1)  # the same entry again (a module re-imported) is fine
    with pytest.raises(DuplicateName, match="widget 'alpha' is already registered"):
        reg.add("alpha", 2)
    reg.add("alpha", 2, replace=True)
    assert reg.get("alpha") == 2
    with pytest.raises(UnknownName, match="unknown widget 'alpah'; did you mean 'alpha'\\? known widgets: alpha"):
        reg.get("alpah")
    error = reg.unknown("x")  # both: mapping lookups catch KeyError, pydantic validators ValueError
    assert isinstance(error, KeyError) and isinstance(error, ValueError)
    assert reg.names() == ["alpha"] and "alpha" in reg and list(reg) == ["alpha"]
    reg.remove("alpha")
    assert "alpha" not in reg


def test_builtins_are_known_before_their_modules_load():
    loaded = []
    reg: Registry[str] = Registry("engine", builtins=("lazy",), loader=lambda: (loaded.append(1), reg.add("lazy", "L")))
    assert reg.check("lazy") == "lazy" and loaded == []  # naming it in a file imports nothing
    assert reg.get("lazy") == "L" and loaded == [1]
    with pytest.raises(UnknownName):
        reg.check("other")


def test_every_pluggable_part_uses_the_one_registry():
    from cave.benchmarks.rewards import REWARDS as BENCH_REWARDS
    from cave.runtimes.base import RUNTIMES
    from cave.training.advantages import ESTIMATORS
    from cave.training.engines import ENGINES
    from cave.training.rewards import REWARDS
    from cave.training.tracking import TRACKERS

    from cave.llm.base import BACKENDS
    from cave.team.patterns import PATTERNS

    for reg in (BACKENDS, RUNTIMES, PATTERNS, ESTIMATORS, ENGINES, REWARDS, BENCH_REWARDS, TRACKERS):
        assert isinstance(reg, Registry), reg


def test_a_plugin_engine_and_tracker_can_be_named_in_a_train_config():
    from cave.training.config import parse_config
    from cave.training.engines import ENGINES
    from cave.training.tracking import TRACKERS

    ENGINES.add("my-engine", lambda *a, **k: None)
    TRACKERS.add("my-tracker", lambda cfg, run_dir: None)
    try:
        cfg = parse_config(
            {
                "team": {"roles": [{"name": "solver", "system": "s"}], "pattern": "sequential"},
                "data": {"prompts": [{"question": "q", "answer": 1}]},
                "models": {"base": {"rollout": {"engine": "my-engine"}}},
                "tracking": ["my-tracker"],
            }
        )
        assert cfg.models["base"].rollout.engine == "my-engine" and cfg.tracking == ["my-tracker"]
    finally:
        ENGINES.remove("my-engine")
        TRACKERS.remove("my-tracker")


# -- the config-file reader --------------------------------------------------------------------------------------
def problems(text: str | bytes, tmp_path, name: str = "c.yaml") -> str:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError) as e:
        read_config(path)
    return str(e.value)


def test_duplicate_keys_are_refused_with_both_lines(tmp_path):
    msg = problems("a: 1\nb:\n  x: 1\n  x: 2\n", tmp_path)
    assert msg.startswith(f"{tmp_path / 'c.yaml'}:4: x: duplicate key `x` (first at line 3)")


def test_alias_bombs_and_deep_nesting_are_refused_quickly(tmp_path):
    bomb = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n' + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    assert "more than 64 YAML aliases" in problems(bomb, tmp_path)
    assert "nested too deeply" in problems("x: " + "[" * 3000 + "]" * 3000 + "\n", tmp_path)
    anchors = "base: &b {a: 1}\none: *b\ntwo: *b\n"  # a few aliases are a normal YAML feature
    (tmp_path / "ok.yaml").write_text(anchors)
    assert read_config(tmp_path / "ok.yaml").data["two"] == {"a": 1}


def test_encodings_binary_and_size(tmp_path):
    assert "UTF-16" in problems("task: x\n".encode("utf-16"), tmp_path)
    assert "byte 0xe9 at offset 9 is not UTF-8" in problems(b"task: caf\xe9\n", tmp_path)
    assert "NUL byte" in problems(b"task: x\x00\n", tmp_path)
    assert "bytes" in problems(b"a: 1\n" * (cave.config.MAX_BYTES // 5 + 1), tmp_path)
    (tmp_path / "bom.yaml").write_bytes("\ufefftask: x\n".encode())
    assert read_config(tmp_path / "bom.yaml").data == {"task": "x"}


def test_not_a_regular_file_is_refused_without_opening_it(tmp_path):
    assert "is a directory" in problems_of_path(tmp_path)
    fifo = tmp_path / "f.yaml"
    os.mkfifo(fifo)
    assert "not a regular file" in problems_of_path(fifo)  # opening a FIFO would block for ever
    assert "no such config file" in problems_of_path(tmp_path / "absent.yaml")


def problems_of_path(path) -> str:
    with pytest.raises(ConfigError) as e:
        read_config(path)
    return str(e.value)


def test_strict_numbers():
    class M(ConfigModel):
        n: int = 1
        x: float = 1.0
        flag: bool = False

    def err(data: dict) -> str:
        with pytest.raises(ConfigError) as e:
            cave.config.validate(M, parse_yaml("{}", "m.yaml").__class__("m.yaml", data))
        return str(e.value)

    assert "true is a boolean, not a number" in err({"n": True})
    assert "is not a finite number" in err({"x": float("inf")})
    assert "is not a finite number" in err({"x": "1e400"})
    assert M.model_validate({"flag": True, "n": 3}).n == 3


def test_line_map_walks_alias_shared_nodes_once():
    cfg = parse_yaml("a: &a {x: 1, y: [1, 2]}\nb: *a\nc: *a\n", "f.yaml")
    assert cfg.line("a", "y", "1") == 1 and cfg.line("b") == 2 and cfg.line("c") == 3


def test_shorthand_expands_a_bare_string():
    class Runtime(ConfigModel):
        shorthand = "kind"
        kind: str = "inprocess"
        timeout: float = 1.0

    assert Runtime.model_validate("kernel").kind == "kernel"


# -- terminal --------------------------------------------------------------------------------------------------
def test_cave_run_does_not_pass_escape_sequences_from_a_model_to_the_terminal(tmp_path):
    task = tmp_path / "t.yaml"
    reply = "```python\\nprint('\\x1b]52;c;aGk=\\x07 clip')\\nfinal_answer('\\x1b[2Jdone')\\n```"
    task.write_text(f'task: hi\nmodel: {{backend: scripted, replies: ["{reply}"]}}\n')
    for mode in ([], ["--quiet"], ["--json"]):
        out = subprocess.run(
            [sys.executable, "-m", "cave", "run", str(task), "--db", str(tmp_path / "r.db"), *mode],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        assert "\x1b" not in out.stdout and "\x1b" not in out.stderr, (mode, out.stdout)
