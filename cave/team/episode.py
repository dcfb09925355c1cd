"""One episode (``TeamRun``): its own runtimes and agents, the published slots, and the one Trajectory
every role writes to."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cave.agent import Agent, RunStarted, StepFinished
from cave.given import derive_seed, in_process, private_copy
from cave.runtimes.base import Runtime, create_runtime
from cave.team.decisions import PUBLISHED_VAR, make_route, parse_route, parse_verdict, publish, summarize, verdict
from cave.team.patterns import Outcome
from cave.team.results import (
    Handoff,
    RoleEvent,
    RoleFinished,
    RoleResult,
    RoleStarted,
    TeamEvent,
    TeamFinished,
    TeamResult,
    TeamStarted,
)
from cave.trajectory import Step, Trajectory, new_id

__all__ = ["Slot", "TeamRun", "derive_seed", "inject_into", "private_copy", "retrieve_from"]

if TYPE_CHECKING:
    from cave.team.team import Team


@dataclass
class Slot:
    name: str
    value: Any
    owner: str  # the role that published it ("host" for the caller)
    description: str
    version: int
    runtime: Runtime | None  # where it lives; None when the host published it


class TeamRun:
    """One episode: its own runtimes and agents, the slots, and the one Trajectory every role writes to.

    Custom patterns receive this object: ``await team.call(role, text)``, ``team.publish(...)``,
    ``team.slots``, ``team.retrieve(role, name)``, ``team.role_names``, ``team.options``.
    """

    def __init__(
        self,
        team: Team,
        task: str,
        *,
        seed: int | None = None,
        inputs: Mapping[str, Any] | None = None,
        on_event: Callable[[TeamEvent], None] | None = None,
        team_run_id: str | None = None,
    ) -> None:
        self.team = team
        self.task = task
        self.seed = seed if seed is not None else team.spec.seed
        self.inputs = dict(inputs or {})
        self.on_event = on_event
        self.id = team_run_id or new_id()
        self.trajectory = Trajectory(run_id=self.id, task=task, team_run_id=self.id)
        self.trajectory.meta.update(
            team=team.spec.name,
            pattern=team.spec.pattern.name,
            roles=team.role_names,
            seed=self.seed,
            calls=[],
            messages=[],
        )
        self.runtimes: dict[str, Runtime] = {}
        self.agents: dict[str, Agent] = {}
        self.slots: dict[str, Slot] = {}
        self.current: tuple[str, int] | None = None  # (role, turn) running now, for error reports
        self.last: tuple[str, int] | None = None  # the latest role turn started
        self._calls: dict[str, int] = {}
        self._shared: Runtime | None = None
        self._seen: dict[tuple[int, str], int] = {}  # (runtime id, name) -> publish sequence already taken
        self._delivered: dict[tuple[int, str], int] = {}  # (runtime id, slot) -> slot version injected
        self._version = 0
        self._role_time = 0.0
        self._setup_time = 0.0

    # -- what custom patterns use ---------------------------------------------------------------
    @property
    def role_names(self) -> list[str]:
        return self.team.role_names

    @property
    def options(self) -> dict[str, Any]:
        return dict(getattr(self.team.pattern.options, "options", {}) or {})

    def emit(self, event: TeamEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)

    def message(self, sender: str, recipient: str, text: str) -> None:
        """Record a text message between roles (kept in trajectory.meta["messages"])."""
        self.trajectory.meta["messages"].append(
            {"from": sender, "to": recipient, "text": text, "at": len(self.trajectory.steps)}
        )

    def publish(
        self, name: str, value: Any, description: str = "", *, owner: str = "host", runtime: Runtime | None = None
    ) -> None:
        """Put ``value`` in slot ``name``; roles get it injected before their next turn."""
        self._version += 1
        self.slots[name] = Slot(name, value, owner, description, self._version, runtime)

    async def retrieve(self, role: str, name: str) -> Any:
        """A variable from ``role``'s runtime (the live object in-process, a copy from a kernel)."""
        return await retrieve_from(await self.runtime(role), name)

    async def call(
        self, role: str, text: str, *, fresh: bool = False, sender: str = "user", seed: int | None = None
    ) -> RoleResult:
        """One turn of ``role`` on ``text``. Never raises for the role's own failure: see ``RoleResult.status``.
        ``fresh``: the role reads only ``text`` (not its earlier turns); ``seed``: sample this turn with its own
        seed (independent answers to the same text; by default a role samples every turn with one seed)."""
        spec = self.team.role(role)
        t_setup = time.perf_counter()
        agent = await self._agent(role)
        await self._deliver(role)
        self._setup_time += time.perf_counter() - t_setup
        if fresh:
            agent.history = []
        if seed is not None:
            agent.seed = seed
        n = self._calls[role] = self._calls.get(role, 0) + 1
        self.current = self.last = (role, n)
        self.message(sender, role, text)
        self.emit(RoleStarted(role, n, text))
        steps: list[Step] = []
        box: dict[str, Trajectory] = {}
        decision = self.team.decision(role)
        choices = self.team.pattern.route_choices(role) or []

        def on_agent_event(ev: Any) -> None:
            if isinstance(ev, RunStarted):
                ev.trajectory.team_run_id = self.id  # the agent tags its steps with it
                box["t"] = ev.trajectory
            elif isinstance(ev, StepFinished):
                ev = StepFinished(self._add_step(ev.step, role, n, box.get("t"), decision, choices))
                steps.append(ev.step)
            self.emit(RoleEvent(role, n, ev))

        t0 = time.perf_counter()
        try:
            coro = agent.arun(text, on_event=on_agent_event)
            res = await (asyncio.wait_for(coro, spec.timeout_s) if spec.timeout_s else coro)
            answer, status, error = res.answer, res.status, res.trajectory.error
        except TimeoutError:
            answer, status, error = None, "timeout", f"role {role!r} ran past its turn limit of {spec.timeout_s:g} s"
            if steps:  # the turn gave no valid output: its last call carries the format penalty
                steps[-1].meta["format_ok"] = False
        duration = time.perf_counter() - t0
        self._role_time += duration
        result = RoleResult(role, n, answer, status, error, steps, duration=duration)
        self._decide(result, decision, choices)
        t_pub = time.perf_counter()
        result.published = await self._collect(role, result)
        self._setup_time += time.perf_counter() - t_pub
        self.trajectory.meta["calls"].append(result.record())
        self.current = None
        self.emit(RoleFinished(result))
        return result

    async def restart(self, role: str) -> None:
        """Start ``role`` over: a new runtime holding the episode's inputs (and the slots it reads) and a new agent
        at its next call, so that its next answer owes nothing to its earlier turns. A runtime the role shares with
        others is kept."""
        self.agents.pop(role, None)
        rt = self.runtimes.get(role)
        if rt is None or rt is self._shared:
            return
        del self.runtimes[role]
        self._delivered = {k: v for k, v in self._delivered.items() if k[0] != id(rt)}
        self._seen = {k: v for k, v in self._seen.items() if k[0] != id(rt)}
        try:
            await asyncio.to_thread(rt.close)
        except Exception:  # closing is best-effort; a dead kernel is already closed
            pass

    # -- internals -----------------------------------------------------------------------------
    async def execute(self, *, keep_runtimes: bool = False) -> TeamResult:
        self.emit(TeamStarted(self.trajectory))
        t0 = time.perf_counter()
        try:
            coro = self.team.pattern.run(self, self.task)
            limit = self.team.spec.timeout_s
            outcome = await (asyncio.wait_for(coro, limit) if limit else coro)
        except TimeoutError:
            outcome = Outcome(
                None, "timeout", f"the episode ran past its limit of {self.team.spec.timeout_s:g} s{self._where()}"
            )
        except Exception as e:  # a runtime that does not start, a bug in a pattern: the episode ends, reported
            self.trajectory.meta["traceback"] = traceback.format_exc(limit=-8)
            outcome = Outcome(None, "error", f"{type(e).__name__}: {e}{self._where()}")
        except BaseException:
            self._close_runtimes()
            raise
        elapsed = time.perf_counter() - t0
        traj = self.trajectory
        traj.status, traj.final_answer, traj.error = outcome.status, outcome.answer, outcome.error
        traj.finished_at = time.time()
        hops = len(traj.meta["calls"])
        overhead = max(0.0, elapsed - self._role_time - self._setup_time)
        traj.meta["timing"] = {
            "episode_s": elapsed,
            "roles_s": self._role_time,
            "setup_s": self._setup_time,
            "turns": hops,
            "overhead_per_turn_ms": overhead / hops * 1000 if hops else 0.0,
        }
        traj.meta["slots"] = {
            s.name: {"owner": s.owner, "description": s.description, "version": s.version} for s in self.slots.values()
        }
        result = TeamResult(outcome.answer, outcome.status, traj, {s.name: s.value for s in self.slots.values()})
        if keep_runtimes:
            result.runtimes = dict(self.runtimes)
        else:
            self._close_runtimes()
        self.emit(TeamFinished(result))
        return result

    def _where(self) -> str:
        if self.current is None:
            return ""
        step = self.trajectory.steps[-1].index if self.trajectory.steps else None
        return f" (in role {self.current[0]!r} turn {self.current[1]}, last step {step})"

    def _close_runtimes(self) -> None:
        for rt in {id(r): r for r in self.runtimes.values()}.values():
            try:
                rt.close()
            except Exception:  # closing is best-effort; a dead kernel is already closed
                pass

    async def runtime(self, role: str) -> Runtime:
        if role in self.runtimes:
            return self.runtimes[role]
        spec, team_rt = self.team.role(role).runtime, self.team.spec.runtime
        if spec.mode == "shared" and self._shared is not None:
            self.runtimes[role] = self._shared
            return self._shared
        kind = spec.kind or team_rt.kind
        options = {**team_rt.options, **spec.options, "timeout": spec.timeout or team_rt.timeout}
        rt = create_runtime(kind, **options)
        self.runtimes[role] = rt  # closed with the episode even if starting it fails
        astart = getattr(rt, "astart", None)
        if astart is not None:  # start a kernel now, off the event loop's critical path
            await astart()
        for name, value in self.inputs.items():
            if callable(value) and not isinstance(value, type):
                rt.inject_function(value, name=name)
            else:
                private = value if self.team.spec.share_inputs or not in_process(rt) else private_copy(value)
                await inject_into(rt, name, private, None)
        if spec.mode == "shared":
            self._shared = rt
        self.runtimes[role] = rt
        return rt

    async def _agent(self, role: str) -> Agent:
        if role in self.agents:
            return self.agents[role]
        spec, team = self.team.role(role), self.team
        rt = await self.runtime(role)
        agent = Agent(
            model=team.backend(team.backend_key(role)),
            runtime=rt,
            max_steps=spec.max_steps,
            max_tokens=spec.sampling.max_tokens or team.spec.max_tokens,
            temperature=spec.sampling.temperature if spec.sampling.temperature is not None else team.spec.temperature,
            seed=spec.sampling.seed if spec.sampling.seed is not None else derive_seed(self.seed, role),
            timeout=spec.runtime.timeout or team.spec.runtime.timeout,
            skills=team.skills(role),
            instructions=team.instructions(role),
            role=role,
            stream=self.on_event is not None,  # text deltas only matter to a live display
            response_prefix=spec.sampling.response_prefix,
            insist_on_code=spec.output.kind == "answer",  # a text role's plain reply is its output
            verify=None,  # a role's answer is verified by the team's pattern (a verifier role, a reward), not here
        )
        decision = team.decision(role)
        if decision == "verdict":
            rt.inject_function(verdict, description="end your turn with your decision on the answer")
        elif decision == "route":
            choices = team.pattern.route_choices(role) or []
            descriptions = {c: team.roles[c].description for c in choices if c in team.roles}
            rt.inject_function(
                make_route(choices, descriptions), name="route", description="end your turn: who acts next"
            )
        rt.inject_function(publish, description="hand an object to the roles after you")
        self.agents[role] = agent
        return agent

    def _add_step(
        self, step: Step, role: str, call: int, agent_traj: Trajectory | None, decision: str | None, choices: list[str]
    ) -> Step:
        """Copy an agent's step into the team trajectory: one index sequence, tagged with role and team run."""
        meta = {**step.meta, "call": call, "agent_run_id": step.run_id}
        kind = step.kind
        output = self.team.role(role).output.kind
        if kind == "action":  # every model call is judged on its own (Dr. MAS: the penalty is per call)
            meta["format_ok"] = call_format_ok(step, output)
        ended = agent_traj is not None and agent_traj.status != "running"
        if decision and ended:  # the step that should carry the structured decision
            value = agent_traj.final_answer if agent_traj.called_final_answer else None
            parsed = parse_verdict(value) if decision == "verdict" else parse_route(value, choices)
            meta["format_ok"] = meta.get("format_ok", True) and parsed is not None
            if parsed is not None and kind == "action":
                kind = decision
        elif ended and output == "answer":  # the contract asks for final_answer()
            meta["format_ok"] = meta.get("format_ok", True) and agent_traj.called_final_answer
        copy = dataclasses.replace(
            step, index=len(self.trajectory.steps), role=role, run_id=self.id, team_run_id=self.id, kind=kind, meta=meta
        )
        self.trajectory.steps.append(copy)
        return copy

    def _decide(self, result: RoleResult, decision: str | None, choices: list[str]) -> None:
        if decision is None:
            return
        if result.status != "success":
            result.decision_error = f"missing: the turn ended with status {result.status!r} without calling {'verdict' if decision == 'verdict' else 'route'}()"
            return
        if decision == "verdict":
            result.verdict = parse_verdict(result.answer)
        else:
            result.route = parse_route(result.answer, choices)
        if result.verdict is None and result.route is None:
            shown = repr(result.answer)[:200] if isinstance(result.answer, str) else summarize(result.answer, 200)
            result.decision_error = f"malformed: final value {shown} is not a {decision}"

    async def _collect(self, role: str, result: RoleResult) -> list[str]:
        """Take what the role published (publish() calls and declared outputs) from its runtime into slots."""
        rt = self.runtimes[role]
        spec = self.team.role(role)
        names: list[str] = []
        try:
            registry = await retrieve_from(rt, PUBLISHED_VAR)
        except KeyError:
            registry = {}
        for name, (seq, description) in dict(registry).items():
            if self._seen.get((id(rt), name)) == seq:
                continue
            self._seen[(id(rt), name)] = seq
            self.publish(name, await retrieve_from(rt, name), description, owner=role, runtime=rt)
            names.append(name)
        missing = []
        for name, description in spec.output.publishes.items():
            if name in names:
                continue
            try:
                self.publish(name, await retrieve_from(rt, name), description, owner=role, runtime=rt)
                names.append(name)
            except KeyError:
                missing.append(name)
        if len(missing) == 1 and list(spec.output.publishes) == missing and result.status == "success":
            # One declared output, not left in the session, but final_answer(value) was called: the
            # value is the result the contract asks for. Bind it under the declared name and hand it on.
            name = missing.pop()
            await inject_into(rt, name, result.answer, spec.output.publishes[name])
            self.publish(name, result.answer, spec.output.publishes[name], owner=role, runtime=rt)
            names.append(name)
            self.trajectory.meta.setdefault("outputs_from_answer", []).append(
                {"role": role, "call": result.call, "name": name}
            )
        if missing:
            if result.steps:
                result.steps[-1].meta["format_ok"] = False
            if result.ok:  # the contract was not met: the pattern treats the turn as failed
                result.status = "missing_output"
                result.error = (
                    f"the turn ended without {', '.join(missing)}: leave the result in a variable of that name"
                )
            result.decision_error = (
                result.decision_error + "; " if result.decision_error else ""
            ) + f"declared outputs not found: {', '.join(missing)}"
            self.trajectory.meta.setdefault("missing_outputs", []).append(
                {"role": role, "call": result.call, "names": missing}
            )
        return names

    async def _deliver(self, role: str) -> None:
        """Inject the slots this role reads and has not got yet (same runtime: nothing to move)."""
        rt = self.runtimes[role]
        reads = self.team.role(role).reads
        for slot in list(self.slots.values()):
            if (reads is not None and slot.name not in reads) or slot.runtime is rt:
                continue
            key = (id(rt), slot.name)
            if self._delivered.get(key) == slot.version:
                continue
            t0 = time.perf_counter()
            note = f"handed over by {slot.owner}" + (f": {slot.description}" if slot.description else "")
            await inject_into(rt, slot.name, slot.value, note)
            self._delivered[key] = slot.version
            self.emit(Handoff(slot.name, slot.owner, role, time.perf_counter() - t0))


