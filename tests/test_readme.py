"""The README's two set-up commands are the project's contract with new users; CI must run the second one. Every
other command in the README is a real command: parsed by the CLI that runs it, and run where it needs no model."""

import argparse
import contextlib
import io
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bash_blocks(text: str) -> list[str]:
    blocks, inside, cur = [], False, []
    for line in text.splitlines():
        if line.strip().startswith("```bash"):
            inside, cur = True, []
        elif inside and line.strip() == "```":
            inside = False
            blocks.append("\n".join(cur).strip())
        elif inside:
            cur.append(line)
    return blocks


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    test_cmd = _bash_blocks(readme)[1]
    # CI creates and activates the venv itself; the rest of the command must be identical.
    tail = test_cmd.split(". .venv/bin/activate && ", 1)[1]
    assert tail in ci, f"CI does not run the README's test command {tail!r}"


def test_first_command_runs_a_shipped_example():
    readme = (ROOT / "README.md").read_text()
    first = _bash_blocks(readme)[0]
    task = first.split("cave run ", 1)[1].split()[0]
    assert (ROOT / task).is_file(), f"the README's first command runs {task}, which does not exist"


@pytest.mark.model
@pytest.mark.slow
def test_the_first_command_ends_in_a_verified_success(tmp_path):
    """`cave run` on the README's first task, on the embedded model: success means its checks passed."""
    import json
    import os
    import subprocess
    import sys

    pytest.importorskip("llama_cpp", reason="the embedded model needs the [local] extra")
    readme = (ROOT / "README.md").read_text()
    task = _bash_blocks(readme)[0].split("cave run ", 1)[1].split()[0]
    out = subprocess.run(
        [sys.executable, "-m", "cave", "run", str(ROOT / task), "--json", "--db", str(tmp_path / "r.db")],
        capture_output=True, text=True, timeout=900, env={**os.environ, "CAVE_RUNS": str(tmp_path)},
    )  # fmt: skip
    summary = json.loads(out.stdout)
    assert out.returncode == 0 and summary["status"] == "success", out.stdout[-2000:] + out.stderr[-2000:]
    assert summary["checks"]["passed"], "the README's example must carry checks, so that success is verified"


@pytest.mark.model
@pytest.mark.slow
def test_the_sdk_snippet_runs_both_turns(monkeypatch):
    """The README's Python snippet, as written, on the embedded model: two turns, the second on the first's data."""
    import re

    pytest.importorskip("llama_cpp", reason="the embedded model needs the [local] extra")
    readme = (ROOT / "README.md").read_text()
    code = re.search(r"## Use it from Python\n\n```python\n(.*?)\n```\n", readme, re.S).group(1)
    monkeypatch.chdir(ROOT)
    ns: dict = {}
    exec(compile(code, "README.md", "exec"), ns)
    assert ns["result"].status == "success" and ns["second"].status == "success"
    sales = ns["agent"].runtime.retrieve("sales")
    top = (sales.units * sales.unit_price).groupby(sales.region).sum().idxmax()
    assert ns["second"].answer == top


# -- every command in the README ------------------------------------------------------------------------------
def _commands(text: str) -> tuple[list[str], list[str]]:
    """(whole commands, mentions): the lines of the ```bash blocks split at `&&` and the `cave ...` / `python -m ...`
    spans of the tables are whole commands; a `cave ...` span in prose is a mention (a command's name and options)."""
    whole: list[str] = []
    mentions: list[str] = []
    prose: list[str] = []
    for block in _bash_blocks(text):
        for line in block.splitlines():
            whole += [part.strip() for part in line.split("#")[0].split("&&") if part.strip()]
    fence = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        elif not fence:
            prose.append(line)
    for line in prose:
        for span in re.findall(r"`([^`]+)`", line):
            if re.match(r"(cave|python -m \S+)( |$)", span) and " " in span:
                (whole if line.startswith("|") else mentions).append(span)
    return whole, mentions


def _walk(argv: list[str]) -> list[str]:
    """Problems with a `cave` command's subcommands and options, walking the real parser (placeholders allowed)."""
    from cave.cli import build_parser

    parser, problems = build_parser(), []
    for word in argv:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if word.startswith("-"):
            if word.split("=")[0] not in parser._option_string_actions:
                problems.append(f"{parser.prog} has no option {word}")
        elif subs and word in subs[0].choices:
            parser = subs[0].choices[word]
        elif subs and word.isupper():
            break  # a placeholder for a subcommand: `cave bench SUITE`
        elif subs and parser.prog == "cave":
            problems.append(f"cave has no command {word!r}")
    return problems


def test_every_readme_command_is_a_real_command():
    """Each whole command parses with the real CLI (subcommands, options, values) and names files that exist; each
    `cave ...` mention names real subcommands and options; `python -m` modules and scripts exist."""
    import importlib.util
    import shlex

    from cave.cli import build_parser, commands

    whole, mentions = _commands((ROOT / "README.md").read_text())
    assert len(whole) >= 20 and any(c.startswith("cave bench") for c in whole), whole
    known = commands()
    bad: list[str] = []
    for command in whole + mentions:
        argv = shlex.split(command)
        if argv[0] == "cave":
            bad += [f"{command}: {p}" for p in _walk(argv[1:])]
        if command in mentions:
            continue
        if argv[0] == "cave":
            rest = argv[1:]
            if rest and rest[0] in known:
                rest = [rest[0], *known.get(rest[0]).normalize(rest[1:])]
            try:
                with contextlib.redirect_stderr(io.StringIO()) as err:
                    build_parser().parse_args(rest)
            except SystemExit:
                problem = err.getvalue().strip().splitlines()[-1]
                if not any(re.fullmatch(r"[A-Z][A-Z_]+", a) and a in problem for a in argv):
                    bad.append(f"{command}: {problem}")  # (a placeholder the CLI checks, --data DIR, is the user's)
            bad += [
                f"{command}: no file {a}" for a in argv if a.endswith((".yaml", ".yml")) and not (ROOT / a).is_file()
            ]
        elif argv[:2] == ["python", "-m"]:
            if importlib.util.find_spec(argv[2]) is None:
                bad.append(f"{command}: no module {argv[2]}")
        elif argv[0].startswith("scripts/"):
            if not os.access(ROOT / argv[0], os.X_OK):
                bad.append(f"{command}: {argv[0]} is not an executable file")
        elif argv[0] not in {"python3", ".", "pytest"}:
            bad.append(f"{command}: not a command this test knows how to check")
    assert not bad, "README commands that do not exist as written:\n" + "\n".join(bad)


QUICK = ["cave schema", "cave runs list", "cave skills list", "cave skills show sql",
         "cave bench data --scripted --sizes 100,1000"]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("command", QUICK)
def test_the_quick_readme_commands_run(command, tmp_path):
    """The README's commands that need no model run to exit 0 (from a scratch folder, with a scratch run store)."""
    import shlex
    import subprocess
    import sys

    whole, _ = _commands((ROOT / "README.md").read_text())
    assert command in whole, f"{command!r} is no longer in the README: update QUICK"
    if command.startswith("cave runs"):
        from cave.store import Store

        Store(tmp_path / "cave.db")  # the store a `cave run` before it would have made
    out = subprocess.run(
        [sys.executable, "-m", *shlex.split(command)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "CAVE_RUNS": str(tmp_path)},
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
