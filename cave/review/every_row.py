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

import ast
import re
from typing import Any

from cave.review.agreement import asks_share
from cave.review.answers import as_count, is_bool

__all__ = ["EVERY_ROW_NOTE", "mask_fix", "note", "whole"]

_CONFIRM = "\nIf every row truly counts, confirm with:\n```python\nfinal_answer(_final_answer)\n```"
EVERY_ROW_NOTE = (
    "Not accepted yet: {what}: the condition in the code holds on every row, so it selects nothing. Print how many "
    "rows each condition keeps (e.g. print(mask.value_counts())): a test that is True for every value (.notna() "
    "of True/False values, .isin() of the column's own values, a comparison that every value passes) needs "
    "changing; then answer again." + _CONFIRM.replace("\nIf", " If", 1)
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


def note(found: list[tuple[str, int]], value: Any, fixed: str | None = None) -> str:
    """The hold for an answer that counts every row of the tables in ``found``; ``fixed``: the code with the test
    itself (``mask_fix``), given before the confirmation (a reply that copies the note runs its first block).

    >>> print(note([("orders", 412)], 412))  # doctest: +ELLIPSIS
    Not accepted yet: the answer 412 is every row of 'orders' (412 rows): the condition ...
    >>> print(note([("orders", 412)], 412, "n = (~a.isin(b)).sum()"))  # doctest: +ELLIPSIS
    Not accepted yet: ... True on every row: your code with the test itself (run it):
    ```python
    n = (~a.isin(b)).sum()
    ```
    If every row truly counts, confirm with:
    ...
    """
    name, rows = found[0]
    what = f"the answer {value!r} is every row of {name!r} ({rows} rows)"
    if as_count(value) is None:
        what = f"the answer {value!r} is all of the rows (a share of 1)"
    if fixed:
        return MASK_FIX.format(what=what, code=fixed) + _CONFIRM
    return EVERY_ROW_NOTE.format(what=what)


MASK_FIX = (
    "Not accepted yet: {what}: the condition in the code holds on every row, so it selects nothing: `.notna()` of "
    "True/False values is True on every row: your code with the test itself (run it):\n```python\n{code}\n```"
)
_BOOLEAN_CALLS = frozenset(
    {"isin", "contains", "startswith", "endswith", "match", "duplicated", "isna", "isnull", "between"}
)
_NEGATED = re.compile(r"\b(?:not|no|without|missing|never|isn't|aren't|doesn't|don't|didn't|wasn't|weren't|lacks?|none)\b", re.I)  # fmt: skip


def mask_fix(task: str, code: str) -> str | None:
    """``code`` with ``.notna()`` / ``.notnull()`` taken off a test of rows (``.isin(...)``, a comparison, a text
    match), negated with ``~`` where the task asks for the rows that do *not* pass it; None when there is none.
    Told that such a test holds on every row, the 1.5B sent the same count again (a development task).

    >>> code = "m = orders['customer_id'].isin(customers['customer_id']).notna()\\nfinal_answer(int(m.sum()))"
    >>> print(mask_fix("How many orders reference a customer that isn't in the customers table?", code))
    m = (~orders['customer_id'].isin(customers['customer_id']))
    final_answer(int(m.sum()))
    >>> print(mask_fix("How many rows are in the west?", "n = (df['region'] == 'west').notnull().sum()"))
    n = (df['region'] == 'west').sum()
    >>> print(mask_fix("How many are not in the west?", "n = df.region.eq('w').notna().sum() + (df.r == 'w').notna().sum()"))
    n = df.region.eq('w').notna().sum() + (~(df.r == 'w')).sum()
    >>> mask_fix("How many emails are set?", "n = df['email'].notna().sum()") is None  # a column's values: fine
    True
    """
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    negate = "~" if _NEGATED.search(task) else ""
    lines = code.splitlines(keepends=True)
    for node in ast.walk(tree):
        func = getattr(node, "func", None)
        if not (isinstance(node, ast.Call) and isinstance(func, ast.Attribute) and func.attr in ("notna", "notnull")):
            continue
        test = func.value
        called = getattr(getattr(test, "func", None), "attr", None)
        if not (isinstance(test, ast.Compare) or called in _BOOLEAN_CALLS) or node.lineno != node.end_lineno:
            continue
        line = lines[node.lineno - 1]
        raw = line.encode()
        start, end = node.col_offset, node.end_col_offset or 0
        inner = raw[start : (func.end_col_offset or 0) - len(func.attr)].decode(errors="ignore").rstrip().rstrip(".")
        if negate:  # ~ binds tighter than a comparison and looser than a method call: parenthesize both ways
            inner = f"(~{inner if inner.startswith('(') or not isinstance(test, ast.Compare) else f'({inner})'})"
        fixed = raw[:start].decode(errors="ignore") + inner + raw[end:].decode(errors="ignore")
        lines[node.lineno - 1] = fixed
        return "".join(lines)
    return None


def _share(value: Any) -> bool | None:
    """True for a share of all (1.0 or 100), None for anything else."""
    if is_bool(value):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return True if x in (1.0, 100.0) else None
