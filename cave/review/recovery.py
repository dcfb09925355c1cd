"""What the agent loop does when the model goes wrong: pure functions over the trajectory so far.

Small models loop (the same failing cell again and again, often with a prose reply between), stop at prose
right after an error, or pass an answer the task did not ask for. The loop asks these functions what to say or
do; none of them calls the model or the runtime, so each is testable on a hand-built trajectory:

- ``repeats_failure``: is this reply the cell that just failed, again? (then it is sampled again, hotter:
  ``retry_temperatures``)
- ``repeats_cut_off``: is this reply one that was already cut off at the length limit? (sampled again too)
- ``cave.review.prose``: why a reply without code cannot be the answer here, and what is said instead;
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
    "calls_name",
    "echoes",
    "error_line",
    "fold_failed",
    "kept_problems",
    "last_action",
    "last_code_step",
    "missing_note",
    "needs_review",
    "repeats_answered_cell",
    "repeats_cut_off",
    "repeats_failure",
    "repeats_twice",
    "retry_temperatures",
    "runtime_noted",
    "unknown_function_note",
]


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


def calls_name(name: str, code: str) -> bool:
    """Whether ``code`` calls the plain name ``name`` (``f(...)``, not a method ``x.f(...)``)."""
    return re.search(rf"(?<![\w.]){re.escape(name)}\s*\(", code) is not None


def error_line(step: Step | None) -> str | None:
    """``"KeyError: 'date'"`` for a step whose code failed; None when it did not (or there is no step)."""
    err = step.execution.error if step is not None and step.execution is not None else None
    return f"{err.type}: {err.message.strip()}" if err is not None else None


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
    if m is None or not calls_name(m.group(1), step.code or ""):
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
