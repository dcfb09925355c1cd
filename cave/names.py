"""Names users type in task and team files (backends, runtimes), checked with errors that say what to do."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# Built-in names, valid before their (lazily imported) modules have registered them.
KNOWN_BACKENDS = ("local", "openai", "scripted", "transformers", "vllm")
KNOWN_RUNTIMES = ("inprocess", "kernel")


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """A hint naming the closest known name, or "" when nothing is close.

    >>> did_you_mean("locl", ["local", "openai"])
    "did you mean 'local'? "
    >>> did_you_mean("zzz", ["local"])
    ''
    """
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"did you mean {close[0]!r}? " if close else ""


def unknown_field_fix(name: str, known: list[str]) -> str:
    """The fix for a misspelt or unknown field in a YAML file.

    >>> unknown_field_fix("max_step", ["max_steps", "seed"])
    'did you mean `max_steps`? known fields here: max_steps, seed'
    """
    close = difflib.get_close_matches(name, known, n=1)
    return (f"did you mean `{close[0]}`? " if close else "remove it; ") + "known fields here: " + ", ".join(known)


def known_backends() -> list[str]:
    """Built-in and registered backend names (importing the registry does not load a model)."""
    from cave.llm.base import BACKENDS

    return sorted(set(KNOWN_BACKENDS) | set(BACKENDS))


def check_backend(name: str) -> str:
    """``name`` if it is a known backend, else a ValueError with the closest name and the known ones."""
    known = known_backends()
    if name not in known:
        raise ValueError(f"unknown backend {name!r}; {did_you_mean(name, known)}use one of: {', '.join(known)}")
    return name


def check_runtime(name: str) -> str:
    """``name`` if it is a known runtime, else a ValueError listing the known ones."""
    from cave.runtimes.base import RUNTIMES

    known = sorted(set(KNOWN_RUNTIMES) | set(RUNTIMES))
    if name not in known:
        raise ValueError(f"unknown runtime {name!r}; use one of: {', '.join(known)}")
    return name
