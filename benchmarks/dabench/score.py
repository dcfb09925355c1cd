"""Scoring DABench answers: the official rule ("strict") and a rounded one.

The official evaluation (``examples/DA-Agent/eval_closed_form.py``) pulls ``@name[value]`` pairs out of the
response and calls a sub-answer right when its text equals the label's, or both parse as numbers within 1e-6;
a question is right when every labelled sub-answer is. The agent's ``final_answer({name: value})`` is written
in that format first (``response``), then scored by that rule.

"rounded" also accepts a number that rounds to the label at the label's own decimal places (34.6543 for a
label of 34.65), element by element for comma-separated labels: the question asks for a rounding that a model
may skip, and this separates "computed it wrong" from "did not round".

>>> strict = score(response({"mean_fare": 34.6543}), [("mean_fare", "34.65")])
>>> strict.strict, strict.rounded
(False, True)
>>> score("@a[1.0] @b[Yes]", [("a", "1"), ("b", "yes")]).sub_strict
1
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from cave.benchmarks.dabench.data import FORMAT


def extract_format(text: str) -> dict[str, str]:
    """``@name[value]`` pairs of a response (the official regular expression; a later pair wins)."""
    return dict(FORMAT.findall(text))


def is_equal(response: str | None, label: str) -> bool:
    """The official sub-answer rule."""
    if response == label:
        return True
    try:
        return abs(float(response) - float(label)) < 1e-6  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def rounds_to(response: str | None, label: str) -> bool:
    """``is_equal``, or ``response`` is a number that rounds to ``label`` at ``label``'s decimal places
    (for comma-separated values: each one)."""
    if response is None:
        return False
    if is_equal(response, label):
        return True
    got, want = _parts(response), _parts(label)
    return len(got) == len(want) > 0 and all(is_equal(a, b) or _rounds(a, b) for a, b in zip(got, want, strict=True))


def _parts(text: str) -> list[str]:
    return [p.strip().strip("'\"") for p in text.strip().strip("[]()").split(",")]


def _rounds(value: str, label: str) -> bool:
    try:
        x, ref = float(value), float(label)
    except ValueError:
        return False
    if math.isnan(x):
        return False
    m = re.fullmatch(r"-?\d*\.(\d+)", label.strip())
    places = len(m.group(1)) if m else 0
    return abs(x - ref) <= 0.5 * 10**-places + 1e-9


def fmt(value: Any) -> str:
    """One value as answer text: numbers plainly, sequences comma-separated (a whole float in one as an integer,
    as a person writes a month and a year: the official rule compares a list's text), the rest as str.

    >>> fmt([1.0, 2018.0, 88.32])
    '1, 2018, 88.32'
    """
    if isinstance(value, str):
        return value
    if hasattr(value, "tolist") and not isinstance(value, (bool, int, float)):  # numpy scalars and arrays, Series
        return fmt(value.tolist())
    if isinstance(value, (list, tuple, set)):  # 2018.0 in a list is written 2018: a list is compared as text
        return ", ".join(str(int(v)) if isinstance(v, float) and v.is_integer() else fmt(v) for v in value)
    return "" if value is None else str(value)


def response(answer: Any, names: list[str] | None = None) -> str:
    """The agent's answer in the official ``@name[value]`` format: a dict by name, text that already has
    the format (or a JSON object), or a lone value when the question has one name."""
    if isinstance(answer, str):
        if FORMAT.search(answer):
            return answer
        parsed = _json_object(answer)
        if parsed is None:
            return f"@{names[0]}[{answer.strip()}]" if names and len(names) == 1 else answer
        answer = parsed
    if isinstance(answer, dict):
        return ", ".join(f"@{k}[{fmt(v)}]" for k, v in answer.items())
    if hasattr(answer, "to_dict") and not hasattr(answer, "columns"):  # a Series by name
        return response(answer.to_dict(), names)
    if names and len(names) == 1 and answer is not None:
        return f"@{names[0]}[{fmt(answer)}]"
    return "" if answer is None else fmt(answer)


def _json_object(text: str) -> dict[str, Any] | None:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        obj = json.loads(text[start : end + 1])
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


@dataclass
class Score:
    strict: bool  # every labelled sub-answer right by the official rule
    rounded: bool  # every one right after rounding to the label's decimals
    subs: int
    sub_strict: int
    sub_rounded: int
    predicted: dict[str, str]


def score(text: str, labels: list[tuple[str, str]] | tuple[tuple[str, str], ...]) -> Score:
    """Score a response (``@name[value]`` text) against ``labels`` ([(name, value)])."""
    got = extract_format(text or "")
    strict = [is_equal(got.get(name), value) for name, value in labels]
    rounded = [rounds_to(got.get(name), value) for name, value in labels]
    return Score(all(strict), all(rounded), len(labels), sum(strict), sum(rounded), got)
