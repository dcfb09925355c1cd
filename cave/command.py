"""The record a package publishes to add a ``cave`` subcommand (entry-point group ``cave.commands``).

It lives at the bottom of the layers so that cave.training and cave.benchmarks can publish their commands
without importing the CLI, which sits above them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

__all__ = ["Command"]


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
