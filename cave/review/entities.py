"""Counts of things a table holds on more than one row: "How many users signed up in March?" answered with the
number of signup rows, when the export repeats some users (a development task and a development task:
18 rows for 15 and 17 users, `success`).

The task counts an entity ("how many users"); a given table that the answering code reads has that entity's id
column (``user_id``, or ``id`` in a table named for it) with some ids on more than one row; and the code counts rows
(``len``, ``.shape[0]``, ``.sum()`` of a mask) without de-duplicating anything. The agent holds the answer once with
``note`` (``cave.review.acceptance``). Where the counted rows are a variable, their ids are read back: when none repeats
there is nothing to say, and when some do, the same count sent again ends ``failed_checks``.

>>> import pandas as pd
>>> signups = pd.DataFrame({"user_id": [1, 2, 2, 3], "email": ["a", None, None, "c"]})
>>> [r.column for r in repeated("How many users have no email?", "n = len(signups[signups.email.isna()])",
...                             {"signups": signups})]
['user_id']
>>> repeated("How many users have no email?", "n = signups[signups.email.isna()].user_id.nunique()",
...          {"signups": signups})
[]
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from cave.review.estimators import all_nodes

__all__ = [
    "REPEATED_NOTE",
    "Repeated",
    "counted_names",
    "deduplicates",
    "note",
    "repeated",
    "repeats_in",
    "repeats_selected",
    "selected_rows",
]

REPEATED_NOTE = (
    "Not accepted yet: the task counts {entity}s, and {tables} (the code counts rows, so an {entity} on two rows "
    "counts twice). If the task counts {entity}s, count distinct ids, e.g. {fix}, and answer again; if each counted "
    "row truly is a different {entity}, confirm with:\n```python\nfinal_answer(_final_answer)\n```"
)
_HOW_MANY = re.compile(
    r"\bhow many\s+(?:(?:distinct|unique|different|individual|separate)\s+)?([a-z]+s)\b(?!\s+(?:of|per)\b)",
    re.I,
)
# counts of rows, events or amounts, not of things with an id
_NOT_ENTITIES = frozenset({"row", "record", "entr", "entrie", "time", "value", "line", "day", "year", "month", "hour"})
_DEDUPED = re.compile(r"nunique|drop_duplicates|\.unique\(|\bset\(|duplicated")  # value_counts/size count rows


@dataclass
class Repeated:
    """A given table whose id column for the counted entity repeats some ids."""

    entity: str
    table: str
    column: str
    rows: int
    distinct: int
    counted: list[str] = field(default_factory=list)  # the variables the code counted the rows of
    rows_of: list[str] = field(default_factory=list)  # every expression it counted the rows of, as written


def _entities(task: str) -> list[str]:
    """What the task counts, singular ('users' -> ['user'], 'classes' -> ['classe', 'class'])."""
    m = _HOW_MANY.search(task)
    if m is None:
        return []
    word = m.group(1).lower()
    singular = [word[:-1]] + ([word[:-2]] if word.endswith("es") else [])
    return [] if any(w in _NOT_ENTITIES for w in singular) or len(word) < 4 else singular


def _id_column(entity: str, table: str, columns: list[Any]) -> str | None:
    """The column of ``table`` that identifies an ``entity`` (``user_id``, ``userId``, or ``id`` in ``users``)."""
    for c in columns:
        if not isinstance(c, str):
            continue
        key = re.sub(r"[\W_]+", "", c).lower()
        if key in (f"{entity}id", f"{entity}sid"):
            return c
    if table.lower() in (entity + "s", entity + "es") and "id" in columns:
        return "id"
    return None


def counted_names(code: str) -> list[str]:
    """The variables whose rows ``code`` counts: ``len(x)``, ``x.shape[0]``.

    >>> counted_names("n = len(march)\\nm = other.shape[0]\\nk = len(df[df.a > 1])")
    ['march', 'other']
    """
    return [e for e in counted(code) if e.isidentifier()]


def counted(code: str) -> list[str]:
    """The expressions whose rows ``code`` counts (``len(x)``, ``x.shape[0]``), as written.

    >>> counted("n = signups[signups['email'].isnull()].shape[0]")
    ["signups[signups['email'].isnull()]"]
    """
    names = []
    for node in all_nodes(code):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" and node.args:
            target = node.args[0]
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "shape"
            and isinstance(node.slice, ast.Constant)
            and node.slice.value == 0
        ):
            target = node.value.value
        else:
            continue
        text = ast.get_source_segment(code, target) or ast.unparse(target)
        if text not in names:
            names.append(text)
    return names


def deduplicates(code: str) -> bool:
    """Whether ``code`` counts distinct things (``nunique``, ``drop_duplicates``, a set, a groupby...)."""
    return bool(_DEDUPED.search(code))


def repeated(task: str, code: str, tables: dict[str, Any]) -> list[Repeated]:
    """The given tables the code reads whose id column for the entity the task counts repeats some ids (none when
    the task counts no entity, or the code de-duplicates)."""
    entities = _entities(task)
    if not entities or deduplicates(code):
        return []
    out = []
    for name, table in tables.items():
        if not re.search(rf"\b{re.escape(name)}\b", code) or not hasattr(table, "columns"):
            continue
        found = [(e, c) for e in entities if (c := _id_column(e, name, list(table.columns))) is not None]
        if not found:
            continue
        entity, column = found[0]
        ids = table[column].dropna()
        distinct = int(ids.nunique())
        if distinct < len(ids):
            exprs = [e for e in counted(code) if re.search(rf"\b{re.escape(name)}\b", e) or e.isidentifier()]
            out.append(Repeated(entity, name, column, len(ids), distinct, counted_names(code), exprs))
    return out


def repeats_in(found: Repeated, live: dict[str, Any]) -> bool | None:
    """Whether the counted rows (the live variables) repeat an id: None when none of them can say."""
    says = [v for v in live.values() if hasattr(v, "columns") and found.column in v.columns]
    if not says:
        return None
    return any(int(v[found.column].dropna().duplicated().sum()) > 0 for v in says)


# what an expression that selects rows of a given table may do, to be evaluated on the host's copy: subscripts,
# comparisons, masks and the methods that test values; no other call, no name but the tables
_SAFE_METHODS = frozenset({
    "isnull", "isna", "notna", "notnull", "isin", "between", "str", "dt", "contains", "startswith", "endswith",
    "lower", "upper", "strip", "eq", "ne", "gt", "lt", "ge", "le", "month", "year", "day", "loc",
})  # fmt: skip
_SAFE_NODES = (
    ast.Expression, ast.Subscript, ast.Name, ast.Load, ast.Constant, ast.Compare, ast.BoolOp, ast.BinOp, ast.UnaryOp,
    ast.Attribute, ast.Call, ast.List, ast.Tuple, ast.Slice, ast.cmpop, ast.boolop, ast.operator, ast.unaryop,
)  # fmt: skip


def selected_rows(expr: str, tables: dict[str, Any]) -> Any:
    """The rows ``expr`` (``signups[signups['email'].isnull()]``) selects from the given ``tables``, evaluated on
    the host's copies when it only subscripts, compares and tests values; None when it does anything else.

    >>> import pandas as pd
    >>> t = pd.DataFrame({"user_id": [1, 1, 2], "email": [None, None, "b"]})
    >>> len(selected_rows("t[t['email'].isnull()]", {"t": t})), selected_rows("t.drop(0)", {"t": t})
    (2, None)
    """
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if not isinstance(node, _SAFE_NODES):
            return None
        if isinstance(node, ast.Name) and node.id not in tables:
            return None
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            return None
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Attribute) and node.func.attr in _SAFE_METHODS
        ):
            return None
    try:
        rows = eval(compile(tree, "<selection>", "eval"), {"__builtins__": {}}, dict(tables))  # noqa: S307
    except Exception:
        return None
    return rows if hasattr(rows, "columns") else None


def repeats_selected(found: Repeated, tables: dict[str, Any]) -> bool | None:
    """Whether the rows the code counted inline (``len(t[mask])``) repeat an id, evaluated on the given tables."""
    says = [r for e in found.rows_of if (r := selected_rows(e, tables)) is not None and found.column in r.columns]
    if not says:
        return None
    return any(int(r[found.column].dropna().duplicated().sum()) > 0 for r in says)


def note(found: list[Repeated]) -> str:
    """The hold for a count of rows where the task counts entities.

    >>> print(note([Repeated("user", "signups", "user_id", 120, 112)]))  # doctest: +ELLIPSIS
    Not accepted yet: the task counts users, and 'signups' has 120 rows for 112 distinct user_id values (the code ...
    """
    first = found[0]
    tables = "; ".join(f"{r.table!r} has {r.rows} rows for {r.distinct} distinct {r.column} values" for r in found)
    # the rows the code counted, their ids counted once (a development task: the model, told only "your selection",
    # counted every user in the table)
    rows = first.rows_of[0] if first.rows_of else f"{first.table}[<the rows the task asks about>]"
    fix = f"{rows}[{first.column!r}].nunique() (per group: .groupby(...)[{first.column!r}].nunique())"
    return REPEATED_NOTE.format(entity=first.entity, tables=tables, fix=fix)
