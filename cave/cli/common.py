"""What every ``cave`` subcommand shares: the Command record, exit statuses, printing errors."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "Command", "err", "usage"]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


@dataclass(frozen=True)
class Command:
    """One ``cave`` subcommand. ``configure`` adds its arguments (or its own subcommands) to the parser it is
    given and sets ``func`` (``args -> exit status``) as a default. Packages publish theirs in the
    ``cave.commands`` entry-point group (``train = "cave.training.cli:COMMAND"``), so the CLI imports nothing above
    it until that command is used."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    # A command with subcommands may name one implied when the next word is none of them (and not an option):
    # ``cave train CONFIG`` means ``cave train run CONFIG``.
    subcommands: tuple[str, ...] = ()
    default: str | None = None

    def normalize(self, argv: list[str]) -> list[str]:
        """``argv`` after the command's name, with the default subcommand inserted where it is implied."""
        if self.default and argv and argv[0] not in self.subcommands and not argv[0].startswith("-"):
            return [self.default, *argv]
        return argv


def err(message: str) -> None:
    """A message on stderr, printed as is (no rich markup, so text from a file or a model cannot style it)."""
    from rich.console import Console

    from cave.terminal import safe

    Console(stderr=True, highlight=False, soft_wrap=True).print(safe(message), markup=False)


def usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return EXIT_BAD_INPUT
