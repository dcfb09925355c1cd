"""Checking an answer against the task's contract (``problems``) and the note that holds a breach.

See ``cave.review.contract`` for what a contract holds.
"""

from __future__ import annotations

import math
import re
from typing import Any

from cave.review.answers import is_array, is_number
from cave.review.contract.groups import per_group
from cave.review.contract.reading import Contract
from cave.review.contract.shapes import (
    as_number,
    column_for,
    column_holding,
    is_frame,
    is_series,
    is_text,
    n_rows,
    norm,
    only_value,
    type_name,
)

__all__ = ["CONTRACT_HOLDS", "NOTE_HEAD", "column_for", "note", "problems"]


def problems(contract: Contract, answer: Any, tables: dict[str, Any] | None = None) -> list[str]:
    """What in ``answer`` contradicts ``contract`` (given the task's tables), each with the fix; [] if nothing.

    >>> import pandas as pd
    >>> from cave.review.contract import read
    >>> visits = pd.DataFrame({"clinic": ["a", "a", "b"], "wait": [1.0, 3.0, 5.0]})
    >>> problems(read("What is the median wait per clinic?"), visits.assign(m=visits.groupby("clinic")["wait"].transform("median")), {"visits": visits})[0][:60]
    'one row per clinic: the given tables have 2 distinct clinic,'
    >>> problems(read("How many clinics are there?"), visits, {"visits": visits})[0][:45]
    'a count: the task asks how many clinics, the '
    >>> problems(read("Which clinic has the longest wait?"), "b", {"visits": visits})
    []
    """
    tables = tables or {}
    out: list[str] = []
    kind = contract.kind
    try:
        if kind in ("number", "count"):
            out += _scalar_number(contract, answer, integral=kind == "count")
        elif kind == "name":
            out += _name(contract, answer, tables)
        elif kind == "date":
            out += _date(answer)
        elif kind == "bool":
            out += _yes_no(answer)
        elif kind in ("list", "set"):
            out += _items(contract, answer) + _measures_for_names(contract, answer, tables)
            out += _labelled_measures(contract, answer, tables)
        elif kind == "table" or (contract.per and n_rows(answer) is not None):
            out += per_group(contract, answer, tables)
        if contract.columns and is_frame(answer):
            out += _named_columns(contract, answer)
        if contract.order and kind in ("list", "table", "frame"):
            out += _ordered(contract, answer)
        if contract.count_of and kind == "count" and not out:
            out += _entity_count(contract, answer, tables)
    except Exception:  # a check that cannot read the answer says nothing rather than something wrong
        return out
    return out


def _scalar_number(contract: Contract, answer: Any, *, integral: bool) -> list[str]:
    what = f"how many {contract.count_of}" if integral and contract.count_of else "for one number"
    label = "a count" if integral else "a number"
    x = as_number(answer)
    if x is None and (n_rows(answer) == 1 or (is_frame(answer) and answer.size == 1)):
        x = as_number(only_value(answer))  # {'mean': 2.5}, a one-row Series: one value all the same
    if x is None:
        return [
            f"{label}: the task asks {what}, the answer is a {type_name(answer)} "
            f"({_preview(answer)}): compute the single value and pass it to final_answer"
        ]
    if integral and not (math.isfinite(x) and x == int(x) and x >= 0):
        return [f"a count: the task asks {what}, the answer {x!r} is not a whole number of them"]
    if not math.isfinite(x):
        return [f"a number: the answer is {x!r}: check for missing values (dropna()) or an empty selection"]
    return []


def _preview(x: Any) -> str:
    text = repr(x) if not (is_frame(x) or is_series(x)) else f"{len(x)} rows"
    return text if len(text) <= 60 else text[:57] + "..."


