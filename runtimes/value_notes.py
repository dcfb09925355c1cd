"""Notes on what a computed value really says: an order, an extreme, a bound, a test or a pick that reads as an
answer and is not one. ``cave.runtimes.matches`` routes the calls here (``matched``) and writes the note to the
cell's stderr; the marks are in every note of their kind, so the review can tell what an answer came from.

- ``numtext_note``: ``sort_values`` / ``.max()`` / ``.min()`` of numbers written as text orders them as text.
- ``text_extreme_note``: ``.max()`` of a text column is its alphabetically last value.
- ``range_note``: a number bound no value of a numeric column passes (a bound in other units).
- ``nan_test_note``: a scipy test that returned nan over missing values.
- ``self_pick_note``: a variable picked as its own strongest correlate.
- ``across_note``: ``df[col].diff()`` / ``.pct_change()`` over rows of several things (products, stores) in turn.
"""

from __future__ import annotations

import re
import sys
from typing import Any

__all__ = [
    "ACROSS_MARK",
    "NAN_MARK",
    "NUMTEXT_MARK",
    "RANGE_MARK",
    "SELF_MARK",
    "TEXT_MARK",
    "across_note",
    "is_text",
    "nan_test_note",
    "numtext_note",
    "range_note",
    "self_pick_note",
    "text_extreme_note",
]

NAN_MARK = "returned nan because"  # in every note on a test over missing values
SELF_MARK = "its correlation with itself"  # in every note on a variable picked as its own strongest correlate
TEXT_MARK = "the alphabetically"  # in every note on .max()/.min() of text
NUMTEXT_MARK = "numbers written as text"  # in every note on ordering such a column (as text: '9' after '10,000')
_ISO = re.compile(r"\d{4}-\d{2}(-\d{2})?([ T]\d{2}:\d{2}(:\d{2})?)?")
# scipy.stats statistics that are nan when their input holds NaN (the default nan_policy); audited as the tests are
ESTIMATES = frozenset({"skew", "kurtosis", "moment", "sem", "variation", "gmean", "hmean", "gstd", "iqr", "entropy"})


def is_text(values: Any) -> bool:
    """Whether a Series (or Index) holds text: object, bytes or unicode, or pandas' string dtype."""
    return values.dtype.kind in "OSUT" or str(values.dtype) in ("string", "str")


RANGE_MARK = "selects no row"  # in every note on a bound outside a column's values (a note, not a hold: none may be the
# answer, "are there any under 30?" -> False)


def range_note(op: str, line: int, source: Any, bound: Any, result: Any) -> str | None:
    """The note for a number bound that no value of a numeric column passes: the values' range, so a bound in other
    units (1e9 over net worths written in millions) shows (a development probe: "any billionaires under 30?" sent
    "none", filtered with finalWorth > 1000000000 as well).

    >>> import pandas as pd
    >>> worth = pd.Series([1200.0, 2500.0, 31000.0], name="finalWorth")
    >>> print(range_note(">", 4, worth, 1e9, worth > 1e9))
    Note (line 4): finalWorth > 1000000000.0 selects no row: its 3 values run from 1200 to 31000.
    >>> range_note(">", 4, worth, 2000, worth > 2000) is None
    True
    """
    pd = sys.modules.get("pandas")
    if pd is None or not isinstance(source, pd.Series) or not isinstance(result, pd.Series) or len(source) == 0:
        return None
    if source.dtype.kind not in "iuf" or bool(result.fillna(False).any()):
        return None
    values = source.dropna()
    if len(values) == 0:
        return None
    name = source.name if isinstance(source.name, str) else "the column"
    low, high = (f"{v:.6g}" for v in (values.min(), values.max()))
    return f"Note (line {line}): {name} {op} {bound!r} {RANGE_MARK}: its {len(values)} values run from {low} to {high}."


