"""What a conversation carries across turns and resumes: the earlier turn's reply, the stored steps' messages, and
what compaction keeps of old observations."""

from __future__ import annotations

from collections.abc import Callable

from cave.llm.base import Message
from cave.trajectory import Trajectory

__all__ = ["answer_note", "elide_observations", "resume_messages", "shorten_to_fit"]

ELIDE_OVER = 300  # characters: shorter observations stay whole
KEEP_AT_LEAST = 400  # characters a shortened message keeps (its head and its tail)


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
        # the stable prompt layout puts the runtime's state note before the observation: old either way
        observation = content.startswith("Observation:") or "\n\nObservation:" in content
        if messages[i]["role"] == "user" and observation and len(content) > ELIDE_OVER:
            messages[i] = {
                "role": "user",
                "content": f"Observation: [elided to save context; it was {len(content)} characters]",
            }
            elided += 1
    return elided


def shorten_to_fit(
    messages: list[Message], start: int, end: int, target: int, count: Callable[[list[Message]], int]
) -> int:
    """Halve the longest message in ``messages[start:end]`` (keeping its head and tail) until ``count(messages)``
    is at most ``target``; in place, returns the cuts. When every message there is down to KEEP_AT_LEAST
    characters and the prompt is still too long, the oldest are replaced by a one-line stub, one by one; it always
    ends (each message is halved a bounded number of times and stubbed at most once).

    The last resort of compaction: a prompt over the context window is an error, a shortened old reply is not.
    Tails are kept because that is where a traceback's error is.

    >>> msgs = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "a" * 2000 + "END"}]
    >>> shorten_to_fit(msgs, 1, 2, 150, lambda ms: sum(len(m["content"]) for m in ms) // 4)
    2
    >>> msgs[1]["content"].endswith("END"), len(msgs[1]["content"]) < 700
    (True, True)
    >>> many = [{"role": "user", "content": "task"}] + [{"role": "user", "content": "x" * 700} for _ in range(6)]
    >>> shorten_to_fit(many, 1, 7, 400, lambda ms: sum(len(m["content"]) for m in ms) // 4) > 0
    True
    >>> [len(m["content"]) < 100 for m in many]
    [True, True, True, True, False, False, False]
    """
    cuts = 0
    done: set[int] = set()  # messages a halving no longer shortens
    while count(messages) > target:
        sizes = {i: len(str(messages[i].get("content") or "")) for i in range(start, end) if i not in done}
        i = max(sizes, key=sizes.__getitem__, default=None)
        if i is None or sizes[i] <= KEEP_AT_LEAST:
            break
        content = str(messages[i]["content"])
        keep = max(KEEP_AT_LEAST, len(content) // 2) // 2
        gap = len(content) - 2 * keep
        shorter = f"{content[:keep]}\n[... {gap} characters cut to fit the context window ...]\n{content[-keep:]}"
        if len(shorter) >= len(content):  # the marker costs what the cut saves: this one is as short as it gets
            done.add(i)
            continue
        messages[i] = {**messages[i], "content": shorter}
        cuts += 1
    for i in range(start, end):  # still too long: the oldest messages go, their roles stay
        if count(messages) <= target:
            break
        content = str(messages[i].get("content") or "")
        stub = f"[{len(content)} characters cut to fit the context window]"
        if len(stub) < len(content):
            messages[i] = {**messages[i], "content": stub}
            cuts += 1
    return cuts


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
