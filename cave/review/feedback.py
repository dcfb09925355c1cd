"""What the model reads after a step, and whether a reply without code may end the run.

The agent's feedback half: after a step that ran code, the observation gets its notes (the same code again, an
unknown function, encoded text features, a loop) and, in the stable layout, the note of what changed in the runtime;
after a reply without code, the reason it cannot be the answer yet (a failed cell just before it, declared outputs
still missing, ...) or None when it can.
"""

from __future__ import annotations

from typing import Any

from cave import prompts
from cave.review import failure_notes, fired, nan_tests, prose, recovery, typed
from cave.runtimes import value_notes
from cave.trajectory import Step, Trajectory

__all__ = ["Feedback"]


class Feedback:
    """Mixed into ``Agent``: uses its runtime, task settings and given objects."""

    runtime: Any
    checks: Any
    outputs: Any
    insist_on_code: bool
    expect_calls: Any
    verify: int | None
    prompt_layout: str
    describe: Any
    _state_note: Any
    _given_functions: Any
    _given_tables: Any

    def _repeat_note(self, step: Step) -> str:
        """The same code again: after an error, read it; after output, answer with it (or change the code)."""
        if step.execution is not None and not step.execution.ok:
            return prompts.REPEAT_NOTE
        if recovery.runtime_noted(step):  # not "answer with it": the Note says the result is doubtful
            rewritten = recovery.noted_rewrite(step.code or "", step.execution.stderr if step.execution else "")
            return prompts.REPEAT_NOTED_NOTE + (prompts.NOTED_CELL.format(code=rewritten) if rewritten else "")
        if typed.only_displays(step.code or ""):  # not "answer with it": TYPED_DISPLAY_NOTE follows
            return prompts.REPEAT_OK_NOTE.split(",", 1)[0] + "."
        name = recovery.last_assigned(step.code or "")
        return prompts.REPEAT_CALL_NOTE.format(name=name) if name else prompts.REPEAT_OK_NOTE

    async def _next_message(self, traj: Trajectory, step: Step, records: list[dict[str, Any]]) -> str:
        """What the model reads after this step: the observation, its notes, and (stable layout) the state."""
        infos = await self.describe()
        if typed.only_displays(step.code or "") and not traj.called_final_answer:  # a typed dict shown, not answered
            fired.note(step, "typed_display", prompts.TYPED_DISPLAY_NOTE)
            step.meta["typed_display"] = True
        tables = self._given_tables()
        # the given tables are the data: not "the file does not exist" as an answer
        fired.note(step, "missing_file", failure_notes.missing_file_note(step, tables))
        if step.execution is not None and value_notes.NAN_MARK in step.execution.stderr:
            dropped = nan_tests.nan_dropped(step.code or "")
            # the note says to drop the NaN; the code that does it is what the 1.5B copies
            fired.note(step, "nan_dropped", nan_tests.NAN_FIX.format(code=dropped) if dropped else None)
        # durations or numbers written as text: the conversion, not "keep the numeric columns"
        fired.note(step, "text_values", failure_notes.text_values_note(step, records, tables))
        # a table about one stock has no symbol column to select that stock by
        fired.note(step, "missing_filter", failure_notes.missing_filter_note(traj.task, step, tables))
        # then "none of them fits" in plain text is an answer, not prose after an error
        if fired.note(step, "unknown_function", recovery.unknown_function_note(step, self._given_functions())):
            step.meta["unknown_function"] = True
        # text reached a model: the columns the task names, encoded
        fired.note(step, "features", failure_notes.features_note(traj.task, step, tables))
        if fired.note(step, "loop", failure_notes.loop_note(traj, step, records, infos, tables)):
            step.meta["loop_note"] = True
        message = step.observation
        if self.prompt_layout == "stable":  # the state note travels in the message, not in the observation
            note = self._state_note(infos)
            if note:  # before the observation: what to do next (an error, a fix) is what the model reads last
                step.meta["state"] = note
                message = f"{note}\n\n{step.observation}"
        return message

    async def _prose_refusal(self, traj: Trajectory, text: str) -> str | None:
        """Why a reply without code cannot end the run here (None: it can be the answer)."""
        given = any(reg.kind == "variable" for reg in self.runtime.registered.values())
        refusal = prose.prose_refusal(
            traj,
            checks=bool(self.checks),
            insist_on_code=self.insist_on_code,
            given=given,
            text=text,
            functions=self._given_functions(),
            expect_calls=self.expect_calls,
            verified=self.verify is not None and not self.expect_calls,
        )
        if refusal is not None or not prose.may_refuse_prose(traj, self.insist_on_code):
            return refusal
        missing = await self._missing_outputs()
        return recovery.missing_note(missing) if missing else None

    async def _missing_outputs(self) -> list[str]:
        if not self.outputs:
            return []
        present = {v.name for v in await self.describe()}
        return [name for name in self.outputs if name not in present]
