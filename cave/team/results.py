"""What an episode returns (``RoleResult``, ``TeamResult``) and the events it emits while it runs."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from cave.runtimes.base import Runtime
from cave.team.decisions import Route, Verdict, summarize
from cave.trajectory import RunStatus, Step, Trajectory

__all__ = [
    "Handoff",
    "RoleEvent",
    "RoleFinished",
    "RoleResult",
    "RoleStarted",
    "RoleStatus",
    "TeamEvent",
    "TeamFinished",
    "TeamResult",
    "TeamStarted",
    "TeamStatus",
]

RoleStatus = RunStatus | Literal["timeout"]  # a role's turn: its agent's run status, or its turn timed out
# how an episode ended; ``unverified``: an answer nothing confirmed (a vote without a majority), ``meta["unverified"]``
TeamStatus = Literal["success", "unverified", "max_rounds", "max_hops", "error", "timeout"]


@dataclass
class RoleResult:
    """One turn of one role."""

    role: str
    call: int  # 1-based turn number of this role in the episode
    answer: Any
    status: RoleStatus
    error: str | None = None
    steps: list[Step] = field(default_factory=list)  # this turn's steps as stored in the team trajectory
    verdict: Verdict | None = None
    route: Route | None = None
    decision_error: str | None = None  # why a deciding role's decision is missing or malformed
    published: list[str] = field(default_factory=list)
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status in ("success", "no_code")

    def record(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "call": self.call,
            "status": self.status,
            "error": self.error,
            "steps": [s.index for s in self.steps],
            "answer": summarize(self.answer, 300),
            "decision": dataclasses.asdict(self.verdict or self.route) if (self.verdict or self.route) else None,
            "decision_error": self.decision_error,
            "published": self.published,
            "duration": round(self.duration, 6),
        }


@dataclass
class TeamResult:
    answer: Any
    status: TeamStatus
    trajectory: Trajectory
    slots: dict[str, Any] = field(default_factory=dict)  # published objects: the live objects when in-process
    runtimes: dict[str, Runtime] | None = None  # kept only with keep_runtimes=True; close() them

    @property
    def ok(self) -> bool:
        return self.status == "success"

    @property
    def team_run_id(self) -> str:
        return self.trajectory.team_run_id or self.trajectory.run_id

    @property
    def usage(self) -> Any:
        return self.trajectory.usage

    def close(self) -> None:
        for rt in {id(r): r for r in (self.runtimes or {}).values()}.values():
            rt.close()
        self.runtimes = None

    def portable(self) -> TeamResult:
        """A copy that can cross a process boundary (Ray): no runtimes, unpicklable slots replaced by a note."""
        import cloudpickle

        slots = {}
        for name, value in self.slots.items():
            try:
                cloudpickle.dumps(value)
                slots[name] = value
            except Exception as e:
                slots[name] = f"<not transferable: {type(value).__name__}: {e}>"
        return TeamResult(self.answer, self.status, self.trajectory, slots, None)


@dataclass(slots=True)
class TeamStarted:
    trajectory: Trajectory


@dataclass(slots=True)
class RoleStarted:
    role: str
    call: int
    task: str


@dataclass(slots=True)
class RoleEvent:
    """An agent event of one role's turn (StepFinished carries the step as stored in the team trajectory)."""

    role: str
    call: int
    event: Any


@dataclass(slots=True)
class RoleFinished:
    result: RoleResult


@dataclass(slots=True)
class Handoff:
    slot: str
    source: str
    target: str
    seconds: float


@dataclass(slots=True)
class TeamFinished:
    result: TeamResult


TeamEvent = TeamStarted | RoleStarted | RoleEvent | RoleFinished | Handoff | TeamFinished
