"""Routing patterns, registered by name (``@register_pattern("loop")``): sequential, loop, router, vote, custom."""

from __future__ import annotations

import asyncio
import dataclasses
import traceback
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import ConfigDict, Field, field_validator

from cave.config import ConfigModel
from cave.registry import Registry, did_you_mean
from cave.team.decisions import Route, Verdict, summarize
from cave.team.errors import TeamError
from cave.team.results import RoleResult, TeamStatus

__all__ = [
    "Custom",
    "CustomOptions",
    "FINISH",
    "Loop",
    "LoopOptions",
    "Outcome",
    "PATTERNS",
    "Pattern",
    "PatternOptions",
    "Result",
    "Router",
    "RouterOptions",
    "Sequential",
    "SequentialOptions",
    "Vote",
    "VoteOptions",
    "register_pattern",
]

if TYPE_CHECKING:
    from cave.team.episode import TeamRun
    from cave.team.specs import RoleSpec
    from cave.team.team import Team


class PatternOptions(ConfigModel):
    """Options every pattern has."""

    model_config = ConfigDict(extra="forbid")

    on_role_error: Literal["fail", "skip"] = Field(
        "fail", description="a role that fails (backend error, max steps, timeout): fail the episode, or skip its turn"
    )


@dataclass
class Outcome:
    """What a pattern (or a custom ``run``) ends with. A custom run may also return a bare answer."""

    answer: Any = None
    status: TeamStatus = "success"
    error: str | None = None


Result = Outcome  # the name the custom-pattern contract uses: ``async def run(team, task) -> Result``

PATTERNS: Registry[type[Pattern]] = Registry("pattern")


def register_pattern(name: str) -> Callable[[type[Pattern]], type[Pattern]]:
    """Class decorator: make a routing pattern available by name (``pattern: NAME`` in team files)."""
    return PATTERNS.register(name, name_attr="name")


class Pattern:
    """A routing pattern: validated options, a static check against the team's roles, and ``run``."""

    name: ClassVar[str] = "pattern"
    Options: ClassVar[type[PatternOptions]] = PatternOptions
    role_options: ClassVar[tuple[str, ...]] = ()  # options naming roles (one name or a list), checked by ``check``

    def __init__(self, options: PatternOptions, team: Team) -> None:
        self.options = options
        self.team = team

    @classmethod
    def check(cls, options: Any, roles: Sequence[RoleSpec]) -> list[tuple[str, str]]:
        """Problems as (option, message): each option in ``role_options`` that names a role the team does not
        have (a pattern adds its own checks on top)."""
        problems: list[tuple[str, str]] = []
        for option in cls.role_options:
            value = getattr(options, option)
            problems += _check_names(option, [value] if isinstance(value, str) else value, roles)
        return problems

    def decision(self, role: str) -> Literal["verdict", "route"] | None:
        """The structured decision ``role`` makes in this pattern (its runtime gets the matching function)."""
        return None

    def route_choices(self, role: str) -> list[str] | None:
        return None

    async def run(self, team: TeamRun, task: str) -> Outcome:
        raise NotImplementedError

    def failed(self, result: RoleResult) -> Outcome | None:
        """The episode's end when ``result`` failed and on_role_error is 'fail'; None to go on (skip)."""
        if result.ok or self.options.on_role_error == "skip":
            return None
        return Outcome(
            None,
            "error",
            f"role {result.role!r} (turn {result.call}) ended with status {result.status!r}: {result.error or 'no answer'}",
        )


def _unknown_role(option: str, name: str, roles: Sequence[RoleSpec]) -> tuple[str, str]:
    names = [r.name for r in roles]
    hint = did_you_mean(name, names)
    return option, f"unknown role {name!r}; {hint}the team's roles: {', '.join(names)}"


def _check_names(option: str, names: Iterable[str] | None, roles: Sequence[RoleSpec]) -> list[tuple[str, str]]:
    known = {r.name for r in roles}
    return [_unknown_role(option, n, roles) for n in (names or []) if n not in known]


def _log(team: TeamRun, key: str, entry: dict[str, Any]) -> None:
    """Add ``entry`` to the list ``key`` of the episode's trajectory meta (its verdicts, its routes, ...)."""
    team.trajectory.meta.setdefault(key, []).append(entry)


