"""Whether final_answer's value ends the run, and as what: the holds an answer goes through first.

An answer is held (sent back with a note, the run goes on) when a declared output is still missing, when the
task is done by calling the session's functions and none was called (``expect_calls``), when it is nothing right
after a failed cell (giving up), when it holds numbers typed in that no output had shown, when its code misreads
a result (``is_normal = p < 0.05``, an MSE sent as the RMSE: ``cave.review.misreadings``), when no code of the run
applies a bound or an operation the task names ("only brands with at least 10 hotels", "in logarithmic scale":
``bounds.unapplied``), when its code selects rows by a value the task never names (``conditions.unasked``) or
no code of the run reads a column holding a value the task names ("unpaid fire hydrant fines":
``conditions.unapplied``), when it was computed
after a conversion dropped values or from a selection that matched no row (``== 'north'`` on 'North'), picked from
a wide tie or decided on a test that returned nan over missing values, when it is not in the form the task names,
or when it looks wrong enough to
be shown to the model for review. Each hold happens once (outputs: twice); then the model's answer stands. When
the task declares no checks, an answer that still has the problem it was held for ends the run
``failed_checks``, not ``success`` (``Acceptance.kept``): a small model's "confirmation" is no evidence. A task's
own checks, when it has them, define success.

The agent builds one ``Acceptance`` from its settings whenever it needs it; the decisions themselves are pure
functions in ``cave.review.recovery`` and ``cave.review.answers``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from cave import prompts
from cave.review import (
    answers,
    bounds,
    conditions,
    entities,
    estimators,
    grouping,
    held_notes,
    in_place,
    misreadings,
    prose,
    recovery,
    typed,
)
from cave.runtimes import coercion, matches, selection_fixes, value_notes
from cave.runtimes.base import Execution
from cave.runtimes.describe import answer_summary
from cave.trajectory import Trajectory

__all__ = ["Acceptance", "answer_notes"]


def answer_notes(traj: Trajectory, executions: list[Execution], code: str) -> str:
    """What the cells behind an answer wrote to stderr (their notes: a lossy conversion, a test over NaN): every
    block of this reply, and the previous step's cells too when the answer cell only copies values from it
    (a development task: a t-test returned nan in one block, the answer was typed in the next and sent again alone)."""
    notes = [e.stderr for e in executions]
    previous = traj.steps[-1].execution if traj.steps and typed.answer_alone(code) else None
    return "\n".join([previous.stderr if previous is not None else "", *notes])


@dataclass
class Acceptance:
    review: bool | Literal["auto"]  # the agent's review setting: form check unless False, review "auto"/True
    checks: bool  # the task declares checks (they ran and passed before a hold is considered)
    expect_calls: bool
    given_functions: Callable[[], list[str]]
    given_tables: Callable[[], dict[str, Any]]
    missing_outputs: Callable[[], Awaitable[list[str]]]
    variables: Callable[[list[str]], Awaitable[dict[str, Any]]] | None = None  # the live values of these names
    restore_given: Callable[[], Awaitable[list[str]]] | None = None  # given variables back as given; a note each
    # the form check's tables: the given ones and a given database's, with the variable each database table is in
    form_tables: Callable[[], tuple[dict[str, Any], dict[str, str]]] | None = None

    def _form_tables(self) -> tuple[dict[str, Any], dict[str, str]]:
        return self.form_tables() if self.form_tables is not None else (self.given_tables(), {})

    async def hold(self, traj: Trajectory, value: Any, code: str, stderr: str) -> str | None:
        """Why final_answer's ``value`` is not accepted yet (None: accept it). ``code``: the whole reply's code, all
        its blocks (written together, before any ran); ``stderr``: what the answer's cell wrote."""
        misread = traj.meta.get("held_misread")
        if misread is not None and _computes(code) and not misreadings.found(code, traj.task):
            misread["recomputed"] = repr(value)[:2000]  # computed again, right: confirming it later is no misreading
        missing = await self.missing_outputs() if traj.meta.get("held_for_outputs", 0) < 2 else []
        if missing:  # twice at most: then the answer stands and the run reports the missing output
            traj.meta["held_for_outputs"] = traj.meta.get("held_for_outputs", 0) + 1
            return recovery.missing_note(missing)
        if self.expect_calls and not traj.meta.get("calls_asked"):
            uncalled = prose.uncalled(self.given_functions(), traj, code)
            if uncalled is not None:  # once: a second answer without a call stands ("none of these fits")
                traj.meta["calls_asked"] = True
                return prompts.answer_without_calls_note(uncalled)
        if value is None and not traj.meta.get("none_asked"):
            name = recovery.answer_name(code)
            note = in_place.none_from_in_place(_answering_code(traj, code), name) if name else None
            if note is not None:  # once: None from x = y.sort() is a slip, not the answer (a development probe)
                traj.meta["none_asked"] = traj.meta["gave_up_asked"] = True
                await _held_for(traj, "warning", value)
                return "Not accepted yet: the answer is None. " + note
        if not traj.meta.get("gave_up_asked"):
            gave_up = prose.gave_up_note(traj, value)
            if gave_up is not None:  # once: nothing, right after a failed cell, is giving up
                traj.meta["gave_up_asked"] = traj.meta["reviewed"] = True  # the same nothing again then stands
                await _held_for(traj, "warning", value)
                return gave_up
        # what the data the answer came from lost or lacked comes first: a fix of the typed values sent from the
        # same lossy variables would only be sent back (a development task: 240 of 241 volumes coerced to NaN)
        for kind, mark, note in _NOTED:
            if mark in stderr and not traj.meta.get(f"held_for_{kind}"):
                traj.meta[f"held_for_{kind}"] = True  # once: the answer came from what the cell's note says
                await _held_for(traj, kind, value)
                if kind == "tie" and (pick := grouping.period_pick(traj.task, self.given_tables())):
                    return f"{note} For the task's question, e.g.: {pick}"
                if kind == "epoch":  # the misread dates may have been written into a given table: as given again
                    return note + await self._restored()
                if kind == "spelling" and (fixed := selection_fixes.one_spelling(_answering_code(traj, code), stderr)):
                    return held_notes.SPELLING_FIX.format(code=fixed)
                if kind == "empty" and (fixed := selection_fixes.dated_selection(_answering_code(traj, code), stderr)):
                    return held_notes.EMPTY_DATES_FIX.format(code=fixed)
                kept = coercion.numbers_kept(code, stderr) if kind == "loss" else None
                if kept is None:
                    return note
                # the lossy line wrote into a given table: the code to run needs the values as they were given
                return held_notes.NUMBERS_KEPT_FIX.format(restored=await self._restored(), code=kept)
        if self.review and not traj.meta.get("typed_asked"):
            seen = typed.seen_text(traj)
            numbers = typed.typed_numbers(code, seen) or typed.prose_guesses(traj, code, seen)
            if numbers:  # once: the values were guessed before the code that computes them ran
                traj.meta["typed_asked"] = True
                traj.meta["held_typed"] = {"answer": repr(value)[:2000], "code": code[:4000]}  # for a confirmation
                call = typed.typed_call(code)
                fix = held_notes.TYPED_FIX.format(call=call) if call else ""
                return held_notes.TYPED_NOTE.format(numbers=", ".join(numbers[:6]), fix=fix)
        if self.review and not traj.meta.get("variables_asked"):
            wrong = await self._disagreements(value, code)
            if wrong:  # once: a typed value that the code's own variable of that name contradicts
                traj.meta["variables_asked"] = True
                call = typed.live_call(value, wrong)
                if call == typed.live_call(value, []):  # no variable of the answer's name holds it: say what, not how
                    return held_notes.COMPUTED_OTHER_NOTE.format(wrong="; ".join(wrong[:4]))
                return held_notes.VARIABLES_NOTE.format(wrong="; ".join(wrong[:4]), call=call)
        if self.review and not traj.meta.get("misread_asked"):
            misread = misreadings.note(_answering_code(traj, code), traj.task)
            if misread is not None:  # once: is_normal = p < 0.05, or an MSE sent as the RMSE
                traj.meta["misread_asked"] = True
                traj.meta["held_misread"] = {
                    "verdicts": misreadings.verdicts(value),
                    "answer": repr(value)[:2000],
                    "values": typed.plain_values(value),
                }
                return misread
        if (
            self.review
            and not traj.meta.get("repeats_asked")
            and (answers.as_count(value) is not None or _counts(value))
        ):
            found = entities.repeated(traj.task, code, self.given_tables())
            verified = await self._repeats(found) if found else False
            if found and verified is not False:  # once: rows counted where the task counts users (with repeats)
                traj.meta["repeats_asked"] = True
                traj.meta["held_repeats"] = {
                    "count": answers.as_count(value),
                    "verified": bool(verified),
                    "entity": found[0].entity,
                    "rows": found[0].rows,
                    "distinct": found[0].distinct,
                }
                return entities.note(found)
        if self.review and not traj.meta.get("form_checked"):  # with checks too: they passed, the form is apart
            traj.meta["form_checked"] = True  # once: then the model's own call stands
            form = await asyncio.to_thread(answers.form_problems, traj.task, value, *self._form_tables())
            if answers.missing_keys(traj.task, value):  # said in this note: not asked again, kept if not fixed
                traj.meta["keys_asked"] = True
            if form.problems:
                traj.meta["reviewed"] = True  # the review's warnings travel with the form note: it is the last look
                what = await _summary(traj, value)
                warnings = recovery.summary_warnings(what)
                await _held_for(traj, "form", value, what)
                if warnings:  # a development task: a p-value of -0.1318 went back for its decimals only, and stood
                    await _held_for(traj, "warning", value, what)
                fixed = answers.literal(form.fixed) if form.fixable and not warnings else None
                return held_notes.form_note([*form.problems, *(f"WARNING: {w}" for w in warnings)], fixed)
        if self.review and not traj.meta.get("bounds_asked"):
            unapplied = bounds.unapplied(traj.task, _run_code(traj, code))
            if unapplied:  # once, after the form (a cheap fix): "at least 10 hotels", and no code uses 10
                traj.meta["bounds_asked"] = True
                return bounds.UNAPPLIED_NOTE.format(lines="\n".join(f"- {x}" for x in unapplied))
        if self.review and not traj.meta.get("conditions_asked"):
            extra = conditions.unasked(traj.task, _answering_code(traj, code))
            if extra:  # once: a selection by a value the task never names (a development probe's invented filter)
                traj.meta["conditions_asked"] = True
                return conditions.UNASKED_NOTE.format(lines="\n".join(f"- {x}" for x in extra[:3]))
        if self.review and not traj.meta.get("unapplied_asked"):
            stated = conditions.unapplied(traj.task, _run_code(traj, code), self.given_tables())
            if stated:  # once: "unpaid fire hydrant fines" summed over every ticket (a development probe)
                traj.meta["unapplied_asked"] = True
                return conditions.UNAPPLIED_NOTE.format(lines="\n".join(f"- {x}" for x in stated[:3]))
        if self.review and traj.meta.get("form_checked") and not traj.meta.get("keys_asked"):
            missing = answers.missing_keys(traj.task, value)
            if missing:  # once more after the form check: a later answer dropped names it had (a development task)
                traj.meta["keys_asked"] = True
                wanted = ", ".join(repr(k) for k in answers.missing_keys(traj.task, {}))
                return held_notes.form_note(
                    [f"the answer has no {', '.join(map(repr, missing))} (the task asks for the keys {wanted})"], None
                )
        if self.review and traj.meta.get("reviewed") and not traj.meta.get("new_warning_asked"):
            what = await _summary(traj, value)
            looked = {_warning_kind(w) for w in recovery.summary_warnings(traj.meta.get("held_summary", ""))}
            if any(_warning_kind(w) not in looked for w in recovery.summary_warnings(what)):
                # once: the last look was at an earlier answer; this one is new and warns (a development task: a form
                # hold, then NaN from a log taken twice, and the NaN was `success`); sent again, it fails its checks
                traj.meta["new_warning_asked"] = True
                await _held_for(traj, "warning", value, what)
                return held_notes.review_note(traj.task, what)
        if self.review and not self.checks and not traj.meta.get("reviewed"):
            what = await _summary(traj, value)
            if self.review == "auto" and not recovery.needs_review(traj.task, value, what):
                return None
            traj.meta["reviewed"] = True
            if recovery.summary_warnings(what):
                await _held_for(traj, "warning", value, what)
            return held_notes.review_note(traj.task, what)
        return None

    async def _restored(self, then: str = "") -> str:
        """The given variables put back as given, a note line for each (``then`` after each)."""
        restored = await self.restore_given() if self.restore_given is not None else []
        return "".join(f"\nNote: {r}{then}" for r in restored)

    async def keep_held(self, traj: Trajectory, ended: str, held_value: Callable[[], Awaitable[Any]]) -> None:
        """A run that ends on prose (a reply without code, or the summary at max_steps) after its answer was held
        ends with that answer, not the prose, and not as a success (a development task: 2.29 and 1.15 held for their
        decimals, restated in prose, and the prose was the answer). The form the task asks for is applied where that
        was all the hold was about. ``held_value``: reads the last final_answer value back from the runtime."""
        held = [
            b
            for s in traj.steps
            for b in s.meta.get("blocks", ())
            if b.get("final") and (b.get("held") or b.get("checks"))
        ]
        if not held:
            return
        try:
            value = await held_value()
        except Exception:  # gone, or not transferable: the prose stays the answer
            return
        value = value if self.checks else await self.settled_form(traj, value)
        checks = held[-1].get("checks")
        traj.status, traj.final_answer = "failed_checks", value
        if checks:
            traj.error = traj.error or "the answer failed the task's checks: " + "; ".join(checks)
            return
        kinds = ", ".join(dict.fromkeys(traj.meta.get("held_for", []))) or "a note"
        traj.meta["held_kept"] = True  # the review's suspicion, not the task's checks: verification may confirm it
        traj.meta["failed_checks"] = [f"{ended}; its last answer (held for: {kinds}) stands"]
        traj.error = "the answer kept problems it was held for: " + "; ".join(traj.meta["failed_checks"])

    async def settled_form(self, traj: Trajectory, value: Any) -> Any:
        """The answer sent again after a hold for its form, with what the form check fixes fixed (the decimal places
        and the Yes/No words the task asks for), when that is all that is wrong with its form; otherwise ``value``.
        A small model resends 6.306690 for "two decimal places" as it was (development tasks): the
        number is right and the rounding is mechanical, so the run ends with the form the task asks for."""
        if "form" not in traj.meta.get("held_for", ()) or traj.meta.get("form_settled"):
            return value
        form = await asyncio.to_thread(answers.form_problems, traj.task, value, *self._form_tables())
        if not form.problems or not form.fixable:
            return value
        traj.meta["form_settled"] = form.problems
        return form.fixed

    async def _disagreements(self, value: Any, code: str) -> list[str]:
        """The answer's typed values that the live variables of the same names contradict (``typed.disagreements``)."""
        keys = typed.typed_keys(code) if isinstance(value, dict) and self.variables is not None else {}
        if not keys:
            return []
        skews = [n for n in typed.assigned_names(code) if "skew" in n.lower()]
        live = await self.variables([*keys, *skews])  # type: ignore[misc]
        return typed.disagreements(value, live, keys) + typed.skew_contradictions(
            value, {n: live[n] for n in skews if n in live}
        )

    async def _repeats(self, found: list[entities.Repeated]) -> bool | None:
        """Whether the rows the code counted repeat an id (read back when they are variables, evaluated on the given
        tables when they are a selection written inline: a development task; None: unknown)."""
        names = [n for r in found for n in r.counted]
        live = await self.variables(names) if names and self.variables is not None else {}
        said = entities.repeats_in(found[0], live)
        if said is None:
            said = await asyncio.to_thread(entities.repeats_selected, found[0], self.given_tables())
        return said

    async def kept(self, traj: Trajectory, value: Any, stderr: str, code: str = "", shown: str = "") -> list[str]:
        """The problems an answer was held for that the answer sent again still has (``recovery.kept_problems``);
        ``code``: the code of the reply that sent it, ``shown``: what its earlier blocks printed."""
        problems = []
        if traj.meta.get("typed_asked"):  # typed again, or still: a printed literal is no result (a development task)
            numbers = typed.typed_numbers(code, typed.seen_text(traj) + "\n" + shown, alone=True)
            if numbers:
                problems.append(f"the answer still has numbers typed in that no computed output shows: {numbers[:6]}")
            held = traj.meta.get("held_typed") or {}
            if not numbers and repr(value)[:2000] == held.get("answer") and not _computes(code):
                # confirmed with final_answer(_final_answer): still typed, unless an output has shown them since
                seen_now = typed.seen_text(traj) + "\n" + shown
                unseen = typed.typed_numbers(held.get("code", ""), seen_now, alone=True)
                if unseen:
                    problems.append(
                        f"the answer is still the one typed in before the code ran (confirmed): {unseen[:6]}"
                    )
        if traj.meta.get("variables_asked"):
            problems += [f"the answer still says {w}" for w in await self._disagreements(value, code)]
        misread = traj.meta.get("held_misread")
        if misread is not None:  # the same answer or verdict again, or code that still misreads the result
            verdicts = misread["verdicts"]
            same = repr(value)[:2000] == misread["answer"] or typed.agrees(value, misread.get("values"))  # rounded: 375
            # the same numbers from code that computes them again and no longer misreads stand: the fix changed
            # nothing here (a development task: no outliers with either std; another: 1e-10 in both terms of a huge ratio)
            same = same and not _computes(code) and repr(value)[:2000] != misread.get("recomputed")
            still = misreadings.found(_answering_code(traj, code), traj.task)
            if same or (verdicts and misreadings.verdicts(value) == verdicts) or still:
                problems.append("the answer still misreads the result it was held for (see the note above)")
        if traj.meta.get("bounds_asked"):
            unapplied = bounds.unapplied(traj.task, _run_code(traj, code))
            problems += [f"the answer still comes from code that does not apply {x.split(':')[0]}" for x in unapplied]
        missing = answers.missing_keys(traj.task, value) if traj.meta.get("keys_asked") else []
        if missing:
            problems.append(f"the answer still has no {', '.join(map(repr, missing))}, which the task asks for")
        repeats = traj.meta.get("held_repeats")
        if (
            repeats
            and repeats["verified"]
            and answers.as_count(value) == repeats["count"]
            and not entities.deduplicates(code)
        ):
            problems.append(f"the answer still counts rows where the task counts {repeats['entity']}s (some repeat)")
        held_count = repeats.get("count") if repeats else None
        selection = isinstance(held_count, int) and held_count < repeats.get("rows", 0)  # a count of some rows
        if selection and answers.as_count(value) == repeats["distinct"] and repeats["distinct"] > repeats["count"]:
            # a development task: 18 rows without an email held, then 120, every user in the table, sent as the answer
            problems.append(
                f"the answer counts every {repeats['entity']} in the table, not the rows the task asks about"
            )
        held = [k for k in traj.meta.get("held_for", ()) if k != "form" or not traj.meta.get("form_settled")]
        if not held:  # (a settled form is fixed in the answer that ends the run: settled_form)
            return problems
        if "spelling" in held and _confirmed(code):
            # sent again as it was: the model says the task means the one spelling. The other spellings are a fact
            # of the data, not a suspicion: verification leaves the answer unverified (SPELLING_CONFIRMED)
            traj.meta["spelling_confirmed"] = True
        summary = await _summary(traj, value)
        return problems + await asyncio.to_thread(
            recovery.kept_problems,
            held,
            task=traj.task,
            value=value,
            summary=summary,
            held_summary=traj.meta.get("held_summary", ""),
            again=_again(stderr, code),
            confirmed=_confirmed(code),
            given=self.given_tables(),
        )


