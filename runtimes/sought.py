"""What a value sought in a column was meant to be, when it matched none of the column's values: the same text
written another way (case, spaces, punctuation: ``near_values``), a part of a date (weekdays, months:
``date_part``), or one moment written another way than the column's dates (``as_timestamp``). ``cave.runtimes.
matches`` builds the fix of its empty-selection note from these.
"""

from __future__ import annotations

import re
import sys
from typing import Any

__all__ = ["EXAMPLES", "as_timestamp", "date_part", "looks_dated", "month_of", "near_fix", "near_values"]

EXAMPLES = 5  # values shown in a note, and sought texts named in a fix, at most

_WEEKDAYS = frozenset({"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"})
_MONTHS = frozenset(
    {"january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november",
     "december"}
)  # fmt: skip


def date_part(value: Any) -> tuple[str, str] | None:
    """What part of a date the sought words name: weekdays or months (with the accessor that gives it)."""
    words = [value] if isinstance(value, str) else list(value) if isinstance(value, list | tuple | set) else []
    words = [w.strip().casefold() for w in words if isinstance(w, str)]
    if words and all(w in _WEEKDAYS for w in words):
        return "weekdays", ".dt.day_name()"
    if words and all(w in _MONTHS for w in words):
        return "months", ".dt.month_name()"
    return None


def month_of(value: Any) -> str | None:
    """The month a sought text names with its year ('Mar 2025', 'March 2025', '2025-03', '03/2025'), as 'YYYY-MM'.

    >>> month_of("Mar 2025"), month_of("march, 2025"), month_of("2025-03"), month_of("3/2025"), month_of("Mar 31 2025")
    ('2025-03', '2025-03', '2025-03', '2025-03', None)
    """
    if not isinstance(value, str):
        return None
    text = value.strip().casefold()
    m = re.fullmatch(r"([a-z]+)\.?,?\s+(\d{4})", text)
    if m:
        word = m.group(1)
        month = next((i for i, name in enumerate(_MONTH_ORDER, 1) if len(word) >= 3 and name.startswith(word)), None)
        return f"{m.group(2)}-{month:02d}" if month else None
    m = re.fullmatch(r"(\d{4})[-/.](\d{1,2})", text) or re.fullmatch(r"(\d{1,2})[-/.](\d{4})", text)
    if not m:
        return None
    year, month = (m.group(1), m.group(2)) if len(m.group(1)) == 4 else (m.group(2), m.group(1))
    return f"{year}-{int(month):02d}" if 1 <= int(month) <= 12 else None


_MONTH_ORDER = "january february march april may june july august september october november december".split()
_FULL_DATE = re.compile(r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{4}")
_COMPACT_STAMP = re.compile(r"(\d{4})(\d{2})(\d{2})(?:[_T ]?(\d{2})(\d{2})(\d{2})?)?")


def as_timestamp(value: Any, values: Any) -> str | None:
    """The moment a sought text names, when it and the column's values both read as dates written differently
    (a development task: '20170413_080000' against 'Apr 13  2017 08:00:00 AM'); None otherwise.

    >>> import pandas as pd
    >>> as_timestamp("20170413_080000", pd.Series(["Apr 13  2017 12:00:00 AM", "Apr 13  2017 08:00:00 AM"]))
    '2017-04-13 08:00:00'
    >>> as_timestamp("2017-04-13", pd.Series(["Apr 13  2017 12:00:00 AM"]))  # a day: compared by day
    '2017-04-13'
    >>> as_timestamp("Mar 2025", pd.Series(["Mar 31 2025", "2025/02/08"])) is None  # a month is no moment
    True
    >>> as_timestamp("north", pd.Series(["Apr 13  2017 12:00:00 AM"])) is None
    True
    """
    if not isinstance(value, str) or not re.search(r"\d", value) or not looks_dated(values):
        return None
    pd = sys.modules.get("pandas")
    if pd is None:
        return None
    compact = _COMPACT_STAMP.fullmatch(value.strip())
    text = value.strip()
    if compact:
        y, mo, d, h, mi, sec = compact.groups()
        text = f"{y}-{mo}-{d}" + (f" {h}:{mi}:{sec or '00'}" if h else "")
    elif not _FULL_DATE.search(text):  # a month or a year ('Mar 2025') is a span: no one moment equals it
        return None
    try:
        stamp = pd.Timestamp(text)
        parsed = pd.to_datetime(values.iloc[:200], format="mixed", errors="coerce")
    except (ValueError, TypeError, OverflowError):
        return None
    if pd.isna(stamp) or parsed.isna().mean() > 0.2:
        return None
    timed = bool(compact and compact.group(4)) or bool(re.search(r"\d:\d{2}", text))
    return str(stamp) if timed else str(stamp.date())


def looks_dated(values: Any) -> bool:
    """Whether most of a text column's first values read as dates (a digit and a separator or a month name)."""
    head = [str(v) for v in values.iloc[:50]]
    return sum(bool(re.search(r"\d", v)) and len(v) >= 6 for v in head) >= 0.8 * len(head)


def _key(text: str) -> str:
    """A text value as a person reads it: no case, spaces or punctuation ('Mr.' and ' mr' are both 'mr')."""
    return re.sub(r"[\W_]+", "", text.casefold())


def near_values(values: Any, wanted: Any) -> dict[str, str]:
    """Each sought text that the column holds written another way (case, spaces, punctuation) -> how it is written.

    >>> import pandas as pd
    >>> near_values(pd.Series(["Mr", "Mrs", "Miss", "Don"]), ["Mr.", "Mrs.", "Rev."])
    {'Mr.': 'Mr', 'Mrs.': 'Mrs'}
    >>> near_values(pd.Series(["North", "south "]), "SOUTH")
    {'SOUTH': 'south '}
    >>> near_values(pd.Series([1, 2]), "1")
    {}
    """
    sought = [wanted] if isinstance(wanted, str) else list(wanted) if isinstance(wanted, list | tuple | set) else []
    sought = [w for w in sought if isinstance(w, str) and _key(w)]
    if not sought:
        return {}
    held: dict[str, str] = {}
    for v in values.drop_duplicates().iloc[:100_000]:
        if isinstance(v, str):
            held.setdefault(_key(v), v)
    return {w: held[_key(w)] for w in sought if _key(w) in held and held[_key(w)] != w}


def near_fix(what: str, op: str, value: Any, near: dict[str, str]) -> str:
    """What to write instead, when the sought texts are in the column written another way."""
    said = "; ".join(f"{w!r} is written {v!r}" for w, v in list(near.items())[:EXAMPLES])
    if op == "isin" and isinstance(value, list | tuple | set):
        fixed = [near.get(w, w) if isinstance(w, str) else w for w in value]
        return f"Here {said}: use .isin({fixed!r}) (drop what none of the values hold)."
    if op in ("==", "==r"):
        return f"Here {said}: compare with == {near[value]!r}."
    return f"Here {said}; match that."