# -- sequential --------------------------------------------------------------------------------
class SequentialOptions(PatternOptions):
    order: list[str] | None = Field(None, description="roles in turn order (default: the team's order)")
    pass_outputs: Literal["all", "previous"] = Field("all", description="which earlier answers each role reads")


@register_pattern("sequential")
class Sequential(Pattern):
    """A pipeline: each role in turn (planner -> coder -> reviewer), reading the earlier roles' answers."""

    Options = SequentialOptions
    options: SequentialOptions
    role_options = ("order",)

    async def run(self, team: TeamRun, task: str) -> Outcome:
        order = self.options.order or team.role_names
        done: list[tuple[str, Any]] = []
        answer: Any = None
        for role in order:
            shown = done if self.options.pass_outputs == "all" else done[-1:]
            text = task
            if shown:
                text += "\n\nWork so far by the other roles:\n" + "\n".join(f"## {r}\n{summarize(a)}" for r, a in shown)
            result = await team.call(role, text, sender=done[-1][0] if done else "user")
            if (end := self.failed(result)) is not None:
                return end
            if not result.ok:
                continue
            if result.verdict is not None:  # a reviewer's verdict is recorded; the answer stays the work's
                _log(team, "verdicts", dataclasses.asdict(result.verdict) | {"role": role})
            else:
                answer = result.answer
            done.append((role, result.answer))
        if not done:
            return Outcome(None, "error", f"no role of {', '.join(order)} finished its turn")
        return Outcome(answer, "success")


# -- loop --------------------------------------------------------------------------------------
class LoopOptions(PatternOptions):
    worker: str | None = Field(None, description="the role that answers (default: the first role)")
    critic: str | None = Field(None, description="the role that returns a verdict (default: the second role)")
    max_rounds: int = Field(2, ge=1, le=100)
    memory: bool = Field(
        False, description="roles keep their earlier turns in context (default: each turn reads only its prompt)"
    )
    on_missing_verdict: Literal["approve", "reject", "fail"] = Field(
        "approve", description="a critic that ends without a valid verdict counts as this (Dr. MAS math: approve)"
    )
    critic_prompt: str = Field(
        "The task given to the {worker}:\n{task}\n\nThe {worker}'s answer:\n{answer}\n\n"
        "Check whether this answer is correct; you may run code to check it. End your turn with "
        'verdict(approve=True) if it is correct, or verdict(approve=False, feedback="what is wrong") if not.',
        description="what the critic reads; {task} {answer} {worker} {critic} are filled in",
    )
    revise_prompt: str = Field(
        "The {critic} rejected your answer {answer}.\nFeedback: {feedback}\n\nSolve the task again and call "
        "final_answer with the corrected result.\n\nTask: {task}",
        description="what the worker reads after a rejection; {task} {answer} {feedback} {worker} {critic}",
    )
    retry_prompt: str = Field(
        "Your previous turn failed: {error}\n\nSolve the task again.\n\nTask: {task}",
        description="what the worker reads after its own failed turn (on_role_error: skip); {task} {error}",
    )


