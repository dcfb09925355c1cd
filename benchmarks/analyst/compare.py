"""Tolerant but honest comparison of an agent's answer with the oracle's.

An answer arrives as whatever the agent hands over: the code agent's live object (a float, a numpy scalar,
a list, a Series, a DataFrame with the key in its index or in a column) or the JSON agent's text (JSON, or
prose). ``same(answer, reference, kind)`` reads it the way an analyst reading it would, then compares:

- ``number``: within rounding: ``|x - ref| <= max(0.01, 0.1% of ref)``;
- ``count``: the exact integer;
- ``share``: a fraction or a percentage (0.234, 23.4, "23.4%") within half a percentage point;
- ``name``: case- and space-insensitive; in prose, the reference must be the only candidate named;
- ``names``: the same set of names (order and case aside): a list, a Series, a column of a DataFrame;
- ``month``: the same month (``2025-07``, ``July``, ``7``, a Timestamp, a Period);
- ``table``: ``{key: number}``: a dict, a Series, or a DataFrame with a key column (or index) and a value column,
  whichever columns they are; every key present, no extra one, every value within rounding;
- ``frame``: the same rows (in any order) of the reference's columns (by name, any order; extra columns
  allowed), numbers within rounding, dates as dates, text exactly (cleaning is about the case and the spaces).

>>> same("  Ada Stone ", "ada stone", "name"), same(0.2345, 0.234, "share"), same("23.4%", 0.234, "share")
(True, True, True)
>>> same({"b": 2.0, "a": 1.004}, {"a": 1.0, "b": 2.0}, "table"), same({"a": 1.0}, {"a": 1.0, "b": 2.0}, "table")
(True, False)
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
from cave.benchmarks.data.tasks import _as_number, _json_span, _loads

KINDS = ("number", "count", "share", "name", "names", "month", "table", "frame")
MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]


def same(answer: Any, reference: Any, kind: str, *, candidates: Iterable[str] = (), keys: str = "text") -> bool:
    """Whether ``answer`` is ``reference`` (see the module's doc). ``candidates``: every name a ``name`` or
    ``names`` answer could be (prose must name the reference and no other); ``keys``: ``text`` or ``month``
    (how a ``table``'s keys are read)."""
    answer = plain(answer)
    try:
        if kind == "number":
            x = number(answer)
            return x is not None and close(x, reference)
        if kind == "count":
            x = number(answer)
            return x is not None and float(x).is_integer() and int(x) == int(reference)
        if kind == "share":
            x = share(answer)
            return x is not None and abs(x - 100 * reference) <= 0.5
        if kind == "name":
            return _same_name(answer, str(reference), list(candidates))
        if kind == "names":
            got = names(answer, list(candidates))
            return got is not None and got == {norm_text(r) for r in reference}
        if kind == "month":
            return month(answer) in (reference, reference[5:])
        if kind == "table":
            return _same_table(answer, reference, keys)
        if kind == "frame":
            return _same_frame(answer, reference)
    except Exception:  # an answer the reader cannot make sense of is a wrong answer, never a crash
        return False
    raise ValueError(f"unknown answer kind {kind!r}: use one of {', '.join(KINDS)}")


def close(x: Any, ref: float) -> bool:
    """Equal within rounding: an absolute 0.01 or a relative 0.1%, whichever is looser."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        return False
    return not math.isnan(x) and abs(x - float(ref)) <= max(0.01, 1e-3 * abs(float(ref)))


def norm_text(x: Any) -> str:
    return " ".join(str(x).split()).casefold().strip(".\"'`")


def number(answer: Any) -> float | None:
    """A single number: a scalar, a one-element container, or the last number in a text."""
    answer = _unwrap(answer)
    if isinstance(answer, str):
        answer = answer.replace("$", "").strip()
    return _as_number(answer)


def share(answer: Any) -> float | None:
    """A share in percent: 0.234 -> 23.4, 23.4 -> 23.4, "23.4%" -> 23.4."""
    answer = _unwrap(answer)
    if isinstance(answer, str) and "%" in answer:
        found = re.findall(r"(-?\d+(?:\.\d+)?)\s*%", answer)
        return float(found[-1]) if found else None
    x = number(answer)
    if x is None:
        return None
    return 100 * x if abs(x) <= 1 else x


def plain(answer: Any) -> Any:
    """A one-dimensional array (numpy's, or pandas' own: ``df['city'].unique()`` of a text column) as a list of
    its values; anything else as it is.

    >>> plain(pd.Series(["a", "b", "a"]).unique()), plain(3)
    (['a', 'b'], 3)
    """
    if isinstance(answer, pd.api.extensions.ExtensionArray) or (isinstance(answer, np.ndarray) and answer.ndim == 1):
        return list(answer)
    return answer


def _unwrap(answer: Any) -> Any:
    """A one-element list / Series / DataFrame / dict -> the element."""
    if isinstance(answer, pd.DataFrame) and answer.shape == (1, 1):
        return answer.iat[0, 0]
    if isinstance(answer, (pd.Series, pd.Index, list, tuple)) and len(answer) == 1:
        return list(answer)[0]
    if isinstance(answer, dict) and len(answer) == 1:
        return next(iter(answer.values()))
    return answer


def _same_name(answer: Any, reference: str, candidates: list[str]) -> bool:
    if isinstance(answer, dict) and len(answer) == 1:  # {"north": 1234.5}: the key is the name
        answer = next(iter(answer))
    answer = _unwrap(answer)
    if isinstance(answer, str):
        parsed = _loads(answer)
        if isinstance(parsed, str):
            answer = parsed
        elif isinstance(parsed, (list, dict)) and len(parsed) == 1:
            return _same_name(parsed, reference, candidates)
    if not isinstance(answer, str):
        return (
            False
            if isinstance(answer, (list, tuple, dict, pd.Series, pd.DataFrame))
            else norm_text(answer) == norm_text(reference)
        )
    if norm_text(answer) == norm_text(reference):
        return True
    return _named(answer, candidates or [reference]) == {norm_text(reference)}


def _named(text: str, candidates: list[str]) -> set[str]:
    """The candidates a text names (whole words, any case)."""
    return {norm_text(c) for c in candidates if re.search(rf"(?<!\w){re.escape(str(c))}(?!\w)", text, re.I)}


def names(answer: Any, candidates: list[str]) -> set[str] | None:
    """A set of names: from a list, a Series (its values, or its index when the values are numbers),
    a DataFrame (the column, or index, of names: the first that holds candidates), JSON, or prose."""
    if isinstance(answer, str):
        parsed = _loads(answer)
        if parsed is None and "[" in answer:
            parsed = _loads(answer[answer.find("[") : answer.rfind("]") + 1])
        if isinstance(parsed, (list, dict)):
            answer = parsed
        else:
            found = _named(answer, candidates)
            if found:
                return found
            return {norm_text(p) for p in re.split(r",|\n|\band\b", answer) if p.strip()}
    if isinstance(answer, dict):
        answer = list(answer)
    if isinstance(answer, pd.DataFrame):
        pool = {norm_text(c) for c in candidates}
        for col in [answer.index, *(answer[c] for c in answer.columns)]:
            values = {norm_text(v) for v in col}
            if values and (values <= pool if pool else all(isinstance(v, str) for v in col)):
                return values
        return None
    if isinstance(answer, pd.Series):
        answer = list(answer.index) if pd.api.types.is_numeric_dtype(answer) else list(answer)
    if isinstance(answer, (list, tuple, set, pd.Index)):
        return {norm_text(x) for x in answer}
    return None


def month(answer: Any) -> str | None:
    """``YYYY-MM`` (or ``MM`` when the answer names no year) of a Timestamp, a Period, ``"2025-07"``,
    ``"July 2025"``, ``"Jul"``, or a month number."""
    answer = _unwrap(answer)
    if isinstance(answer, dict) and len(answer) == 1:
        answer = next(iter(answer))
    if isinstance(answer, pd.Period):
        return str(answer.asfreq("M"))
    if isinstance(answer, (pd.Timestamp,)) or hasattr(answer, "strftime"):
        return pd.Timestamp(answer).strftime("%Y-%m")
    if isinstance(answer, bool):
        return None
    if isinstance(answer, (int, float)) or type(answer).__module__ == "numpy":
        x = float(answer)
        return f"{int(x):02d}" if x.is_integer() and 1 <= x <= 12 else None
    if isinstance(answer, str):
        text = answer.casefold()
        iso = re.findall(r"(\d{4})-(\d{1,2})", text)
        if iso:
            return f"{iso[-1][0]}-{int(iso[-1][1]):02d}"
        found = [i for i, m in enumerate(MONTHS, 1) if re.search(rf"\b{m[:3]}(?:{m[3:]})?\b", text)]
        if len(found) == 1:
            year = re.findall(r"\b(20\d\d)\b", text)
            return f"{year[-1]}-{found[0]:02d}" if year else f"{found[0]:02d}"
        if text.strip().isdigit():
            return month(int(text.strip()))
    return None


def month_key(x: Any) -> str | None:
    """A table key as ``YYYY-MM`` (a month-end or month-start Timestamp, a Period, a date string)."""
    if isinstance(x, pd.Period):
        return str(x.asfreq("M"))
    try:
        return pd.Timestamp(str(x) if not hasattr(x, "strftime") else x).strftime("%Y-%m")
    except (ValueError, TypeError):
        m = month(x)
        return m if m and len(m) == 7 else None


def _same_table(answer: Any, reference: dict[str, float], keys: str) -> bool:
    key = month_key if keys == "month" else norm_text
    ref = {key(k): v for k, v in reference.items()}
    for got in _mappings(answer):
        try:
            table = {key(k): v for k, v in got.items()}
        except Exception:
            continue
        if set(table) == set(ref) and all(close(table[k], ref[k]) for k in ref):
            return True
    return False


def _mappings(answer: Any) -> Iterable[dict[Any, Any]]:
    """Every reading of ``answer`` as a key -> value mapping."""
    if isinstance(answer, str):
        parsed = _loads(answer)
        answer = parsed if parsed is not None else _loads(_json_span(answer))
    if isinstance(answer, dict):
        yield answer
    elif isinstance(answer, pd.Series):
        yield dict(answer.items())
    elif isinstance(answer, list) and answer and all(isinstance(r, dict) for r in answer):
        yield from _mappings(pd.DataFrame(answer))
    elif isinstance(answer, pd.DataFrame):
        frame = answer.reset_index()
        numeric = [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c])]
        for k in frame.columns:
            if frame[k].duplicated().any():
                continue
            for v in numeric:
                if v != k:
                    yield dict(zip(frame[k], frame[v], strict=True))


def _same_frame(answer: Any, reference: pd.DataFrame) -> bool:
    if isinstance(answer, str):
        answer = (
            _loads(answer) if _loads(answer) is not None else _loads(answer[answer.find("[") : answer.rfind("]") + 1])
        )
    if isinstance(answer, list):
        answer = pd.DataFrame(answer)
    if not isinstance(answer, pd.DataFrame) or len(answer) != len(reference):
        return False
    frame = answer.reset_index(drop=not any(n is not None for n in answer.index.names))
    by_name = {norm_text(c): c for c in frame.columns}
    if any(norm_text(c) not in by_name for c in reference.columns):
        return False
    got = frame[[by_name[norm_text(c)] for c in reference.columns]]
    kinds = [_cell_kind(reference[c]) for c in reference.columns]

    def rows(f: pd.DataFrame) -> list[tuple[Any, ...]]:
        return sorted(tuple(_cell(v, k) for v, k in zip(r, kinds, strict=True)) for r in f.itertuples(index=False))

    return rows(got) == rows(reference)


def _cell_kind(col: pd.Series) -> str:
    if pd.api.types.is_datetime64_any_dtype(col):
        return "date"
    if pd.api.types.is_numeric_dtype(col):
        return "number"
    return "text"


def _cell(v: Any, kind: str) -> Any:
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NaT:
        return ("", "")
    if kind == "date":
        return ("d", pd.Timestamp(v).strftime("%Y-%m-%d"))
    if kind == "number":
        return ("n", round(float(v), 2))
    return ("t", str(v))  # exact: in a cleaned table, the case and the spaces are the point


def describe(value: Any, limit: int = 120) -> str:
    """A short repr of an answer or a reference, for the entries file."""
    if isinstance(value, pd.DataFrame):
        text = f"DataFrame{value.shape} " + json.dumps(value.head(3).to_dict("records"), default=str)
    elif isinstance(value, pd.Series):
        text = "Series " + json.dumps({str(k): v for k, v in value.head(6).items()}, default=str)
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
