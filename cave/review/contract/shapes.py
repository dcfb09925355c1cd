"""What an answer and a given table look like: the small predicates the contract's checks share (pandas objects are
told by their type's name, so a plain answer needs no pandas import), and the given column a phrase of the task
names (``column_for``).
"""

from __future__ import annotations

import re
from typing import Any

from cave.review.contract.words import stem as _stem
from cave.runtimes.value_notes import is_text  # a column or index of text: one test, shared with the runtime's notes

__all__ = [
    "as_number",
    "column_for",
    "column_holding",
    "is_frame",
    "is_series",
    "is_text",
    "n_rows",
    "norm",
    "only_value",
    "type_name",
]


def type_name(answer: Any) -> str:
    """The answer's type as the notes name it ('DataFrame', 'dict')."""
    return type(answer).__name__


def is_frame(x: Any) -> bool:
    return type_name(x) == "DataFrame"


def is_series(x: Any) -> bool:
    return type_name(x) == "Series"


def n_rows(x: Any) -> int | None:
    """How many rows or items a table, Series, dict, list or tuple holds; None for a single value."""
    if is_frame(x) or is_series(x) or isinstance(x, dict | list | tuple):
        return len(x)
    return None


def as_number(x: Any) -> float | None:
    """The answer as one number (numpy scalars and numeric text such as '1,234' or '12%' too), None if it is not one.

    >>> as_number("1,234"), as_number(True), as_number([1])
    (1234.0, None, None)
    """
    if isinstance(x, bool):
        return None
    if isinstance(x, int | float):
        return float(x)
    if type(x).__module__ == "numpy" and hasattr(x, "item") and getattr(x, "size", 1) == 1:
        v = x.item()
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None
    if isinstance(x, str):
        try:
            return float(x.strip().replace(",", "").rstrip("%"))
        except ValueError:
            return None
    return None


def only_value(answer: Any) -> Any:
    """The first value of a dict, Series, list or tuple, the one cell of a one-cell table (None if more)."""
    if isinstance(answer, dict):
        return next(iter(answer.values()))
    if is_frame(answer):
        return answer.iat[0, 0] if answer.size == 1 else None
    if is_series(answer):
        return answer.iloc[0]
    return answer[0] if isinstance(answer, list | tuple) else None


def norm(value: Any) -> str:
    """A value as the checks compare it: case folded, without spaces or punctuation ('Ines ' and 'INES' alike)."""
    return re.sub(r"[\W_]+", "", str(value).casefold())


def column_holding(value: str, tables: dict[str, Any]) -> tuple[str, str] | None:
    """The first given text column (table, column) that holds ``value`` (compared as ``norm`` does), else None."""
    key = norm(value)
    for t, df in tables.items():
        for c in df.columns:
            if is_text(df[c]) and key in {norm(v) for v in df[c].dropna().astype(str).unique()[:5000]}:
                return t, str(c)
    return None


def column_for(phrase: str, tables: dict[str, Any]) -> tuple[str, str] | None:
    """The given column a phrase of the task names ("clinic" -> visits['clinic_name']), or None when none or
    several do.

    >>> import pandas as pd
    >>> column_for("patients", {"v": pd.DataFrame({"patient_id": [1], "clinic": ["a"]})})
    ('v', 'patient_id')

    A last word that only says "a kind of" names the column without it ("violation type" -> 'violation'):

    >>> column_for("violation type", {"t": pd.DataFrame({"violation": ["x"], "fine": [1.0]})})
    ('t', 'violation')
    """
    words = [w for w in re.split(r"[\s\-_]+", phrase.lower()) if w]
    if not words:
        return None
    found = _column_named(words, tables)
    if found is None and len(words) > 1 and words[-1] in _QUALIFIERS:
        return _column_named(words[:-1], tables)
    return found


_QUALIFIERS = {"type", "types", "kind", "kinds", "category", "categories", "class", "classes"}


def _column_named(words: list[str], tables: dict[str, Any]) -> tuple[str, str] | None:
    stems = {_stem(w) for w in words}
    head = _stem(words[-1])
    exact, partial = [], []
    for t, df in tables.items():
        for c in df.columns:
            parts = [p for p in re.split(r"[\s\-_.]+|(?<=[a-z])(?=[A-Z])", str(c)) if p]
            col_stems = {_stem(p.lower()) for p in parts}
            if "".join(sorted(col_stems)) == "".join(sorted(stems)) or _stem(norm(c)) == _stem("".join(words)):
                exact.append((t, str(c)))
            elif head in col_stems and col_stems - stems <= {"id", "name", "code", "no", "number", "key", "type"}:
                partial.append((t, str(c)))
    for found in (exact, partial):
        names = {c for _, c in found}
        if len(names) == 1:
            return found[0]
    return None