@register_pattern("loop")
class Loop(Pattern):
    """Worker and critic: the worker answers, the critic returns verdict(approve, feedback); up to max_rounds."""

    Options = LoopOptions
    options: LoopOptions

    role_options = ("worker", "critic")

    @classmethod
    def check(cls, options: LoopOptions, roles: Sequence[RoleSpec]) -> list[tuple[str, str]]:
        problems = super().check(options, roles)
        worker, critic = cls.pair(options, [r.name for r in roles])
        if critic is None:
            problems.append(("critic", "the loop pattern needs two roles, a worker and a critic; add a critic role"))
        elif worker == critic:
            problems.append(("critic", f"worker and critic are both {worker!r}; name two different roles"))
        return problems

    @staticmethod
    def pair(options: LoopOptions, names: Sequence[str]) -> tuple[str, str | None]:
        worker = options.worker or names[0]
        rest = [n for n in names if n != worker]
        return worker, options.critic or (rest[0] if rest else None)

    def decision(self, role: str) -> Literal["verdict", "route"] | None:
        return "verdict" if role == self.pair(self.options, self.team.role_names)[1] else None

    async def run(self, team: TeamRun, task: str) -> Outcome:
        o = self.options
        worker, critic = self.pair(o, team.role_names)
        assert critic is not None  # checked at validation
        fill = {"task": task, "worker": worker, "critic": critic}
        answer: Any = None
        text = task
        for rnd in range(1, o.max_rounds + 1):
            team.trajectory.meta["rounds"] = rnd
            work = await team.call(worker, text, sender="user" if rnd == 1 else critic, fresh=not o.memory)
            if (end := self.failed(work)) is not None:
                return end
            if not work.ok:  # skipped: the round is lost, the worker tries again
                text = o.retry_prompt.format(**fill, error=work.error or f"it ended with status {work.status}")
                continue
            answer = work.answer
            prompt = o.critic_prompt.format(**fill, answer=summarize(answer))
            check = await team.call(critic, prompt, sender=worker, fresh=not o.memory)
            if (end := self.failed(check)) is not None:
                return end
            v = check.verdict
            if v is None:
                _log(team, "missing_verdicts", {"round": rnd, "why": check.decision_error})
                if o.on_missing_verdict == "fail":
                    return Outcome(
                        answer,
                        "error",
                        f"critic {critic!r} gave no valid verdict in round {rnd}: {check.decision_error}",
                    )
                v = Verdict(o.on_missing_verdict == "approve", "")
            _log(team, "verdicts", {"round": rnd, "approve": v.approve, "feedback": v.feedback})
            if v.approve:
                return Outcome(answer, "success")
            text = o.revise_prompt.format(
                **fill, answer=summarize(answer), feedback=v.feedback or "(no feedback given)"
            )
        if answer is None:
            return Outcome(None, "error", f"the worker {worker!r} gave no answer in {o.max_rounds} round(s)")
        return Outcome(answer, "max_rounds")


# -- router ------------------------------------------------------------------------------------
class RouterOptions(PatternOptions):
    router: str | None = Field(None, description="the role that chooses (default: the first role)")
    choices: list[str] | None = Field(None, description="roles it chooses among (default: every other role)")
    finish: list[str] = Field(default_factory=list, description="roles whose answer ends the episode (Dr. MAS: answer)")
    allow_finish: bool = Field(
        False, description="the router may end the episode itself: route('finish', message=answer)"
    )
    max_hops: int = Field(4, ge=1, le=100, description="most router decisions in an episode")
    fallback: str | None = Field(
        None, description="a role called once when max_hops is reached without a finishing answer"
    )
    on_missing_route: str = Field(
        "fail", description="a router turn without a valid route(): 'fail', or a role to go to"
    )
    router_prompt: str = Field(
        "Task: {task}\n\nWhat the team did so far:\n{history}\n\nDecide who acts next: call route(role, message) "
        "with one of {choices}; message tells that role what to do.",
        description="what the router reads; {task} {history} {choices} are filled in",
    )
    role_prompt: str = Field(
        "{task}\n\nInstruction from the {router}: {message}\n\nWhat the team found so far:\n{history}",
        description="what the chosen role reads; {task} {message} {router} {history}",
    )


FINISH = "finish"


