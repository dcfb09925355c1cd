"""Keeping a conversation inside the model's context window: old observations elided, the middle summarized by
one LLM call, and at the last the longest messages shortened, so that a reply always has room (a prompt over the
window is a run error). ``Agent`` takes these methods from ``Compaction``; they use its backend (``llm``,
``_count``, ``_generate``) and its settings (``max_tokens``, ``compact_at``, ``keep_recent``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from cave import prompts
from cave.events import Compacted, Event, StepFinished
from cave.generation import Generation
from cave.history import elide_observations, shorten_to_fit
from cave.llm.base import Message
from cave.trajectory import Step, Trajectory

__all__ = ["SUMMARY_ROOM", "Compaction", "next_index"]

SUMMARY_ROOM = 256  # tokens left for the compaction summary's reply


def next_index(traj: Trajectory) -> int:
    """The index the trajectory's next step gets."""
    return traj.steps[-1].index + 1 if traj.steps else 0


class Compaction:
    """The context-window half of ``Agent`` (see the module docstring)."""

    llm: Any
    role: str
    max_tokens: int
    compact_at: float
    keep_recent: int
    _count: Any
    _generate: Any

    def prompt_tokens(self, messages: list[Message]) -> int:
        return sum(self._count(str(m.get("content") or "")) + 4 for m in messages)

    def _window(self) -> int:
        """The backend's context window in tokens (0: it has none to respect)."""
        return getattr(self.llm, "context_window", 0) or 0

    def _room_for_reply(self, messages: list[Message], least: int = 128) -> bool:
        """Whether the context window leaves a reply of ``least`` tokens after ``messages`` (no window: yes)."""
        window = self._window()
        return not window or self.prompt_tokens(messages) + least <= window

    async def _maybe_compact(self, traj: Trajectory, messages: list[Message], head: int) -> AsyncIterator[Event]:
        """Keep the prompt under ``compact_at`` of the window: elide old observations, then summarize; at the last,
        shorten the longest messages so that a reply always has room (a prompt over the window is a run error)."""
        window = self._window()
        if not window:
            return
        limit = int(window * self.compact_at) - self.max_tokens
        before = self.prompt_tokens(messages)
        if before <= limit:
            return
        recent = 2 * self.keep_recent  # the last exchanges stay verbatim
        body_end = max(head, len(messages) - recent)
        elided = elide_observations(messages, head, body_end)
        after = self.prompt_tokens(messages)
        if elided:
            yield Compacted("elide", before, after)
        if after > limit and body_end > head:
            # Still too long: one LLM call summarizes the middle; the task and the recent exchanges stay.
            async for event in self._summarize_middle(traj, messages, head, body_end, before):
                yield event
        self._fit(messages, head, max(window - self.max_tokens, window // 2))

    def _fit(self, messages: list[Message], start: int, target: int) -> None:
        """Shorten the longest of ``messages[start:]`` until the prompt is at most ``target`` tokens."""
        if self.prompt_tokens(messages) > target:
            shorten_to_fit(messages, start, len(messages), target, self.prompt_tokens)

    async def _summarize_middle(
        self, traj: Trajectory, messages: list[Message], head: int, body_end: int, before: int
    ) -> AsyncIterator[Event]:
        middle = messages[head:body_end]
        convo = [*messages[:head], *middle, {"role": "user", "content": prompts.SUMMARY_PROMPT}]
        # the summarizing call must fit as well: a long old reply (literal data, say) is cut, not sent whole
        shorten_to_fit(convo, head, len(convo) - 1, self._window() - SUMMARY_ROOM, self.prompt_tokens)
        t0 = time.time()
        step = Step(
            index=next_index(traj),
            role=self.role,
            messages=convo,
            run_id=traj.run_id,
            kind="compaction",
            started_at=t0,
        )
        gen = Generation()
        async for _ in self._generate(step.index, convo, gen, prose=True):
            pass
        gen.fill(step, time.time() - t0)
        step.duration = step.llm_duration
        task_msg = messages[head - 1]
        base_task = str(task_msg["content"]).split("\n\nProgress so far", 1)[0]
        messages[head - 1] = {
            "role": "user",
            "content": f"{base_task}\n\nProgress so far (your own summary of the earlier steps):\n{gen.text.strip()}",
        }
        del messages[head:body_end]
        traj.steps.append(step)
        after2 = self.prompt_tokens(messages)
        yield Compacted("summary", before, after2, step)
        yield StepFinished(step)