_NUMBER_TEXT = re.compile(
    r"\s*[-+]?[$€£]?\s*\d{1,3}(?:[,\s]\d{3})+(?:\.\d+)?\s*%?\s*|\s*[-+]?[$€£]?\d+(?:\.\d+)?\s*%?\s*"
)


def numtext_note(op: str, line: int, source: Any, by: Any = None) -> str | None:
    """The note for ordering (``sort_values``, ``.max()``, ``.min()``) a text column whose values are numbers:
    text orders them by their characters ('999,120' after '1,250,000'), so the top of it is not the largest
    number (a development probe: the 3 most streamed songs picked from streams written '1,234,567').

    >>> import pandas as pd
    >>> streams = pd.Series(["999,120", "1,250,000", "87,004"], name="streams")
    >>> print(numtext_note("sort", 3, streams.to_frame(), "streams"))  # doctest: +ELLIPSIS
    Note (line 3): 'streams' holds numbers written as text ('999,120', '1,250,000', ...): ...
    >>> numtext_note("max", 1, pd.Series(["10", "20", "30"])) is None  # one length: text order is number order
    True
    """
    pd = sys.modules.get("pandas")
    if pd is None:
        return None
    if isinstance(source, pd.DataFrame):
        key = by[0] if isinstance(by, list | tuple) and by else by
        if not isinstance(key, str) or key not in source.columns:
            return None
        source = source[key]
    if not isinstance(source, pd.Series) or not is_text(source):
        return None
    values = source.dropna().astype(str).iloc[:5000]
    if len(values) < 2 or values.str.fullmatch(_NUMBER_TEXT).mean() < 0.9 or values.str.len().nunique() < 2:
        return None
    name = source.name if isinstance(source.name, str) else "the column"
    shown = ", ".join(repr(v) for v in values.iloc[:2])
    return (
        f"Note (line {line}): {name!r} holds {NUMTEXT_MARK} ({shown}, ...): .{'sort_values' if op == 'sort' else op}() "
        f"orders them as text, character by character, not by size. Convert first, e.g. "
        rf"df[{name!r}] = pd.to_numeric(df[{name!r}].astype(str).str.replace(r'[,$€£%\s]', '', regex=True), "
        "errors='coerce')."
    )


ACROSS_MARK = "with the row above it"  # in every note on a diff over rows of several things in turn
_PERIOD = re.compile(  # labels of periods: Q1, H2, 2024, 2024-03, 2024Q1, FY24, Mar, March, week 12, Monday
    r"(?i)(?:q[1-4]|h[12]|\d{4}(?:[-/]\d{1,2}){0,2}|\d{4}\s*-?\s*q[1-4]|q[1-4]\s*-?\s*\d{2,4}|fy\s*\d{2,4}|"
    r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?(?:\s*\d{2,4})?|week\s*\d{1,2}|"
    r"(?:mon|tues|wednes|thurs|fri|satur|sun)day)"
)


