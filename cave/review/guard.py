"""The guard: a cell's code is checked before it runs for the statements that derail small models' runs.

``final_answer = value`` is taken as the call it meant; a ``def`` of ``final_answer`` or of a function the
session was given is dropped, and so is an import of one (``from tools import get_weather``: the model assumed
a module); a given input that the code re-reads from disk, rebuilds or replaces with literal data keeps being
the live object (the line runs as an alias, or is skipped); ``.loc[0]`` on a frame just sorted (which picks the
row labelled 0, not the top row) runs as ``.iloc[0]``; ``df['x'].fillna(v, inplace=True)``, a no-op under pandas 3,
runs as ``df['x'] = df['x'].fillna(v)``. Each change comes with a note the model reads. Everything else runs as
written.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["chained_writes", "guard_code", "positional_picks"]


@functools.lru_cache(maxsize=256)
def _guard_pattern(protected: frozenset[str], functions: frozenset[str] = frozenset()) -> re.Pattern[str]:
    """Lines that may need a guard: anything naming final_answer, an assignment to a protected name, or a
    ``def``/import of a given function."""
    names = "|".join(sorted(map(re.escape, protected)))
    assign = rf"|^[ \t]*(?:[\w, ]*,\s*)?(?:{names})\s*(?:,[\w, ]*)?=[^=]" if names else ""
    fns = "|".join(sorted(map(re.escape, functions)))
    given = rf"|^[ \t]*(?:async[ \t]+)?def[ \t]+(?:{fns})\b|^[ \t]*from[ \t].*\bimport\b.*\b(?:{fns})\b" if fns else ""
    return re.compile(rf"final_answer{assign}{given}", re.M)


def guard_code(
    code: str, protected: Iterable[str] | Mapping[str, str] = (), functions: Iterable[str] = ()
) -> tuple[str, list[str]]:
    r"""Handle the top-level statements that small models write and that would derail a run.

    1. Redefining ``final_answer``, or a function in ``functions`` (the ones the session was given), with a
       ``def``: dropped; the session's own is the one to call (a model's stand-in computes an answer the
       real function would not, or records nothing). Importing one from a module (``from your_module import
       f``; there is no such module) is dropped the same way.
    2. Assigning ``final_answer = value``: the model means "this is my answer", so the line becomes
       ``final_answer(value)`` (throwing the answer away left runs without one).
    3. Overwriting a given variable with made-up literal data, e.g. ``sales = pd.DataFrame({...})``:
       the real object is already there.
    4. Loading a given object again under another name (``engine = create_engine(...)`` opens a new, empty
       database; ``items = pd.read_csv("items.csv")`` reads a file that is not there): the line becomes an alias
       of the live object. ``protected`` maps given names to their type names for this rule.

    5. ``.loc[0]`` on a frame just reordered (``positional_picks``): runs as ``.iloc[0]``.
    6. An inplace method on a selected column (``df['x'].fillna(0, inplace=True)``), which changes a copy under
       pandas 3's copy-on-write (``chained_writes``): runs as a write to the frame.

    Dropped lines become blank lines (tracebacks keep the model's line numbers); the notes say what changed.

    >>> code, notes = guard_code("def final_answer(x):\n    print(x)\nfinal_answer(1)")
    >>> code.strip(), notes[0].startswith("final_answer is provided")
    ('final_answer(1)', True)
    >>> guard_code("sales = pd.DataFrame({'a': [1]})\nprint(sales.shape)", ["sales"])[0].strip()
    'print(sales.shape)'
    >>> guard_code("sales = pd.read_csv('sales.csv')", ["sales"])[1][0].startswith("`sales` was given to you")
    True
    >>> guard_code("db = sqlalchemy.create_engine('sqlite:///shop.db')", ["db"])[0]
    ''
    >>> guard_code("db = pd.read_sql('select 1', db)", ["db"])[1]
    []
    >>> guard_code("sales = sales.dropna()", ["sales"])
    ('sales = sales.dropna()', [])
    >>> guard_code("engine = create_engine('sqlite:///shop.db')", {"db": "sqlalchemy.Engine"})[0]
    'engine = db'
    >>> guard_code("df = pd.read_csv('data/items.csv')", {"items": "pandas.DataFrame"})[0]
    'df = items.copy()'
    >>> guard_code("from tools import area, sqrt\ndef area(b, h):\n    return b * h / 2\narea(10, 5)", functions=["area"])[0]
    'from tools import sqrt\n\n\narea(10, 5)'
    >>> code, notes = guard_code("x = 2\nfinal_answer = {'n': x,\n   'ok': True}\nprint(1)")
    >>> code
    "x = 2\nfinal_answer({'n': x,\n   'ok': True})\nprint(1)"
    >>> notes[0].startswith("`final_answer = ...` was taken as your answer")
    True
    """
    code, picks = positional_picks(code)
    code, writes = chained_writes(code)
    code, notes = _guard_statements(code, protected, functions)
    return code, notes + picks + writes


def rereads(code: str, protected: Iterable[str]) -> list[str]:
    r"""The given names that a top-level line of ``code`` loads again from a file into the same name
    (``df = pd.read_csv('titanic.csv')``): the model wants the data as it was given, whatever earlier cells did
    to it (a development task: ``df = df.dropna()`` had left 183 of 891 rows, and every later re-read kept them).

    >>> rereads("import pandas as pd\ndf = pd.read_csv('t.csv')\ndf = df.dropna()", ["df"])
    ['df']
    >>> rereads("df = df.dropna()", ["df"]), rereads("x = pd.read_csv('t.csv')", ["df"]), rereads("df = (", ["df"])
    ([], [], [])
    """
    names = frozenset(protected)
    if not names or not _RELOAD.search(code):
        return []
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    found = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and _file_read_call(node.value) and not (_names_used(node.value) & names):
            found += [t.id for t in node.targets if isinstance(t, ast.Name) and t.id in names and t.id not in found]
    return found


def _guard_statements(
    code: str, protected: Iterable[str] | Mapping[str, str], functions: Iterable[str]
) -> tuple[str, list[str]]:
    """guard_code's rules 1-4 (the top-level statements)."""
    types = dict(protected) if isinstance(protected, Mapping) else {}
    protected = frozenset(protected)
    given = frozenset(functions) - {"final_answer"}
    if not _guard_pattern(protected, given).search(code) and not (types and _RELOAD.search(code)):
        return code, _printed_rows(code, protected)  # the common case costs a few regex scans
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code, _typed_in(code, protected) or _printed_rows(code, protected)
    drop: list[tuple[int, int]] = []
    calls: list[ast.Assign] = []  # `final_answer = value` -> final_answer(value)
    aliases: list[tuple[ast.Assign, str]] = []  # `x = create_engine(...)` -> `x = db`
    retargets: list[tuple[ast.Assign, str]] = []  # `db = pd.read_sql("... FROM t", db)` -> `t = ...`
    imports: list[tuple[ast.ImportFrom, list[ast.alias]]] = []  # `from m import f, g` -> `from m import g`
    notes: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and (
            node.name == "final_answer" or node.name in given
        ):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            drop.append((start, node.end_lineno or node.lineno))
            notes.append(
                f"{node.name} is provided by the session; your definition of it was skipped. Call it directly."
            )
        elif isinstance(node, ast.ImportFrom) and any(a.name in given and not a.asname for a in node.names):
            keep = [a for a in node.names if not (a.name in given and not a.asname)]
            imports.append((node, keep))
            skipped = ", ".join(a.name for a in node.names if a not in keep)
            notes.append(
                f"{skipped} already exists in the session (no import needed); your import of it was skipped. "
                "Call it directly."
            )
        elif isinstance(node, ast.Assign) and node.targets and all(isinstance(t, ast.Name) for t in node.targets):
            names = {t.id for t in node.targets}  # type: ignore[attr-defined]
            if names == {"final_answer"} and len(node.targets) == 1:
                calls.append(node)
                notes.append(
                    "`final_answer = ...` was taken as your answer: it ran as final_answer(...). "
                    "Next time call final_answer(result) directly."
                )
            elif "final_answer" in names:
                drop.append((node.lineno, node.end_lineno or node.lineno))
                notes.append("final_answer is provided by the session; your assignment to it was skipped.")
            elif (
                names & protected
                and (_literal_data_call(node.value) or _file_read_call(node.value))
                and not (
                    _names_used(node.value) & names  # `db = read_sql(q, db)` uses the object: not a reload
                )
            ):
                drop.append((node.lineno, node.end_lineno or node.lineno))
                name = sorted(names & protected)[0]
                notes.append(
                    f"`{name}` was given to you ready to use; your line replacing it was skipped. Use `{name}` as it is."
                )
            elif len(node.targets) == 1 and (kept := _database_kept(node, types)):
                retargets.append((node, kept))
                name = node.targets[0].id  # type: ignore[attr-defined]
                notes.append(
                    f"`{name}` is the database given to you; your line would have replaced it with its result, so the "
                    f"result is kept as `{kept}` and `{name}` stays the database."
                )
            elif len(node.targets) == 1 and (alias := _reload_alias(node.value, types)):
                aliases.append((node, alias))
                target = node.targets[0].id  # type: ignore[attr-defined]
                notes.append(
                    f"`{target} = {ast.unparse(node.value)[:60]}` would load again what is already in the session; "
                    f"it ran as `{target} = {alias}` (the live object given to you)."
                )
    if not drop and not calls and not aliases and not imports and not retargets:
        return code, []
    lines = code.splitlines()
    for node, kept in retargets:  # only the target changes: `db = ` -> `customers = `
        target = node.targets[0]
        first = target.lineno - 1
        lines[first] = lines[first][: target.col_offset] + kept + lines[first][target.end_col_offset :]
    for start, end in drop:
        for i in range(start - 1, end):
            lines[i] = ""
    for node, keep in imports:  # the statement keeps the names that are not the session's, on its first line
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        indent = lines[first][: node.col_offset]
        kept = ast.unparse(ast.ImportFrom(module=node.module, names=keep, level=node.level)) if keep else ""
        lines[first] = indent + kept if kept else ""
        for i in range(first + 1, last + 1):
            lines[i] = ""
    for node, alias in aliases:  # the whole statement becomes `target = alias`, keeping line numbers
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        indent = lines[first][: node.col_offset]
        lines[first] = f"{indent}{node.targets[0].id} = {alias}"  # type: ignore[attr-defined]
        for i in range(first + 1, last + 1):
            lines[i] = ""
    for node in calls:  # the value's own text, wrapped in a call, on the lines it had
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        value = node.value
        head = lines[first][: node.col_offset] + "final_answer("
        if value.lineno == value.end_lineno:
            lines[first] = (
                head + lines[first][value.col_offset : value.end_col_offset] + ")" + lines[first][node.end_col_offset :]
            )
        else:
            lines[first] = head + lines[first][value.col_offset :]
            lines[last] = lines[last][: value.end_col_offset] + ")" + lines[last][node.end_col_offset :]
    return "\n".join(lines), list(dict.fromkeys(notes))


_FROM_TABLE = re.compile(r"\bfrom\s+[\"'`\[]?([A-Za-z_]\w*)", re.I)


def _database_kept(node: Any, types: Mapping[str, str]) -> str | None:
    """The name a query's result is kept under when the line assigns it to the given database it reads
    (``db = pd.read_sql("SELECT * FROM customers", db)``: the engine was gone for the rest of a development run,
    every later ``read_sql(..., db)`` failing): the table the query reads, else ``<db>_result``; None for any other
    line.

    >>> import ast
    >>> line = ast.parse("db = pd.read_sql('SELECT * FROM customers', db)").body[0]
    >>> _database_kept(line, {"db": "sqlalchemy.Engine"}), _database_kept(line, {"db": "pandas.DataFrame"})
    ('customers', None)
    """
    import ast

    name = node.targets[0].id
    if not types.get(name, "").endswith(("Engine", "Connection")) or name not in _names_used(node.value):
        return None
    texts = [n.value for n in ast.walk(node.value) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    table = next((m.group(1) for t in texts if (m := _FROM_TABLE.search(t))), None)
    return table if table and table.isidentifier() and table != name else f"{name}_result"


def _typed_in(code: str, protected: Iterable[str]) -> list[str]:
    """The note for code that does not parse because it types a given table in as literal data: a long literal
    cut off by the reply's length limit (a development attempt re-typed a given 600-row table four times, each cut
    off, each a SyntaxError, and never used the table it had).

    >>> _typed_in("requests = pd.DataFrame({'service': ['a', 'b',", ["requests"])[0][:41]
    '`requests` was given to you ready to use:'
    >>> _typed_in("x = pd.DataFrame({'a': [1,", ["requests"]), _typed_in("requests = requests[", ["requests"])
    ([], [])
    """
    names = "|".join(sorted(map(re.escape, frozenset(protected))))
    if not names:
        return []
    found = re.search(rf"^({names})\s*=\s*[\w.]*\(\s*[{{\[]", code, re.M)
    if found is None:
        return []
    name = found.group(1)
    return [
        f"`{name}` was given to you ready to use: this cell types its data in, and that text did not even parse. "
        f"Do not write data out; use `{name}` as it is (e.g. `{name}.head()`)."
    ]


_ROW = re.compile(r"^\s*\S+(?: {2,}\S+){2,}\s*$")  # a printed table's row: cells apart by runs of spaces


def _printed_rows(code: str, protected: Iterable[str]) -> list[str]:
    """The note for a cell that does not parse because it is a table's printed rows, not code (a development run
    wrote the first rows it was shown into a code block twice: "leading zeros in decimal integer literals").

    >>> _printed_rows("0  2025-01-01    phone      5        35.0", ["sales"])[0][:52]
    "This cell is a table's printed rows, not Python code"
    >>> _printed_rows("x = [1,", ["sales"]), _printed_rows("print(df.head()", ["sales"])
    ([], [])
    """
    lines = [line for line in code.splitlines() if line.strip()]
    rows = [line for line in lines if _ROW.match(line) and not re.search(r"[=(\[{:]", line)]
    if not lines or len(rows) < max(1, len(lines) // 2):
        return []
    import ast

    try:
        ast.parse(code)
        return []  # it is code after all
    except SyntaxError:
        pass
    names = sorted(frozenset(protected))
    use = f" that uses {names[0]} (e.g. `print({names[0]}.head())`)" if len(names) == 1 else ""
    return [f"This cell is a table's printed rows, not Python code: nothing ran. Write the code{use} instead."]


def _names_used(node: object) -> set[str]:
    import ast

    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}  # type: ignore[arg-type]


_LOADERS = {"open", "create_engine", "connect", "load", "DataFrame", "Series"}
_RELOAD = re.compile(r"\b(create_engine|connect|read_\w+)\s*\(")
_CONNECTION_TYPES = ("Engine", "Connection")


def _call_name(value: object) -> str:
    import ast

    if not isinstance(value, ast.Call):
        return ""
    func = value.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _reload_alias(value: object, types: Mapping[str, str]) -> str | None:
    """The given object a load call re-creates: the one engine/connection for ``create_engine``/``connect``;
    the DataFrame named like the file for ``read_*("…/name.csv")``. None when it is not that."""
    import ast

    name = _call_name(value)
    if name in ("create_engine", "connect"):
        engines = [n for n, t in types.items() if t.rsplit(".", 1)[-1] in _CONNECTION_TYPES]
        return engines[0] if len(engines) == 1 else None
    if name.startswith("read_") and name != "read_sql" and isinstance(value, ast.Call) and value.args:
        arg = value.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            stem = re.split(r"[\\/]", arg.value)[-1].split(".", 1)[0]
            for n, t in types.items():
                if n.lower() == stem.lower() and t.endswith("DataFrame"):
                    return f"{n}.copy()"
    return None


def _file_read_call(value: object) -> bool:
    """``pd.read_csv(...)``, ``create_engine(...)``, ``open(...)``: loading the object again from somewhere."""
    import ast

    if not isinstance(value, ast.Call):
        return False
    func = value.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name.startswith("read_") or name in _LOADERS


def _literal_data_call(value: object) -> bool:
    """``X({...})`` or ``X([...])`` (e.g. pd.DataFrame({...})): a constructor fed literal data."""
    import ast

    return (
        isinstance(value, ast.Call)
        and bool(value.args)
        and isinstance(value.args[0], ast.Dict | ast.List)
        and len(getattr(value.args[0], "keys", None) or getattr(value.args[0], "elts", None) or []) > 0
    )


# inplace methods small models call on a selected column; under copy-on-write they change a copy (a development task:
# df['LoanAmount'].fillna(median, inplace=True) left the NaNs, and the std of the unfilled column was sent)
_INPLACE = frozenset({"fillna", "replace", "interpolate", "ffill", "bfill", "clip", "where", "mask"})
_WRITE_HINT = re.compile(r"inplace\s*=\s*True")


def chained_writes(code: str) -> tuple[str, list[str]]:
    r"""A write through a selected column runs as a write to the frame. Under pandas 3's copy-on-write,
    ``df['x'].fillna(v, inplace=True)`` and ``df['x'][mask] = v`` change a copy and leave ``df`` as it was (with a
    ChainedAssignmentError warning); small models learned the idiom on older pandas, where it worked, and go on
    to answer from the unchanged frame. The statement becomes ``df['x'] = df['x'].fillna(v)`` or
    ``df.loc[mask, 'x'] = v``, equivalent on any pandas. A statement that shares its line is left alone.

    >>> chained_writes("df['a'].fillna(df['a'].mean(), inplace=True)")[0]
    "df['a'] = df['a'].fillna(df['a'].mean())"
    >>> chained_writes("for c in cols:\n    df[c].fillna(0, inplace=True)")[0]
    'for c in cols:\n    df[c] = df[c].fillna(0)'
    >>> chained_writes("df.x.fillna(0, inplace=True)")[0]
    'df.x = df.x.fillna(0)'
    >>> chained_writes("df.fillna(0, inplace=True)"), chained_writes("x = 1; df['a'].fillna(0, inplace=True)")[1]
    (('df.fillna(0, inplace=True)', []), [])
    """
    if not _WRITE_HINT.search(code):
        return code, []
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code, []
    lines = code.splitlines()
    edits: list[tuple[ast.stmt, str]] = []
    for node in ast.walk(tree):
        new = _inplace_write(node) if isinstance(node, ast.Expr) else None
        if new is None or node.end_lineno is None or node.end_col_offset is None:
            continue
        first, last = lines[node.lineno - 1], lines[node.end_lineno - 1]
        if first[: node.col_offset].strip() or last.encode()[node.end_col_offset :].decode().strip():
            continue  # another statement on the line: leave it as written
        edits.append((node, new))
    if not edits:
        return code, []
    shown = []
    for node, new in sorted(edits, key=lambda e: e[0].lineno, reverse=True):
        was = lines[node.lineno - 1].strip()
        indent = lines[node.lineno - 1][: node.col_offset]
        lines[node.lineno - 1 : node.end_lineno] = [indent + new] + [""] * (node.end_lineno - node.lineno)  # type: ignore[operator]
        shown.append(f"`{was[:80]}` ran as `{new[:100]}`")
    note = "An inplace method on a selected column changes a copy, not the frame, under pandas' copy-on-write: "
    note += "; ".join(reversed(shown))
    return "\n".join(lines) + ("\n" if code.endswith("\n") else ""), [note]


def _column_of(node: object) -> bool:
    """A column (or columns) selected from a name: ``df['x']``, ``df[c]``, ``df.loc[:, 'x']``, ``df.x``."""
    import ast

    if isinstance(node, ast.Subscript):
        base = node.value
        if isinstance(base, ast.Attribute) and base.attr in ("loc", "iloc"):
            base = base.value
        return isinstance(base, ast.Name)
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr not in _FRAME_ATTRS


_FRAME_ATTRS = frozenset({"loc", "iloc", "at", "iat", "T", "values", "index", "columns", "str", "dt", "cat"})


def _inplace_write(node: object) -> str | None:
    """``df['x'].fillna(v, inplace=True)`` as ``df['x'] = df['x'].fillna(v)`` (None: not such a statement)."""
    import ast

    call = node.value  # type: ignore[attr-defined]
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in _INPLACE):
        return None
    inplace = [k for k in call.keywords if k.arg == "inplace"]
    if len(inplace) != 1 or not (isinstance(inplace[0].value, ast.Constant) and inplace[0].value.value is True):
        return None
    target = call.func.value
    if not _column_of(target):
        return None
    kept = [k for k in call.keywords if k.arg != "inplace"]
    fixed = ast.Call(
        func=ast.Attribute(value=target, attr=call.func.attr, ctx=ast.Load()), args=call.args, keywords=kept
    )
    return f"{ast.unparse(target)} = {ast.unparse(fixed)}"


_REORDERS = frozenset({"sort_values", "nlargest", "nsmallest"})
_PICK_HINT = re.compile(r"\.loc\[\s*\d")


def positional_picks(code: str) -> tuple[str, list[str]]:
    """``.loc[0]`` on a frame or series that was just sorted runs as ``.iloc[0]``.

    After ``sort_values`` (``nlargest``, ``nsmallest``) the index keeps the original labels, so ``.loc[0]`` picks
    the row that came first before sorting: the top of the sorted result is ``.iloc[0]``. Small models write the
    first and read a plausible wrong row. ``.loc[0, col]`` becomes ``.iloc[0][col]``. The frame counts as just
    sorted when the chain under ``.loc`` reaches a sort before any ``reset_index``, or names a variable this
    cell assigned from such a chain. Left alone: assignments through ``.loc``, and chains with an index of
    meaningful labels (``groupby``, ``value_counts``, ``set_index``, a pivot...), where 0 may be hour 0.

    >>> positional_picks("top = df.sort_values('sales', ascending=False).loc[0, 'region']")[0]
    "top = df.sort_values('sales', ascending=False).iloc[0]['region']"
    >>> positional_picks("s = df.nlargest(3, 'x')\\nprint(s.loc[0])")[0]
    "s = df.nlargest(3, 'x')\\nprint(s.iloc[0])"
    >>> positional_picks("df.sort_values('x').reset_index(drop=True).loc[0]")[1]
    []
    >>> positional_picks("df.loc[0, 'x']")[1], positional_picks("by = df.groupby('hour').size().sort_values()\\nby.loc[0]")[1]
    ([], [])
    """
    if not _PICK_HINT.search(code) or not any(r in code for r in _REORDERS):
        return code, []
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code, []
    assigned: dict[str, list[tuple[int, tuple[bool, bool]]]] = {}  # name -> (line, (sorted, labelled)), in order

    def flags_of(name: str, line: int) -> tuple[bool, bool]:
        before = [f for ln, f in assigned.get(name, []) if ln < line]
        return before[-1] if before else (False, False)

    for node in sorted((n for n in ast.walk(tree) if isinstance(n, ast.Assign)), key=lambda n: n.lineno):
        flags = _chain_flags(node.value, lambda n, line=node.lineno: flags_of(n, line))
        for t in node.targets:
            if isinstance(t, ast.Name):
                assigned.setdefault(t.id, []).append((node.lineno, flags))

    edits: list[tuple[int, int, int, str]] = []  # (line, start col, end col, new text), all on one line
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "loc"
            and node.lineno == node.end_lineno
            and _chain_flags(node.value.value, lambda n, line=node.lineno: flags_of(n, line)) == (True, False)
        ):
            continue
        index = node.slice
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        first = parts[0]
        if not (isinstance(first, ast.Constant) and type(first.value) is int and first.value == 0) or len(parts) > 2:
            continue
        attr = node.value
        edits.append((attr.end_lineno or attr.lineno, attr.end_col_offset - 3, attr.end_col_offset, "iloc"))  # type: ignore[operator]
        if len(parts) == 2 and first.end_lineno == parts[1].lineno:
            edits.append((first.lineno, first.end_col_offset, parts[1].col_offset, "]["))  # type: ignore[arg-type]
    if not edits:
        return code, []
    lines = code.splitlines()
    for line, start, end, text in sorted(edits, reverse=True):
        row = lines[line - 1].encode()  # ast columns are UTF-8 byte offsets
        lines[line - 1] = (row[:start] + text.encode() + row[end:]).decode()
    note = (
        "`.loc[0]` on a sorted frame picks the row labelled 0 (the first row before sorting), not the top of the "
        "sorted result: it ran as `.iloc[0]`."
    )
    return "\n".join(lines) + ("\n" if code.endswith("\n") else ""), [note]


_LABELLERS = frozenset(
    {"groupby", "value_counts", "set_index", "pivot_table", "pivot", "crosstab", "resample", "stack", "unstack"}
)


def _chain_flags(node: object, name_flags: object) -> tuple[bool, bool]:
    """(sorted, labelled) for a method chain (``x.a(...)[k].b(...)``), read from its end: sorted when it reaches
    a sort before any ``reset_index``; labelled when any call in it makes an index of meaningful labels. A name
    at its root brings the flags of its assignment (``name_flags(name)``)."""
    import ast

    sorted_ = labelled = False
    while True:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr = node.func.attr
            if attr == "reset_index" and not sorted_:
                return False, False  # a fresh positional index above any sort: .loc[0] is the top
            sorted_ |= attr in _REORDERS
            labelled |= attr in _LABELLERS
            node = node.func.value
        elif isinstance(node, ast.Attribute | ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Name) and callable(name_flags):
            was_sorted, was_labelled = name_flags(node.id)
            return sorted_ or was_sorted, labelled or was_labelled
        else:
            return sorted_, labelled