async def retrieve_from(rt: Runtime, name: str) -> Any:
    """``rt.retrieve(name)`` without blocking the event loop (a kernel's async verb, or a worker thread)."""
    if in_process(rt):
        return rt.retrieve(name)
    aretrieve = getattr(rt, "aretrieve", None)  # the kernel runtime's async verbs never block the loop
    return await aretrieve(name) if aretrieve else await asyncio.to_thread(rt.retrieve, name)


async def inject_into(rt: Runtime, name: str, value: Any, description: str | None) -> None:
    """``rt.inject(...)`` without blocking the event loop."""
    if in_process(rt):
        rt.inject(name, value, description)
        return
    ainject = getattr(rt, "ainject", None)
    await (ainject(name, value, description) if ainject else asyncio.to_thread(rt.inject, name, value, description))


def call_format_ok(step: Step, output: str) -> bool:
    """Whether one model call of a role has a valid format, for the trainer's invalid-format penalty.

    A ``text`` role's call is valid when it says something. Every other role acts through code: its call is valid
    when the reply has a ```python block and every block parses (a reply in prose, or a cell with a SyntaxError,
    is not). Whether the turn's *result* meets the role's contract (final_answer, verdict, route) is judged on
    the call that ends the turn, on top of this.
    """
    if output == "text":
        return bool(step.completion.strip())
    blocks = step.meta.get("blocks") or []
    if not blocks:
        return False
    return not any(((b.get("execution") or {}).get("error") or {}).get("type") == "SyntaxError" for b in blocks)
