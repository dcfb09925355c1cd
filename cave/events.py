"""What an agent run emits while it runs (``Agent.arun(..., on_event=...)`` and ``Agent.events``): for live
displays, logs and tests. Each event is a small slotted record; ``Event`` is their union."""

from __future__ import annotations

from dataclasses import dataclass

from cave.runtimes.base import Execution
from cave.trajectory import Step, Trajectory

__all__ = [
    "CodeStarted",
    "Compacted",
    "Event",
    "Observation",
    "RunError",
    "RunFinished",
    "RunStarted",
    "StepFinished",
    "StepStarted",
    "TextChunk",
]


@dataclass(slots=True)
class RunStarted:
    trajectory: Trajectory
    resumed: bool = False


@dataclass(slots=True)
class StepStarted:
    index: int
    max_steps: int


@dataclass(slots=True)
class TextChunk:
    """Streamed reply text (for live display)."""

    index: int
    text: str


@dataclass(slots=True)
class CodeStarted:
    index: int
    block: int
    code: str


@dataclass(slots=True)
class Observation:
    index: int
    block: int
    execution: Execution
    text: str  # what the model is shown for this block
    final: bool = False


@dataclass(slots=True)
class StepFinished:
    step: Step


@dataclass(slots=True)
class Compacted:
    """Old context was shrunk: ``how`` is "elide" (observations replaced by markers) or "summary"."""

    how: str
    tokens_before: int
    tokens_after: int
    step: Step | None = None  # the summarizing LLM call, when how == "summary"


@dataclass(slots=True)
class RunError:
    message: str
    exception: BaseException | None = None


@dataclass(slots=True)
class RunFinished:
    trajectory: Trajectory


Event = (
    RunStarted | StepStarted | TextChunk | CodeStarted | Observation | StepFinished | Compacted | RunError | RunFinished
)