def across_note(op: str, line: int, source: Any, frame: Any, name: str) -> str | None:
    """The note for ``df[col].diff()`` (``.pct_change()``) where the rows of ``frame`` take several things in turn
    (phone, tablet, monitor, phone, ...): each row is compared with the row above it, another thing's. A development
    task: "Which product rose most from Q1 to Q2?" took units.diff() over the rows of all products.

    >>> import pandas as pd
    >>> sales = pd.DataFrame({"product": ["phone", "tablet", "phone", "tablet"], "quarter": ["Q1", "Q1", "Q2", "Q2"],
    ...                       "units": [5, 3, 7, 2]})
    >>> print(across_note("diff", 4, sales["units"], sales, "sales"))
    Note (line 4): .diff() compares each row with the row above it, and the rows of sales take the products in turn ('phone', 'tablet', 'phone', ...): it subtracts one product's units from another's. Per product: sales.groupby('product')['units'].diff() (rows in time order); to compare two quarters, put them side by side: t = sales.pivot_table(index='product', columns='quarter', values='units', aggfunc='sum'), then t['Q2'] - t['Q1'].
    >>> across_note("diff", 4, sales["units"], sales.sort_values("product"), "sales") is None  # one thing's rows together
    True
    >>> days = pd.DataFrame({"weather": list("srsrrssrsrrsrssr"), "temp": range(16)})  # an attribute, not a turn
    >>> across_note("diff", 2, days["temp"], days, "days") is None
    True
    """
    pd = sys.modules.get("pandas")
    if pd is None or not isinstance(frame, pd.DataFrame) or not isinstance(source, pd.Series) or len(frame) < 4:
        return None
    head = frame.iloc[:5000]
    keys, periods = [], []  # columns of things that take turns; columns of periods (quarters, months, years)
    for col in list(head.columns)[:50]:
        values = head[col]
        if col == source.name or not (is_text(values) or str(values.dtype) == "category"):
            continue
        distinct = values.nunique()
        if not 2 <= distinct <= len(head) // 2:
            continue
        if values.dropna().astype(str).str.strip().str.fullmatch(_PERIOD).all():
            periods += [str(col)] if distinct <= 12 else []
            continue
        turns = int((values != values.shift()).iloc[1:].sum())
        if turns == distinct - 1:
            return None  # the rows are grouped by this column (sorted by it): the code may diff within groups
        cycle = float((values == values.shift(distinct)).iloc[distinct:].mean())
        if turns > 2 * (distinct - 1) and cycle >= 0.8:  # the things in a fixed turn: a panel, not an attribute
            keys.append((turns, distinct, str(col)))
    if not keys:
        return None
    keys.sort(reverse=True)
    key, col = keys[0][2], source.name
    shown = ", ".join(repr(v) for v in head[key].astype(str).iloc[:3])
    note = (
        f"Note (line {line}): .{op}() compares each row with the row above it, and the rows of {name} take the "
        f"{key}s in turn ({shown}, ...): it subtracts one {key}'s {col} from another's. Per {key}: "
        f"{name}.groupby({key!r})[{col!r}].{op}() (rows in time order)"
    )
    if periods and isinstance(col, str):
        p = periods[0]
        first, second = (sorted(head[p].dropna().astype(str).unique()) + ["", ""])[:2]
        note += (
            f"; to compare two {p}s, put them side by side: t = {name}.pivot_table(index={key!r}, columns={p!r}, "
            f"values={col!r}, aggfunc='sum'), then t[{second!r}] - t[{first!r}]"
        )
    return note + "."


def text_extreme_note(op: str, line: int, source: Any, result: Any) -> str | None:
    """The note for ``.max()`` / ``.min()`` of a Series of text: the alphabetically last (first) value.

    >>> import pandas as pd
    >>> print(text_extreme_note("max", 2, pd.Series(["57", "99", "HA2"], name="site"), "HA2"))
    Note (line 2): .max() of the text column 'site' is 'HA2', the alphabetically last of its values, not the row with the largest of another column; for that: df.loc[df[other].idxmax(), 'site'].
    >>> text_extreme_note("max", 1, pd.Series([3, 9]), 9) is None
    True
    """
    pd = sys.modules.get("pandas")
    if pd is None or not isinstance(source, pd.Series) or not isinstance(result, str):
        return None
    if _ISO.match(result) and bool(source.dropna().astype(str).str.match(_ISO).all()):
        return None  # ISO dates and times sort as text the way they sort in time: the latest date is right
    name = source.name if isinstance(source.name, str) else "col"
    which, pick = ("last", "idxmax") if op == "max" else ("first", "idxmin")
    return (
        f"Note (line {line}): .{op}() of the text column {name!r} is {result[:40]!r}, {TEXT_MARK} {which} of "
        f"its values, not the row with the {'largest' if op == 'max' else 'smallest'} of another column; for that: "
        f"df.loc[df[other].{pick}(), {name!r}]."
    )


