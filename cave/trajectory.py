"""The one record: a Trajectory is a list of Steps.

The CLI, the SDK, the benchmarks, the team orchestrator and the trainer all
produce and consume this record. A Step is one LLM call by one role, plus the
code it wrote and what running that code did.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from cave.llm.base import Usage
from cave.runtimes.base import Execution

__all__ = ["ANSWERED", "RunStatus", "Step", "Trajectory", "jsonable", "new_id"]


def new_id() -> str:
    return uuid.uuid4().hex[:12]


@dataclass
class Step:
    index: int  # 0-based position in the trajectory
    role: str = "agent"
    messages: list[dict[str, Any]] | None = None  # the prompt this call saw (None when stored by reference)
    completion: str = ""
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    code: str | None = None  # the code extracted from the completion, if any
    execution: Execution | None = None
    observation: str = ""  # what the agent was shown after running the code (truncated)
    started_at: float = field(default_factory=time.time)
    duration: float = 0.0  # seconds: LLM call + execution
    llm_duration: float = 0.0
    reward: float | None = None
    # For training: token ids and logprobs at sampling time (filled by backends that return them).
    prompt_token_ids: list[int] | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    run_id: str = ""  # the agent run this step belongs to
    team_run_id: str | None = None  # the team episode, when run inside a team
    kind: str = "action"  # "action" | "summary" | "compaction" | "verdict" | "route"
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["usage"] = self.usage.to_dict()
        d["execution"] = self.execution.to_dict() if self.execution else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Step:
        d = dict(d)
        d["usage"] = Usage(**(d.get("usage") or {}))
        if d.get("execution") is not None:
            d["execution"] = Execution.from_dict(d["execution"])
        return cls(**d)


RunStatus = Literal["running", "success", "unverified", "no_code", "max_steps", "failed_checks", "error", "interrupted"]
"""How a run ended: ``success`` (final_answer was called and the answer was verified: it passed the task's checks,
or the task's contract and the agreement of independent attempts; the answer is the live object), ``unverified``
(final_answer was called but nothing confirmed the answer: ``meta["unverified"]`` says why), ``no_code`` (it ended on
a reply without code, whose text is the answer), ``max_steps``, ``error`` (a backend or runtime failure),
``interrupted`` (Ctrl-C or a killed process), ``failed_checks`` (the answer given last failed the checks the
task declares: see cave.review.checks; or, where the caller verifies (a team's role), final_answer was called with an
answer that still has the problem it was held for, which ``meta["failed_checks"]`` names: see
cave.review.recovery.kept_problems; an agent that verifies sends such an answer to its attempts instead, and it ends
``success`` or ``unverified``); ``running`` while it runs."""

ANSWERED: tuple[RunStatus, ...] = ("success", "unverified", "no_code")  # the statuses that carry an answer


@dataclass
class Trajectory:
    run_id: str = field(default_factory=new_id)
    task: str = ""
    steps: list[Step] = field(default_factory=list)
    status: RunStatus = "running"
    final_answer: Any = None
    error: str | None = None
    reward: float | None = None
    team_run_id: str | None = None
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def usage(self) -> Usage:
        total = Usage()
        for s in self.steps:
            total = total + s.usage
        return total

    @property
    def called_final_answer(self) -> bool:
        """final_answer ended the run: a success, or an answer that kept a problem it was held for (whose status
        is ``failed_checks`` but whose ``final_answer`` is the live object all the same)."""
        return self.status in ("success", "unverified") or (
            self.status == "failed_checks" and bool(self.meta.get("kept_problems"))
        )

    def by_role(self, role: str) -> list[Step]:
        return [s for s in self.steps if s.role == role]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "task": self.task,
            "steps": [s.to_dict() for s in self.steps],
            "status": self.status,
            "final_answer": jsonable(self.final_answer),
            "error": self.error,
            "reward": self.reward,
            "team_run_id": self.team_run_id,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "usage": self.usage.to_dict(),
            "meta": self.meta,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trajectory:
        d = dict(d)
        d.pop("usage", None)
        d["steps"] = [Step.from_dict(s) for s in d.get("steps", [])]
        return cls(**d)


def jsonable(value: Any) -> Any:
    """A JSON-friendly stand-in for a final answer (DataFrames become a short repr)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    return repr(value)[:2000]
