"""The things a task asks for, not a stand-in: ids where it asks who or which customers, a number where it asks which
product.

"Find the 3 customers with the highest total" answered with customer_id and the total, "which product grew
fastest" answered with 0 (a row label): the answer names the things by something a reader cannot use, while a
given table (or a given database's table) holds them by name. ``ids_for_names`` and ``number_for_a_name`` say so,
with the merge or the column that gives the names; ``cave.review.answers.form_problems`` holds the answer for it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from cave.review.grouping import SCAN_ROWS, as_dates
from cave.runtimes.value_notes import is_text

__all__ = ["ids_for_names", "number_for_a_name"]

_ID_COLUMN = re.compile(r"(?:^|_)(?:id|Id|ID)$|[a-z](?:Id|ID)$")  # customer_id, PassengerId, CustomerID; not "paid"
_MENTIONS_IDS = re.compile(r"\b(?:ids?|identifiers?)\b", re.I)


def _entity_asked(task: str, stem: str) -> bool:
    """Whether the task asks for the things themselves ("the 3 customers with ...", "which customer", "who"),
    not for values keyed by them ("revenue per customer")."""
    things = rf"{re.escape(stem)}s?\b"
    if re.search(rf"\b(?:per|each|by|every)\s+{things}", task, re.I):
        return False
    return bool(
        re.search(r"\b(?:who|whose)\b", task, re.I)
        or re.search(
            rf"\b(?:which|what|name|names|top|bottom|first|last|\d+|three|five|ten)\s+(?:\w+\s+){{0,2}}{things}",
            task,
            re.I,
        )
        or re.search(rf"\bthe\s+{things}\s+(?:with|that|who|whose)\b", task, re.I)
    )


def _answer_ids(pd: Any, value: Any) -> tuple[str | None, list[Any]] | None:
    """The id column (or index) an answer is made of, and its values: a table of ids and numbers, a Series
    keyed by ids, or a plain list of ids. None when the answer holds text (names) already."""
    if isinstance(value, pd.DataFrame):
        if len(value) == 0 or len(value) > 100:
            return None
        text = [c for c in value.columns if is_text(value[c])]
        ids = [c for c in value.columns if _ID_COLUMN.search(str(c))]
        index_name = value.index.name
        if not ids and index_name is not None and _ID_COLUMN.search(str(index_name)):
            return str(index_name), list(value.index)
        if len(ids) != 1 or [c for c in text if c != ids[0]]:
            return None
        return str(ids[0]), list(value[ids[0]])
    if isinstance(value, pd.Series):
        if len(value) == 0 or len(value) > 100:
            return None
        if value.index.name is not None and _ID_COLUMN.search(str(value.index.name)):
            return str(value.index.name), list(value.index)
        if value.name is not None and _ID_COLUMN.search(str(value.name)):
            return str(value.name), list(value)
        return None
    if (
        isinstance(value, list | tuple)
        and 0 < len(value) <= 100
        and all(type(v).__name__.startswith("int") for v in value)
    ):
        return None, list(value)
    return None


def number_for_a_name(
    task: str, value: Any, given: Mapping[str, Any], sources: Mapping[str, str] | None = None
) -> str | None:
    """When the task asks which product (city, region, ...) and the answer is a number where a given table holds
    them as text: a row label or a count came back instead of the thing (a development task: 0).

    >>> import pandas as pd
    >>> sales = pd.DataFrame({"product": ["phone", "monitor"], "units": [3, 5]})
    >>> print(number_for_a_name("Which product grew fastest between March and April?", 0, {"sales": sales}))
    the task asks which product; the answer is the number 0, but `sales['product']` holds each product as text: answer with the product itself
    >>> number_for_a_name("How many units per product?", 0, {"sales": sales}) is None
    True
    >>> number_for_a_name("Which product rose most?", "monitor", {"sales": sales}) is None
    True
    """
    plain = value.item() if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0 else value
    if isinstance(plain, bool) or not isinstance(plain, int | float):
        return None
    try:
        import pandas as pd
    except ImportError:
        return None
    for name, frame in given.items():
        if not isinstance(frame, pd.DataFrame):
            continue
        for column in frame.columns[:200]:
            if not isinstance(column, str) or frame[column].dtype.kind not in "OTU":  # text: pandas' str is "O"
                continue
            stem = re.sub(r"[_ ]?name$", "", column.lower()) or column.lower()
            if len(stem) > 2 and re.search(rf"\b(?:which|what)\s+{re.escape(stem)}\b", task, re.I):
                where = (
                    f"the column {column!r} of the table {name} in `{sources[name]}`"
                    if name in (sources or {})
                    else f"`{name}[{column!r}]`"
                )
                return (
                    f"the task asks which {stem}; the answer is the number {plain!r}, but {where} holds "
                    f"each {stem} as text: answer with the {stem} itself"
                )
    return None


def ids_for_names(
    task: str, value: Any, given: Mapping[str, Any], sources: Mapping[str, str] | None = None
) -> str | None:
    """When the task asks for things (customers, products) and the answer gives their ids where a given table
    holds their names: what is wrong and how to add the names. Analyst: "Find the 3 customers with the highest
    total" answered with a table of customer_id and amount.

    >>> import pandas as pd
    >>> customers = pd.DataFrame({"customer_id": [1, 2, 3], "name": ["Ada Moss", "Gus Hart", "Kai Shaw"]})
    >>> top = pd.DataFrame({"customer_id": [2, 3], "amount": [9.5, 7.0]})
    >>> print(ids_for_names("Find the 2 customers with the highest total.", top, {"customers": customers}))
    the answer gives the customers as 'customer_id' values (2, 3); the task asks for the customers: `customers` has their 'name', e.g. .merge(customers[['customer_id', 'name']], on='customer_id')
    >>> ids_for_names("Revenue per customer", top, {"customers": customers}) is None  # keyed by id: fine
    True
    >>> ids_for_names("The ids of the 2 best customers", top, {"customers": customers}) is None
    True
    >>> bool(_ID_COLUMN.search("PassengerId")), bool(_ID_COLUMN.search("paid")), bool(_ID_COLUMN.search("valid"))
    (True, False, False)

    A table of a given database (``sources``: table -> the variable holding the database) is not a variable: the fix
    reads it (a development run: "Who were our top 3 customers" answered from SQL with customer_id and the total):

    >>> print(ids_for_names("Who were our top 2 customers?", top, {"customers": customers}, {"customers": "db"}))
    the answer gives the customers as 'customer_id' values (2, 3); the task asks for the customers: the table customers of `db` has their 'name': JOIN customers in the query, or .merge(pd.read_sql("SELECT customer_id, name FROM customers", db), on='customer_id')
    """
    if _MENTIONS_IDS.search(task) or not given:
        return None
    try:
        return _ids_for_names(task, value, given, sources or {})
    except Exception:  # unhashable cells, odd frames: a form check never fails the run
        return None


def _ids_for_names(task: str, value: Any, given: Mapping[str, Any], sources: Mapping[str, str]) -> str | None:
    try:
        import pandas as pd
    except ImportError:  # no pandas, no tables to look names up in
        return None
    found = _answer_ids(pd, value)
    if found is None:
        return None
    column, ids = found
    for name, frame in given.items():
        if not isinstance(frame, pd.DataFrame) or frame.empty:
            continue
        key = column if column in frame.columns else None
        if key is None:  # a plain list of ids: the frame's id column that holds them all
            key = next(
                (c for c in frame.columns if _ID_COLUMN.search(str(c)) and set(ids) <= set(frame[c].tolist())), None
            )
        if key is None or key.lower() in task.lower() or not set(ids) <= set(frame[key].tolist()):
            continue  # (a task that names the id column asks for ids)
        label = _label_column(pd, frame, key)
        stem = re.sub(r"s$", "", str(name).lower())
        if label is None or not _entity_asked(task, stem):
            continue
        shown = ", ".join(str(i) for i in ids[:5]) + (", ..." if len(ids) > 5 else "")
        head = f"the answer gives the {name} as {key!r} values ({shown}); the task asks for the {name}: "
        if name in sources:
            query = f'pd.read_sql("SELECT {key}, {label} FROM {name}", {sources[name]})'
            return (
                head + f"the table {name} of `{sources[name]}` has their {label!r}: JOIN {name} in the query, or "
                f".merge({query}, on={key!r})"
            )
        return head + f"`{name}` has their {label!r}, e.g. .merge({name}[[{key!r}, {label!r}]], on={key!r})"
    return None


def _label_column(pd: Any, frame: Any, key: str) -> str | None:
    """The column that names a table's rows: 'name' or '*_name'/'title'/'label', else the first text column
    whose values are mostly distinct."""
    texts = [c for c in frame.columns if c != key and is_text(frame[c])]
    for c in texts:
        if re.search(r"(?:^|_)(?:name|title|label)$", str(c), re.I):
            return str(c)
    for c in texts:
        sample = frame[c].head(SCAN_ROWS).dropna()
        if len(sample) and sample.nunique() >= 0.8 * len(sample) and as_dates(pd, sample) is None:
            return str(c)
    return None
