"""What the agent loop does when the model goes wrong: pure functions over the trajectory so far.

Small models loop (the same failing cell again and again, often with a prose reply between), stop at prose
right after an error, or pass an answer the task did not ask for. The loop asks these functions what to say or
do; none of them calls the model or the runtime, so each is testable on a hand-built trajectory:

- ``repeats_failure``: is this reply the cell that just failed, again? (then it is sampled again, hotter:
  ``retry_temperatures``)
- ``repeats_cut_off``: is this reply one that was already cut off at the length limit? (sampled again too)
- ``prose_refusal``: why a reply without code cannot be the answer here (None: it can be);
- ``loop_note``: the failing line and the real objects, when the same error comes back (or a column/attribute
  is missing the first time);
- ``missing_note``: the declared outputs that do not exist yet;
- ``kept_problems``: what is still wrong with an answer sent again after it was held for a problem (a lossy
  conversion, a form the task does not ask for, a warning in its review): the run then ends ``failed_checks``
  with the answer, not ``success``.

Whether an answer has the form the task names (decimal places, "Yes"/"No", its keys, one row per month) is
``cave.review.answers``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Literal

from cave import prompts
from cave.review.answers import asks_yes_no, form_problems
from cave.review.things import number_for_a_name
from cave.trajectory import Step, Trajectory

__all__ = [
    "answer_name",
    "echoes",
    "fold_failed",
    "kept_problems",
    "last_action",
    "last_code_step",
    "may_refuse_prose",
    "missing_note",
    "named_uncalled",
    "needs_review",
    "prose_refusal",
    "repeats_answered_cell",
    "repeats_cut_off",
    "repeats_failure",
    "repeats_refused_prose",
    "repeats_twice",
    "retry_temperatures",
    "runtime_noted",
    "uncalled",
    "unknown_function_note",
]

PROSE_REFUSALS = 2  # after this many refusals in a run the prose is taken: a model that cannot write code
# should not burn every step


def last_action(traj: Trajectory) -> Step | None:
    return next((s for s in reversed(traj.steps) if s.kind == "action"), None)


def last_code_step(traj: Trajectory) -> Step | None:
    """The last step that ran code: a refused prose reply in between does not break a repeated-failure loop."""
    return next((s for s in reversed(traj.steps) if s.kind == "action" and s.code), None)


def repeats_failure(traj: Trajectory, blocks: list[str]) -> bool:
    """Whether ``blocks`` are exactly the last cell that ran, and it failed (or its answer failed the checks, or
    was held). A held answer's note says how to confirm it (``final_answer(_final_answer)``) or to fix it; the same
    code again word for word is neither but greedy decoding's echo, and it computes the same answer with the same
    problem (development runs: 3 of 7 held answers were echoed so, each ending failed_checks). The contract's note
    alone asks for the answer "sent again unchanged" to confirm it, so its echo is no repeat."""
    last = last_code_step(traj)
    if not blocks or last is None or last.code != "\n\n".join(blocks):
        return False
    # it ran, but its answer failed checks or was held (the contract's note asks for the answer unchanged to confirm)
    refused = any(b.get("checks") or b.get("held") not in (None, "contract") for b in last.meta.get("blocks", []))
    return last.execution is None or not last.execution.ok or refused


def repeats_twice(traj: Trajectory, blocks: list[str]) -> bool:
    """Whether ``blocks`` are the cell that the last two code steps both ran: the model was told after the first
    repeat to answer with its result or change the code, and greedy decoding echoes the same reply again (an
    analyst task ran one working cell six times and ended at max_steps with the answer only printed).

    >>> t = Trajectory(task="t")
    >>> t.steps += [Step(index=i, code="print(x)") for i in range(2)]
    >>> repeats_twice(t, ["print(x)"]), repeats_twice(t, ["print(y)"])
    (True, False)
    """
    code = "\n\n".join(blocks)
    if not blocks or "final_answer" in code:  # an answer sent again after a hold stands by being sent again
        return False
    ran = [s for s in traj.steps if s.kind == "action" and s.code]
    return len(ran) >= 2 and ran[-1].code == code and ran[-2].code == code


def repeats_answered_cell(traj: Trajectory, blocks: list[str]) -> bool:
    r"""Whether ``blocks`` are a cell already run twice (``repeats_twice``) that worked and assigned its result,
    so that the note after the repeat offered ``final_answer(name)`` (``prompts.REPEAT_CALL_NOTE``).

    >>> from cave.runtimes.base import Execution
    >>> t = Trajectory(task="t")
    >>> t.steps += [Step(index=i, code="x = 1\nprint(x)", execution=Execution(stdout="1\n")) for i in range(2)]
    >>> repeats_answered_cell(t, ["x = 1\nprint(x)"]), repeats_answered_cell(t, ["print(x)"])
    (True, False)
    """
    if not repeats_twice(traj, blocks):
        return False
    last = last_code_step(traj)
    ran = last is not None and last.execution is not None and last.execution.ok and not runtime_noted(last)
    return ran and last_assigned(last.code or "") is not None


RUNTIME_NOTE = "Note (line "  # how the runtime's notes on what a cell computed start (cave.runtimes.matches, ...)


def runtime_noted(step: Step) -> bool:
    """Whether the runtime noted something doubtful about what the step's cell computed (a conversion that made
    most values missing, a selection that matched no row, ...): its result is not one to answer with as it is."""
    return step.execution is not None and RUNTIME_NOTE in (step.execution.stderr or "")


_NOTED_FIX = re.compile(
    r"Note \(line \d+\): (to_datetime|to_numeric)\(errors=\"coerce\"\).*?: (pd\.\1\(.*?\)); if they"
)


def noted_rewrite(code: str, stderr: str) -> str | None:
    r"""``code`` with the conversion a runtime Note gives the line for (``pd.to_datetime(x, format='mixed',
    errors='coerce')``) in place of the model's own call on the same values; None when there is none to place.
    The 1.5B ran the same cell five times after the Note named the line to use (a development task): a whole cell
    to run is what it copies.

    >>> note = ('Note (line 2): to_datetime(errors="coerce") turned 8 of 9 ...: they read as dates each in its own '
    ...         "format: pd.to_datetime(s['d'], format='mixed', errors='coerce'); if they are truly missing, keep going.")
    >>> print(noted_rewrite("import pandas as pd\ns['d'] = pd.to_datetime(s['d'], errors='coerce')\nprint(s)", note))
    import pandas as pd
    s['d'] = pd.to_datetime(s['d'], format='mixed', errors='coerce')
    print(s)
    >>> noted_rewrite("s['d'] = pd.to_datetime(s['x'])", note) is None  # other values: not this Note's line
    True
    """
    m = _NOTED_FIX.search(stderr or "")
    if not m:
        return None
    name, fix = m.group(1), m.group(2)
    try:
        tree, wanted = ast.parse(code), ast.parse(fix, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(wanted, ast.Call) or not wanted.args:
        return None
    target = ast.dump(wanted.args[0])
    lines = code.splitlines(keepends=True)
    for node in ast.walk(tree):
        func = getattr(node, "func", None)
        called = getattr(func, "attr", None) or getattr(func, "id", None)
        if not isinstance(node, ast.Call) or called != name or not node.args or ast.dump(node.args[0]) != target:
            continue
        if node.lineno != node.end_lineno or node.end_col_offset is None:
            return None  # a call over several lines: not rewritten
        line = lines[node.lineno - 1]
        start, end = _char_offset(line, node.col_offset), _char_offset(line, node.end_col_offset)
        lines[node.lineno - 1] = line[:start] + fix + line[end:]
        return "".join(lines)
    return None


def _char_offset(line: str, utf8_offset: int) -> int:
    """The character position of an ast column offset (counted in UTF-8 bytes)."""
    return len(line.encode("utf-8")[:utf8_offset].decode("utf-8", errors="ignore"))


def repeats_cut_off(traj: Trajectory, text: str) -> bool:
    r"""Whether ``text`` is, word for word, a reply of this run that was cut off at the length limit (and so not
    run): greedy decoding writes the same over-long cell again after the note (a development task typed the given
    table in four times, each cut off, with a prose reply between, until max_steps).

    >>> t = Trajectory(task="t", steps=[Step(index=0, completion="```python\nx = [1, 2,", meta={"cut_off": True})])
    >>> repeats_cut_off(t, "```python\nx = [1, 2,"), repeats_cut_off(t, "```python\nx = df.x\n```")
    (True, False)

    A long reply that starts as a cut-off one did is the same loop cut elsewhere (a development run: the review
    note's sentences written as comments again and again, cut off at 1,833, 1,439 and 1,267 tokens in turn):

    >>> loop = "```python\n" + "# check the target column and the labels\n" * 12
    >>> t = Trajectory(task="t", steps=[Step(index=0, completion=loop * 2, meta={"cut_off": True})])
    >>> repeats_cut_off(t, loop), repeats_cut_off(t, loop[:100])
    (True, False)
    """
    said = text.strip()
    cut = [(s.completion or "").strip() for s in traj.steps if s.meta.get("cut_off")]
    head = said[:CUT_OFF_HEAD]
    return bool(said) and any(c == said or len(said) >= CUT_OFF_HEAD and c.startswith(head) for c in cut)


CUT_OFF_HEAD = 300  # characters: a reply that starts as a cut-off reply did, this far, repeats it


def repeats_refused_prose(traj: Trajectory, text: str, blocks: list[str], *, always_refused: bool = False) -> bool:
    """Whether a reply without code is, word for word, the prose reply refused at the last step (greedy
    decoding gives the same reply to the same refusal: a development task wrote one paragraph nine times, twice), or
    mostly a copy of the note that refused it (BFCL: "Not accepted yet: this task is done by calling ..."
    came back as the model's reply). ``always_refused``: no prose can end this run (the task checks objects), so any
    prose reply right after a refused one counts (a development task: three prose replies in other words, each
    refused with the call to run, until max_steps).

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


def echoes(text: str, note: str, n: int = 4) -> bool:
    """Whether ``text`` is mostly a copy of ``note``: half or more of its runs of ``n`` words are in it.

    >>> note = "Not accepted yet: this task is done by calling this session's functions, and none has been called."
    >>> echoes("The task is done by calling this session's functions, and none has been called (`f`).", note)
    True
    >>> echoes("None of the functions can give the population of a city.", note)
    False
    """
    words = re.findall(r"\w+", text.lower())
    if len(words) < 2 * n:
        return False
    grams = {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}
    source = re.findall(r"\w+", note.lower())
    known = {tuple(source[i : i + n]) for i in range(len(source) - n + 1)}
    return len(grams & known) >= len(grams) / 2


def fold_failed(messages: list[dict[str, Any]], code: str, error: str, start: int = 1) -> int:
    r"""Take the model's earlier replies whose code is ``code`` (a cell that failed) out of the context; how
    many were taken out. Each goes with its observation into the user message before it, as one line saying
    that an attempt failed with ``error``, then that observation (messages from ``start`` on: the task and
    what comes before it stay as they are).

    A small model copies its own failing cell from the context, sampled hotter or not (a 1.5B re-ran
    ``df['year']`` on a frame without that column six times, three samples each): with the code gone from
    the context, the next sample has nothing to copy. The line is the user's, not a stub in the model's own
    reply, which a small model copied as its next reply instead.

    >>> msgs = [{"role": "user", "content": "Task"}, {"role": "assistant", "content": "```python\nx = df['year']\n```"},
    ...         {"role": "user", "content": "KeyError: 'year'"}]
    >>> fold_failed(msgs, "x = df['year']", "KeyError: 'year'"), len(msgs)
    (1, 1)
    >>> print(msgs[0]["content"])
    Task
    <BLANKLINE>
    (An attempt here failed with KeyError: 'year'; its code is omitted so that the next one takes another approach.)
    KeyError: 'year'
    """
    n = 0
    for i in range(len(messages) - 1, max(start, 1) - 1, -1):
        m = messages[i]
        if m.get("role") != "assistant" or messages[i - 1].get("role") != "user":
            continue
        if "\n\n".join(prompts.extract_code(str(m.get("content") or ""))) != code:
            continue
        line = prompts.FOLDED_NOTE.format(error=error.strip().splitlines()[0][:160] if error.strip() else "an error")
        after = messages[i + 1] if i + 1 < len(messages) and messages[i + 1].get("role") == "user" else None
        merged = f"{messages[i - 1].get('content') or ''}\n\n{line}"
        if after is not None:
            merged += f"\n{after.get('content') or ''}"
        messages[i - 1] = {"role": "user", "content": merged}
        del messages[i : i + (2 if after is not None else 1)]
        n += 1
    return n


def retry_temperatures(retry_temperature: float | None) -> list[float]:
    """The temperatures a repeated failing reply is sampled again at: the retry one, then hotter once more.

    >>> retry_temperatures(0.7)
    [0.7, 1.1]
    >>> retry_temperatures(None)
    []
    """
    if retry_temperature is None:
        return []
    return [retry_temperature, round(min(retry_temperature + 0.4, 1.2), 6)]


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


def _calls(name: str, code: str) -> bool:
    """Whether ``code`` calls the plain name ``name`` (``f(...)``, not a method ``x.f(...)``)."""
    return re.search(rf"(?<![\w.]){re.escape(name)}\s*\(", code) is not None


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
    if any(_calls(f, ran) for f in names):
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


def error_line(step: Step | None) -> str | None:
    """``"KeyError: 'date'"`` for a step whose code failed; None when it did not (or there is no step)."""
    err = step.execution.error if step is not None and step.execution is not None else None
    return f"{err.type}: {err.message.strip()}" if err is not None else None


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


def last_assigned(code: str, *, private: bool = True) -> str | None:
    r"""The last name a top-level statement of ``code`` assigns (what a cell that printed its result computed);
    ``private=False`` leaves out ``_`` names.

    >>> last_assigned("x = 1\ntotal = x + 1\nprint(total)"), last_assigned("t = 1\n_n = 2", private=False)
    ('total', 't')
    """

    try:
        body = ast.parse(code).body
    except SyntaxError:
        return None
    names = [t.id for node in body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)]
    names = [n for n in names if private or not n.startswith("_")]
    return names[-1] if names else None


def unknown_function_note(step: Step, functions: list[str]) -> str | None:
    """When code called a function the session does not have (``NameError: name 'derivative' is not
    defined`` on a call) in a session that has functions: say so, and that "none fits" is an answer. A small
    model invents the function it wishes it had and calls it again and again (BFCL irrelevance_40: four times).

    >>> from cave.runtimes.base import ExecError, Execution
    >>> step = Step(index=0, code="derivative('2x', 1)")
    >>> step.execution = Execution(error=ExecError("NameError", "name 'derivative' is not defined"))
    >>> print(unknown_function_note(step, ["get_weather"]))
    Note: `derivative` does not exist in this session (its functions are the ones listed in the system prompt). If none of those fits the request, do not call anything: reply in plain text saying so.
    """
    error = step.execution.error if step.execution is not None else None
    names = [f for f in functions if f != "final_answer"]
    if error is None or error.type != "NameError" or not names:
        return None
    m = re.search(r"name '(\w+)' is not defined", error.message)
    if m is None or not _calls(m.group(1), step.code or ""):
        return None
    # the session's functions are not listed again here: named in a note, the 1.5B called one that did not fit
    return prompts.UNKNOWN_FUNCTION_NOTE.format(name=m.group(1))


def missing_note(missing: list[str]) -> str:
    """The note for declared outputs that do not exist yet.

    >>> missing_note(["by_region"])[:70]
    'Not finished yet: the task asks you to store results in `by_region`, w'

    """
    names = ", ".join(f"`{n}`" for n in missing)
    one = len(missing) == 1
    return prompts.MISSING_OUTPUTS_NOTE.format(names=names, verb="does" if one else "do", them="it" if one else "them")


def answer_name(code: str) -> str | None:
    """The variable a cell passed to its last ``final_answer(...)`` call, when it passed a plain name.

    >>> answer_name("x = 1\\nfinal_answer(by_region)")
    'by_region'
    >>> answer_name("final_answer(df.head())") is None
    True
    """
    calls = re.findall(r"final_answer\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)", code)
    return calls[-1] if calls else None


def _nothing(value: Any) -> bool:
    """0, NaN, None or empty, or a dict/list of only such values: what a count or mean over no rows gives.

    >>> _nothing(0), _nothing(float("nan")), _nothing({"n": 0, "m": None}), _nothing(3), _nothing("north")
    (True, True, True, False, False)
    """
    if isinstance(value, dict):
        return all(map(_nothing, value.values()))
    if isinstance(value, list | tuple):
        return all(map(_nothing, value))
    if value is None:
        return True
    size = getattr(value, "size", None)
    if isinstance(size, int) and getattr(value, "ndim", 0) >= 1:  # a Series or DataFrame (or an array)
        return size == 0
    plain = value.item() if hasattr(value, "item") else value
    return isinstance(plain, int | float) and not isinstance(plain, bool) and (plain == 0 or plain != plain)


def _has_bool(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_bool(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_bool(v) for v in value)
    return type(value).__name__ in ("bool", "bool_")  # numpy's bool too


def needs_review(task: str, value: Any, summary: str) -> bool:
    """Whether an answer looks wrong enough to be shown to the model once before it is accepted (the
    agent's ``review="auto"``): the summary warns (empty, None, NaN, every value the same), or a yes/no
    question got True/False where the task names the words.

    >>> needs_review("Is it normal? Answer 'Yes' or 'No'.", {"is_normal": False}, "dict of 1: 'is_normal': bool False")
    True
    >>> needs_review("How many rows?", 12, "int 12")
    False
    >>> needs_review("Mean per group", None, "NoneType None (WARNING: it is None)")
    True
    """
    return "WARNING:" in summary or (_has_bool(value) and asks_yes_no(task))


HeldFor = Literal[
    "loss", "epoch", "empty", "spelling", "tie", "nan", "self", "text", "numtext", "polarity", "form", "warning"
]

# What an answer held for a cell's note still is when it comes back with the same note or the same summary.
_STILL: dict[str, str] = {
    "loss": "the answer is the one computed after a conversion turned values into NaN; they were not recovered",
    "epoch": "the answer still comes from Unix times read as nanoseconds (every moment in the first second of 1970)",
    "empty": "the answer is the one computed from a selection that matched no row",
    "spelling": "the answer still comes from a selection or grouping that keeps a value's other spellings apart",
    "tie": "the answer is still the first of many tied entries, not what the task asks about",
    "nan": "the answer still rests on a test that returned nan over missing values",
    "self": "the answer is still the variable itself, picked from its own correlation of 1",
    "text": "the answer is still the alphabetically last (first) text value, not the row with the extreme of a number",
    "numtext": "the answer still comes from numbers ordered as text, not by size",
    "polarity": "a value named for the 'not' group still comes from the group labelled yes (1/True)",
}


def summary_warnings(summary: str) -> list[str]:
    """The warnings in an ``answer_summary`` (empty, None, NaN, every value the same, a table for one value).

    >>> summary_warnings("dict of 2:\\n  'a': float nan (WARNING: 'a' is NaN)\\n  'b': int 1")
    ["'a' is NaN"]
    """
    return re.findall(r"\(WARNING: ([^()]*)\)", summary)


def kept_problems(
    held: Iterable[HeldFor],
    *,
    task: str,
    value: Any,
    summary: str,
    held_summary: str,
    again: Collection[str] = (),
    confirmed: bool = False,
    given: Mapping[str, Any] | None = None,
) -> list[str]:
    """What is still wrong with an answer that was held once for each of ``held`` and then sent again.

    A small model "confirms" a held answer by running the same code again (a development task: the same lossy
    ``to_numeric`` and the same wrong 0.52) or by sending the same literal (453: four means, all 27.7). Its
    confirmation is no evidence, and the problems are facts about the answer, so they are re-checked on the answer
    itself: ``summary`` is this answer's ``answer_summary``, ``held_summary`` the held one's, and ``again`` the
    kinds whose note the cell that sent it wrote again ("loss": a coercion dropped values, "empty": a selection
    matched no row, "tie": a pick from a wide tie, "nan": a test over missing values, "self": a variable picked as
    its own strongest correlate). ``confirmed``: the answer came back as it was (``final_answer(_final_answer)``),
    which for a selection of one spelling says the task means that spelling. ``given``: the session's
    tables, for the one table-based form problem that stands re-checking (a number where the task asks which
    product).

    >>> kept_problems(["warning"], task="Mean of each", value={"a": 1.0, "b": 1.0, "c": 1.0},
    ...               summary="dict of 3: (WARNING: every value is the same)", held_summary="")
    ['the answer still has a warning: every value is the same']
    >>> kept_problems(["loss"], task="Total paid", value=34973.56, summary="float 34973.56",
    ...               held_summary="float 34973.56")
    ['the answer is the one computed after a conversion turned values into NaN; they were not recovered']
    >>> kept_problems(["loss", "warning"], task="Total paid", value=49120.0, summary="float 49120.0",
    ...               held_summary="float 34973.56")
    []
    """
    problems: list[str] = []
    for kind in dict.fromkeys(held):
        if kind in _STILL:
            # a selection of one spelling confirmed as it was (``confirmed``: final_answer(_final_answer)) is the
            # task's choice; code that computes it again and still leaves the other spellings out is not
            same = kind in again or (summary == held_summary and not (kind == "spelling" and confirmed))
            # only an answer of nothing (0, NaN, empty) is the empty selection's: a total of the other rows stands
            if same and (kind != "empty" or _nothing(value)):
                problems.append(_STILL[kind])
        elif kind == "form":  # without the given tables: ids kept for names stand (the task may mean the ids)
            problems += form_problems(task, value).problems
            number = number_for_a_name(task, value, given) if given else None
            if number:  # a number is never the name of a product that the table holds as text
                problems.append(number)
        elif kind == "warning":
            problems += [f"the answer still has a warning: {w}" for w in summary_warnings(summary)]
    return problems
