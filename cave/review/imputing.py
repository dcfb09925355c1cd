"""Missing values handled the way the task and the statistic need: rows dropped where the task says to fill them
(``dropped_missing``, ``note``), a model refusing NaN in the column the task fills (``fit_note``), and a scipy test
that returned nan over missing values (``nan_dropped``: the code with them dropped, to run).

Rows dropped where the task says to fill them: "impute missing values in the 'Age' column" done as
``df = df.dropna(subset=['Age'])``. The answer then counts or averages fewer rows than the task's, and nothing
fails: a development task (KNN imputation of Titanic ages) dropped the 177 passengers without an age after a classifier
refused the NaN target, and sent the age-group counts of the other 714 as `success`.

``dropped_missing(task, codes)`` finds such lines in the run's code: a ``dropna`` (or a ``notna()`` mask) assigned
back to the table it reads, or in place, whose subset holds a column that a clause of the task says to fill
(impute, fill, replace its missing values), or with no subset at all when the task says to fill some and drop none.
A table kept apart (``known = df.dropna(subset=['Age'])`` to fit the imputer on) is no drop.

>>> task = "Impute missing values in the 'Age' column with the median, and drop the 'Cabin' column."
>>> dropped_missing(task, ["df = df.dropna(subset=['Age'])\\nm = df.Age.mean()"])
["line 1: `df = df.dropna(subset=['Age'])` drops the rows whose 'Age' is missing"]
>>> dropped_missing(task, ["known = df.dropna(subset=['Age'])", "df['Age'] = df['Age'].fillna(df['Age'].median())"])
[]
"""

from __future__ import annotations

import ast
import re
from typing import Any

from cave.review.estimators import MAX_FIX_LINES, all_nodes, node_name, quoted, rewritten
from cave.trajectory import Step

__all__ = ["DROPPED_NOTE", "NAN_FIX", "dropped_missing", "fit_note", "nan_dropped", "note"]

DROPPED_NOTE = (
    "Not accepted yet: the task says to fill missing values that the code drops instead (the answer then comes "
    "from fewer rows than the task's):\n{lines}\n"
    "Keep every row and fill the missing values as the task says, e.g.\n```python\n{fill}\n```\n"
    "Then call final_answer again."
)
_BY_STATISTIC = "{t}[{c}] = {t}[{c}].fillna({t}[{c}].median())  # or the mean, the mode: what the task names"
_BY_MODEL = (
    "features = [...]  # the columns the task fits on\nknown = {t}[{t}[{c}].notna()]\n"
    "model.fit(known[features], known[{c}])\nmissing = {t}[{c}].isna()\n"
    "{t}.loc[missing, {c}] = model.predict({t}.loc[missing, features])"
)
_MODEL = re.compile(r"neighbou?rs?\b|\bknn|regress|classifier|\bmodel\b|predict|forest|iterative", re.I)

_FILL = re.compile(r"\b(?:imput\w*|fill(?:s|ed|ing)?|replac\w*|interpolat\w*)\b", re.I)
_DROP = re.compile(r"\b(?:drop\w*|remov\w*|exclud\w*|discard\w*|delet\w*|omit\w*|ignor\w*|dropna)\b", re.I)
_MISSING = re.compile(r"\b(?:missing|nan|nulls?|n/?a|empty|blank)\b", re.I)
_NOT = re.compile(r"\b(?:do not|don't|never|without|instead of|rather than|if|when|unless)\b", re.I)
# a clause ends at a sentence, a semicolon, or a ", and"/"then" that starts the next step (not "'Age', 'Fare'")
_CLAUSE = re.compile(
    r"[.;](?=\s)|\n|,?\s+(?:and\s+)?then\s+|,\s+and\s+(?![\"'])"
    r"|(?:,|\s+and)\s+(?=(?:drop|remov|exclud|discard|delet|imput|fill|replac|normali|standardi|scal|creat|comput"
    r"|calculat|convert|encod|bin|report|add)\w*)",
    re.I,
)
_QUOTED = re.compile(r"['\"\u2018\u201c]([^'\"\u2019\u201d\n]{1,60})['\"\u2019\u201d]")
_COLUMN = re.compile(r"\b(?:the\s+)?([A-Za-z_]\w*)\s+column\b", re.I)


def _clauses(task: str) -> tuple[set[str], set[str], bool, bool]:
    """The columns ``task`` says to fill and to drop missing values of; and whether it says to fill any, or to
    drop rows with missing values at all."""
    fill: set[str] = set()
    drop: set[str] = set()
    fills = drops = False
    for clause in _CLAUSE.split(task):
        if not _MISSING.search(clause):
            continue
        names = {m.group(1) for m in _QUOTED.finditer(clause)} | {m.group(1) for m in _COLUMN.finditer(clause)}
        if _FILL.search(clause) and not _NOT.search(clause):
            fills, fill = True, fill | names
        elif _DROP.search(clause):
            drops, drop = True, drop | names
    return fill, drop, fills, drops