_PLAIN_CALLS = frozenset({"final_answer", "round", "float", "int", "str", "bool", "print", "dict", "list", "tuple"})


def _computes(code: str) -> bool:
    """Whether ``code`` computes the value it sends: final_answer's argument has a call other than round, float...
    or names a variable this code assigned from one. An answer typed in, confirmed (``_final_answer``), or rounded
    from what an earlier cell left computes nothing."""
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False

    def calls(node: ast.AST) -> bool:
        return any(isinstance(n, ast.Call) and estimators.node_name(n.func) not in _PLAIN_CALLS for n in ast.walk(node))

    # transitively: `normal = p >= 0.05` after `p = shapiro(x).pvalue` is computed (a development task)
    computed = _derived(tree, calls)
    sent = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and estimators.node_name(n.func) == "final_answer"]
    return any(
        calls(arg) or any(isinstance(x, ast.Name) and x.id in computed for x in ast.walk(arg))
        for call in sent
        for arg in [*call.args, *(k.value for k in call.keywords)]
    )


def _derived(tree: Any, source: Callable[[Any], bool]) -> set[str]:
    """The names ``tree`` assigns from an expression ``source`` accepts, or from one that uses such a name
    (transitively, in any order of the assignments)."""
    import ast

    assigns = [n for n in ast.walk(tree) if isinstance(n, ast.Assign)]
    out: set[str] = set()
    grew = True
    while grew:
        grew = False
        for n in assigns:
            names = {x.id for x in ast.walk(n.value) if isinstance(x, ast.Name)}
            if source(n.value) or names & out:
                new = {t.id for target in n.targets for t in ast.walk(target) if isinstance(t, ast.Name)} - out
                out |= new
                grew |= bool(new)
    return out


