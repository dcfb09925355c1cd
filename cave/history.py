"""What a conversation carries across turns and resumes: the earlier turn's reply, the stored steps' messages."""

from __future__ import annotations

from cave.llm.base import Message
from cave.trajectory import Trajectory

__all__ = ["answer_note", "resume_messages"]


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