def _base(node: ast.AST) -> str:
    """The name a chain of calls and attributes starts from (``df.drop_duplicates().dropna()`` is 'df')."""
    while isinstance(node, (ast.Call, ast.Attribute, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


def _strings(node: ast.AST | None) -> set[str] | None:
    """The strings a ``subset=`` names (one, or a list or tuple of them); None when it names none we can read."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.List, ast.Tuple)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return None


def _dropna_rows(call: ast.Call) -> set[str] | None:
    """The columns whose missing values a ``dropna`` call drops rows for ({'*'}: any column); None when it drops
    columns, only all-missing rows, or rows by a threshold."""
    kw = {k.arg: k.value for k in call.keywords}
    axis = kw.get("axis")
    if isinstance(axis, ast.Constant) and axis.value in (1, "columns"):
        return None
    if "thresh" in kw or (isinstance(kw.get("how"), ast.Constant) and kw["how"].value == "all"):  # type: ignore[union-attr]
        return None
    if "subset" not in kw:
        return {"*"}
    return _strings(kw["subset"])


def _column(node: ast.AST, table: str) -> str | None:
    """The column ``table['Age']`` or ``table.Age`` reads; None for anything else."""
    if _base(node) != table:
        return None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.attr
    return None


def _mask_columns(mask: ast.AST, table: str) -> set[str]:
    """The columns a row mask keeps only the present values of: ``t['Age'].notna()``, ``~t.Age.isna()``."""
    out = set()
    for node in ast.walk(mask):
        if isinstance(node, ast.Call) and node_name(node.func) in ("notna", "notnull"):
            col = _column(node.func.value, table) if isinstance(node.func, ast.Attribute) else None
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Invert, ast.Not)):
            call = node.operand
            named = isinstance(call, ast.Call) and node_name(call.func) in ("isna", "isnull")
            func = call.func if isinstance(call, ast.Call) else None
            col = _column(func.value, table) if named and isinstance(func, ast.Attribute) else None
        else:
            continue
        if col is not None:
            out.add(col)
    return out


def _drops(code: str) -> list[tuple[ast.stmt, str, set[str]]]:
    """The statements of ``code`` that drop rows of a table by missing values, kept in that table, with the
    columns they drop rows for."""
    out = []
    for node in all_nodes(code):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            table, value = node.targets[0].id, node.value
            if _base(value) != table:
                continue  # another table: the rows an imputer is fitted on
            cols: set[str] = set()
            for sub in ast.walk(value):
                if isinstance(sub, ast.Call) and node_name(sub.func) == "dropna" and _base(sub.func) == table:
                    cols |= _dropna_rows(sub) or set()
                elif isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name) and sub.value.id == table:
                    cols |= _mask_columns(sub.slice, table)
            if cols:
                out.append((node, table, cols))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and node_name(node.value.func) == "dropna":
            call = node.value
            inplace = any(
                k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value for k in call.keywords
            )
            cols = _dropna_rows(call) if inplace else None
            if cols:
                out.append((node, _base(call.func), cols))
    return out


def _found(task: str, codes: list[str]) -> list[tuple[str, str, str]]:
    """Each drop of ``dropped_missing``: the line, the table, and the column filled (or '')."""
    fill, drop, fills, drops = _clauses(task)
    if not fills:
        return []
    out: list[tuple[str, str, str]] = []
    for code in codes:
        for node, table, cols in _drops(code):
            named = sorted(c for c in cols if c in fill and c not in drop)
            if named:
                what = f"whose {', '.join(map(repr, named))} {'is' if len(named) == 1 else 'are'} missing"
            elif "*" in cols and not drops:
                what = "with any missing value"
            else:
                continue
            line = f"line {node.lineno}: `{quoted(code, node)}` drops the rows {what}"
            if all(line != seen for seen, _, _ in out):  # the same line resent in a later step
                out.append((line, table, named[0] if named else ""))
    return out


def dropped_missing(task: str, codes: list[str]) -> list[str]:
    """The lines of ``codes`` that drop, from the table they keep, rows whose missing values ``task`` says to fill.

    >>> dropped_missing("Fill the missing values with the mean.", ["df.dropna(inplace=True)"])
    ['line 1: `df.dropna(inplace=True)` drops the rows with any missing value']
    >>> dropped_missing("Fill missing 'Age' with the median and drop rows with missing 'Embarked'.",
    ...                 ["df = df.dropna(subset=['Embarked'])", "df = df[df['Age'].notna()]"])
    ["line 1: `df = df[df['Age'].notna()]` drops the rows whose 'Age' is missing"]
    >>> dropped_missing("Report the mean age.", ["df = df.dropna(subset=['Age'])"])
    []
    """
    return [line for line, _, _ in _found(task, codes)]


def note(task: str, codes: list[str]) -> str | None:
    """The note that holds an answer whose code dropped the rows the task says to fill (None when none did), with
    the fill written for the table and the column.

    >>> print(note("Impute missing values in the 'Age' column.", ["df = df.dropna(subset=['Age'])"]))  # doctest: +ELLIPSIS
    Not accepted yet: ...
    - line 1: `df = df.dropna(subset=['Age'])` drops the rows whose 'Age' is missing
    ...
    df['Age'] = df['Age'].fillna(df['Age'].median())  # or the mean, the mode: what the task names
    ...

    A task that fills them with a model (a development task: k-nearest neighbours) gets the model's way:

    >>> print(note("Impute missing 'Age' values using KNN with k=3.", ["df.dropna(subset=['Age'], inplace=True)"]))
    ... # doctest: +ELLIPSIS
    Not accepted yet: ...
    known = df[df['Age'].notna()]
    ...
    """
    found = _found(task, codes)
    if not found:
        return None
    _, table, column = found[0]
    fill = (_BY_MODEL if _MODEL.search(task) else _BY_STATISTIC).format(t=table, c=repr(column) if column else "col")
    return DROPPED_NOTE.format(lines="\n".join(f"- {line}" for line, _, _ in found), fill=fill)


_NAN_INPUT = re.compile(r"Input (?:X |y )?contains NaN", re.I)
FIT_NOTE = (
    "Note: the task says to fill the missing values of {c}, not to drop them: fit on the rows of {t} that have "
    "{c} and predict the others, keeping every row of {t}, e.g.\n```python\n{fill}\n```"
)


def fit_note(task: str, step: Step, tables: dict[str, Any]) -> str | None:
    """When a model refused missing values (``Input y contains NaN``) and the task fills a column with a model: how
    to fit on the known rows and fill the rest. The error's own hint says to drop them, which is right for a
    model's inputs and wrong for the column being filled (a development task dropped 177 passengers' rows from df).

    >>> import pandas as pd
    >>> from cave.runtimes.base import ExecError, Execution
    >>> step = Step(index=0, code="knn.fit(df[['Fare']], df['Age'])")
    >>> step.execution = Execution(error=ExecError("ValueError", "Input y contains NaN."))
    >>> print(fit_note("Impute missing 'Age' values using KNN.", step, {"df": pd.DataFrame({"Age": [1.0], "Fare": [2.0]})}))
    ... # doctest: +ELLIPSIS
    Note: the task says to fill the missing values of 'Age', not to drop them: fit on the rows of df that have 'Age' ...
    known = df[df['Age'].notna()]
    ...
    """
    error = step.execution.error if step.execution is not None else None
    if error is None or error.type != "ValueError" or not _NAN_INPUT.search(error.message) or not _MODEL.search(task):
        return None
    fill, drop, _, _ = _clauses(task)
    for name, frame in tables.items():
        columns = [c for c in map(str, getattr(frame, "columns", [])) if c in fill and c not in drop]
        if columns:
            c = repr(columns[0])
            return FIT_NOTE.format(c=c, t=name, fill=_BY_MODEL.format(t=name, c=c))
    return None


NAN_FIX = (
    "Your code with the missing values dropped from each test's input (the rows of two columns together), to run:"
    "\n```python\n{code}\n```"
)


def nan_dropped(code: str) -> str | None:
    """``code`` with each scipy test or statistic over columns with missing values given the rows that have them:
    one column ``t['a']`` as ``t['a'].dropna()``, two of one table as ``t[['a', 'b']].dropna()['a']`` (rows dropped
    together, as a paired test needs). The runtime's note names the NaN; a development task still sent the nan
    correlations of male and female passengers and ended failed_checks.

    >>> print(nan_dropped("r, p = pearsonr(m['Age'], m['Fare'])\\ns = skew(df['Age'])"))
    r, p = pearsonr(m[['Age', 'Fare']].dropna()['Age'], m[['Age', 'Fare']].dropna()['Fare'])
    s = skew(df['Age'].dropna())
    >>> nan_dropped("s = skew(df['Age'].dropna())") is None
    True
    """
    from cave.runtimes.matches import ESTIMATES, TESTS

    spans = []
    for node in all_nodes(code):
        if not isinstance(node, ast.Call) or node_name(node.func) not in TESTS | ESTIMATES or node.keywords:
            continue
        args = node.args[:2] if node_name(node.func) in _PAIRED else node.args[:1]
        columns = [_read(a) for a in args]
        if not columns or any(c is None for c in columns) or len({t for t, _ in columns}) != 1:  # type: ignore[misc]
            continue
        table = columns[0][0]  # type: ignore[index]
        keys = [k for _, k in columns]  # type: ignore[misc]
        for arg, key in zip(args, keys, strict=True):
            text = f"{table}[{key!r}].dropna()" if len(keys) == 1 else f"{table}[{keys!r}].dropna()[{key!r}]"
            spans.append((arg, text))
    if not spans or len(code.splitlines()) > MAX_FIX_LINES:
        return None
    return rewritten(code, spans)


# the tests of two samples of paired rows: their two columns lose the same rows
_PAIRED = frozenset({"pearsonr", "spearmanr", "kendalltau", "pointbiserialr", "linregress", "ttest_rel", "wilcoxon"})


def _read(node: ast.AST) -> tuple[str, str] | None:
    """(table, column) of ``t['a']`` with a plain table name; None for anything else."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and isinstance(node.slice, ast.Constant):
        if isinstance(node.slice.value, str):
            return node.value.id, node.slice.value
    return None
