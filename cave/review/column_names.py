"""Column names the model wrote differently from the given tables' own, run as the table's: without the spaces a
name has at its ends (``spaced_names``), or with other separators (``separator_names``). Each such line would only
raise a KeyError, and small models write the same name again after the "Did you mean". ``Given._spaced_names``
applies both to each cell, unless the code renamed the columns itself (``RENAMES``) or made the column
(``created_columns``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from cave.review.estimators import rewritten

__all__ = ["RENAMES", "created_columns", "read_first", "separator_names", "spaced_names", "stored_columns"]


# code that renames a frame's columns (after it, a name without its spaces may be the real one)
RENAMES = re.compile(r"\.columns\s*=|\.rename\s*\(|\.columns\.str\.|set_axis\s*\(")


def spaced_names(code: str, columns: Mapping[str, Iterable[object]]) -> tuple[str, list[str]]:
    r"""A column name written without the spaces the table's own name has at its ends runs with them.

    Real exports carry names like ``'avg. wait time '`` and ``' DIR'``; small models write ``'avg. wait time'``,
    get the KeyError with the exact name, fix that one column and hit the next (development tasks: runs ended
    at max_steps one column at a time). In ``columns`` (table name -> its column names, as they are now), a name
    that is no column of any table but is exactly one column with its end spaces stripped is that column. Only
    names in a subscript (``df['x']``, ``df[['x', 'y']]``) or passed to a call (``groupby('x')``) are changed.
    The caller leaves ``columns`` empty once the code renamed the columns itself (``RENAMES``).

    >>> code, notes = spaced_names("r = df['avg. wait time'].mean()", {"df": ["timestamp", "avg. wait time "]})
    >>> code
    "r = df['avg. wait time '].mean()"
    >>> print(notes[0])
    Column names written without the spaces at their ends ran with them: 'avg. wait time' as 'avg. wait time '. The names of df with spaces: 'avg. wait time '. Write them exactly, or strip them all once: df.columns = df.columns.str.strip()
    >>> spaced_names("df.groupby('DIR')[['WINDSPEED']].mean()", {"df": [" DIR", " WINDSPEED"]})[0]
    "df.groupby(' DIR')[[' WINDSPEED']].mean()"
    >>> spaced_names("features = ['a', 'b']\nX = df[features]", {"df": ["a ", "b"]})[0]  # names held in a variable
    "features = ['a ', 'b']\nX = df[features]"
    >>> spaced_names("print('x')", {"df": ["x ", "x"]}), spaced_names("df['y']", {"df": ["y ", " y"]})[1]
    (("print('x')", []), [])
    """
    exact = {c for cols in columns.values() for c in cols if isinstance(c, str)}
    spaced: dict[str, tuple[str, str]] = {}
    clashes = set()
    for table, cols in columns.items():
        for c in cols:
            if isinstance(c, str) and c != c.strip() and c.strip():
                clashes |= {c.strip()} if c.strip() in spaced else set()
                spaced[c.strip()] = (c, table)
    spaced = {k: v for k, v in spaced.items() if k not in exact and k not in clashes}
    if not spaced or not any(k in code for k in spaced):
        return code, []
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code, []
    code, done = _rewrite_names(code, tree, spaced)
    if not done:
        return code, []
    ran = "; ".join(f"{name!r} as {spaced[name][0]!r}" for name in sorted(done))
    tables = sorted(set(done.values()))
    names = ", ".join(repr(c) for t in tables for c in columns[t] if isinstance(c, str) and c != c.strip())
    note = (
        f"Column names written without the spaces at their ends ran with them: {ran}. The names of "
        f"{', '.join(tables)} with spaces: {names[:300]}. Write them exactly, or strip them all once: "
        "df.columns = df.columns.str.strip()"
    )
    return code, [note]


def _rewrite_names(code: str, tree: Any, names: Mapping[str, tuple[str, str]]) -> tuple[str, dict[str, str]]:
    """Each string in a subscript (``df['x']``, ``df[['x', 'y']]``) or passed to a call (``groupby('x')``) that is a
    key of ``names`` (written name -> (column, table)) written as the column instead; returns the code and
    {written name: table} of what changed."""
    import ast

    found: list[ast.Constant] = []
    # names held in a variable the code selects by: features = ['a', 'b'] ... df[features] (a development task: three
    # steps on a list of names that had lost their end spaces, one KeyError each)
    selecting: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            parts = node.slice.elts if isinstance(node.slice, ast.List | ast.Tuple) else [node.slice]
            selecting |= {node.slice.id} if isinstance(node.slice, ast.Name) else set()
        elif isinstance(node, ast.Call):
            parts = [*node.args, *(k.value for k in node.keywords)]
            selecting |= {p.id for p in parts if isinstance(p, ast.Name)}
            parts += [e for p in list(parts) if isinstance(p, ast.List | ast.Tuple) for e in p.elts]
        else:
            continue
        found += [p for p in parts if isinstance(p, ast.Constant) and isinstance(p.value, str) and p.value in names]
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in selecting for t in node.targets):
            held = node.value.elts if isinstance(node.value, ast.List | ast.Tuple) else [node.value]
            found += [p for p in held if isinstance(p, ast.Constant) and isinstance(p.value, str) and p.value in names]
    found = list(dict.fromkeys(n for n in found if n.lineno == n.end_lineno))
    fixed = rewritten(code, [(n, repr(names[n.value][0])) for n in found])
    if fixed is None:
        return code, {}
    done = {n.value: names[n.value][1] for n in found}
    return fixed + ("\n" if code.endswith("\n") else ""), done


def _separated(name: str) -> str:
    return re.sub(r"[\s_.\-]+", " ", name).strip()


def separator_names(
    code: str, columns: Mapping[str, Iterable[object]], created: Iterable[str] = ()
) -> tuple[str, list[str]]:
    r"""A column name written with other separators than the table's own (``'wind_speed'`` for ``'wind speed'``,
    ``'avg_wait_time'`` for ``'avg. wait time'``) runs as that column: the line would only raise a KeyError, and
    small models write the snake_case name again after the "Did you mean" (a development task: three steps on
    ``df['wind_speed']``). Only a name that is no column of any table, matches exactly one column when spaces,
    underscores, dots and hyphens are read alike (case counts: ``'mean'`` is never ``'Mean'``), and that no code
    of the run made itself (``created``, and the stores of this code: ``df['wind_speed'] = ...``).

    >>> code, notes = separator_names("df['wind_speed'].mean()", {"df": ["time", "wind speed"]})
    >>> code, notes[0][:72]
    ("df['wind speed'].mean()", "Column names written with other separators ran as the table's: 'wind_spe")
    >>> separator_names("df['wind_speed'] = df['wind speed'] * 2\nx = df['wind_speed']", {"df": ["wind speed"]})[1]
    []
    >>> separator_names("df.agg('mean')", {"df": ["Mean"]})[1], separator_names("df['a_b']", {"df": ["a b", "a.b"]})[1]
    ([], [])
    """
    exact = {c for cols in columns.values() for c in cols if isinstance(c, str)}
    by_form: dict[str, list[tuple[str, str]]] = {}
    for table, cols in columns.items():
        for c in cols:
            if isinstance(c, str) and c.strip():
                by_form.setdefault(_separated(c), []).append((c, table))
    if not any(" " in form for form in by_form):  # no column name has a separator
        return code, []
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code, []
    made = set(created) | stored_columns(tree)
    written = {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.strip()
    }
    names = {
        w: by_form[_separated(w)][0]
        for w in written
        if w not in exact and w not in made and len(by_form.get(_separated(w), ())) == 1
    }
    if not names:
        return code, []
    code, done = _rewrite_names(code, tree, names)
    if not done:
        return code, []
    ran = "; ".join(f"{name!r} as {names[name][0]!r}" for name in sorted(done))
    return code, [f"Column names written with other separators ran as the table's: {ran}. Write them exactly."]


def read_first(code: str, frame: str) -> set[str]:
    """The column names ``code`` reads from ``frame`` by subscript (``frame['x']``, ``frame[['x', 'y']]``) before
    any line of it writes them (``frame['x'] = f(frame['x'])`` reads x first): the columns it expects to be there.

    >>> sorted(read_first("a = df['x'] + df[['y', 'z']].sum()\\ndf['w'] = 1\\nb = df['w']\\ndf['v'] = df['v'] * 2", "df"))
    ['v', 'x', 'y', 'z']
    """
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    reads: dict[str, int] = {}
    writes: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == frame:
            parts = node.slice.elts if isinstance(node.slice, ast.List | ast.Tuple) else [node.slice]
            seen = writes if isinstance(node.ctx, ast.Store) else reads
            for p in parts:
                if isinstance(p, ast.Constant) and isinstance(p.value, str):
                    seen[p.value] = min(seen.get(p.value, node.lineno), node.lineno)
    made = stored_columns(tree) - set(writes)  # assign(x=...), rename(...): made somewhere, line not tracked
    return {c for c, line in reads.items() if c not in made and line <= writes.get(c, line)}


def created_columns(code: str) -> set[str]:
    """``stored_columns`` of ``code`` (nothing when it does not parse)."""
    import ast

    try:
        return stored_columns(ast.parse(code))
    except SyntaxError:
        return set()


def stored_columns(tree: Any) -> set[str]:
    r"""The column names code writes: ``df['x'] = ...``, ``df.assign(x=...)``, ``rename(columns={...: 'x'})``.

    >>> import ast
    >>> sorted(stored_columns(ast.parse("df['a'] = 1\ndf = df.assign(b=2).rename(columns={'c': 'd'})")))
    ['a', 'b', 'd']
    """
    import ast

    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            parts = node.slice.elts if isinstance(node.slice, ast.List | ast.Tuple) else [node.slice]
            out |= {p.value for p in parts if isinstance(p, ast.Constant) and isinstance(p.value, str)}
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("assign", "rename")
        ):
            out |= {k.arg for k in node.keywords if k.arg and node.func.attr == "assign"}
            for k in node.keywords:
                if k.arg in ("columns", "mapper") and isinstance(k.value, ast.Dict):
                    out |= {v.value for v in k.value.values if isinstance(v, ast.Constant) and isinstance(v.value, str)}
    return out
