"""What a conversation carries across turns and resumes: the earlier turn's reply, the stored steps' messages, and
what compaction keeps of old observations."""

from __future__ import annotations

from cave.llm.base import Message
from cave.trajectory import Trajectory

__all__ = ["answer_note", "elide_observations", "resume_messages"]

ELIDE_OVER = 300  # characters: shorter observations stay whole


def elide_observations(messages: list[Message], start: int, end: int) -> int:
    """Replace each long observation in ``messages[start:end]`` with a one-line stub, in place; returns how many.

    The first step of compaction: old outputs are what a long run has most of, and what it needs least.

    >>> msgs = [{"role": "user", "content": "Observation:\\n" + "x" * 400}, {"role": "user", "content": "Observation: ok"}]
    >>> elide_observations(msgs, 0, 2), msgs[0]["content"]
    (1, 'Observation: [elided to save context; it was 413 characters]')
    """
    elided = 0
    for i in range(start, end):
        content = str(messages[i].get("content") or "")
        if messages[i]["role"] == "user" and content.startswith("Observation:") and len(content) > ELIDE_OVER:
            messages[i] = {
                "role": "user",
                "content": f"Observation: [elided to save context; it was {len(content)} characters]",
            }
            elided += 1
    return elided


def answer_note(traj: Trajectory) -> str:
    """What a later turn sees of this one: the reply whose code finished it.

    Showing the code (not a prose note about the answer) matters: small models imitate the assistant turns
    they see, and a note such as "(final_answer was called with ...)" taught them to answer the next turn
    with an invented result and no code. The runtime's variables are in the system prompt anyway.
    """
    if traj.called_final_answer:
        last = next((s for s in reversed(traj.steps) if s.kind == "action" and s.code), None)
        if last is not None:
            return last.completion[:1500]
        r = repr(traj.final_answer)
        return f"final_answer({r[:300] + '...' if len(r) > 300 else r})"
    return str(traj.final_answer or "")[:1000]


def resume_messages(traj: Trajectory) -> list[Message]:
    """The conversation after the last stored action step: its prompt, its reply, its observation."""
    for step in reversed(traj.steps):
        if step.kind == "action" and step.messages:
            messages = [dict(m) for m in step.messages]
            messages.append({"role": "assistant", "content": step.completion})
            if step.observation:
                state = step.meta.get("state")  # what changed in the runtime, as the model saw it after this step
                content = f"{state}\n\n{step.observation}" if state else step.observation
                messages.append({"role": "user", "content": content})
            return messages
    return [{"role": "system", "content": ""}, {"role": "user", "content": traj.task}]
