"""cave: LLM agents that act by writing Python in a persistent runtime.

    from cave import Agent, Runtime
    agent = Agent(model="local", runtime="inprocess")
    agent.runtime.inject("sales", df)
    result = agent.run("Total revenue by region as a DataFrame")
    result.answer, result.status, result.trajectory

Names are imported on first use, so ``import cave`` stays cheap (a kernel that
unpickles ``final_answer`` imports ``cave.cells`` and nothing heavy).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Agent": "cave.agent",
    "RunResult": "cave.agent",
    "FinalAnswer": "cave.cells",
    "final_answer": "cave.cells",
    "Runtime": "cave.sdk",
    "run_task": "cave.sdk",
    "arun_task": "cave.sdk",
    "Scripted": "cave.llm.base",
    "LLM": "cave.llm.base",
    "Completion": "cave.llm.base",
    "Usage": "cave.llm.base",
    "create_backend": "cave.llm.base",
    "Trajectory": "cave.trajectory",
    "Step": "cave.trajectory",
    "Store": "cave.store",
    "load_task": "cave.task",
    "TaskError": "cave.task",
}

__all__ = [
    "LLM",
    "Agent",
    "Completion",
    "FinalAnswer",
    "RunResult",
    "Runtime",
    "Scripted",
    "Step",
    "Store",
    "TaskError",
    "Trajectory",
    "Usage",
    "arun_task",
    "create_backend",
    "final_answer",
    "load_task",
    "run_task",
]

if TYPE_CHECKING:
    from cave.agent import Agent, RunResult
    from cave.cells import FinalAnswer, final_answer
    from cave.llm.base import LLM, Completion, Scripted, Usage, create_backend
    from cave.sdk import Runtime, arun_task, run_task
    from cave.store import Store
    from cave.task import TaskError, load_task
    from cave.trajectory import Step, Trajectory


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of a package whose names are imported on first use: ``exports`` maps each name to
    the module that defines it; once imported, a name is kept in the package."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__


__getattr__ = lazy_exports(__name__, _EXPORTS)