def _name(contract: Contract, answer: Any, tables: dict[str, Any]) -> list[str]:
    r"""Whether the answer to "which X" is one value of the column that holds X.

    A row (a Series holding the X and its measure) gets the line that takes the X from it, not `.idxmax()` (a
    development run: `pd.read_sql("SELECT city, COUNT(*) ...").iloc[0]`, then `.idxmax()` of that row failed):

    >>> import pandas as pd
    >>> c = Contract(which="city", kind="name")
    >>> _name(c, pd.Series({"city": "Accra", "n": 12}), {"customers": pd.DataFrame({"city": ["Accra"]})})[0][-55:]
    "pass the single city (e.g. its ['city']: `row['city']`)"
    """
    if n_rows(answer) is not None and not isinstance(answer, str):
        n = n_rows(answer)
        if n == 1:
            return _one_row(contract, answer, tables)
        found = column_for(contract.which or "", tables)
        row = is_series(answer) and found is not None and found[1] in list(answer.index)
        take = f"its [{found[1]!r}]: `row[{found[1]!r}]`" if row and found else "`.idxmax()`"
        return [
            f"one {contract.which}: 'which {contract.which}' asks for one value, the answer is a "
            f"{type_name(answer)} of {n}: pass the single {contract.which} (e.g. {take})"
        ]
    found = column_for(contract.which or "", tables)
    if found is None:
        return []
    table, col = found
    number = isinstance(answer, int | float) and not isinstance(answer, bool)
    if not (isinstance(answer, str) or number and is_text(tables[table][col])):
        return []
    keys = {norm(v) for v in tables[table][col].dropna().astype(str)}
    if number:
        shown = int(answer) if float(answer).is_integer() else answer  # a store numbered 7 may come back as 7.0
        if norm(shown) in keys:
            return []
        return [
            f"'which {contract.which}' asks for a value of {table}[{col!r}] (a name); the answer {answer!r} is a "
            f"number, the measure rather than the {col} it belongs to: answer with the {col} (`.idxmax()` / "
            "`.idxmin()` of the grouped measure, not `.max()`)"
        ]
    if norm(answer) in keys:
        return []
    other = column_holding(answer, tables)
    if other and other != (table, col):
        return [
            f"'which {contract.which}' asks for a value of {table}[{col!r}]; the answer {answer!r} is a value of "
            f"{other[0]}[{other[1]!r}]: answer with the {col} of that row"
        ]
    return []


def _one_row(contract: Contract, answer: Any, tables: dict[str, Any]) -> list[str]:
    r"""A one-row table (or a one-item Series) that holds the X 'which X' asks for, beside its measure: the X is the
    answer, not the row (a development run: "Which city has the most customers?" answered with the city and its
    count; a reader of the answer gets a table where it asks for a name).

    >>> import pandas as pd
    >>> c, given = Contract(which="city", kind="name"), {"customers": pd.DataFrame({"city": ["Accra", "Lima"]})}
    >>> _one_row(c, pd.DataFrame({"city": ["Accra"], "n": [12]}), given)[0][-60:]
    "pass its 'city': final_answer(_final_answer['city'].iloc[0])"
    >>> _one_row(c, pd.Series([12], index=["Accra"]), given)[0][-52:]
    'pass its label: final_answer(_final_answer.index[0])'
    >>> _one_row(c, pd.DataFrame({"n": [12]}), given)
    []
    """
    found = column_for(contract.which or "", tables)
    if found is None:
        return []
    col = found[1]
    if is_frame(answer) and col in answer.columns:
        take, what = f"final_answer(_final_answer[{col!r}].iloc[0])", f"its {col!r}"
    elif is_series(answer) and norm(answer.index[0]) in {norm(v) for v in tables[found[0]][col].dropna().astype(str)}:
        take, what = "final_answer(_final_answer.index[0])", "its label"
    else:
        return []
    return [
        f"one {contract.which}: 'which {contract.which}' asks for the {contract.which} itself; the answer is a "
        f"{type_name(answer)} of one row: pass {what}: {take}"
    ]


def _yes_no(answer: Any) -> list[str]:
    """A yes/no question answered with something other than True or False: a word, a count, the rows themselves.

    >>> _yes_no(True), _yes_no(__import__("numpy").bool_(False)), _yes_no("Yes")[0][:44]
    ([], [], 'yes or no: the task asks a yes/no question; ')
    """
    if isinstance(answer, bool) or type(answer).__name__ == "bool_":
        return []
    word = str(answer).strip().strip(".!").lower() if isinstance(answer, str) else None
    if word in ("yes", "no", "true", "false"):
        fix = f"final_answer({word in ('yes', 'true')})"
    elif is_frame(answer):  # the matching rows: whether there are any is their count (a development probe)
        fix = (
            "final_answer(len(_final_answer) > 0) if the question is whether any row matches; else "
            "final_answer(bool(...)) over the test itself, e.g. `(df['col'] > x).all()`"
        )
    elif isinstance(answer, str) or is_series(answer) or isinstance(answer, int | float):
        # a sentence ("No billionaires under 30 found.") is a reading of the data, not the bool the test gives
        fix = "final_answer(bool(...)) over the test itself, e.g. `(df['col'] > x).any()` or `.all()`"
    else:
        return []
    return [f"yes or no: the task asks a yes/no question; the answer is {_short(answer)}: send True or False ({fix})"]


def _short(answer: Any) -> str:
    text = repr(answer) if not (is_series(answer) or is_frame(answer)) else f"a {type(answer).__name__}"
    return text if len(text) <= 60 else text[:57] + "..."


