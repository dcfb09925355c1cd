"""Verification: ``success`` only for an answer something confirmed. ``Agent`` takes these methods from
``Verifying``; they use its settings, its runtime and the task's contract.

An answer without the task's own checks is held while it breaks the task's contract (``cave.review.contract``,
at most ``CONTRACT_HOLDS`` times), then confirmed by agreement (``cave.review.agreement``): ``verify`` independent
attempts, each a fresh agent with the same settings in a sibling of the run's runtime holding the given inputs as
they were at the start, sampled with its own seed; a majority of those that answered must agree (an attempt whose
own answer the review did not accept cannot outvote one it accepted: it is run again). An answer
nothing confirmed ends ``unverified``, with the reason in ``meta["unverified"]`` and the attempts in
``meta["verify"]``. An answer the review held and the run kept (``meta["held_kept"]``: a hold is a suspicion read
from the code, not a check the task declared) goes to the same attempts: ``success`` when they agree, else
``unverified`` naming what it was held for (``meta["kept"]``); such an answer is read against the task's contract
first (one left standing at max_steps never reached it). An answer that selects rows by one spelling of a value its
column also holds in other spellings, sent again as it was after the note said so, is ``unverified`` without
attempts: the spellings are a fact of the data, the model's word is no evidence (nor can such an attempt outvote an
accepted answer). A team gets the same rule as a pattern (``vote``:
independent answers, the majority's wins).
Taking instead an answer the attempts agree on among themselves was measured on the held-out suite and left out
(of the 2 answers it replaced, both had been right; 1 was after).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from cave.given import derive_seed, in_process, private_copy
from cave.review import agreement
from cave.review import contract as task_contract
from cave.runtimes.base import Runtime
from cave.trajectory import Trajectory

__all__ = ["ATTEMPT_SETTINGS", "ATTEMPT_STEPS", "ATTEMPT_TEMPERATURE", "Verifying", "fresh_runtime"]


class Verifying:
    """The verification half of ``Agent`` (see the module docstring)."""

    verify: int | None
    review: Any
    contract: task_contract.Contract
    runtime: Runtime
    llm: Any
    seed: int | None
    temperature: float
    max_steps: int
    _given_at_start: dict[str, Any]
    _given_tables: Any
    _review_tables: Any
    checks: Any
    expect_calls: bool

    def _contract_hold(self, traj: Trajectory, value: Any) -> str | None:
        """The note that holds an answer breaking the task's contract (at most ``CONTRACT_HOLDS`` times a run); an
        answer that still breaks it after that is accepted, and left ``unverified``. The contract is part of the
        verification: where the caller verifies (``verify=None``: a team's role, whose text is the team's task and
        whose answer may be a verdict), it does not apply."""
        if self.review is False or self.verify is None:
            return None
        found = task_contract.problems(self.contract, value, self._review_tables())
        traj.meta.pop("contract_problems", None)
        if not found:
            return None
        held_before = any(b.get("held") not in (None, "contract") for s in traj.steps for b in s.meta.get("blocks", ()))
        if traj.meta.get("contract_holds", 0) >= task_contract.CONTRACT_HOLDS or held_before:
            # held enough, or a specific hold already spoke: the problems stand in the record, the answer unverified
            traj.meta["contract_problems"] = found
            return None
        traj.meta["contract_holds"] = traj.meta.get("contract_holds", 0) + 1
        return task_contract.note(found)

    def _confirms_kept(self, traj: Trajectory) -> bool:
        """Whether an answer the review held, and the run kept (sent again with the problem, or left standing when
        the run ended on prose or at max_steps), goes to verification. A hold is a suspicion read from the code
        and the answer, not a check the task declared: on the frozen held-out split 4 of the 7 answers ending
        this way were right. So the attempts decide, as for any answer: ``success`` when they agree, else
        ``unverified`` naming the kept problems. Without verification (a team's role), it stays ``failed_checks``."""
        return (
            traj.status == "failed_checks"
            and bool(traj.meta.get("held_kept"))
            and not self.checks
            and self.verify is not None
            and not self.expect_calls
        )

    async def _verify(self, traj: Trajectory) -> None:
        """``success`` only for a verified answer: one that the task's contract accepts and that a majority of
        ``verify`` independent attempts agree with; otherwise ``unverified``, with the reason."""
        before, t0 = traj.status, time.time()
        kept = _take_kept(traj)  # a held answer that kept its problem: verified like any other, the problem named
        if kept and not traj.meta.get("contract_problems"):
            # a held answer left standing (at max_steps, or on prose) never reached the contract: it is read now
            found = task_contract.problems(self.contract, traj.final_answer, self._review_tables())
            traj.meta.update({"contract_problems": found} if found else {})
        broken = traj.meta.get("contract_problems") or []
        facts = _spelling_confirmed(traj) + (
            ["it still breaks the task's contract: " + "; ".join(broken)] if broken else []
        )
        if facts:
            traj.meta["verify"] = {"n": 0, "status_before": before, "attempts": [], "agreed": 0, "seconds": 0.0}
            return _unverified(traj, kept + "; ".join(facts))
        if self.verify <= 0:
            return _unverified(traj, kept + "the task declares no checks and verification is off (verify=0)")
        outcome, votes, attempts, _ = await self._confirm(traj.task, traj.final_answer, self.verify, accepted=not kept)
        traj.meta["verify"] = {
            "n": self.verify,
            "status_before": before,
            "attempts": attempts,
            "agreed": sum(v is True for v in votes),
            "seconds": time.time() - t0,
        }
        if outcome != "verified":
            _unverified(traj, kept + _disagreement(votes))
        elif kept:
            traj.status = "success"  # the attempts confirmed the answer the hold doubted

    async def _confirm(
        self, task: str, answer: Any, n: int, *, accepted: bool = True
    ) -> tuple[str, list[bool | None], list[dict[str, Any]], list[Any]]:
        """Independent attempts at ``task`` until ``agreement.decide(votes, n)`` settles whether they confirm
        ``answer``: the outcome ('verified' or 'disagreed'), each attempt's vote (None: it reached no answer), its
        record (for ``meta["verify"]``) and its result.

        ``accepted``: the review accepted ``answer`` (nothing it was held for stands). Then an attempt that disagrees
        with it, and whose own answer the review did not accept (it kept what it was held for, or broke the task's
        contract), does not vote: it is run again, as one that reached no answer. (Such an attempt that agrees still
        confirms: the same content in a form the review doubted, e.g. the clinics' waits for "which clinics".) A
        development probe (groupings over a value in several spellings): runs that fixed the hold were outvoted by
        attempts that kept the split groups."""
        # the same answer in another form agrees: a name and the one-row table naming it, 0.153 and 15.3 (%), 3
        # and "March" for which month, 9 and "09:00" for which hour
        ordered = self.contract.kind == "list" or bool(self.contract.order)
        form = {
            "ordered": ordered,
            "kind": self.contract.kind,
            "share": agreement.asks_share(task),
            "period": agreement.asks_period(task),
        }
        votes: list[bool | None] = []
        records: list[dict[str, Any]] = []
        results: list[Any] = []
        outcome = None
        while outcome is None:
            t_attempt = time.time()
            other = await self._attempt(task, len(votes))
            answered = other.status in ANSWERED_BY_CODE
            unaccepted = _unaccepted(other.trajectory) if answered else []
            agrees = agreement.same(answer, other.answer, **form) if answered else None
            if agrees is False and accepted and unaccepted:
                agrees = None  # the review's doubt about the attempt outweighs its disagreement: run another
            votes.append(agrees)
            results.append(other)
            usage = other.usage
            records.append(
                {
                    "status": other.status,
                    "answer": agreement.shown(other.answer) if answered else None,
                    "agrees": agrees,
                    "steps": len(other.trajectory.steps),
                    "prompt_tokens": usage.prompt_tokens,
                    "completion_tokens": usage.completion_tokens,
                    "seconds": round(time.time() - t_attempt, 3),
                    **({"unaccepted": unaccepted} if unaccepted else {}),
                }
            )
            outcome = agreement.decide(votes, n)
        return outcome, votes, records, results

    async def _attempt(self, task: str, i: int) -> Any:
        """One independent attempt at ``task``: a fresh agent on the same model with the run's settings, in a
        sibling of the run's runtime holding the given inputs as they were at the start, sampled with its own seed."""
        runtime = await fresh_runtime(self.runtime, self._given_at_start)
        try:
            same = {name: getattr(self, name) for name in ATTEMPT_SETTINGS}  # the settings the run was made with
            seed = derive_seed(self.seed or 0, "verify", i)
            temperature = max(self.temperature, ATTEMPT_TEMPERATURE)
            same["max_steps"] = min(self.max_steps, ATTEMPT_STEPS)
            other = type(self)(self.llm, runtime, temperature=temperature, seed=seed, stream=False, verify=0, **same)
            return await other.arun(task)
        finally:
            await asyncio.to_thread(runtime.close)


# -- helpers -------------------------------------------------------------------------------------
ATTEMPT_SETTINGS = (  # what an independent attempt keeps of the agent it verifies (besides model and runtime)
    "max_steps max_tokens stop timeout skills instructions base_prompt prompt_budget role review outputs "
    "response_prefix insist_on_code expect_calls observation_limit max_continuations compact_at keep_recent "
    "retry_temperature"
).split()
ATTEMPT_TEMPERATURE = 0.3  # attempts sample (a greedy one would repeat the first) but stay near the model's best
ATTEMPT_STEPS = 4  # an attempt with no answer after this many steps does not vote (it is run again, n at most)
ANSWERED_BY_CODE = ("success", "unverified")  # attempts whose answer came from final_answer


SPELLING_CONFIRMED = (  # an answer sent again as it was after the spelling hold: the data says otherwise
    "it selects rows by one spelling of a value that its column also holds in other spellings (sent again as it "
    "was, as if the task meant that spelling)"
)


def _unaccepted(traj: Trajectory) -> list[str]:
    """What the review did not accept in an attempt's answer: the problems it kept after a hold, the task's
    contract it broke, or a selection by one spelling it confirmed; [] for an answer the review accepted."""
    return (
        list(traj.meta.get("kept") or []) + list(traj.meta.get("contract_problems") or []) + _spelling_confirmed(traj)
    )


def _spelling_confirmed(traj: Trajectory) -> list[str]:
    """[SPELLING_CONFIRMED] for an answer selected by one spelling and sent again as it was, else []."""
    return [SPELLING_CONFIRMED] if traj.meta.get("spelling_confirmed") else []


def _disagreement(votes: list[bool | None]) -> str:
    """Why the attempts did not confirm an answer, e.g. '1 of 1 independent attempts disagreed with it'."""
    answered = [v for v in votes if v is not None]
    why = f"{answered.count(False)} of {len(answered)} independent attempts disagreed with it"
    if len(answered) < len(votes):
        why += f" ({len(votes) - len(answered)} more reached no answer the review accepted)"
    return why if answered else f"no independent attempt reached an answer the review accepted ({len(votes)} tried)"


def _take_kept(traj: Trajectory) -> str:
    """For an answer that kept what the review held it for (``failed_checks`` with ``meta["held_kept"]``): its
    problems moved from ``meta["failed_checks"]`` to ``meta["kept"]``, its error cleared, and the opening of the
    reason it would stay ``unverified`` for; '' for any other answer."""
    if not traj.meta.pop("held_kept", False):
        return ""
    problems = traj.meta.pop("failed_checks", None) or []
    traj.meta["kept"] = problems
    traj.error = None
    return f"it kept what it was held for ({'; '.join(problems)}), and "


def _unverified(traj: Trajectory, why: str) -> None:
    traj.status = "unverified"
    traj.meta["unverified"] = why


async def fresh_runtime(runtime: Runtime, given: dict[str, Any] | None = None) -> Runtime:
    """A sibling of ``runtime`` (same kind and options, its own working directory) holding private copies of what
    was given to it, not what the code made: the given inputs as they were at the start (``given``: copies taken
    then, by name)."""
    fresh = runtime.sibling()
    astart = getattr(fresh, "astart", None)
    if astart is not None:
        await astart()
    for name, reg in runtime.registered.items():
        if name == "final_answer":
            continue
        if reg.kind == "function" or reg.host:
            fresh.inject_function(reg.value, name=name, description=reg.description)
        elif reg.kind == "type":
            fresh.inject_type(reg.value, description=reg.description, name=name)
        else:
            value = (given or {}).get(name, reg.value)
            private = private_copy(value) if in_process(fresh) else value  # a kernel gets its own copy anyway
            await asyncio.to_thread(fresh.inject, name, private, reg.description)
    return fresh
