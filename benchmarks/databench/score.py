"""The competition's compare rule (``databench_eval.Evaluator.default_compare``, databench-eval 4.0.1), written
out here so that cave needs neither that package nor its ``datasets`` dependency. A response is a string (the
organizers' runner writes ``str(response)`` with newlines as spaces); the truth and the answer type come from
the QA table.

>>> compare("True", "True", "boolean"), compare("yes", "True", "boolean"), compare("3.149", "3.14", "number")
(True, True, True)
>>> compare("3.15", "3.14", "number"), compare("['a', 'b']", "['b', 'a']", "list[category]")
(False, True)
>>> compare("['a' 'b']", "['a', 'b']", "list[category]")  # an array's text has no commas: one item
False
>>> compare("[1.5, 2.0]", "[2, 1.5]", "list[number]"), compare("2024-03-01 00:00:00", "2024-03-01", "category")
(True, True)
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["SEMANTICS", "compare", "response_text"]

SEMANTICS = ("boolean", "category", "number", "list[category]", "list[number]")
STRIP = "[]'\" "
NULLS = ("None", "nan", "", "np.nan")  # what the rule reads as no value (after stripping STRIP)
TRUE, FALSE = ("true", "yes", "y"), ("false", "no", "n")


def response_text(answer: Any) -> str:
    """An answer object as the organizers' runner writes a response: ``str(answer)``, newlines as spaces."""
    return str(answer).replace("\n", " ")


def compare(value: Any, truth: Any, semantic: str) -> bool:
    """Whether the response ``value`` is right for ``truth`` under the rule for answers of type ``semantic``."""
    semantic = semantic.strip()
    v, t = str(value).strip(STRIP), str(truth).strip(STRIP)
    if v in NULLS or t in NULLS:
        return v in NULLS and t in NULLS
    if semantic == "boolean":
        return (v.lower() in TRUE and t.lower() in TRUE) or (v.lower() in FALSE and t.lower() in FALSE)
    if semantic == "category":
        return v == t or _same_date(v, t)
    if semantic == "number":
        a, b = _number(str(value)), _number(str(truth))
        return a is not None and b is not None and math.trunc(a * 100) == math.trunc(b * 100)
    if semantic == "list[category]":
        a, b = _items(value), _items(truth)
        if len(a) != len(b):
            return False
        dates_a, dates_b = _dates(a), _dates(b)
        return set(dates_a) == set(dates_b) if dates_a is not None and dates_b is not None else set(a) == set(b)
    if semantic == "list[number]":
        a, b = _numbers(value), _numbers(truth)
        return a is not None and b is not None and len(a) == len(b) and set(a) == set(b)
    raise ValueError(f"answer type {semantic!r} is not one of the competition's: {', '.join(SEMANTICS)}")


def _number(text: str) -> float | None:
    """The rule's reading of a number: every character but digits, '.' and '-' dropped."""
    try:
        return float("".join(c for c in text if c.isdigit() or c in ".-"))
    except ValueError:
        return None


def _items(value: Any) -> list[str]:
    items = [x.strip(STRIP) for x in str(value).strip("[]").split(",")]
    return ["" if x in NULLS else x for x in items]


def _numbers(value: Any) -> list[float] | None:
    parts = [p for p in str(value).strip("[]").split(",") if p.strip()]
    read = [_number(p.strip()) for p in parts]
    if any(x is None for x in read):
        return None
    return [int(x * 100) / 100 for x in sorted(read)]  # type: ignore[operator]


def _same_date(a: str, b: str) -> bool:
    found = _dates([a, b])
    return found is not None and found[0] == found[1]


def _dates(items: list[str]) -> list[Any] | None:
    import pandas as pd

    try:
        return [pd.to_datetime(x).date() for x in items]
    except (ValueError, TypeError, OverflowError):
        return None
