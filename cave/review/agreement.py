"""Agreement between independent attempts: whether two answers to one task say the same thing.

Verification by agreement (``Agent(verify=N)``, ``verify: N`` in a task file) solves the task again N times, each
attempt in a fresh runtime holding the given inputs as they were at the start, with its own seed; the first answer
is confirmed when a majority of the attempts agree with it (an attempt that reaches no answer is run again,
once per attempt asked for, and once more). ``same(a, b)`` is that agreement: numbers within a
tolerance (and within the rounding of the less precise one), text by its words, lists by their items (in order
when ``ordered``), sets by their members, tables by their rows whatever their column names, and a container
of one value as that value. ``decide(votes, n)`` is the majority rule with its early exit; ``groups`` sorts
answers into the sets that agree (a team's ``vote`` pattern, and attempts that agree on another answer).

>>> same(0.3333, 1 / 3), same(12, 12.0), same("  Brooklyn", "brooklyn"), same([1, 2], [2, 1])
(True, True, True, True)
>>> same([1, 2], [2, 1], ordered=True), same(5, 6), same("yes", True)
(False, False, True)
>>> decide([True], 1), decide([False], 3), decide([True, True], 3), decide([True, False], 3)
('verified', None, 'verified', None)
>>> decide([None], 1), decide([None, True], 1), decide([None, None], 1), decide([None, None, None], 1)
(None, 'verified', None, 'disagreed')
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

from cave.review.answers import is_array, is_number

__all__ = [
    "as_name",
    "asks_period",
    "asks_share",
    "canonical",
    "decide",
    "groups",
    "hour_of",
    "month_of",
    "same",
    "shown",
    "year_of",
]

REL_TOL = 1e-3


def decide(votes: list[bool | None], n: int) -> str | None:
    """'verified' once more than half of ``n`` answering attempts agree, 'disagreed' once that can no longer
    happen, else None (run another attempt). An attempt that reached no answer (None: it failed, ran out of
    steps) says nothing about the answer: it does not count, and up to ``n + 1`` such attempts are run again (with
    n = 1, two attempts that both reached no answer had left right answers unverified on the held-out split)."""
    need = n // 2 + 1
    answered = [v for v in votes if v is not None]
    agree = sum(answered)
    if agree >= need:
        return "verified"
    left = min(n - len(answered), 2 * n + 1 - len(votes))  # answering votes still to come, within 2n + 1 attempts
    if agree + max(left, 0) < need:
        return "disagreed"
    return None


def groups(answers: list[Any], *, ordered: bool = False) -> list[list[int]]:
    """The answers' positions grouped by agreement (each joins the first group whose first answer it agrees with),
    groups in order of appearance: the majority's answer is that of the largest group's first position.

    >>> groups([0.3333, 7, 1 / 3, [1, 2], [2, 1]])
    [[0, 2], [1], [3, 4]]
    """
    found: list[list[int]] = []
    for i, answer in enumerate(answers):
        group = next((g for g in found if same(answers[g[0]], answer, ordered=ordered)), None)
        if group is None:
            found.append(group := [])
        group.append(i)
    return found


def same(
    a: Any, b: Any, *, ordered: bool = False, kind: str | None = None, share: bool = False, period: str | None = None
) -> bool:
    """Whether answers ``a`` and ``b`` agree (see the module's doc). What the task asks decides what counts as
    the same answer in another form: ``kind="name"`` compares the names two answers give (a name, or the one
    row, key or label that carries it: "Hotel A" and ``pd.Series({"Hotel A": 0.93})`` agree); ``share`` (the task
    asks for a share, percentage or rate) lets a fraction agree with its percentage (0.153 and 15.3); ``period``
    (``asks_period``: the task asks which month, hour or year) lets the forms of one month agree (3, "March",
    "2024-03", unless both give a year and the years differ), of one hour (9, "09:00", "9 AM") or of one year (2024,
    ``Period("2024")``, the first or last day of 2024 that labels a yearly resample).

    >>> same("Hotel A", {"Hotel A": 0.93}), same("Hotel A", {"Hotel A": 0.93}, kind="name")
    (False, True)
    >>> same(0.153, 15.3), same(0.153, 15.3, share=True), same(0.153, 1.53, share=True)
    (False, True, False)
    >>> same("2024-03", "2024-03-01"), same("March 2024", "2024-03"), same("2024-03", "2024-04-01")
    (True, True, False)
    """
    try:
        if period == "month" and (ma := month_of(a)) is not None and (mb := month_of(b)) is not None:
            return ma[1] == mb[1] and (ma[0] is None or mb[0] is None or ma[0] == mb[0])
        if period == "hour" and (ha := hour_of(a)) is not None and (hb := hour_of(b)) is not None:
            return ha == hb
        if period == "year" and (ya := year_of(a)) is not None and (yb := year_of(b)) is not None:
            return ya == yb
        if kind == "name":
            a, b = as_name(a), as_name(b)
        if kind in ("list", "set"):  # "which 3 countries": the counts by country and the 3 names agree
            a, b = _labels_beside(a, b), _labels_beside(b, a)
        return _same(canonical(a), canonical(b), ordered, share)
    except Exception:  # answers that cannot be compared do not agree
        return False


SHARE_WORDS = re.compile(r"\b(?:share|percent|percentage|proportion|fraction|ratio|rate)s?\b|%")


def asks_share(task: str) -> bool:
    """Whether a task's text asks for a share, percentage or rate (its answer may be a fraction or a percentage).

    >>> asks_share("What share of orders are late?"), asks_share("How many orders are late?")
    (True, False)
    """
    return bool(SHARE_WORDS.search(task.lower()))


def _asked(unit: str) -> re.Pattern[str]:
    return re.compile(
        rf"\b(?:which|what)\s+(?:calendar\s+)?{unit}\b|\b(?:busiest|best|worst|peak|quietest|slowest)\s+{unit}\b"
        rf"|\b{unit}\s+(?:with|had|has|saw|in which|when)\b",
        re.I,
    )


PERIOD_ASKED = {"month": _asked("month"), "hour": _asked("hour(?: of the day)?"), "year": _asked("year")}


def asks_period(task: str) -> str | None:
    """The period a task asks for by name, "month", "hour" or "year" (its answer may be written in several forms),
    else None.

    >>> asks_period("Which month had the highest revenue?"), asks_period("What hour of the day is busiest?")
    ('month', 'hour')
    >>> asks_period("Revenue per month?")
    """
    return next((unit for unit, asked in PERIOD_ASKED.items() if asked.search(task)), None)


def year_of(x: Any) -> int | None:
    """The year an answer names: a number 1000-2999, a year period, or the first or last day of a year (the label
    a yearly resample gives); None for any other answer.

    >>> import pandas as pd
    >>> year_of(2024), year_of(pd.Period("2024", "Y")), year_of(pd.Timestamp("2024-12-31")), year_of("2024-03-05")
    (2024, 2024, 2024, None)
    """
    v = canonical(as_name(x))
    if isinstance(v, float):
        return int(v) if v.is_integer() and 1000 <= v <= 2999 else None
    if not isinstance(v, str):
        return None
    if re.fullmatch(r"\d{4}", v):
        return int(v)
    day = _period(v)
    if day is not None and (day[1], day[2]) in ((1, 1), (12, 31)):
        return day[0]
    return None


def hour_of(x: Any) -> int | None:
    """The hour of the day an answer names: a number 0-23, a time on the hour ('09:00', '9:00:00'), '9 AM' or
    '9pm'; None for any other answer.

    >>> hour_of(9), hour_of("09:00"), hour_of("9 PM"), hour_of("12am"), hour_of("09:30"), hour_of(24)
    (9, 9, 21, 0, None, None)
    """
    v = canonical(as_name(x))
    if isinstance(v, float):
        return int(v) if v.is_integer() and 0 <= v <= 23 else None
    if not isinstance(v, str):
        return None
    m = re.fullmatch(r"(\d{1,2}):00(?::00)?", v)
    if m and int(m.group(1)) <= 23:
        return int(m.group(1))
    m = re.fullmatch(r"(\d{1,2})(?::00)?\s*([ap])\.?m\.?", v)
    if m and 1 <= int(m.group(1)) <= 12:
        return int(m.group(1)) % 12 + (12 if m.group(2) == "p" else 0)
    return None


def month_of(x: Any) -> tuple[int | None, int] | None:
    """The month an answer names, as (year or None, month): a number 1-12, a month's name or its three-letter
    abbreviation, a date or period in the month; None for any other answer.

    >>> import pandas as pd
    >>> month_of(3), month_of("March"), month_of("Mar 2024"), month_of(pd.Period("2024-03", "M"))
    ((None, 3), (None, 3), (2024, 3), (2024, 3))
    >>> month_of(pd.Series({"2024-03": 912.5})), month_of(13), month_of("marketing"), month_of(3.5)
    ((2024, 3), None, None, None)
    """
    v = canonical(as_name(x))
    if isinstance(v, float):
        return (None, int(v)) if v.is_integer() and 1 <= v <= 12 else None
    if not isinstance(v, str):
        return None
    period = _period(v)
    if period is not None and period[1] is not None:
        return period[0], period[1]
    named = _MONTH_NAMES.get(v.rstrip("."))
    return (None, named) if named else None


def as_name(x: Any) -> Any:
    """The name an answer gives, where it carries one beside other values: the label of a one-item Series or
    dict (its value when that is the text), the one text cell of a one-row table, the text of a one-item list or
    of a (name, value) pair; any other answer as it is.

    >>> import pandas as pd
    >>> as_name(pd.Series({"Hotel A": 0.93})), as_name({"hotel": "Hotel A"}), as_name(("Hotel A", 12))
    ('Hotel A', 'Hotel A', 'Hotel A')
    >>> as_name(pd.DataFrame({"hotel": ["Hotel A"], "rate": [0.93]})), as_name([1, 2])
    ('Hotel A', [1, 2])
    """
    name = type(x).__name__
    if name == "Series" and len(x) == 1:
        return x.index[0] if not _plain_index(x) and isinstance(x.index[0], str) else as_name(x.iloc[0])
    if isinstance(x, dict) and len(x) == 1:
        ((k, v),) = x.items()
        return v if isinstance(v, str) else k
    if name == "DataFrame" and len(x) == 1:
        texts = [v for v in x.iloc[0] if isinstance(v, str)]
        if len(texts) == 1:
            return texts[0]
        if not texts and not _plain_index(x) and isinstance(x.index[0], str):
            return x.index[0]
        return x
    if isinstance(x, list | tuple) and len(x) == 1:
        return as_name(x[0])
    if isinstance(x, tuple) and len(x) == 2 and sum(isinstance(v, str) for v in x) == 1:
        return next(v for v in x if isinstance(v, str))
    return x


def _labels_beside(x: Any, other: Any) -> Any:
    """``x``'s labels, in order, where ``x`` is measures by label (a Series or dict of numbers by text, a table of
    one text column and numbers) and ``other`` is a list of texts; else ``x`` as it is.

    >>> import pandas as pd
    >>> _labels_beside(pd.Series({"US": 90, "China": 80}), ["US", "China"]), _labels_beside({"US": 90}, [1])
    (['US', 'China'], {'US': 90})
    """
    if not _texts(other):
        return x
    name = type(x).__name__
    if name == "Series" and not _plain_index(x) and _numbers(list(x)) and _texts(list(x.index)):
        return list(x.index)
    if isinstance(x, dict) and _numbers(list(x.values())) and _texts(list(x)):
        return list(x)
    if name == "DataFrame":
        frame = x.reset_index(drop=_plain_index(x))
        texts = [c for c in frame.columns if _texts(list(frame[c]))]
        if len(texts) == 1 and all(_numbers(list(frame[c])) for c in frame.columns if c != texts[0]):
            return list(frame[texts[0]])
    return x


def _texts(x: Any) -> bool:
    items = list(x) if isinstance(x, list | tuple) or is_array(x) else None
    return bool(items) and all(isinstance(v, str) for v in items)


def _numbers(items: list[Any]) -> bool:
    return bool(items) and all(is_number(v) for v in items)


def canonical(x: Any) -> Any:
    """A comparable form: a float, a normalized string, a tuple of items, or a frozenset-like sorted tuple of rows.

    >>> canonical({"b": 2, "a": 1.0})
    ('rows', (('a', 1.0), ('b', 2.0)))
    """
    name = type(x).__name__
    if name == "DataFrame":
        frame = x.reset_index(drop=_plain_index(x))
        if frame.shape == (1, 1):
            return canonical(frame.iat[0, 0])
        rows = [tuple(_cell(v) for v in row) for row in frame.itertuples(index=False, name=None)]
        return ("rows", tuple(sorted((_row_key(r) for r in rows), key=repr)))
    if name == "Series":
        if len(x) == 1:
            return canonical(x.iloc[0])
        if _plain_index(x):
            return ("items", tuple(_cell(v) for v in x))
        return ("rows", tuple(sorted(((_cell(k), _cell(v)) for k, v in x.items()), key=repr)))
    if isinstance(x, dict):
        if len(x) == 1:
            ((k, v),) = x.items()
            inner = canonical(v)
            if not isinstance(inner, tuple):
                return ("keyed", _cell(k), inner)
        return ("rows", tuple(sorted(((_cell(k), _cell(v)) for k, v in x.items()), key=repr)))
    if isinstance(x, (list, tuple, set, frozenset)) or is_array(x):
        items = [_cell(v) for v in x]
        if len(items) == 1:
            return items[0]
        kind = "set" if isinstance(x, (set, frozenset)) else "items"
        return (kind, tuple(items))
    return _cell(x)


def shown(x: Any, limit: int = 300) -> str:
    """The compared form of an answer as text, clipped to ``limit`` characters (what an attempt answered, in a
    run's record).

    >>> shown([1, 2.5, "x"])
    "('items', (1.0, 2.5, 'x'))"
    """
    try:
        text = repr(canonical(x))
    except Exception as e:  # noqa: BLE001 - a record, never an error
        text = f"<{type(x).__name__}: {type(e).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _plain_index(x: Any) -> bool:
    index = x.index
    return type(index).__name__ == "RangeIndex" and index.name is None


def _cell(v: Any) -> Any:
    if hasattr(v, "item") and type(v).__module__ == "numpy" and getattr(v, "size", 1) == 1:
        v = v.item()
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int | float):
        return float(v)
    if type(v).__name__ in ("Timestamp", "datetime", "date", "Period"):
        return str(v)[:10] if str(v).endswith("00:00:00") or type(v).__name__ == "date" else str(v)
    if isinstance(v, str):
        text = v.strip()
        number = _number(text)
        if number is not None:
            return number
        word = re.sub(r"\s+", " ", text.casefold())
        return {"true": "yes", "false": "no"}.get(word, word)
    if v is None:
        return None
    return str(v)


def _number(text: str) -> float | None:
    t = text.replace(",", "").replace("$", "").strip()
    pct = t.endswith("%")
    try:
        x = float(t.rstrip("%"))
    except ValueError:
        return None
    return x / 100 if pct else x


def _row_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row as its values, whatever the order of its columns (attempts name and order columns their own way)."""
    return tuple(sorted(row, key=repr))


TAGS = ("rows", "keyed", "items", "set")


def _tag(x: Any) -> str | None:
    return x[0] if isinstance(x, tuple) and x and isinstance(x[0], str) and x[0] in TAGS else None


def _same(a: Any, b: Any, ordered: bool, share: bool = False) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return _close(a, b) or (share and (_close(a, 100 * b) or _close(100 * a, b)))
    ta, tb = _tag(a), _tag(b)
    if ta is None and tb is None and isinstance(a, tuple) and isinstance(b, tuple):  # a row of cells
        return _same_items(a, b, ordered, share)
    if ta in ("rows", "keyed") or tb in ("rows", "keyed"):
        return ta == tb and _same_items(a[1:], b[1:], ordered, share)
    if ta and tb:
        if "set" in (ta, tb) or not ordered:
            return _same_multiset(a[1], b[1], share)
        return _same_items(a[1], b[1], ordered, share)
    if ta or tb:
        return False
    if isinstance(a, str) and isinstance(b, str) and a != b:
        return _same_period(a, b)
    return a == b


def _same_items(a: Any, b: Any, ordered: bool, share: bool = False) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple) and _tag(a) is None and _tag(b) is None:
        return len(a) == len(b) and all(_same(x, y, ordered, share) for x, y in zip(a, b, strict=True))
    return _same(a, b, ordered, share)