def _date(answer: Any) -> list[str]:
    """A date, month or year asked for, and a number sent that cannot be one (the count or total of that period).

    >>> _date(1250)[0][:48], _date(2024), _date(3), _date("2024-03")
    ('a date: the task asks when (a day, month or year', [], [], [])
    """
    if not isinstance(answer, int | float) or isinstance(answer, bool):
        return []
    x = float(answer)
    if x.is_integer() and (0 <= x <= 31 or 1900 <= x <= 2100):
        return []  # a month, day or hour number, or a year
    return [
        f"a date: the task asks when (a day, month or year); the answer {answer!r} is a number that is none of "
        "them, the measure rather than the period it belongs to: answer with the period (`.idxmax()` of the "
        "per-period measure)"
    ]


def _items(contract: Contract, answer: Any) -> list[str]:
    items = _as_items(answer)
    if items is None:
        return []
    out = []
    # names listed twice are one thing listed twice ("a list of neighbourhoods" has each once), whatever the
    # task says about distinctness; repeated numbers may be ties, and are left alone unless it asks for distinct
    # (not a table's rows: they may repeat a name, as the top orders of one customer do)
    # and the values of N ranked things may repeat (the artists of the 3 most streamed songs)
    names = not is_frame(answer) and bool(items) and all(isinstance(i, str) for i in items) and not contract.repeats
    if contract.distinct or contract.kind == "set" or names:
        seen = [norm(i) for i in items]
        if len(set(seen)) < len(seen):
            dup = len(seen) - len(set(seen))
            out.append(
                f"distinct values: the answer lists {dup} value(s) more than once: drop the duplicates "
                "(`.unique()` / `drop_duplicates()`)"
            )
    if contract.top and len(items) > contract.top:
        out.append(
            f"top {contract.top}: the answer has {len(items)} items: keep the first {contract.top} "
            "(`.head(n)` after sorting)"
        )
    return out


def _measures_for_names(contract: Contract, answer: Any, tables: dict[str, Any]) -> list[str]:
    """'Which 3 countries ...' answered with numbers (the counts or totals that rank them) where the column that
    holds the countries holds names: the measure was sent, not the things it ranks."""
    items = _as_items(answer)
    if not contract.which or not items:
        return []
    if not all(is_number(i) for i in items) or (named := _names_of(contract.which, tables)) is None:
        return []
    table, col, keys = named
    if any(norm(int(i) if float(i).is_integer() else i) in keys for i in items):
        return []
    return [
        f"'which {contract.which}' asks for values of {table}[{col!r}] (names); the answer's items are numbers, the "
        f"measure that ranks them rather than the {contract.which}: answer with the {contract.which} (the index of "
        "the sorted measure, e.g. `.nlargest(n).index.tolist()`)"
    ]


def _labelled_measures(contract: Contract, answer: Any, tables: dict[str, Any]) -> list[str]:
    """'Which 2 neighbourhood groups have the highest average price?' answered with the prices by group (a Series
    of numbers indexed by the groups): the groups are what is asked, as a list; the prices ride along. A reader
    that takes the answer's values (``.tolist()``) gets the prices."""
    if not contract.which or not is_series(answer) or answer.dtype.kind not in "fiu" or not is_text(answer.index):
        return []
    named = _names_of(contract.which, tables)
    if named is None:
        return []
    _, col, keys = named
    if not all(norm(v) in keys for v in answer.index):
        return []
    return [
        f"'which {contract.which}' asks for the {contract.which} themselves; the answer is a Series of numbers by "
        f"{col}: pass the {col} values as a list: final_answer(_final_answer.index.tolist())"
    ]


def _names_of(which: str, tables: dict[str, Any]) -> tuple[str, str, set[str]] | None:
    """The given column of text that 'which X' names (table, column) with its values normalized; None when no
    column or one of numbers does."""
    found = column_for(which, tables)
    if found is None or not is_text(tables[found[0]][found[1]]):
        return None
    table, col = found
    return table, col, {norm(v) for v in tables[table][col].dropna().astype(str)}


def _as_items(answer: Any) -> list[Any] | None:
    if isinstance(answer, list | tuple | set):
        return list(answer)
    if is_series(answer):
        return list(answer.index if answer.dtype.kind in "fi" and is_text(answer.index) else answer)
    if is_frame(answer):
        return list(answer.iloc[:, 0]) if answer.shape[1] >= 1 else None
    if is_array(answer):
        return list(answer)
    return None


def _named_columns(contract: Contract, answer: Any) -> list[str]:
    have = {norm(c) for c in answer.columns} | {norm(n) for n in answer.index.names if n is not None}
    missing = [c for c in contract.columns if norm(c) not in have]
    if not missing:
        return []
    return [
        f"columns: the task names the columns {', '.join(map(repr, contract.columns))}; the answer has "
        f"{', '.join(map(repr, map(str, answer.columns)))} (missing {', '.join(map(repr, missing))}): rename them "
        "(`.rename(columns={...})`, `.reset_index()`)"
    ]


