"""One reply of the model, however many LLM calls it took to make it.

A reply may be continued when a call stops at ``max_tokens`` inside a code block, or re-sampled when the model
repeats a failing cell; the step records the text of the kept calls, their usage summed, and the token ids and
logprobs the trainer needs: one call's, or a continued reply's calls joined into one response whose tokens between
the calls are masked (``meta["response_mask"]``; ``meta["untrainable"]`` says why when they cannot be joined).
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from cave import prompts
from cave.events import Event, TextChunk
from cave.llm.base import Completion, Message, TextDelta, Usage
from cave.review import prose, recovery
from cave.trajectory import Step, Trajectory

__all__ = ["Generation", "Replying", "continued_tokens", "repetitive", "strip_reopened_fence"]

CODE_PREFIX = "```python\n"  # where a retry of refused prose starts: inside a code block
ANSWER_PREFIX = CODE_PREFIX + "final_answer("  # where a retry of a working cell run a third time starts


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
        if len(self.completions) == 1:
            c = self.completions[0]
            step.token_ids, step.logprobs, step.prompt_token_ids = c.token_ids, c.logprobs, c.prompt_token_ids
            return
        step.meta["continuations"] = len(self.completions) - 1
        joined = continued_tokens(self.completions)
        if isinstance(joined, str):  # the trainer counts such steps as untrainable, with this reason
            step.meta["untrainable"] = joined
            return
        step.prompt_token_ids, step.token_ids, step.logprobs, mask = joined
        step.meta["response_mask"] = mask


def continued_tokens(completions: list[Completion]) -> tuple[list[int], list[int], list[float], list[int]] | str:
    """One trainable call out of a reply continued past ``max_tokens``: (prompt ids, response ids, logprobs, mask).

    Each continuation's prompt is the conversation so far, the cut reply as an assistant turn and the request to go
    on; when its tokens begin with the previous call's prompt and response tokens, the reply is one response to the
    first prompt whose tokens between the calls (the end of the assistant turn, the request, a response prefix) are
    masked out (mask 0, logprob 0.0): the policy is trained on what it sampled, in the context it sampled it in.
    Otherwise (a backend without token ids or logprobs, a template that re-tokenizes the reply differently) the reason
    it cannot be, as a string.

    >>> from cave.llm.base import Completion
    >>> a = Completion("x", prompt_token_ids=[1, 2], token_ids=[3, 4], logprobs=[-0.1, -0.2])
    >>> b = Completion("y", prompt_token_ids=[1, 2, 3, 4, 9, 9], token_ids=[5], logprobs=[-0.3])
    >>> continued_tokens([a, b])
    ([1, 2], [3, 4, 9, 9, 5], [-0.1, -0.2, 0.0, 0.0, -0.3], [1, 1, 0, 0, 1])
    >>> continued_tokens([a, Completion("y", prompt_token_ids=[1, 2, 8], token_ids=[5], logprobs=[-0.3])])
    "continuation 1's prompt does not extend the tokens before it (the template re-tokenized the reply)"
    """
    first = completions[0]
    if not first.prompt_token_ids:
        return "the backend returned no prompt token ids"
    context = list(first.prompt_token_ids)
    response: list[int] = []
    logprobs: list[float] = []
    mask: list[int] = []
    for i, c in enumerate(completions):
        if c.token_ids is None or c.logprobs is None or not c.prompt_token_ids:
            return f"call {i} of the reply has no token ids or logprobs"
        prompt = list(c.prompt_token_ids)
        if prompt[: len(context)] != context:
            return (
                f"continuation {i}'s prompt does not extend the tokens before it (the template re-tokenized the reply)"
            )
        between = prompt[len(context) :]
        response += between + list(c.token_ids)
        logprobs += [0.0] * len(between) + list(c.logprobs)
        mask += [0] * len(between) + [1] * len(c.token_ids)
        context = prompt + list(c.token_ids)
    return list(first.prompt_token_ids), response, logprobs, mask


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
    checks: Any
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
            retry_with: dict[str, Any] = {"temperature": temperature}
            if (
                prose.repeats_refused_prose(traj, gen.text, blocks, always_refused=bool(self.checks))
                and self._may_open_code()
            ):
                # refused words said again: a hotter sample of a small model says them once more (the answer
                # stated, the nudge to pass its variable ignored), so the retry starts inside a code block
                retry_with["prefix"] = CODE_PREFIX
            elif recovery.repeats_answered_cell(traj, blocks) and self._may_open_code():
                # a cell that worked, run a third time after the note to answer with its result: a hotter sample
                # of a small model runs it again word for word (a development task: six times, to max_steps,
                # the answer only printed), so the retry starts at the call the note asked for, the argument its own
                retry_with["prefix"] = ANSWER_PREFIX
            step.meta.setdefault("resampled", []).append({**retry_with, "discarded": gen.text})
            if attempt == 0 and recovery.repeats_failure(traj, blocks):  # the failing code leaves the context
                error = recovery.error_line(recovery.last_code_step(traj)) or "a failed check"
                folded = recovery.fold_failed(messages, "\n\n".join(blocks), error, start=head)
                if folded:
                    step.meta["folded"] = folded
                    step.messages = list(messages)
            seed = None if self.seed is None else self.seed + index + 1 + attempt
            self._override = {**retry_with, "seed": seed}
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
            if attempt == self.max_continuations or repetitive(gen.text):  # a decoding loop is not continued
                return
            convo = [
                *messages,
                {"role": "assistant", "content": gen.text},
                {"role": "user", "content": prompts.CONTINUE_PROMPT},
            ]
            if not self._room_for_reply(convo):  # the cell stays cut off (and is said to be), not a run error
                return

    def _may_open_code(self) -> bool:
        """Whether a retry may start the reply inside a code block: the backend takes a response prefix and the
        agent sets none of its own (one that opens code already makes every reply start there)."""
        return not self.response_prefix and bool(getattr(self.llm, "supports_prefix", False))

    def _repeats(self, traj: Trajectory, text: str, blocks: list[str]) -> bool:
        """Whether this reply repeats the last failing cell, a cell already run twice, the last refused prose or a
        reply already cut off at the length limit (then it is sampled again)."""
        if self.retry_temperature is None or self.retry_temperature <= self.temperature:
            return False
        return (
            recovery.repeats_failure(traj, blocks)
            or recovery.repeats_twice(traj, blocks)
            or prose.repeats_refused_prose(traj, text, blocks, always_refused=bool(self.checks))
            or recovery.repeats_cut_off(traj, text)
        )

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


def repetitive(text: str, *, min_chars: int = 1000) -> bool:
    """Whether ``text`` is mostly the same lines written again and again: a decoding loop, not code to continue
    past the length limit. A development run: after a review note, the 1.5B wrote the note's sentences as comments
    over and over, continued to 1,833 tokens (300 s), four steps in a row.

    >>> note = "# Check the target column and the labels to ensure they are correctly labeled.\\n"
    >>> repetitive("```python\\n" + note * 20), repetitive("```python\\n" + "".join(f"x{i} = df['c{i}'].mean()\\n" for i in range(80)))
    (True, False)
    >>> repetitive("```python\\n" + "ab " * 800)  # one line, one phrase: by how well it compresses
    True
    """
    if len(text) < min_chars:
        return False
    lines = [line.strip() for line in text.splitlines() if len(line.strip()) >= 8]
    if len(lines) >= 6:
        counts = Counter(lines)
        if sum(c for c in counts.values() if c >= 3) >= 0.5 * len(lines):
            return True
    return len(zlib.compress(text.encode("utf-8"))) < 0.08 * len(text.encode("utf-8"))


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
