"""What every ``cave`` subcommand shares: exit statuses, printing errors (and the Command record, cave.command)."""

from __future__ import annotations

import argparse
import sys

from cave.command import Command

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "Command", "err", "usage"]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


def err(message: str) -> None:
    """A message on stderr, printed as is (no rich markup, so text from a file or a model cannot style it)."""
    from rich.console import Console

    from cave.terminal import safe

    Console(stderr=True, highlight=False, soft_wrap=True).print(safe(message), markup=False)


def usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return EXIT_BAD_INPUT
