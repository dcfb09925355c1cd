"""One reply of the model, however many LLM calls it took to make it.

A reply may be continued when a call stops at ``max_tokens`` inside a code block, or re-sampled when the model
repeats a failing cell; the step records the text of the kept calls, their usage summed, and (when one call made
the whole reply) the token ids and logprobs the trainer needs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from cave import prompts

from cave.review import recovery
from cave.events import Event, TextChunk
from cave.llm.base import Completion, Message, TextDelta, Usage
from cave.trajectory import Step, Trajectory

__all__ = ["Generation", "Replying", "strip_reopened_fence"]


@dataclass
class Generation:
    """The reply being made: its text, the calls behind it, and what they cost."""

    text: str = ""
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    completions: list[Completion] = field(default_factory=list)  # the calls whose text makes up ``text``
    calls: int = 0  # every LLM call made for this reply (discarded re-samples included)

    def fill(self, step: Step, llm_duration: float) -> None:
        """Write this reply into ``step``."""
        step.completion = self.text
        step.usage = self.usage
        step.finish_reason = self.finish_reason
        step.llm_duration = llm_duration
        if self.calls > 1:
            step.meta["llm_calls"] = self.calls
        if len(self.completions) > 1:
            step.meta["continuations"] = len(self.completions) - 1
        else:  # token ids are only meaningful for training when one call produced the whole reply
            c = self.completions[0]
            step.token_ids, step.logprobs, step.prompt_token_ids = c.token_ids, c.logprobs, c.prompt_token_ids


class Replying:
    """The replying half of ``Agent``: one model reply per step, continued when cut off inside a code block and
    sampled again when it repeats the failing cell. Uses the agent's backend and sampling settings."""

    llm: Any
    max_tokens: int
    temperature: float
    seed: int | None
    stop: Any
    response_prefix: str | None
    use_stream: bool
    max_continuations: int
    retry_temperature: float | None
    _override: dict[str, Any]
    _room_for_reply: Any

    async def _reply(
        self, traj: Trajectory, messages: list[Message], head: int, step: Step, gen: Generation
    ) -> AsyncIterator[Event]:
        """This step's reply into ``gen``: sampled again (at most twice) while it repeats a failure."""
        index = step.index
        async for event in self._generate(index, messages, gen):
            yield event
        blocks = prompts.extract_code(gen.text)
        for attempt, temperature in enumerate(recovery.retry_temperatures(self.retry_temperature)):
            if not self._repeats(traj, gen.text, blocks):
                break
            # Greedy decoding of a small model tends to repeat the code that just failed, forever. Sample this
            # reply again at retry_temperature, then hotter once more (usage of every call is counted).
            step.meta.setdefault("resampled", []).append({"temperature": temperature, "discarded": gen.text})
            if attempt == 0 and blocks:  # the failing code leaves the context: a small model copies what it sees
                error = recovery.error_line(recovery.last_code_step(traj)) or "a failed check"
                folded = recovery.fold_failed(messages, "\n\n".join(blocks), error, start=head)
                if folded:
                    step.meta["folded"] = folded
                    step.messages = list(messages)
            seed = None if self.seed is None else self.seed + index + 1 + attempt
            self._override = {"temperature": temperature, "seed": seed}
            retry = Generation()
            try:
                async for event in self._generate(index, messages, retry):
                    yield event
            finally:
                self._override = {}
            gen.text, gen.finish_reason, gen.completions = retry.text, retry.finish_reason, retry.completions
            gen.usage, gen.calls = gen.usage + retry.usage, gen.calls + retry.calls
            blocks = prompts.extract_code(gen.text)

    async def _generate(
        self, index: int, messages: list[Message], gen: Generation, *, prose: bool = False
    ) -> AsyncIterator[Event]:
        """One LLM reply, continued when the length limit cut it inside a code block.

        ``prose``: a call that asks for text (the summary at max_steps, a compaction summary): no response prefix.
        """
        convo = messages
        for attempt in range(self.max_continuations + 1):
            completion: Completion | None = None
            async for item in self._call(convo, prose=prose):
                if isinstance(item, TextDelta):
                    yield TextChunk(index, item.text)
                else:
                    completion = item
            assert completion is not None
            gen.completions.append(completion)
            gen.calls += 1
            gen.usage = gen.usage + completion.usage
            gen.finish_reason = completion.finish_reason
            gen.text += strip_reopened_fence(completion.text) if attempt else completion.text
            if completion.finish_reason != "length" or prompts.unclosed_code(gen.text) is None:
                if self.stop and completion.finish_reason == "stop" and prompts.unclosed_code(gen.text) is not None:
                    gen.text = gen.text.rstrip("\n") + "\n```"  # a stop sequence ate the closing fence
                return
            if attempt < self.max_continuations:
                convo = [
                    *messages,
                    {"role": "assistant", "content": gen.text},
                    {"role": "user", "content": prompts.CONTINUE_PROMPT},
                ]
                if not self._room_for_reply(convo):  # the cell stays cut off (and is said to be), not a run error
                    return

    def _repeats(self, traj: Trajectory, text: str, blocks: list[str]) -> bool:
        """Whether this reply repeats the last failing cell or the last refused prose (then it is sampled again)."""
        if self.retry_temperature is None or self.retry_temperature <= self.temperature:
            return False
        return recovery.repeats_failure(traj, blocks) or recovery.repeats_refused_prose(traj, text, blocks)

    async def _call(self, messages: list[Message], *, prose: bool = False) -> AsyncIterator[TextDelta | Completion]:
        """The backend call. Streaming or not, the final Completion (and so the usage) is the same object."""
        kwargs: dict[str, Any] = dict(max_tokens=self.max_tokens, temperature=self.temperature, seed=self.seed)
        kwargs.update(self._override)
        if self.stop:
            kwargs["stop"] = self.stop
        if self.response_prefix and not prose:  # a prefix opening a code block would contradict "do not write code"
            kwargs["prefix"] = self.response_prefix
        if self.use_stream:
            async for item in self.llm.stream(messages, **kwargs):
                yield item
        else:
            completion = await self.llm.complete(messages, **kwargs)
            if completion.text:
                yield TextDelta(completion.text)
            yield completion


def strip_reopened_fence(text: str) -> str:
    """A continuation that restarts with ```python would open a second block; drop that line.

    >>> strip_reopened_fence("```python\\nx = 1\\n```")
    'x = 1\\n```'
    """
    stripped = text.lstrip()
    if stripped.startswith("```"):
        nl = stripped.find("\n")
        return stripped[nl + 1 :] if nl != -1 else ""
    return text