def nan_test_note(line: int, func: Any, args: tuple[Any, ...], result: Any) -> str | None:
    """The note for a scipy.stats test (or statistic: skew, kurtosis, ...) that returned nan because an input held
    NaN (None otherwise).

    >>> import numpy as np, pandas as pd
    >>> from scipy.stats import shapiro
    >>> x = pd.Series([1.0, 2.5, np.nan, 4.0, 3.5, 2.0], name="nsamplecov")
    >>> print(nan_test_note(3, shapiro, (x,), shapiro(x)))
    Note (line 3): shapiro() returned nan because 1 of the 6 values of 'nsamplecov' are missing (NaN), and every comparison with nan is False; drop them first: shapiro(df['nsamplecov'].dropna()) (two columns: df[[a, b]].dropna()).
    >>> nan_test_note(1, shapiro, (x.dropna(),), shapiro(x.dropna())) is None
    True
    >>> from scipy.stats import skew
    >>> print(nan_test_note(2, skew, (x,), skew(x)))  # doctest: +ELLIPSIS
    Note (line 2): skew() returned nan because 1 of the 6 values of 'nsamplecov' are missing (NaN), and a statistic over a nan is nan; drop them first: skew(df['nsamplecov'].dropna()) ...
    """
    np = sys.modules.get("numpy")
    if np is None or not _has_nan(np, result):
        return None
    for arg in args:
        try:
            values = np.asarray(arg, dtype=float)
        except (TypeError, ValueError):
            continue
        missing = int(np.isnan(values).sum())
        if missing:
            name = getattr(arg, "name", None)
            label = f" of {name!r}" if isinstance(name, str) else ""
            column = f"df[{name!r}]" if isinstance(name, str) else "x"
            call = getattr(func, "__name__", "the test")
            why = "a statistic over a nan is nan" if call in ESTIMATES else "every comparison with nan is False"
            return (
                f"Note (line {line}): {call}() {NAN_MARK} {missing} of the {values.size} values{label} are missing "
                f"(NaN), and {why}; drop them first: {call}({column}.dropna()) (two columns: df[[a, b]].dropna())."
            )
    return None


def _has_nan(np: Any, result: Any) -> bool:
    """Whether a test's result (a number, a tuple or named result of numbers, an array) holds a nan."""
    if hasattr(result, "pvalue") and not isinstance(result, tuple):  # PearsonRResult and other result objects
        result = (getattr(result, "statistic", 0.0), result.pvalue)
    parts = result if isinstance(result, tuple) else (result,)
    for part in parts:
        try:
            if bool(np.isnan(np.asarray(part, dtype=float)).any()):
                return True
        except (TypeError, ValueError):
            continue
    return False


def self_pick_note(op: str, line: int, source: Any, result: Any) -> str | None:
    """The note for an idxmax over a column of correlations that picked the column's own variable (r = 1).

    >>> import pandas as pd
    >>> corr = pd.DataFrame({"score": [1, 2, 3, 4], "gdp": [2, 4, 5, 9], "rank": [4, 3, 2, 1]}).corr()
    >>> print(self_pick_note("idxmax", 5, corr["score"].abs(), "score"))
    Note (line 5): idxmax() picked 'score' itself: its correlation with itself is 1. Leave it out first: corr['score'].drop('score').abs().idxmax().
    >>> self_pick_note("idxmax", 5, corr["score"].drop("score").abs(), "rank") is None
    True
    """
    pd = sys.modules.get("pandas")
    if op != "idxmax" or pd is None or not isinstance(source, pd.Series) or source.name is None:
        return None
    try:
        if result != source.name or abs(float(source[result]) - 1.0) > 1e-9:
            return None
    except (TypeError, ValueError, KeyError):
        return None
    return (
        f"Note (line {line}): idxmax() picked {result!r} itself: {SELF_MARK} is 1. Leave it out first: "
        f"corr[{result!r}].drop({result!r}).abs().idxmax()."
    )
