"""One reply of the model, however many LLM calls it took to make it.

A reply may be continued when a call stops at ``max_tokens`` inside a code block, or re-sampled when the model
repeats a failing cell; the step records the text of the kept calls, their usage summed, and (when one call made
the whole reply) the token ids and logprobs the trainer needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cave.llm.base import Completion, Usage
from cave.trajectory import Step

__all__ = ["Generation", "strip_reopened_fence"]


@dataclass
class Generation:
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