def _made_here(code: str) -> bool:
    r"""Whether final_answer sends a variable that ``code`` itself read from data (a subscript, an attribute or a
    call, or arithmetic on such variables): the answer comes from this reply's code even when no call computes it
    (a development task: ``n = orders[...].shape[0]``, ``share = n / total``, and an earlier step's held
    line was read with it). A variable set to a literal or to an earlier cell's variable is not.

    >>> _made_here("n = df[df.a > 1].shape[0]\nfinal_answer(n / len(df))"), _made_here("final_answer(round(x, 2))")
    (True, False)
    >>> _made_here("s = 2.68\nfinal_answer(s)"), _made_here("y = x\nfinal_answer(_final_answer)")
    (False, False)
    """
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False

    def reads(node: ast.AST) -> bool:
        return any(
            isinstance(n, ast.Subscript | ast.Attribute)
            or (isinstance(n, ast.Call) and estimators.node_name(n.func) not in _PLAIN_CALLS)
            for n in ast.walk(node)
        )

    made = _derived(tree, reads)
    sent = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and estimators.node_name(n.func) == "final_answer"]
    return any(
        isinstance(x, ast.Name) and x.id in made
        for call in sent
        for arg in [*call.args, *(k.value for k in call.keywords)]
        for x in ast.walk(arg)
    )