def _ordered(contract: Contract, answer: Any) -> list[str]:
    values = None
    if is_series(answer) and answer.dtype.kind in "fiu":
        values = list(answer)
    elif isinstance(answer, dict) and all(as_number(v) is not None for v in answer.values()):
        values = [as_number(v) for v in answer.values()]
    elif is_frame(answer):
        numeric = [c for c in answer.columns if answer[c].dtype.kind in "fiu"]
        if numeric and not any(_monotonic(list(answer[c]), contract.order) for c in numeric):
            return [
                f"order: the task asks for {'highest' if contract.order == 'desc' else 'lowest'} first; no "
                f"numeric column of the answer is sorted that way: `.sort_values(..., ascending="
                f"{contract.order == 'asc'})`"
            ]
        return []
    if values and len(values) > 1 and not _monotonic(values, contract.order):
        return [
            f"order: the task asks for {'highest' if contract.order == 'desc' else 'lowest'} first; the answer "
            f"is not sorted that way: `.sort_values(ascending={contract.order == 'asc'})`"
        ]
    return []


def _monotonic(values: list[Any], order: str | None) -> bool:
    clean = [v for v in values if v == v]  # NaN aside
    pairs = list(zip(clean, clean[1:], strict=False))
    return all(a >= b for a, b in pairs) if order == "desc" else all(a <= b for a, b in pairs)


def _entity_count(contract: Contract, answer: Any, tables: dict[str, Any]) -> list[str]:
    x = as_number(answer)
    found = column_for(contract.count_of or "", tables)
    if x is not None and found is None:
        return _kinds_counted(contract.count_of or "", x, tables)
    if x is None or found is None:
        return []
    df = tables[found[0]]
    rows, distinct = len(df), int(df[found[1]].nunique())
    if int(x) == rows and distinct != rows:
        return [
            f"a count of {contract.count_of}: the answer {int(x)} is the number of rows of {found[0]}, which holds "
            f"{distinct} distinct {found[1]}: count each {contract.count_of.rstrip('s')} once (`.nunique()`), "
            "after any filter the task asks for"
        ]
    return []


def _kinds_counted(counted: str, x: float, tables: dict[str, Any]) -> list[str]:
    """ "How many different cats" answered with the number of distinct values of the column that holds 'Cat' (the
    species): the kinds were counted, not the cats (a development probe). The problem, with the rows to count.

    >>> import pandas as pd
    >>> pets = pd.DataFrame({"pet_id": [1, 2, 2, 3, 4, 5], "species": ["Cat", "Dog", "Dog", "Cat", "cat", "Bird"]})
    >>> _kinds_counted("cats", 4, {"pets": pets})[0][:81]
    "a count of cats: the answer 4 is the number of distinct values of pets['species']"
    >>> _kinds_counted("cats", 3, {"pets": pets}), _kinds_counted("visits", 4, {"pets": pets})
    ([], [])
    """
    words = counted.split()
    if not words or len(words) > 2:
        return []
    last = words[-1]
    for stem in dict.fromkeys(
        [last, last[:-1] if last.endswith("s") else last, last[:-2] if last.endswith("es") else last]
    ):
        holding = column_holding(stem, tables) if len(stem) > 2 else None
        if holding is None:
            continue
        table, column = holding
        values = tables[table][column]
        kinds = int(values.nunique())
        if int(x) != x or int(x) != kinds or kinds < 2:
            return []
        df = tables[table]
        chosen = df[values.astype(str).map(norm) == norm(stem)]
        ids = [c for c in df.columns if c != column and re.search(r"(?:^|_)id$|_id|^id", str(c), re.I)]
        if len(chosen) == x or any(chosen[c].nunique() == x for c in ids):
            return []  # the right count happens to be the same number: nothing to say
        shown = next(v for v in values.dropna().astype(str).unique() if norm(v) == norm(stem))
        return [
            f"a count of {counted}: the answer {int(x)} is the number of distinct values of {table}[{column!r}], "
            f"one of which is {shown!r}: count the {counted} themselves, the rows where {column} is {shown!r} (or "
            "the distinct ids among them)"
        ]
    return []


# -- the note ----------------------------------------------------------------------------------------------
CONTRACT_HOLDS = 2  # holds for the contract in one run; an answer that still breaks it ends unverified
NOTE_HEAD = "Not accepted yet: the answer does not fit what the task asks for"


def note(found: list[str]) -> str:
    """What the model reads when its answer breaks the task's contract.

    >>> print(note(["a count: ..."]))
    Not accepted yet: the answer does not fit what the task asks for:
    - a count: ...
    Fix it and call final_answer again (if the task really asks for this answer, send it again unchanged).
    """
    lines = "\n".join(f"- {p}" for p in found)
    return (
        f"{NOTE_HEAD}:\n{lines}\nFix it and call final_answer again (if the task really asks for this answer, "
        "send it again unchanged)."
    )
