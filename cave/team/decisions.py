"""Structured decisions: the functions injected into a deciding role's runtime (``verdict``, ``route``,
``publish``) and their parsing on the host. Kept free of heavy imports: a kernel that unpickles
``verdict`` imports this module and ``cave.cells`` only."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cave.cells import FINAL_VAR, FinalAnswer

__all__ = [
    "ANSWER_PREVIEW",
    "PUBLISHED_VAR",
    "Route",
    "Verdict",
    "make_route",
    "parse_route",
    "parse_verdict",
    "publish",
    "summarize",
    "verdict",
]

PUBLISHED_VAR = "_cave_published"  # name -> (sequence number, description), kept in the role's runtime
ANSWER_PREVIEW = 1500  # characters of another role's answer shown in a message


@dataclass
class Verdict:
    """A critic's decision on a worker's answer."""

    approve: bool
    feedback: str = ""


@dataclass
class Route:
    """A router's choice of the next role, with what that role should do."""

    role: str
    message: str = ""


def _end_turn(value: Any) -> None:
    # Same contract as cave.cells.final_answer: the value goes into the namespace of the code that
    # called us (frame 2: the agent's cell), so a host across a process boundary can retrieve it.
    sys._getframe(2).f_globals[FINAL_VAR] = value
    raise FinalAnswer(value)


def verdict(approve: bool, feedback: str = "") -> None:
    """End your turn with your decision: approve=True if the answer is correct, else False with feedback saying what is wrong."""
    if type(approve).__name__ == "bool_":  # numpy's bool, from a comparison of numpy/pandas values
        approve = bool(approve)
    if not isinstance(approve, bool):
        raise TypeError(f"verdict(approve=...) must be True or False, got {approve!r}")
    # Plain data, not a Verdict: an untrusted (sandboxed) kernel hands back only JSON-safe values, never pickles.
    _end_turn({"approve": approve, "feedback": str(feedback)})


def make_route(choices: Sequence[str], descriptions: Mapping[str, str] | None = None) -> Callable[..., None]:
    """The ``route`` function for a router role: ``route(role, message="")`` among ``choices``."""
    allowed = tuple(choices)

    def route(role: str, message: str = "") -> None:
        if role not in allowed:
            raise ValueError(f"route({role!r}): unknown role; choose one of {', '.join(map(repr, allowed))}")
        _end_turn({"role": role, "message": str(message)})  # plain data: see verdict()

    listed = ", ".join(
        f"'{c}'" + (f" ({descriptions[c]})" if descriptions and descriptions.get(c) else "") for c in allowed
    )
    route.__doc__ = f"End your turn by choosing who acts next: one of {listed}; message says what they should do."
    return route


def publish(name: str, obj: Any, description: str = "") -> None:
    """Hand ``obj`` to the roles that act after you, as a variable named ``name`` in their session."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"publish(name, ...): name must be a Python identifier, got {name!r}")
    ns = sys._getframe(1).f_globals
    ns[name] = obj
    registry = ns.setdefault(PUBLISHED_VAR, {})
    seq = max((s for s, _ in registry.values()), default=0) + 1
    registry[name] = (seq, str(description))


def parse_verdict(value: Any) -> Verdict | None:
    """A Verdict from a structured value, or None when it is not one (free text is never parsed).

    >>> parse_verdict(Verdict(False, "off by one")), parse_verdict(True), parse_verdict({"approve": "reject"})
    (Verdict(approve=False, feedback='off by one'), Verdict(approve=True, feedback=''), Verdict(approve=False, feedback=''))
    >>> parse_verdict("looks right to me") is None
    True
    """
    if isinstance(value, Verdict):
        return value
    if type(value).__name__ == "Verdict" and hasattr(value, "approve"):  # a copy whose class came back by another path
        return Verdict(bool(value.approve), str(getattr(value, "feedback", "")))
    if isinstance(value, bool):
        return Verdict(value)
    if isinstance(value, Mapping) and "approve" in value:
        a = value["approve"]
        if isinstance(a, str) and a.strip().lower() in ("approve", "reject"):
            a = a.strip().lower() == "approve"
        if isinstance(a, bool):
            return Verdict(a, str(value.get("feedback", "")))
    return None


def parse_route(value: Any, choices: Sequence[str]) -> Route | None:
    """A Route among ``choices`` from a structured value (a Route, {"role": ...}, or exactly a role name).

    >>> parse_route("search", ["search", "answer"]), parse_route("I'd search", ["search"]) is None
    (Route(role='search', message=''), True)
    """
    if isinstance(value, Route) or (type(value).__name__ == "Route" and hasattr(value, "role")):
        route = Route(str(value.role), str(getattr(value, "message", "")))
    elif isinstance(value, Mapping) and "role" in value:
        route = Route(str(value["role"]), str(value.get("message", "")))
    elif isinstance(value, str):
        route = Route(value.strip())
    else:
        return None
    return route if route.role in choices else None


def summarize(value: Any, limit: int = ANSWER_PREVIEW) -> str:
    """How one role's answer appears in a message to another: text as is, objects as a bounded preview.

    >>> summarize(42), summarize("x" * 10, limit=5)
    ('42', 'xxxx…')
    """
    from cave.runtimes.describe import clip, preview, type_name

    if isinstance(value, str):
        return value if len(value) <= limit else value[: limit - 1] + "…"
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    if isinstance(value, (Verdict, Route)):
        return repr(value)
    text = repr(value)
    if len(text) <= min(limit, 400) and "\n" not in text:
        return text
    return clip(f"<{type_name(value)}: {preview(value)}>", limit)
