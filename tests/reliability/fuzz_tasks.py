"""Bad task files, fed to ``cave run`` as a user would: each must end in a clear error (exit 2, the file and the
line, no traceback), never a hang, a crash or a silent wrong run. Used by test_fuzz_tasks.py and by
``python -m cave.benchmarks.reliability`` (fuzzed task files tried / clean errors)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GOOD = 'task: say hi\nmodel: {backend: scripted, replies: ["```python\\nfinal_answer(1)\\n```"]}\n'


@dataclass
class Case:
    name: str
    make: Callable[[Path], list[str]]  # writes what it needs under the folder, returns `cave run` arguments


def _file(text: str | bytes, name: str = "task.yaml", extra: tuple[str, ...] = ()) -> Callable[[Path], list[str]]:
    def make(d: Path) -> list[str]:
        path = d / name
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return [str(path), *extra]

    return make


def _fifo(d: Path) -> list[str]:
    os.mkfifo(d / "fifo.yaml")
    return [str(d / "fifo.yaml")]


def _garbage_sqlite(d: Path) -> list[str]:
    (d / "shop.db").write_bytes(b"this is not a database " * 100)
    (d / "task.yaml").write_text(GOOD + "inputs:\n  db: {url: 'sqlite:///shop.db'}\n")
    return [str(d / "task.yaml")]


def _csv_task(options: str) -> Callable[[Path], list[str]]:
    def make(d: Path) -> list[str]:
        (d / "t.csv").write_text("a,b\n1,2\n")
        (d / "task.yaml").write_text(GOOD + f"inputs:\n  t: {{file: t.csv, read_options: {options}}}\n")
        return [str(d / "task.yaml")]

    return make


def _with_module(module: str, task: str, function: str = "f") -> Callable[[Path], list[str]]:
    """A task file with a `function:` input from helper.py next to it (whose top level is ``module``)."""

    def make(d: Path) -> list[str]:
        (d / "helper.py").write_text(module + "\n")
        (d / "task.yaml").write_text(task + f"inputs:\n  f: {{function: 'helper:{function}'}}\n")
        return [str(d / "task.yaml")]

    return make


def _in_folder(prepare: Callable[[Path], Any], text: str) -> Callable[[Path], list[str]]:
    def make(d: Path) -> list[str]:
        prepare(d)
        return _file(text)(d)

    return make


def _local_model(name: str, make_it: Callable[[Path], None]) -> Callable[[Path], list[str]]:
    """A local-backend task file whose model path (read from the current folder, as the backend reads it) is
    absolute here, so the case does not depend on where `cave run` starts."""

    def make(d: Path) -> list[str]:
        make_it(d / name)
        (d / "task.yaml").write_text(f"task: t\nmodel: {{backend: local, model: '{d / name}'}}\n")
        return [str(d / "task.yaml")]

    return make


def _bomb() -> str:
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    lines += [f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi", strict=True)]
    return "\n".join(lines) + "\n" + GOOD


CASES = [
    Case("utf16", _file(GOOD.encode("utf-16"))),
    Case("invalid-utf8", _file(b"task: caf\xe9\n")),
    Case("nul-byte", _file(b"task: x\x00\n")),
    Case("binary-junk", _file(os.urandom(2000))),
    Case("empty", _file("")),
    Case("top-level-list", _file("- a\n- b\n")),
    Case("yaml-syntax", _file("task: [unclosed\n")),
    Case("huge-file", _file("# " + "x" * (5 << 20) + "\n" + GOOD)),
    Case("fifo", _fifo),
    Case("directory", lambda d: [str(d)]),
    Case("missing", lambda d: [str(d / "absent.yaml")]),
    Case("alias-bomb", _file(_bomb())),
    Case("deep-nesting", _file(GOOD + "x: " + "[" * 5000 + "]" * 5000 + "\n")),
    Case("duplicate-key", _file(GOOD + "max_steps: 500\nmax_steps: 3\n")),
    Case("bool-as-int", _file(GOOD + "max_steps: true\n")),
    Case("inf-timeout", _file(GOOD + "runtime: {timeout: .inf}\n")),
    Case("overflow-timeout", _file(GOOD + "runtime: {timeout: 1e400}\n")),
    Case("nan-temperature", _file(GOOD.replace("backend: scripted", "backend: scripted, temperature: .nan"))),
    Case("replies-not-a-list", _file("task: x\nmodel: {backend: scripted, replies: notalist}\n")),
    Case("max-steps-0", _file(GOOD, extra=("--max-steps", "0"))),
    Case("max-steps-negative", _file(GOOD, extra=("--max-steps", "-5"))),
    Case("db-is-a-directory", lambda d: [*_file(GOOD)(d), "--db", str(d)]),
    Case("garbage-sqlite", _garbage_sqlite),
    Case("full-width-name", _file(GOOD + "inputs:\n  ｓａｌｅｓ: {value: 1}\n")),
    Case("skiprows-huge", _csv_task("{skiprows: 100000000000}")),
    Case("nrows-float", _csv_task("{nrows: 1.5}")),
    Case("memory-limit-huge", _file(GOOD + "runtime: {kind: process, memory_limit_mb: 100000000000000000000}\n")),
    Case("memory-limit-inprocess", _file(GOOD + "runtime: {kind: inprocess, memory_limit_mb: 512}\n")),
    Case("unknown-runtime-option", _file(GOOD + "runtime: {kind: inprocess, options: {nope: 1}}\n")),
    Case("unknown-backend", _file(GOOD.replace("scripted", "scriptd"))),
    Case("unknown-field", _file(GOOD + "max_step: 3\n")),
    Case("bad-check", _file(GOOD + "checks:\n  answer: {assert: ['value >']}\n")),
    # what used to fail only once the run started, or with exit 1 and no line (issue 40), and variations of it
    Case("replies-items-null", _file("task: x\nmodel: {backend: scripted, replies: [null, 'x']}\n")),
    Case("replies-a-mapping", _file("task: x\nmodel: {backend: scripted, replies: {a: b}}\n")),
    Case("backend-option-unknown", _file(GOOD.replace("backend: scripted", "backend: scripted, repeat: true"))),
    Case("base-url-not-http", _file("task: x\nmodel: {backend: openai, base_url: 'localhost:8000', model: m}\n")),
    Case("local-model-a-character-device", _file("task: x\nmodel: {backend: local, model: /dev/zero}\n")),
    Case("local-model-empty-gguf", _local_model("empty.gguf", lambda p: p.write_bytes(b""))),
    Case("local-model-a-folder", _local_model("m.gguf", lambda p: p.mkdir())),
    Case(
        "local-model-a-link-to-a-fifo",
        _local_model("l.gguf", lambda p: os.mkfifo(p.with_suffix(".fifo")) or p.symlink_to(p.with_suffix(".fifo"))),
    ),
    Case("output-variable-a-path", _file(GOOD + "outputs:\n  x: {variable: ../../x}\n")),
    Case("output-variable-a-keyword", _file(GOOD + "outputs:\n  x: {variable: lambda}\n")),
    Case("output-name-dotted", _file(GOOD + "outputs:\n  a.b: {format: csv}\n")),
    Case(
        "sqlite-url-a-folder",
        _in_folder(lambda d: (d / "db").mkdir(), GOOD + "runtime: process\ninputs:\n  db: {url: 'sqlite:///db'}\n"),
    ),
    Case("in-memory-db-in-a-process", _file(GOOD + "runtime: process\ninputs:\n  db: {url: 'sqlite://'}\n")),
    Case(
        "workdir-a-file",
        lambda d: _file(GOOD + f"runtime: {{kind: process, options: {{workdir: '{d}/task.yaml'}}}}\n")(d),
    ),
    Case("module-exits-when-imported", _with_module("raise SystemExit(0)\ndef f():\n    return 1", GOOD)),
    Case("module-raises-when-imported", _with_module("raise RuntimeError('no config')\ndef f():\n    return 1", GOOD)),
    Case("function-not-callable", _with_module("f = 1", GOOD)),
]

_WHERE = re.compile(r"(\.yaml|\.db|[/\\]\S*):\d+|--max-steps|--db")


@dataclass
class Outcome:
    case: str
    code: int | None  # None: it hung (killed at the timeout)
    seconds: float
    stderr: str

    @property
    def clean(self) -> bool:
        """Exit 2 with a located error and no traceback, in time."""
        return (
            self.code == 2 and "Traceback" not in self.stderr and bool(_WHERE.search(self.stderr)) and self.seconds < 30
        )


def run_case(case: Case, folder: Path, timeout: float = 30.0) -> Outcome:
    folder.mkdir(parents=True, exist_ok=True)
    args = case.make(folder)
    t0 = time.monotonic()
    env = {**os.environ, "CAVE_RUNS": str(folder / "runs")}
    try:
        out = subprocess.run(
            [sys.executable, "-m", "cave", "run", *args, "--quiet", *([] if "--db" in args else ["--db", str(folder / "r.db")])],
            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, env=env,
        )  # fmt: skip
        return Outcome(case.name, out.returncode, time.monotonic() - t0, out.stderr)
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return Outcome(case.name, None, time.monotonic() - t0, err)


def run_all(root: Path) -> list[Outcome]:
    return [run_case(c, root / c.name) for c in CASES]