@register_pattern("router")
class Router(Pattern):
    """A router role picks the next role with route(role, message); a finishing role's answer ends the episode."""

    Options = RouterOptions
    options: RouterOptions

    role_options = ("router", "choices", "finish", "fallback")

    @classmethod
    def check(cls, options: RouterOptions, roles: Sequence[RoleSpec]) -> list[tuple[str, str]]:
        names = [r.name for r in roles]
        problems = super().check(options, roles)
        if options.on_missing_route != "fail":
            problems += _check_names("on_missing_route", [options.on_missing_route], roles)
        router = options.router or names[0]
        choices = cls.choices_of(options, names)
        if router in choices:
            problems.append(("choices", f"the router {router!r} cannot choose itself; list the other roles"))
        if not choices:
            problems.append(("choices", "the router has no roles to choose from; add roles to the team"))
        if not options.finish and not options.allow_finish:
            problems.append(
                ("finish", "the router pattern needs a way to end: set finish: [answer] or allow_finish: true")
            )
        problems += [
            ("finish", f"{f!r} is not among the choices {choices}") for f in options.finish if f not in choices
        ]
        return problems

    @staticmethod
    def choices_of(options: RouterOptions, names: Sequence[str]) -> list[str]:
        router = options.router or names[0]
        return list(options.choices) if options.choices else [n for n in names if n != router]

    @property
    def router(self) -> str:
        return self.options.router or self.team.role_names[0]

    def decision(self, role: str) -> Literal["verdict", "route"] | None:
        return "route" if role == self.router else None

    def route_choices(self, role: str) -> list[str] | None:
        if role != self.router:
            return None
        choices = self.choices_of(self.options, self.team.role_names)
        return [*choices, FINISH] if self.options.allow_finish else choices

    async def run(self, team: TeamRun, task: str) -> Outcome:
        o = self.options
        router = self.router
        choices = self.route_choices(router) or []
        described = ", ".join(
            f"{c!r}"
            + (f" ({team.team.roles[c].description})" if c in team.team.roles else " (end with your answer as message)")
            for c in choices
        )
        history: list[str] = []
        last: Any = None
        for hop in range(1, o.max_hops + 1):
            team.trajectory.meta["hops"] = hop
            shown = "\n".join(history) or "(nothing yet)"
            decided = await team.call(
                router, o.router_prompt.format(task=task, history=shown, choices=described), sender="user", fresh=True
            )
            if (end := self.failed(decided)) is not None:
                return end
            route = decided.route
            if route is None:
                _log(team, "missing_routes", {"hop": hop, "why": decided.decision_error})
                if o.on_missing_route == "fail":
                    return Outcome(
                        last, "error", f"router {router!r} chose no valid role at hop {hop}: {decided.decision_error}"
                    )
                route = Route(o.on_missing_route)
            _log(team, "routes", {"hop": hop, "role": route.role, "message": route.message})
            if route.role == FINISH:
                return Outcome(route.message, "success")
            text = o.role_prompt.format(task=task, message=route.message or "(none)", router=router, history=shown)
            result = await team.call(route.role, text, sender=router)
            if (end := self.failed(result)) is not None:
                return end
            outcome = f"{result.answer!r}" if not result.ok else summarize(result.answer, 600)
            history.append(f"{hop}. {route.role}" + (f" ({route.message})" if route.message else "") + f": {outcome}")
            if result.ok:
                last = result.answer
                if route.role in o.finish:
                    return Outcome(result.answer, "success")
        if o.fallback:
            result = await team.call(
                o.fallback,
                o.role_prompt.format(
                    task=task, message="give the final answer now", router=router, history="\n".join(history)
                ),
                sender=router,
            )
            if result.ok:
                return Outcome(result.answer, "success")
            return Outcome(last, "error", f"fallback role {o.fallback!r} failed: {result.error or result.status}")
        return Outcome(last, "max_hops")


# -- vote --------------------------------------------------------------------------------------
class VoteOptions(PatternOptions):
    voters: list[str] | None = Field(
        None, description="roles that answer, asked in turn (default: every role); several backends make an ensemble"
    )
    n: int = Field(3, ge=1, le=25, description="answers to collect; one that more than half of them agree with wins")
    ordered: bool = Field(False, description="lists agree only in the same order (default: by their items)")
    independent: bool = Field(
        True, description="each answer in a new runtime holding the episode's inputs (default), not the role's last one"
    )

    on_role_error: Literal["fail", "skip"] = Field(
        "skip",
        description="a turn without an answer (an error, prose where code was asked) does not vote; it is "
        "asked again, n times at most (default)",
    )


