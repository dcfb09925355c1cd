"""Helpers for errors that say what to do."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """A hint naming the closest known name, or "" when nothing is close.

    >>> did_you_mean("locl", ["local", "openai"])
    "did you mean 'local'? "
    >>> did_you_mean("zzz", ["local"])
    ''
    """
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"did you mean {close[0]!r}? " if close else ""
