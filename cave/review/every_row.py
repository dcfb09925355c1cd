"""A condition that holds on every row: a count that is the whole table, a share that is all of it.

A count of the orders whose customer is missing from the customers table answered with
``orders['customer_id'].isin(customers['customer_id']).notna().sum()``: ``.notna()`` of True/False values is True
on every row, so the count is the table's length (412 of 412 orders; a development task, `unverified` only because
an independent attempt disagreed). The empty selection (a filter that matched no row) is noted by the runtime
(``cave.runtimes.matches``); this is its other end, read from the answer: the code tests rows (a comparison,
``isin``, ``notna``, ``str.contains``...), and the answer is a count equal to the length of a given table the code
reads, or a share of 1 (100%) where the task asks for a share. ``cave.review.acceptance`` holds such an answer
once; sent again it stands (every row may truly count).

>>> import pandas as pd
>>> orders = pd.DataFrame({"customer_id": [1, 2, 9]})
>>> code = "n = orders['customer_id'].isin(customers['customer_id']).notna().sum()"
>>> whole("How many orders have no customer?", code, 3, {"orders": orders})
[('orders', 3)]
>>> whole("How many orders have no customer?", code, 1, {"orders": orders})
[]
>>> whole("How many orders are there?", "n = len(orders)", 3, {"orders": orders})  # no condition: a total
[]
"""

from __future__ import annotations

import re
from typing import Any

from cave.review.agreement import asks_share
from cave.review.answers import as_count, is_bool

__all__ = ["EVERY_ROW_NOTE", "note", "whole"]

EVERY_ROW_NOTE = (
    "Not accepted yet: {what}: the condition in the code holds on every row, so it selects nothing. Print how many "
    "rows each condition keeps (e.g. print(mask.value_counts())): a test that is True for every value (.notna() "
    "of True/False values, .isin() of the column's own values, a comparison that every value passes) needs "
    "changing; then answer again. If every row truly counts, confirm with:\n```python\nfinal_answer(_final_answer)\n```"
)
# code that tests rows: a comparison, a membership or missing-value test, a text match, a query
_TESTS = re.compile(
    r"==|!=|[<>]=?|\.isin\(|\.not(?:na|null)\(|\.is(?:na|null)\(|\.str\.(?:contains|startswith|endswith|match)\(|"
    r"\.query\(|\.between\(|\.duplicated\(|~"
)


def whole(task: str, code: str, value: Any, tables: dict[str, Any]) -> list[tuple[str, int]]:
    """The given tables (name, rows) the code reads and tests whose every row the answer counts: a count equal to
    the table's length (at least 2 rows), or a share of 1 / 100% where the task asks for a share."""
    if not _TESTS.search(code):
        return []
    count = as_count(value)
    share = _share(value) if count is None and asks_share(task) else None
    if count is None and share is None:
        return []
    found = []
    for name, table in tables.items():
        if not hasattr(table, "columns") or not re.search(rf"\b{re.escape(name)}\b", code):
            continue
        rows = len(table)
        if rows >= 2 and (count == rows or share):
            found.append((name, rows))
    return found


def note(found: list[tuple[str, int]], value: Any) -> str:
    """The hold for an answer that counts every row of the tables in ``found``.

    >>> print(note([("orders", 412)], 412))  # doctest: +ELLIPSIS
    Not accepted yet: the answer 412 is every row of 'orders' (412 rows): the condition ...
    """
    name, rows = found[0]
    what = f"the answer {value!r} is every row of {name!r} ({rows} rows)"
    if as_count(value) is None:
        what = f"the answer {value!r} is all of the rows (a share of 1)"
    return EVERY_ROW_NOTE.format(what=what)


def _share(value: Any) -> bool | None:
    """True for a share of all (1.0 or 100), None for anything else."""
    if is_bool(value):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return True if x in (1.0, 100.0) else None
