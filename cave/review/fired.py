"""Which notes a step carried: the names the review and the runtime's notes leave in a step's record, so that how
often each one speaks on unseen tasks, and whether the run it spoke in ended right, can be counted (the held-out
harness's totals; ``python -m cave.benchmarks.heldout``). Holds name themselves in ``held_by``; this is the same
for notes, which only inform the model.

- ``note(step, name, text)``: add a review note to a step's observation and its name to ``step.meta["noted"]``.
- ``block_notes(execution, guard_notes)``: the names of what one block's result carries: the runtime's notes on
  its values (read by their marks in stderr), the error's hint and rewritten line, the guard's notes.
- ``run_notes(steps)``: every name a run's steps carry, once each.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cave.review.error_hints import error_help
from cave.runtimes import aligned, coercion, matches, value_notes

__all__ = ["RUNTIME_MARKS", "block_notes", "note", "run_notes", "runtime_notes"]

# each kind of the runtime's value notes by the phrase every note of that kind carries
RUNTIME_MARKS: dict[str, str] = {
    "runtime.empty_selection": matches.MARK,
    "runtime.tie": matches.TIE_MARK,
    "runtime.polarity": matches.POLARITY_MARK,
    "runtime.spelling": matches.SPELLING_MARK,
    "runtime.lossy_conversion": coercion.LOSS_MARK,
    "runtime.epoch_units": coercion.EPOCH_MARK,
    "runtime.nan_test": value_notes.NAN_MARK,
    "runtime.self_correlate": value_notes.SELF_MARK,
    "runtime.text_extreme": value_notes.TEXT_MARK,
    "runtime.numbers_as_text": value_notes.NUMTEXT_MARK,
    "runtime.bound_out_of_range": value_notes.RANGE_MARK,
    "runtime.diff_across_things": value_notes.ACROSS_MARK,
    "runtime.misaligned": aligned.ALIGN_MARK,
}
_NOTE_HEAD = "Note (line "  # how every runtime note begins, the unmarked kinds too


def note(step: Any, name: str, text: str | None) -> bool:
    """Add ``text`` (when there is one) to the step's observation, and ``name`` to the notes it carries.

    >>> from types import SimpleNamespace as S
    >>> s = S(observation="Out: 3", meta={})
    >>> note(s, "loop", "Note: the same cell again."), note(s, "features", None), s.meta
    (True, False, {'noted': ['loop']})
    """
    if not text:
        return False
    step.observation += "\n" + text
    step.meta.setdefault("noted", []).append(name)
    return True


def runtime_notes(stderr: str) -> list[str]:
    """The kinds of runtime notes in a block's stderr (``runtime.other`` for a note of no marked kind).

    >>> runtime_notes("Note (line 2): == 'Brooklyn' left out 2 rows of 'borough' that hold it spelled another way")
    ['runtime.spelling']
    >>> runtime_notes("Note (line 1): .iloc[0] is the entry labelled 'b'"), runtime_notes("")
    (['runtime.other'], [])
    """
    kinds = [name for name, mark in RUNTIME_MARKS.items() if mark in stderr]
    if not kinds and _NOTE_HEAD in stderr:
        kinds = ["runtime.other"]
    return kinds


def block_notes(execution: Any, guard_notes: Sequence[str] = ()) -> list[str]:
    """The names of the notes one block's result carries, as ``format_execution`` shows them to the model."""
    names = runtime_notes(execution.stderr or "")
    err = execution.error
    if err is not None and not execution.timed_out:
        hint, fixed = error_help(err.type, err.message, str(err))
        names += [name for name, text in (("error_hint", hint), ("line_fix", fixed)) if text]
    if guard_notes:
        names.append("guard")
    return names


def run_notes(steps: Sequence[Any]) -> list[str]:
    """Every note name the run's steps carry (review notes and their blocks' notes), sorted, once each.

    >>> from types import SimpleNamespace as S
    >>> run_notes([S(meta={"noted": ["loop"], "blocks": [{"noted": ["error_hint"]}]}), S(meta={"noted": ["loop"]})])
    ['error_hint', 'loop']
    """
    names = {n for s in steps for n in s.meta.get("noted", ())}
    names |= {n for s in steps for b in s.meta.get("blocks", ()) for n in b.get("noted", ())}
    return sorted(names)