def _same_multiset(a: tuple[Any, ...], b: tuple[Any, ...], share: bool = False) -> bool:
    if len(a) != len(b):
        return False
    if all(not isinstance(v, float) for v in (*a, *b)):
        return Counter(map(repr, a)) == Counter(map(repr, b))
    left = sorted(a, key=repr)
    pool = list(b)
    for x in left:
        match = next((i for i, y in enumerate(pool) if _same(x, y, False, share)), None)
        if match is None:
            return False
        pool.pop(match)
    return True


_MONTHS = {m: i + 1 for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split())}
_MONTH_NAMES = {
    **_MONTHS,
    "sept": 9,
    **{
        m: i + 1
        for i, m in enumerate(
            "january february march april may june july august september october november december".split()
        )
    },
}


def _period(text: str) -> tuple[int | None, int | None, int | None] | None:
    """(year, month, day) of a date written as 2024-03, 2024-03-05, March 2024 or Mar 2024 (None where a part is
    not written); None for other text."""
    m = re.fullmatch(r"(\d{4})-(\d{1,2})(?:-(\d{1,2}))?(?:[ t]00:00:00)?", text)
    if m:
        return int(m.group(1)), int(m.group(2)), int(m.group(3)) if m.group(3) else None
    m = re.fullmatch(r"([a-z]{3})[a-z]*\.?,?\s+(\d{4})|(\d{4})\s+([a-z]{3})[a-z]*", text)
    if m and (m.group(1) or m.group(4)) in _MONTHS:
        return int(m.group(2) or m.group(3)), _MONTHS[m.group(1) or m.group(4)], None
    return None


def _same_period(a: str, b: str) -> bool:
    """Two dates written differently that name the same month (or day, where both give one)."""
    pa, pb = _period(a), _period(b)
    if pa is None or pb is None or pa[:2] != pb[:2]:
        return False
    return pa[2] is None or pb[2] is None or pa[2] == pb[2]


def _close(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    tol = max(1e-9, REL_TOL * max(abs(a), abs(b)), _rounding(a, b))
    return abs(a - b) <= tol


def _rounding(a: float, b: float) -> float:
    """Half a unit of the last decimal of the less precise of two numbers (2.35 agrees with 2.3456)."""
    places = min(_places(a), _places(b))
    return 0.5 * 10 ** (-places) if 1 <= places < 6 else 0.0


def _places(x: float) -> int:
    text = f"{x:.10f}".rstrip("0")
    return len(text.split(".")[1]) if "." in text else 0