def _answering_code(traj: Trajectory, code: str) -> str:
    """The code an answer came from: the reply's own, and the previous step's too when the reply computes nothing
    (a development task: the sample std computed in one step, its printed value typed into final_answer in the next)."""
    if _computes(code) or _made_here(code):
        return code
    previous = recovery.last_code_step(traj)
    return f"{previous.code}\n\n{code}" if previous is not None and previous.code else code


def _run_code(traj: Trajectory, code: str) -> list[str]:
    """The code of every step so far and the reply's own: a condition applied two steps back is applied."""
    return [s.code for s in traj.steps if s.code] + [code]


# What a cell's stderr note says about the data an answer came from (the mark is in every such note), and the
# note that holds the answer once for it: a coercion dropped values, a selection matched no row or left out its
# value written another way, idxmax picked from
# a wide tie, a test returned nan over missing values, the strongest correlate picked was the variable itself, the
# largest of a text column is its alphabetically last, a value named for the 'not' group came from the yes group.
_NOTED: tuple[tuple[recovery.HeldFor, str, str], ...] = (
    ("loss", coercion.LOSS_MARK, held_notes.LOSS_HELD_NOTE),
    ("epoch", coercion.EPOCH_MARK, held_notes.EPOCH_HELD_NOTE),
    ("empty", matches.MARK, held_notes.EMPTY_HELD_NOTE),
    ("spelling", matches.SPELLING_MARK, held_notes.SPELLING_HELD_NOTE),
    ("tie", matches.TIE_MARK, held_notes.TIE_HELD_NOTE),
    ("nan", value_notes.NAN_MARK, held_notes.NAN_HELD_NOTE),
    ("self", value_notes.SELF_MARK, held_notes.SELF_HELD_NOTE),
    ("numtext", value_notes.NUMTEXT_MARK, held_notes.NUMTEXT_HELD_NOTE),
    ("text", value_notes.TEXT_MARK, held_notes.TEXT_HELD_NOTE),
    ("polarity", matches.POLARITY_MARK, held_notes.POLARITY_HELD_NOTE),
)


