"""Tables grouped at the grain the task asks: one row per month for "revenue per month" (not 162 days), the
hour (day, month) picked from its own groups for "what hour gets the most ...", and labels that spell one name one
way (not ' Germany', 'GERMANY' and 'germany' as three countries).

Pure functions of the task's words and the answer object; the agent adds what they find to a failed check's note
and to the tie hold (``cave.review.acceptance``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from cave.runtimes.value_notes import is_text

__all__ = ["as_dates", "granularity_problem", "messy_keys", "period_pick", "SCAN_ROWS"]

# -- one row per month -------------------------------------------------------------------------------------
_UNIT = re.compile(
    r"\b(?:per|each|by|every)\s+(hour|day|week|month|quarter|year)\b"
    r"|\b(hourly|daily|weekly|monthly|quarterly|yearly|annual)\b",
    re.I,
)
_ADJECTIVE = {
    "hourly": "hour",
    "daily": "day",
    "weekly": "week",
    "monthly": "month",
    "quarterly": "quarter",
    "yearly": "year",
    "annual": "year",
}
_FREQ = {"hour": "h", "day": "D", "week": "W", "month": "M", "quarter": "Q", "year": "Y"}
_STRFTIME = {"hour": "%Y-%m-%d %H", "day": "%Y-%m-%d", "week": "%Y-%W", "month": "%Y-%m", "year": "%Y"}  # SQLite's
_DATE_TEXT = re.compile(r"\d{1,4}[-/.:]\d{1,2}")
SCAN_ROWS = 5000


def granularity_problem(
    task: str, value: Any, given: Mapping[str, Any] | None = None, sources: Mapping[str, str] | None = None
) -> str | None:
    """When the task asks for one row per month (hour, day, week, quarter, year) and the answer is a table
    whose dates are finer than that (162 days for "revenue per month"), what is wrong and how to group. Where
    a ``given`` table has the date column the answer was grouped by, the example groups that table: a bare
    ``df.index`` was applied to the given table's own index (a development task: one row, for 1970-01).

    >>> import pandas as pd
    >>> days = pd.DataFrame({"date": ["2025-01-05", "2025-01-06", "2025-02-01"], "amount": [1.0, 2.0, 3.0]})
    >>> print(granularity_problem("revenue per month in 2025", days))
    the task asks for one row per month, but the 3 rows hold 3 dates in 2 months (column 'date'): group by the month, e.g. .groupby(pd.to_datetime(df['date']).dt.to_period('M'))
    >>> by_day = days.set_index("date")  # the dates in the index: the example must run as written (no .dt there)
    >>> note = granularity_problem("revenue per month", by_day)
    >>> note.split("e.g. ")[1]
    ".groupby(pd.to_datetime(df.index).to_period('M'))"
    >>> df = by_day; eval("df" + note.split("e.g. ")[1] + "['amount'].sum()").tolist()
    [3.0, 3.0]
    >>> print(granularity_problem("revenue per month", by_day, {"orders": days}).split("e.g. ")[1])
    orders.groupby(pd.to_datetime(orders['date']).dt.to_period('M'))

    A table of a given SQLite database (``sources``: table -> the variable holding the database) is grouped in
    the query:

    >>> print(granularity_problem("revenue per month", by_day, {"orders": days}, {"orders": "db"}).split("e.g. ")[1])
    SELECT strftime('%Y-%m', date) AS month, ... FROM orders GROUP BY month (pd.read_sql(..., db))
    >>> months = days.assign(date=["2025-01", "2025-01", "2025-02"], product=["a", "b", "a"])  # month x product
    >>> granularity_problem("revenue per month and product", months) is None
    True
    """
    m = _UNIT.search(task)
    kind = type(value).__name__
    if m is None or kind not in ("DataFrame", "Series") or not type(value).__module__.startswith("pandas"):
        return None
    unit = (m.group(1) or _ADJECTIVE[m.group(2).lower()]).lower()
    if len(value) < 2:
        return None
    import pandas as pd

    head = value.head(SCAN_ROWS)
    columns = [(None, head.index.to_series())] if not isinstance(head.index, pd.RangeIndex) else []
    if kind == "DataFrame":
        columns += [(str(c), head[c]) for c in list(head.columns)[:8]]
    elif head.name is not None:
        columns.append((str(head.name), head))
    for name, column in columns:
        dates = as_dates(pd, column)
        if dates is None:
            continue
        periods = dates.dt.to_period(_FREQ[unit]).nunique()
        distinct = dates.nunique()
        if distinct <= periods:
            return None  # a date column at the asked granularity (rows may repeat it: month x product)
        where = f"column '{name}'" if name is not None else "the index"
        freq = _FREQ[unit]
        date = name if name is not None else head.index.name
        source = next((t for t, f in (given or {}).items() if date is not None and _has_column(pd, f, date)), None)
        db, sql = (sources or {}).get(source or ""), _STRFTIME.get(unit)
        if db and sql:  # a database's table: grouped in the query
            example = f"SELECT strftime('{sql}', {date}) AS {unit}, ... FROM {source} GROUP BY {unit} (pd.read_sql(..., {db}))"  # fmt: skip
        elif source is not None and not db:  # the given table by its date column: right for any aggregation
            example = f"{source}.groupby(pd.to_datetime({source}[{date!r}]).dt.to_period('{freq}'))"
        elif name is not None:  # a column's dates go through .dt; an index's do not (a DatetimeIndex has no .dt)
            example = f".groupby(pd.to_datetime(df[{name!r}]).dt.to_period('{freq}'))"
        else:
            example = f".groupby(pd.to_datetime(df.index).to_period('{freq}'))"
        return (
            f"the task asks for one row per {unit}, but the {len(head)} rows hold {distinct} dates in {periods} "
            f"{unit}s ({where}): group by the {unit}, e.g. {example}"
        )
    return None


# "which hour has the most page views", "which month had the highest revenue"
_PERIOD_ASKED = re.compile(r"\b(?:what|which)\s+(hour|day of the week|weekday|day|week|month|quarter|year)\b", re.I)
_PERIOD_KEY = {
    "hour": ".dt.hour",
    "day of the week": ".dt.day_name()",
    "weekday": ".dt.day_name()",
    "day": ".dt.date",
    "week": ".dt.to_period('W')",
    "month": ".dt.to_period('M')",
    "quarter": ".dt.to_period('Q')",
    "year": ".dt.year",
}


def period_pick(task: str, given: Mapping[str, Any] | None) -> str | None:
    """The grouping that answers "what hour (day, month, ...) has the most ...", on the given table's date column,
    for an answer picked from a wide tie (a development task: one group per timestamp, each of one row, and the
    first one's hour sent twice).

    >>> import pandas as pd
    >>> requests = pd.DataFrame({"timestamp": pd.date_range("2025-01-01", periods=4, freq="37min"), "ms": range(4)})
    >>> period_pick("Which hour has the most page views?", {"requests": requests})
    "requests.groupby(requests['timestamp'].dt.hour).size().idxmax() (or ['col'].sum() for a total in place of .size())"
    >>> period_pick("What is the mean latency?", {"requests": requests}) is None
    True
    """
    m = _PERIOD_ASKED.search(task)
    if m is None or not given:
        return None
    import pandas as pd

    for name, frame in given.items():
        if not isinstance(frame, pd.DataFrame):
            continue
        for column in list(frame.columns)[:50]:
            if not isinstance(column, str) or not pd.api.types.is_datetime64_any_dtype(frame[column]):
                continue
            key = f"{name}[{column!r}]{_PERIOD_KEY[m.group(1).lower()]}"
            return f"{name}.groupby({key}).size().idxmax() (or ['col'].sum() for a total in place of .size())"
    return None


def messy_keys(value: Any) -> str | None:
    """When an answer's labels (a table's index, or a dict's keys) spell one name several ways (' Germany',
    'GERMANY', 'germany'), what they are and how to clean them (a development task: value_counts of the raw
    column, 43 rows for 5 countries).

    >>> import pandas as pd
    >>> counts = pd.Series([14, 7, 7, 4, 8], index=pd.Index(["Germany", " Germany", "germany", "GERMANY", "France"],
    ...                                                          name="country"))
    >>> print(messy_keys(counts))
    the answer's 5 labels spell 2 names in several ways ('Germany', ' Germany', 'germany', 'GERMANY'): clean them before grouping, e.g. df['country'].str.strip().str.title(), then group and answer again
    >>> messy_keys(pd.Series([1, 2], index=["a", "b"])) is None
    True

    A table whose labels were moved into a column (``reset_index()``) is read by its first text column:

    >>> print(messy_keys(counts.reset_index(name="n")).split(":")[0])
    the answer's 5 labels spell 2 names in several ways ('Germany', ' Germany', 'germany', 'GERMANY')
    """
    kind = type(value).__name__
    if isinstance(value, dict):
        labels, name = list(value)[:10_000], None
    elif kind in ("Series", "DataFrame") and type(value).__module__.startswith("pandas"):
        labels, name = list(value.index[:10_000]), value.index.name
        if kind == "DataFrame" and _default_index(value.index):
            text = [c for c in value.columns if value[c].dtype == object or str(value[c].dtype).startswith("str")]
            if not text or not value[text[0]].is_unique:
                return None  # a listing of rows (a value may repeat), not one row per label
            labels, name = list(value[text[0]].iloc[:10_000]), text[0]
    else:
        return None
    groups: dict[str, list[str]] = {}
    for label in labels:
        if isinstance(label, str):
            groups.setdefault(re.sub(r"\s+", " ", label.strip().casefold()), []).append(label)
    messy = [list(dict.fromkeys(g)) for g in groups.values() if len(set(g)) > 1]  # spelled apart, not repeated
    if not messy:
        return None
    column = f"df[{name!r}]" if isinstance(name, str) else "df[col]"
    shown = ", ".join(repr(x) for x in messy[0][:4])
    return (
        f"the answer's {len(labels)} labels spell {len(groups)} names in several ways ({shown}): clean them before "
        f"grouping, e.g. {column}.str.strip().str.title(), then group and answer again"
    )


def _default_index(index: Any) -> bool:
    """Whether ``index`` is pandas' default 0..n-1 row numbering (no labels of its own)."""
    return type(index).__name__ == "RangeIndex" and index.name is None and index.start == 0 and index.step == 1


def _has_column(pd: Any, frame: Any, column: Any) -> bool:
    return isinstance(frame, pd.DataFrame) and column in frame.columns


def as_dates(pd: Any, column: Any) -> Any:
    """The column as datetimes when it holds dates (datetime dtype, or text that reads as dates), else None."""
    if pd.api.types.is_datetime64_any_dtype(column):
        return column.dropna()
    if not is_text(column):
        return None
    text = column.dropna().astype(str)
    if text.empty or text.str.contains(_DATE_TEXT).mean() < 0.9:
        return None
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dates = pd.to_datetime(text, errors="coerce", format="mixed")
    return dates.dropna() if dates.notna().mean() >= 0.9 else None
