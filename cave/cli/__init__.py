"""The ``cave`` command: subcommands registered by the packages that own them.

    cave run TASK.yaml [--quiet | --json] [--db PATH] [--max-steps N]
    cave run --resume RUN_ID
    cave run TEAM_TASK.yaml          # a task file with a `team:` section runs a team (cave.team)
    cave train run|plot|export ...   # Dr. MAS RL (cave.training.cli)
    cave bench bfcl|tau2|data ...    # benchmarks (cave.benchmarks.cli)
    cave schema                      # the JSON Schema of task files
    cave runs list [--limit N] [--json] | cave runs show RUN_ID [--steps] [--json]
    cave skills list [PATH ...] | cave skills show NAME [PATH ...]

The core commands live in this package; others come from the ``cave.commands`` entry-point group (cave's own
``train`` and ``bench``, and any plugin's), so the CLI sits above the layers: nothing below imports it, and it
imports a command's package only when that command runs.

Exit status: 0 the run ended with an answer (and every required output was saved); 1 it did not (max steps, an
error, a missing output); 2 bad input (task file, arguments), reported before any model is loaded; 130
interrupted.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import entry_points

from cave.cli.common import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, Command, err
from cave.registry import Registry

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "Command",
    "build_parser",
    "main",
]

GROUP = "cave.commands"


def _core() -> list[Command]:
    from cave.cli import run, runs, skills

    return [run.COMMAND, runs.SCHEMA, runs.RUNS, skills.COMMAND]


def commands() -> Registry[Command]:
    """The core commands plus every ``cave.commands`` entry point that loads (a broken plugin is reported, not fatal)."""
    found: Registry[Command] = Registry("command")
    for c in _core():
        found.add(c.name, c)
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        try:
            cmd = ep.load()
        except Exception as e:  # an extra that is not installed, a plugin with a bug
            cmd = _unavailable(ep.name, ep.value, e)
        found.add(ep.name, cmd, replace=True)
    return found


def _unavailable(name: str, where: str, error: Exception) -> Command:
    def configure(p: argparse.ArgumentParser) -> None:
        p.add_argument("args", nargs=argparse.REMAINDER)
        p.set_defaults(func=lambda a: _report(name, where, error))

    return Command(name, f"(unavailable: {type(error).__name__})", configure)


def _report(name: str, where: str, error: Exception) -> int:
    hint = "; install its extra, e.g. scripts/install.sh train" if isinstance(error, ImportError) else ""
    err(f"error: `cave {name}` cannot load ({where}): {type(error).__name__}: {error}{hint}")
    return EXIT_FAILED


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cave", description="LLM agents that act by writing Python in a persistent runtime."
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for _, cmd in commands().items():
        cmd.configure(sub.add_parser(cmd.name, help=cmd.help, description=cmd.help))
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and not argv[0].startswith("-"):
        cmd = commands().get(argv[0]) if argv[0] in commands() else None
        if cmd is not None:
            argv = [argv[0], *cmd.normalize(argv[1:])]
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    return int(args.func(args) or 0)