def _again(stderr: str, code: str) -> set[str]:
    """The kinds of note an answer sent again after a hold still comes from: its cells wrote the note again. A
    selection by one spelling confirmed as it was (``final_answer(_final_answer)``: the task means that spelling)
    is not one again: its notes are the earlier cell's."""
    kinds = {kind for kind, mark, _ in _NOTED if mark in stderr}
    return kinds - {"spelling"} if _confirmed(code) else kinds


def _confirmed(code: str) -> bool:
    """Whether ``code`` sends the held answer back as it was (``final_answer(_final_answer)``), computing nothing."""
    return "_final_answer" in code and not _computes(code)


def _counts(value: Any) -> bool:
    """Whether the answer is counts per group: a pandas Series of integers (users per country), a table of label
    columns and one integer column (``.size().reset_index(name='count')``), or a dict of integers.

    >>> import pandas as pd
    >>> s = pd.Series([3, 2], index=["Spain", "Italy"])
    >>> _counts(s), _counts(s.rename("n").rename_axis("country").reset_index()), _counts({"Spain": 3, "Italy": 2})
    (True, True, True)
    >>> _counts(s.astype(float)), _counts(pd.DataFrame({"a": [1], "b": [2]})), _counts({"Spain": True})
    (False, False, False)
    """
    if isinstance(value, dict):
        return len(value) > 1 and all(answers.as_count(v) is not None for v in value.values())
    kind = type(value).__name__
    if kind == "Series":
        return _int_dtype(value)
    if kind != "DataFrame" or len(value.columns) < 2:
        return False
    numeric = [c for c in value.columns if str(value[c].dtype)[:1] in "iIuUf"]
    return len(numeric) == 1 and _int_dtype(value[numeric[0]])


def _int_dtype(series: Any) -> bool:
    return str(getattr(series, "dtype", "")).startswith(("int", "Int", "uint", "UInt"))


async def _summary(traj: Trajectory, value: Any) -> str:
    """The answer's summary, without the one-value warning for names the task asks a table, dict or list for."""
    tables, empty_ok = answers.collection_keys(traj.task), answers.absence_possible(traj.task)
    return await asyncio.to_thread(answer_summary, value, tables=tables, empty_ok=empty_ok)


def _warning_kind(warning: str) -> str:
    """A warning without its numbers: the same problem in a rounded answer is no new one.

    >>> _warning_kind("'p' is -0.131836; a p-value is between 0 and 1") == _warning_kind("'p' is -0.13; a p-value is between 0 and 1")
    True
    """
    return re.sub(r"-?\d[\d.,e+-]*", "#", warning)


async def _held_for(traj: Trajectory, kind: recovery.HeldFor, value: Any, summary: str | None = None) -> None:
    """Remember why an answer was held, and what it was: the answer sent next is checked for the same problem."""
    if summary is None:
        summary = await _summary(traj, value)
    traj.meta.setdefault("held_for", []).append(kind)
    traj.meta.setdefault("held_summary", summary)
