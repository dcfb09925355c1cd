"""The contract's "per X" check: one row per distinct X of the given data, each X spelled once; and the line that
aggregates a per-row answer by X.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

from cave.review.contract.reading import Contract
from cave.review.contract.shapes import as_number, column_for, is_frame, is_series, is_text, n_rows, norm
from cave.review.profile import spelling_groups

__all__ = ["per_group"]


def per_group(contract: Contract, answer: Any, tables: dict[str, Any]) -> list[str]:
    per = contract.per or ""
    n = n_rows(answer)
    distinct = _distinct_count(per, tables)
    if distinct is None:
        return []  # "per X" names nothing in the given data: nothing to count the rows against
    if n is None:
        if contract.kind == "table" and as_number(answer) is not None and distinct > 1:
            return [
                f"one value per {per}: the answer is a single number; group by the {per} "
                f"(`groupby(...).agg(...)`) and pass the table"
            ]
        return []
    if n > distinct:
        return [
            f"one row per {per}: the given tables have {distinct} distinct {per}, the answer has {n} rows "
            f"(one per input row?): aggregate with `groupby(...).agg(...)`, not `transform` or a merge"
            + _regroup(contract, answer, tables)
        ]
    keys = _keys(answer)
    if keys is not None and (spelled := _spelled_apart(keys)):
        shown = ", ".join(repr(k) for k in spelled[:4])
        return [
            f"one row per {per}: the answer's labels spell one {per} in several ways ({shown}): the given column "
            f"holds each {per} in several spellings; clean it before grouping (e.g. `.str.strip().str.title()`), "
            "then group and answer again"
        ]
    if keys is not None and len(set(map(norm, keys))) < len(keys):
        return [f"one row per {per}: the answer repeats a {per}: aggregate so each {per} appears once"]
    return []


def _spelled_apart(keys: list[Any]) -> list[str]:
    """The first set of labels that differ only by case, spaces or punctuation ('Ines', 'INES', 'Ines '), or [].
    Spellings of one value grouped apart are a fact of the data, not a suspicion: the answer splits one group.

    >>> _spelled_apart(["Ines", "INES", "Kwame", "Ines "]), _spelled_apart(["a", "b", "a"])
    (['Ines', 'INES', 'Ines '], [])
    """
    groups = spelling_groups(k for k in keys if isinstance(k, str))
    return groups[0] if groups else []


def _regroup(contract: Contract, answer: Any, tables: dict[str, Any]) -> str:
    """A line that aggregates a per-row answer by the task's X, when its rows are rows of the table holding X
    (a development probe: nights x rate of each confirmed booking sent for "revenue per hotel"); '' otherwise.
    ``_final_answer`` is the answer just sent, in the runtime.

    >>> import pandas as pd
    >>> from cave.review.contract import read
    >>> stays = pd.DataFrame({"hotel": ["Inn", "Inn", "Lodge"], "nights": [1, 2, 3], "rate": [10.0, 20.0, 30.0]})
    >>> print(_regroup(read("Revenue per hotel, highest first"), stays.nights * stays.rate, {"stays": stays}))
    ; e.g. final_answer(_final_answer.groupby(stays.loc[_final_answer.index, 'hotel']).sum().sort_values(ascending=False))
    >>> daily = pd.Series([1.0, 2.0, 4.0], index=["2025-01-05", "2025-01-09", "2025-02-01"])
    >>> print(_regroup(read("revenue per month in 2025"), daily, {}))
    ; e.g. import pandas as pd; final_answer(_final_answer.groupby(pd.to_datetime(_final_answer.index).to_period('M').astype(str)).sum())
    """
    if not is_series(answer) or answer.dtype.kind not in "iufb":
        return ""
    agg = {"count": "size"}.get(contract.agg or "sum", contract.agg or "sum")
    order = {"desc": ".sort_values(ascending=False)", "asc": ".sort_values()"}.get(contract.order or "", "")
    period = _PERIODS.get((contract.per or "").split()[-1] if contract.per else "")
    if period is not None and _dated(answer.index):  # one row per day sent for "per month"
        line = f"_final_answer.groupby(pd.to_datetime(_final_answer.index).to_period({period!r}).astype(str)).{agg}()"
        return f"; e.g. import pandas as pd; final_answer({line}{order})"
    found = column_for(contract.per or "", tables)
    if found is None:
        return ""
    table, column = found
    if not answer.index.isin(tables[table].index).all():
        return ""
    line = f"_final_answer.groupby({table}.loc[_final_answer.index, {column!r}]).{agg}(){order}"
    return f"; e.g. final_answer({line})"


_PERIODS = {"month": "M", "year": "Y", "quarter": "Q", "week": "W"}


def _dated(index: Any) -> bool:
    """Whether an index holds moments (datetimes, or most of its text reads as dates).

    >>> import pandas as pd
    >>> _dated(pd.Index(["2025-01-05", "2025-01-06"])), _dated(pd.Index(["Inn", "Lodge"])), _dated(pd.RangeIndex(3))
    (True, False, False)
    """
    import pandas as pd

    if pd.api.types.is_datetime64_any_dtype(index):
        return True
    if not is_text(index) or len(index) == 0:
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parsed = pd.to_datetime(pd.Series(index.astype(str)), errors="coerce", format="mixed")
    return bool(parsed.notna().mean() >= 0.8)


def _distinct_count(per: str, tables: dict[str, Any]) -> int | None:
    import pandas as pd

    found = column_for(per, tables)
    if found is not None:
        return int(tables[found[0]][found[1]].nunique())
    head = per.split()[-1] if per else ""
    if head not in ("month", "year", "quarter", "week"):
        return None
    counts = []
    for df in tables.values():
        for c in df.columns:
            s = df[c]
            if pd.api.types.is_datetime64_any_dtype(s):
                dates = s
            elif is_text(s) and re.search(r"date|time|day|month", str(c), re.I):
                dates = pd.to_datetime(s, errors="coerce", format="mixed")
            else:
                continue
            if dates.notna().mean() < 0.8:
                continue
            period = {"month": "M", "year": "Y", "quarter": "Q", "week": "W"}[head]
            counts.append(int(dates.dropna().dt.to_period(period).nunique()))
    return max(counts) if counts else None


def _keys(answer: Any) -> list[Any] | None:
    if isinstance(answer, dict):
        return list(answer)  # unique by construction, but several may spell one value
    if is_series(answer):
        return list(answer.index) if is_text(answer.index) else None
    if is_frame(answer):
        if is_text(answer.index) and answer.index.name is not None:
            return list(answer.index)
        text = [c for c in answer.columns if is_text(answer[c])]
        return list(answer[text[0]]) if len(text) == 1 else None
    return None
