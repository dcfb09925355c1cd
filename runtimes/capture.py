"""The output of the cell that is running: its bounded stdout/stderr, and the notes already written in it.

``CAPTURE`` holds the running cell's capture in the cell's context (thread or asyncio task); ``first_note`` lets the
audits (``coercion``, ``matches``) write each note once per cell. Its own module so that the cell runner
(``cells``) and the audits it calls can both import it without importing each other.
"""

from __future__ import annotations

import contextvars
import time
from typing import Any

from cave.runtimes.base import ExecError, Execution

__all__ = ["CAPTURE", "Capture", "first_note", "may_note"]


class Capture:
    """The stdout/stderr of one running cell, bounded to ``limit`` characters in all."""

    __slots__ = ("parts", "size", "limit", "dropped", "noted")

    def __init__(self, limit: int) -> None:
        self.parts: tuple[list[str], list[str]] = ([], [])
        self.size = 0
        self.limit = limit
        self.dropped = [0, 0]
        self.noted: set[Any] = set()  # notes already written in this cell (first_note)

    def write(self, which: int, s: str) -> int:
        n = len(s)
        if self.size + n <= self.limit:
            self.parts[which].append(s)
            self.size += n
        else:
            room = max(0, self.limit - self.size)
            if room:
                self.parts[which].append(s[:room])
                self.size += room
            self.dropped[which] += n - room
        return n

    def text(self, which: int) -> str:
        text = "".join(self.parts[which])
        if self.dropped[which]:
            text += f"\n[... {self.dropped[which]} more characters of output not kept]\n"
        return text

    def execution(self, result: str | None, error: ExecError | None, t0: float, timed_out: bool) -> Execution:
        """The cell's Execution: its captured output, ``result``/``error``, and the time since ``t0``."""
        return Execution(
            stdout=self.text(0),
            stderr=self.text(1),
            result=result,
            error=error,
            duration=time.perf_counter() - t0,
            timed_out=timed_out,
        )


CAPTURE: contextvars.ContextVar[Capture | None] = contextvars.ContextVar("cave_capture", default=None)


def may_note(line: int, label: Any) -> bool:
    """Whether ``first_note`` would let a note through, without taking its turn: an audit whose check costs work
    (counting a column's values) asks first, and skips the check where its note could not be written anyway."""
    cap = CAPTURE.get()
    return cap is not None and _note_key(line, label) not in cap.noted


def first_note(line: int, label: Any) -> bool:
    """Whether the audits (coercion, matches) may write their note for this call site and column: once per cell
    (a loop or .apply calls them once per value), and never outside a cell (a function carried out of the runtime
    and called by its host has no one to tell)."""
    if not may_note(line, label):
        return False
    CAPTURE.get().noted.add(_note_key(line, label))  # type: ignore[union-attr]
    return True


def _note_key(line: int, label: Any) -> tuple[int, Any]:
    return (line, label if isinstance(label, str | int) else None)
