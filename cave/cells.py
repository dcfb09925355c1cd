"""One block of the model's code, run: the ``final_answer`` signal that ends a run, and what a step's blocks did.

A kernel in another process unpickles ``final_answer`` by importing this module, so it imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from typing import Any

from cave.runtimes.base import ExecError, Execution

__all__ = ["FINAL_VAR", "Cell", "Cells", "FinalAnswer", "final_answer", "is_final_error"]


# -- the final_answer signal -------------------------------------------------------------------
class FinalAnswer(BaseException):  # noqa: N818 - a signal, not an error
    """Raised by ``final_answer``. A BaseException so ``except Exception`` in the model's code cannot swallow it."""

    def __init__(self, value: Any = None) -> None:
        super().__init__("final_answer() was called")
        self.value = value


FINAL_VAR = "_final_answer"


def final_answer(value: Any) -> None:
    """Finish the task with ``value``: the result object itself (a DataFrame, a number, a list), not a description."""
    # Stash the value in the namespace of the code that called us (the runtime's globals), so a
    # host on the far side of a process boundary can retrieve it even if only the error type crosses.
    sys._getframe(1).f_globals[FINAL_VAR] = value
    raise FinalAnswer(value)


def is_final_error(error: ExecError | None) -> bool:
    """Whether a cell's error is the final_answer signal (its type name is all that crosses a process boundary)."""
    return error is not None and error.type.rsplit(".", 1)[-1] == "FinalAnswer"


@dataclass
class Cell:
    """One code block run in the runtime."""

    execution: Execution
    final: bool  # final_answer was called
    value: Any  # what final_answer was called with (the live object)
    notes: list[str]  # what guard_code changed before it ran (e.g. a reassigned input that was skipped)
    code: str = ""  # the block as the model wrote it


@dataclass
class Cells:
    """What one step's blocks did, in order (filled by ``Agent._run_blocks``)."""

    formatted: list[str] = dataclasses.field(default_factory=list)  # each block's observation text
    records: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # each block's record (step.meta)
    executions: list[Execution] = dataclasses.field(default_factory=list)
    skipped: int = 0  # blocks not run after a failing one