@register_pattern("vote")
class Vote(Pattern):
    """Independent answers, then the majority: the voters answer the task in turn, each with a fresh context and
    its own seed, until more than half of ``n`` answers agree (``cave.review.agreement.same``: numbers within a
    tolerance, lists and sets by their items, tables by their rows). Ends ``success`` with the majority's answer,
    or ``unverified`` with the most agreed answer when no majority can form; ``meta["votes"]`` holds each answer.
    The same rule confirms a single agent's answer (``verify: N``)."""

    Options = VoteOptions
    options: VoteOptions
    role_options = ("voters",)

    async def run(self, team: TeamRun, task: str) -> Outcome:
        from cave.given import derive_seed
        from cave.review import agreement

        o = self.options
        voters = o.voters or team.role_names
        answers: list[Any] = []  # one per answering turn
        groups: list[list[int]] = []  # positions in answers that agree with each other (agreement.groups)
        asked = 0
        while asked < 2 * o.n and len(answers) < o.n:
            role = voters[asked % len(voters)]
            if o.independent and asked >= len(voters):
                await team.restart(role)
            result = await team.call(role, task, fresh=True, seed=derive_seed(team.seed, "vote", asked))
            asked += 1
            if (end := self.failed(result)) is not None:
                return end
            entry: dict[str, Any] = {"role": role, "call": result.call, "status": result.status}
            # an answer is a final_answer; a plain reply only from a role whose output is text
            if result.status == "success" or (result.ok and team.team.role(role).output.kind == "text"):
                answers.append(result.answer)
                groups = agreement.groups(answers, ordered=o.ordered)
                group = next(k for k, g in enumerate(groups) if len(answers) - 1 in g)
                entry.update(answer=summarize(result.answer, 300), group=group)
            _log(team, "votes", entry)
            best = max(groups, key=len, default=[])
            if len(best) > o.n // 2:
                return Outcome(answers[best[0]], "success")
            if groups and len(best) + (o.n - len(answers)) <= o.n // 2:
                break  # no answer can reach a majority any more
        if not answers:
            return Outcome(None, "error", f"no voter answered in {asked} turn(s)")
        best = max(groups, key=len)
        why = f"no answer had a majority: the most agreed one had {len(best)} of {len(answers)} answers (n={o.n})"
        team.trajectory.meta["unverified"] = why
        return Outcome(answers[best[0]], "unverified")


# -- custom ------------------------------------------------------------------------------------
class CustomOptions(PatternOptions):
    function: str = Field(description="'package.module:run', an async def run(team, task) -> Result")
    options: dict[str, Any] = Field(default_factory=dict, description="free options, readable as team.options")

    @field_validator("function")
    @classmethod
    def _import_path(cls, v: str) -> str:
        mod, _, attr = v.partition(":")
        if not mod or not attr or not all(p.isidentifier() for p in mod.split(".") + attr.split(".")):
            raise ValueError(f"import path {v!r} must look like 'package.module:run'")
        return v


@register_pattern("custom")
class Custom(Pattern):
    """A user function ``async def run(team, task) -> Result`` (``team``: the episode's TeamRun)."""

    Options = CustomOptions
    options: CustomOptions

    def __init__(self, options: CustomOptions, team: Team) -> None:
        super().__init__(options, team)
        from cave.inputs import import_callable

        try:
            self.fn: Callable[[TeamRun, str], Awaitable[Any]] = import_callable(options.function, team.base_dir)
        except Exception as e:
            raise TeamError(
                [
                    f"{team.where('pattern', 'function')}: pattern.function: cannot import {options.function!r}: {type(e).__name__}: {e}\n  fix: make the module importable from the team file's folder"
                ]
            ) from None
        if not asyncio.iscoroutinefunction(self.fn):
            raise TeamError(
                [
                    f"{team.where('pattern', 'function')}: pattern.function: {options.function} is not an async function\n  fix: define it as `async def run(team, task) -> Result`"
                ]
            )

    async def run(self, team: TeamRun, task: str) -> Outcome:
        try:
            value = await self.fn(team, task)
        except Exception as e:
            role, call = team.current or team.last or ("(none)", 0)
            step = team.trajectory.steps[-1].index if team.trajectory.steps else None
            team.trajectory.meta["traceback"] = traceback.format_exc(limit=-8)
            return Outcome(
                None,
                "error",
                f"custom pattern {self.options.function} raised {type(e).__name__}: {e} (last role: {role!r} turn {call}, last step: {step})",
            )
        return value if isinstance(value, Outcome) else Outcome(value, "success")
