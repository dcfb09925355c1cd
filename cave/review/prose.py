"""What a reply without code may be: when the loop refuses prose, and what it says instead. Pure functions over the
trajectory so far, as in ``cave.review.recovery`` (whose helpers they read), each testable on a hand-built
trajectory:

- ``prose_refusal``: why a reply without code cannot end the run here (None: it can), with the call that sends the
  last result where a call is what is missing;
- ``repeats_refused_prose``: is this prose the reply refused at the last step, again? (then it is sampled again,
  inside a python block where the backend takes a response prefix);
- ``uncalled`` / ``named_uncalled``: the session's functions that no code called, or that a prose reply names;
- ``uncalled_answer``: the variable a reply's prose passes to final_answer when its code never did;
- ``gave_up_note``: an answer of nothing right after a failed cell.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from cave import prompts
from cave.review.recovery import calls_name, echoes, error_line, last_action, last_assigned, last_code_step
from cave.trajectory import Trajectory

__all__ = [
    "PROSE_REFUSALS",
    "gave_up_note",
    "last_result",
    "may_refuse_prose",
    "named_uncalled",
    "prose_refusal",
    "repeats_refused_prose",
    "uncalled",
    "uncalled_answer",
]

PROSE_REFUSALS = 2  # after this many refusals in a run the prose is taken: a model that cannot write code
# should not burn every step


def repeats_refused_prose(traj: Trajectory, text: str, blocks: list[str], *, always_refused: bool = False) -> bool:
    """Whether a reply without code is, word for word, the prose reply refused at the last step (greedy
    decoding gives the same reply to the same refusal: a development task wrote one paragraph nine times, twice), or
    mostly a copy of the note that refused it (BFCL: "Not accepted yet: this task is done by calling ..."
    came back as the model's reply). ``always_refused``: no prose can end this run (the task checks objects), so any
    prose reply right after a refused one counts (a development task: three prose replies in other words, each
    refused with the call to run, until max_steps).

    >>> from cave.trajectory import Step
    >>> t = Trajectory(task="t", steps=[Step(index=0, completion="The total is 10.", observation="Write code.")])
    >>> repeats_refused_prose(t, "It is 10.", []), repeats_refused_prose(t, "It is 10.", [], always_refused=True)
    (False, True)
    """
    last = last_action(traj)
    if blocks or last is None or last.code or not last.observation or last.meta.get("cut_off"):
        return False
    if not text.strip():
        return False
    return always_refused or (last.completion or "").strip() == text.strip() or echoes(text, last.observation)


def may_refuse_prose(traj: Trajectory, insist_on_code: bool) -> bool:
    """Whether a prose reply may still be refused for a reason other than the task's checks."""
    return insist_on_code and traj.meta.get("prose_refused", 0) < PROSE_REFUSALS


def named_uncalled(text: str, functions: Iterable[str], traj: Trajectory) -> list[str]:
    """The session's functions a prose reply names that no code of this run has called: the reply describes
    calling them (small models write "I call `get_weather` ..." and stop), but nothing ran.

    >>> named_uncalled("I call `country_capital` with 'Brazil'.", ["country_capital", "final_answer"], Trajectory(task="t"))
    ['country_capital']
    >>> named_uncalled("The capital is Brasília.", ["country_capital"], Trajectory(task="t"))
    []
    """
    code = "\n".join(s.code for s in traj.steps if s.kind == "action" and s.code)
    return [
        f
        for f in functions
        if f != "final_answer"
        and re.search(rf"\b{re.escape(f)}\b", text)
        and not re.search(rf"\b{re.escape(f)}\s*\(", code)
    ]


def uncalled(functions: Iterable[str], traj: Trajectory, code: str = "") -> list[str] | None:
    """The session's functions, when no code of this run (nor ``code``, the cell running now) has called any of
    them; None when one was called or there are none.

    >>> uncalled(["solve_quadratic"], Trajectory(task="t"), "import math; print(math.sqrt(169))")
    ['solve_quadratic']
    >>> uncalled(["solve_quadratic"], Trajectory(task="t"), "solve_quadratic(a=3, b=-11, c=-4)") is None
    True
    """
    names = [f for f in functions if f != "final_answer"]
    if not names:
        return None
    ran = "\n".join([*(s.code for s in traj.steps if s.kind == "action" and s.code), code])
    if any(calls_name(f, ran) for f in names):
        return None
    return names


def prose_refusal(traj: Trajectory, **kwargs: Any) -> str | None:
    """Why a reply without code cannot end the run here (see ``_prose_refusal``), with the call that sends the
    result the last code left, where a call is what is missing: the 1.5B, told to call final_answer after a
    prose summary of its printed result, typed the given table in by hand four times (a development task)."""
    note = _prose_refusal(traj, **kwargs)
    if note in (prompts.NEED_OBJECTS_NOTE, prompts.PROSE_NEEDS_CALL_NOTE, prompts.PROSE_TO_VERIFY_NOTE):
        name = last_result(traj)
        if name is not None:
            note += f" Your last code left `{name}`; if it holds the result, run:\n```python\nfinal_answer({name})\n```"
    return note


def last_result(traj: Trajectory) -> str | None:
    """The variable the last code step that ran without error assigned last (at its top level; not a ``_`` name),
    else None.

    >>> from cave.runtimes.base import Execution
    >>> from cave.trajectory import Step
    >>> traj = Trajectory(task="t")
    >>> traj.steps.append(Step(index=0, code="x = 1\\nby_month = t.groupby('m').sum()\\nprint(by_month)", execution=Execution()))
    >>> last_result(traj)
    'by_month'
    """
    step = last_code_step(traj)
    if step is None or not step.code or (step.execution is not None and not step.execution.ok):
        return None
    return last_assigned(step.code, private=False)


def _prose_refusal(
    traj: Trajectory,
    *,
    checks: bool,
    insist_on_code: bool,
    given: bool,
    text: str = "",
    functions: Iterable[str] = (),
    expect_calls: bool = False,
    verified: bool = False,
) -> str | None:
    """Why a reply without code cannot end the run here, before the declared outputs are considered (None: it
    can, as far as the trajectory tells). ``given``: the runtime holds variables the task gave; ``text``: the
    reply; ``functions``: the functions the session was given; ``expect_calls``: the task is done by calling
    them, so prose before any call is sent back once; ``verified``: the run's answer is to be verified (only an
    object passed to final_answer can be), so a prose answer about the given data is sent back once."""
    functions = list(functions)  # read twice below (named, then uncalled)
    if checks:  # the task checks objects in the runtime: prose cannot be the answer
        return prompts.NEED_OBJECTS_NOTE
    if text.lstrip().startswith(prompts.FOLDED_NOTE.split("{", 1)[0]):  # the fold's line, copied as a reply
        return prompts.PROSE_AFTER_ERROR_NOTE  # (a small model imitates what it reads): never an answer
    if not may_refuse_prose(traj, insist_on_code):
        return None
    last = last_action(traj)
    failed = last is not None and last.execution is not None and not last.execution.ok
    if last is not None and (last.meta.get("cut_off") or (failed and not last.meta.get("unknown_function"))):
        return prompts.PROSE_AFTER_ERROR_NOTE  # (after a call to a function the session lacks, "none fits" may end it)
    if last is not None and any(b.get("held") for b in last.meta.get("blocks", [])):
        return prompts.PROSE_AFTER_HELD_NOTE  # "The coefficient is 0.52.": the held answer, neither fixed nor confirmed
    asked = traj.meta.get("named_refused") or traj.meta.get("calls_asked")  # one "call it" note per run
    named = [] if asked else named_uncalled(text, functions, traj)
    if named:  # once: a second prose reply naming them is taken (e.g. "none of these fits: `f` does X")
        traj.meta["named_refused"] = traj.meta["calls_asked"] = True
        names = ", ".join(f"`{n}`" for n in named[:3])
        one = len(named[:3]) == 1
        return prompts.PROSE_NAMED_CALL_NOTE.format(
            names=names, was="was" if one else "were", is_="is" if one else "are", runs="runs" if one else "run"
        )
    if expect_calls and not asked:
        names = uncalled(functions, traj)
        if names is not None:  # once (shared with a final_answer held for it): "none of these fits" then stands
            traj.meta["calls_asked"] = True
            return prompts.answer_without_calls_note(names)
    if given and not any(s.kind == "action" and s.code for s in traj.steps):
        return prompts.PROSE_UNCHECKED_NOTE
    if "final_answer(" in traj.task:  # the task names the call: "The mean is 40.82." printed, never returned
        return prompts.PROSE_NEEDS_CALL_NOTE
    if verified and given and not traj.meta.get("prose_to_verify"):  # once: "The top region is 'west'." after code
        traj.meta["prose_to_verify"] = True
        return prompts.PROSE_TO_VERIFY_NOTE
    return None


_NOTHING_SAID = re.compile(
    r"\s*(?:no\s+(?:data|results?|answer|rows?|matches?|records?)(?:\s+(?:is\s+|are\s+)?(?:available|found))?"
    r"|not\s+(?:found|available|applicable)|n/?a|unknown|cannot\s+be\s+(?:determined|computed|calculated)"
    r"|(?:an\s+)?error(?:\s+occurred)?)[\s.!]*$",
    re.I,
)


def gave_up_note(traj: Trajectory, value: Any) -> str | None:
    """An answer of nothing right after a failed cell is giving up, not an answer: send the model back to the error.
    (The 1.5B, asked for a table its code failed to build, called ``final_answer(None)`` and then confirmed it.)

    >>> from cave.runtimes.base import ExecError, Execution
    >>> from cave.trajectory import Step
    >>> traj = Trajectory(task="Make monthly")
    >>> traj.steps.append(Step(index=0, code="m = t['date']", execution=Execution(error=ExecError("KeyError", "'date'"))))
    >>> gave_up_note(traj, None)[:60]
    'final_answer(None) is not an answer: your previous code fail'
    >>> gave_up_note(traj, 3) is None, gave_up_note(traj, "No data available.")[:40]
    (True, "final_answer('No data available.') is no")
    """
    if not (value is None or (isinstance(value, str) and (not value.strip() or _NOTHING_SAID.match(value)))):
        return None
    error = error_line(last_code_step(traj))
    return None if error is None else prompts.GAVE_UP_NOTE.format(value=repr(value), error=error[:200])


_PROSE_CALL = re.compile(r"final_answer\(\s*([A-Za-z_]\w*)\s*\)")


def uncalled_answer(reply: str, code: str, names: Iterable[str]) -> str | None:
    r"""The variable a reply's prose passes to final_answer when its code never called it (a development task:
    "The `final_answer(total_spend)` function is called with the result", six steps of the same code).

    >>> uncalled_answer("Here:\n```python\nt = 1\n```\nThe `final_answer(t)` is called.", "t = 1", ["t"])
    't'
    >>> uncalled_answer("```python\nfinal_answer(t)\n```", "final_answer(t)", ["t"]) is None
    True
    """
    if "final_answer" in code:
        return None
    prose = re.sub(r"```.*?(?:```|$)", "", reply, flags=re.S)
    live = set(names)
    return next((m.group(1) for m in _PROSE_CALL.finditer(prose) if m.group(1) in live), None)
