"""What a missing column or attribute probably meant: "Did you mean 'avg. wait time'?" beside a KeyError; and
which column a text value came from when a model (or ``float()``) was fed text: "could not convert string to
float: 'S.O.C. 14879'" happens when a whole frame goes into ``model.fit`` (a development task dropped one text column per
step, Name, then Ticket, then ran out of steps), so the error names the frame's text columns.

Small models misspell the columns of wide, messily named tables (``df['avg.wait time']`` for
``'avg. wait time'``; ``df.fare`` for ``'Fare'``) and, told only ``KeyError: 'avg.wait time'``, try the same
name again. Like Python's own "Did you mean" for names, the cell's error names the closest columns of the
session's DataFrames. It runs where the cell ran (in a kernel, inside it) and reads only frames that already
exist: pandas is never imported here.
"""

from __future__ import annotations

import ast
import difflib
import inspect
import numbers
import os
import re
import sys
import types
from typing import Any

__all__ = ["did_you_mean", "is_text", "suggested_column"]

_NO_ATTR = re.compile(r"^'DataFrame' object has no attribute '([^']+)'$")
_NOT_A_NUMBER = re.compile(r"could not convert string to float: '(.*)'$", re.S)
_MAX_ROWS = 1_000_000
_MAX_FRAMES = 50
_MAX_COLUMNS = 2000


def _norm(name: str) -> str:
    return re.sub(r"[^0-9a-z]", "", name.lower())


# a list of names, as pandas reports them: "['a', 'b'] not in index", "None of [Index(['a'], dtype='str')] are in
# the [columns]", "['a'] not found in axis" (drop)
_KEY_LIST = re.compile(r"^(?:None of \[Index\()?(\[[^\]]*\])(?:, dtype=[^)]*\)\])?\s+(?:are in|not in|not found)")
_STATISTICS = frozenset({"min", "max", "mean", "median", "std", "var", "sum", "count", "mode", "first", "last"})


def _missing_keys(e: BaseException) -> list[str]:
    """The names a KeyError (or a DataFrame's AttributeError) says are missing: one, or each of a list."""
    if isinstance(e, KeyError) and len(e.args) == 1 and isinstance(e.args[0], str):
        text = e.args[0].removeprefix("Column not found: ")  # a groupby's ['col'] says it so
        listed = _KEY_LIST.match(text)
        if listed:
            try:
                names = ast.literal_eval(listed.group(1))
            except (ValueError, SyntaxError):
                return [text]
            return [n for n in names if isinstance(n, str)]
        return [text]
    if isinstance(e, AttributeError) and (m := _NO_ATTR.match(str(e))):
        return [m.group(1)]
    return []


def _statistics_line(keys: list[str], frames: list[tuple[str, Any]]) -> str | None:
    """'min', 'max', 'mean' selected as columns: they are what .agg computes (a development task: seven steps of
    df[['Fare', 'min', 'max', 'mean']])."""
    stats = [k for k in keys if k.lower() in _STATISTICS]
    if not stats or len(stats) < len(keys) or any(k in f.columns for _, f in frames for k in stats):
        return None
    listed = ", ".join(repr(k) for k in stats)
    return (
        f"{listed} {'are statistics' if len(stats) > 1 else 'is a statistic'}, not columns: compute them from the "
        f"column, e.g. df['col'].agg([{listed}])"
    )


_TEST_RESULTS = frozenset({"pvalue", "p_value", "statistic", "correlation"})


def _name_hint(name: str, namespace: dict[str, Any]) -> str | None:
    """For an undefined name, the variables of earlier cells written alike (``pvalue`` for ``p_value``: a development task
     sent ``pvalue`` three times; Python's own suggestion is not in a cell's traceback).

    >>> _name_hint("pvalue", {"p_value": 0.01, "df": None}), _name_hint("zz", {"p_value": 1})
    ("Did you mean 'p_value' (a variable of an earlier cell)?", None)
    """
    table = _table_hint(name, namespace)
    if table:
        return table
    names = [n for n in list(namespace)[: _MAX_COLUMNS * 5] if isinstance(n, str) and not n.startswith("_")]
    same = [n for n in names if _norm(n) == _norm(name) and n != name]
    close = same or difflib.get_close_matches(name, names, n=2, cutoff=0.8)
    if not close:
        return None
    return f"Did you mean {' or '.join(repr(c) for c in close)} (a variable of an earlier cell)?"


def _table_hint(name: str, namespace: dict[str, Any]) -> str | None:
    """For an undefined name that is a table of a database engine in the session: the line that reads it (a
    development task: ``customers[...]`` over an engine's table, NameError for five steps).

    >>> import sqlalchemy
    >>> db = sqlalchemy.create_engine("sqlite://")
    >>> with db.begin() as con:
    ...     _ = con.exec_driver_sql("CREATE TABLE customers (name TEXT)")
    >>> _table_hint("customers", {"db": db})
    "'customers' is a table of the database db, not a variable: customers = pd.read_sql('SELECT * FROM customers', db)"
    """
    for var, obj in list(namespace.items())[:_MAX_COLUMNS]:
        if isinstance(var, str) and not var.startswith("_") and _is_connection(obj) and _table_columns(obj, name):
            return (
                f"{name!r} is a table of the database {var}, not a variable: "
                f"{name} = pd.read_sql('SELECT * FROM {name}', {var})"
            )
    return None


def _attributes_hint(e: BaseException) -> str | None:
    """For a missing attribute of any other object: the closest public attributes, else the ones it has."""
    if not isinstance(e, AttributeError) or not isinstance(getattr(e, "name", None), str):
        return None
    obj = getattr(e, "obj", None)
    if e.name in _TEST_RESULTS and isinstance(obj, numbers.Real):  # development tasks: df.a.corr(df.b).pvalue
        return (
            f"A number has no {e.name}: pandas' .corr() gives only the coefficient. For the coefficient and its "
            "p-value: from scipy.stats import pearsonr; r, p = pearsonr(df['a'], df['b']) (spearmanr, kendalltau "
            "likewise); never make a p-value up from r."
        )
    # only objects whose dir() is the built-in one (or a module's): a hostile __dir__ must not run here
    if obj is None or not (type(obj).__dir__ is object.__dir__ or isinstance(obj, types.ModuleType)):
        return None
    moment = _MOMENTS.get(e.name.lower().strip("_"))
    # shapiro(x).kurtosis, .skew, .kstatistic: a moment asked of a test's result, not of the values
    if moment and type(obj).__name__.endswith("Result"):
        return (
            f"A {type(obj).__name__} holds the test's own numbers ({', '.join(a for a in dir(obj) if not a.startswith('_'))}); "
            f"the {moment[0]} is its own function of the values: from scipy.stats import {moment[1]}; {moment[1]}(x)"
        )
    names = [a for a in dir(obj) if not a.startswith("_")][:_MAX_COLUMNS]
    if not names:
        return None
    close = difflib.get_close_matches(e.name, names, n=3, cutoff=0.7)
    if close:
        return f"Did you mean {' or '.join(repr(c) for c in close)}?"
    kind = type(obj).__name__
    shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
    return f"A {kind} has: {shown}."


# statistics of the values asked of a test's result object: (what it is, the scipy.stats function that computes it)
_MOMENTS = {
    "skew": ("skewness", "skew"),
    "skewness": ("skewness", "skew"),
    "kstatistic": ("skewness", "skew"),
    "kurtosis": ("kurtosis", "kurtosis"),
    "kurt": ("kurtosis", "kurtosis"),
    "mean": ("mean", "tmean"),
    "std": ("standard deviation", "tstd"),
    "variance": ("variance", "tvar"),
}


def did_you_mean(e: BaseException, namespace: dict[str, Any]) -> str | None:
    """The columns of the namespace's DataFrames closest to the key an error says is missing, as one line.

    >>> import pandas as pd
    >>> ns = {"df": pd.DataFrame(columns=["timestamp", "avg. wait time", "avg. num. agents talking"])}
    >>> did_you_mean(KeyError("avg.wait time"), ns)
    "Did you mean 'avg. wait time' (a column of df)? To keep the name your code uses: df['avg.wait time'] = df['avg. wait time']"
    >>> did_you_mean(AttributeError("'DataFrame' object has no attribute 'Timestamp'"), ns)
    "Did you mean 'timestamp' (a column of df)?"
    >>> did_you_mean(KeyError("zzz"), ns) is None
    True

    A column asked of a frame that lacks it, which another frame has; a name with spaces at its ends:

    >>> ns["by_hour"] = pd.DataFrame(columns=["hour", "calls"])
    >>> did_you_mean(KeyError("timestamp"), ns)
    "'timestamp' is a column of df."
    >>> did_you_mean(KeyError("calls "), {"t": pd.DataFrame(columns=["calls  "])})
    "Did you mean 'calls  ' (a column of t)? 'calls  ' has spaces at its ends: write it exactly, or strip every name first: t.columns = t.columns.str.strip()"

    A column an earlier cell moved into the index:

    >>> did_you_mean(KeyError("day"), {"s": pd.DataFrame({"n": [1]}, index=pd.Index(["d1"], name="day"))})
    "'day' is the index of s now, not a column: run s = s.reset_index() first."

    A list of names, as pandas reports them, each on its own; statistics selected as columns:

    >>> did_you_mean(KeyError("None of [Index(['avg.wait time'], dtype='str')] are in the [columns]"), ns)[:40]
    "Did you mean 'avg. wait time' (a column "
    >>> did_you_mean(KeyError("['min', 'max', 'mean'] not in index"), ns)
    "'min', 'max', 'mean' are statistics, not columns: compute them from the column, e.g. df['col'].agg(['min', 'max', 'mean'])"

    Any other object's missing attribute: the closest ones, or what it has.

    >>> from collections import namedtuple
    >>> result = namedtuple("ShapiroResult", "statistic pvalue")(0.95, 0.003)
    >>> try:
    ...     result.p_value
    ... except AttributeError as e:
    ...     print(did_you_mean(e, ns))
    Did you mean 'pvalue'?
    >>> try:
    ...     result.skewness
    ... except AttributeError as e:
    ...     print(did_you_mean(e, ns))
    A ShapiroResult holds the test's own numbers (count, index, pvalue, statistic); the skewness is its own function of the values: from scipy.stats import skew; skew(x)
    >>> try:
    ...     result.effect
    ... except AttributeError as e:
    ...     print(did_you_mean(e, ns))
    A ShapiroResult has: count, index, pvalue, statistic.
    """
    if isinstance(e, TypeError) and (m := _NO_KEYWORD.search(str(e))):
        return _signature_hint(m.group(1), m.group(2), namespace)
    if type(e) is NameError and isinstance(getattr(e, "name", None), str):
        return _name_hint(e.name, namespace)
    keys = _missing_keys(e)
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(e, ValueError) and (m := _NOT_A_NUMBER.search(str(e))):
        return _text_columns_hint(m.group(1), namespace, pd)
    if not keys or pd is None:
        return _attributes_hint(e)
    frames = [(n, v) for n, v in list(namespace.items()) if not n.startswith("_") and type(v) is pd.DataFrame]
    stats = _statistics_line(keys, frames[:_MAX_FRAMES])
    if stats:
        return stats
    lines = [line for key in keys[:3] if (line := _key_hint(key, e, frames, namespace))]
    return " ".join(lines) or None


def _key_hint(key: str, e: BaseException, frames: list[tuple[str, Any]], namespace: dict[str, Any]) -> str | None:
    """What one missing name probably meant: the closest columns, the frame that has it, the query that left it
    out, the wide table it is a header of."""
    hits: dict[str, list[str]] = {}
    owners: list[str] = []
    indexed = [name for name, frame in frames[:_MAX_FRAMES] if key in frame.index.names and key not in frame.columns]
    if indexed:  # set_index('date', inplace=True), then sales['date'] for five steps (a development task)
        name = indexed[0]
        return f"{key!r} is the index of {name} now, not a column: run {name} = {name}.reset_index() first."
    for name, frame in frames[:_MAX_FRAMES]:
        columns = [c for c in list(frame.columns[:_MAX_COLUMNS]) if isinstance(c, str)]
        if key in columns:
            owners.append(name)  # the key is there: this frame is not the one that failed, but it has the column
            continue
        for column in _close(key, columns):
            hits.setdefault(column, []).append(name)
    lines = []
    if hits:
        shown = [f"{c!r} (a column of {', '.join(names[:3])})" for c, names in list(hits.items())[:3]]
        lines.append(f"Did you mean {' or '.join(shown)}?")
        spaced = next(((c, names[0]) for c, names in hits.items() if c != c.strip()), None)
        if spaced:  # a small model cannot type the space at the end of 'avg. wait time ': strip them all
            lines.append(
                f"{spaced[0]!r} has spaces at its ends: write it exactly, or strip every name first: "
                f"{spaced[1]}.columns = {spaced[1]}.columns.str.strip()"
            )
        elif isinstance(e, KeyError) and len(hits) == 1:
            # the model writes the task's words ('avg. waiting time') again and again: let its name work
            ((column, names),) = hits.items()
            lines.append(f"To keep the name your code uses: {names[0]}[{key!r}] = {names[0]}[{column!r}]")
    if owners:  # asked of a frame made from it: by_region['date'] where sales has date
        lines.append(f"{key!r} is a column of {', '.join(owners[:3])}.")
        join = _join_line(key, owners[0], frames[:_MAX_FRAMES])
        if join:  # orders has no city, customers has: the 1.5B checked and re-raised for 7 steps (a development task)
            lines.append(join)
    if not hits:
        unselected = _unselected_line(key, frames[:_MAX_FRAMES], namespace)
        if unselected:  # customers = read_sql("SELECT city FROM customers"), then a merge on customer_id
            lines.append(unselected)
        elif not owners and (wide := _wide_line(key, frames[:_MAX_FRAMES])):
            lines.append(wide)
    return " ".join(lines) or None


def _wide_line(key: str, frames: list[tuple[str, Any]]) -> str | None:
    """For a value column asked of a wide table (one column per field, a development task: df_2010['Percent'] where
    each field of study is a column), how to read it: the largest column of a row, or the table made long.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"Year": [2009, 2010], **{f"f{i}": [1.0 * i, 2.0 * i] for i in range(8)}})
    >>> print(_wide_line("Percent", [("df", df)]))  # doctest: +ELLIPSIS
    df is wide: its 8 number columns ('f0', 'f1', 'f2', ...) are the values, one column each, keyed by 'Year'. ...
    >>> gdp = pd.DataFrame({"country": ["Nepal"], **{f"gdpPercap_{y}": [1.0] for y in range(1952, 2008, 5)}})
    >>> print(_wide_line("year", [("gdp", gdp)]))  # doctest: +ELLIPSIS
    gdp is wide: ...; what tells them apart is in their names ('1952' to '2007'): one year's values are one column, e.g. gdp['gdpPercap_1952']; a long table with a 'year' column: t = gdp.melt(id_vars='country', var_name='year', value_name='value'), then t['year'] = t['year'].str.removeprefix('gdpPercap_').
    >>> people = df.assign(name="a", sex="m", ticket="t")  # a development task: titanic's KeyError 'Mr.' was no wide read
    >>> _wide_line("Mr.", [("df", people)]) is None
    True
    """
    for name, frame in reversed(frames):  # the newest frame first: the one just built and used
        columns = [c for c in list(frame.columns[:_MAX_COLUMNS]) if isinstance(c, str)]
        numeric = [c for c in columns if frame[c].dtype.kind in "if"]
        others = [c for c in columns if c not in numeric]
        ids = others or [c for c in numeric if re.search(r"year|date|id$|^id|month|time", c, re.I)]
        values = [c for c in numeric if c not in ids]
        if len(values) < 6 or not ids or len(others) > 2:  # a table with many text fields (titanic) is no wide one
            continue
        by = ids[0]
        shown = ", ".join(repr(c) for c in values[:3])
        head = f"{name} is wide: its {len(values)} number columns ({shown}, ...) are the values, one column each, keyed by {by!r}"  # fmt: skip
        prefix = os.path.commonprefix(values)
        if len(prefix) >= 3 and all(len(c) > len(prefix) for c in values):  # gdpPercap_1952, gdpPercap_1957, ...
            first, last = values[0][len(prefix) :], values[-1][len(prefix) :]
            return (
                f"{head}; what tells them apart is in their names ({first!r} to {last!r}): one {key}'s values are "
                f"one column, e.g. {name}[{values[0]!r}]; a long table with a {key!r} column: t = {name}.melt("
                f"id_vars={by!r}, var_name={key!r}, value_name='value'), then "
                f"t[{key!r}] = t[{key!r}].str.removeprefix({prefix!r})."
            )
        known = frame[by].dropna()
        row = repr(known.iloc[0].item() if hasattr(known.iloc[0], "item") else known.iloc[0]) if len(known) else "key"
        return (
            f"{head}. The largest in a row: {name}.set_index({by!r}).loc[{row}].idxmax(); a long table with a "
            f"{key!r} column: {name}.melt(id_vars={by!r}, var_name='field', value_name={key!r})."
        )
    return None


def _table_columns(connection: Any, table: str) -> list[str]:
    """The columns of ``table`` in a SQLAlchemy engine or sqlite3 connection ([] when it has none, or cannot say)."""
    try:
        if type(connection).__module__.startswith("sqlalchemy"):
            from sqlalchemy import inspect as sa_inspect

            return [c["name"] for c in sa_inspect(connection).get_columns(table)]
        if type(connection).__module__ == "sqlite3":
            return [row[1] for row in connection.execute(f"PRAGMA table_info({table!r})").fetchall()]
    except Exception:  # no such table, a closed connection: nothing to say
        return []
    return []


def _unselected_line(key: str, frames: list[tuple[str, Any]], namespace: dict[str, Any]) -> str | None:
    """The frame read from a database table without ``key``, when the table has it: its SELECT left it out.

    >>> import sqlite3, pandas as pd
    >>> db = sqlite3.connect(":memory:")
    >>> _ = db.execute("CREATE TABLE customers (customer_id INTEGER, city TEXT)")
    >>> customers = pd.read_sql("SELECT city FROM customers", db)
    >>> _unselected_line("customer_id", [("customers", customers)], {"db": db})
    "customers has no 'customer_id' column, but the database table customers has: select it too (SELECT customer_id, city FROM customers)."
    """
    connections = [v for v in list(namespace.values())[:200] if _is_connection(v)]
    if not connections:
        return None
    lines = []
    for name, frame in frames:
        columns = [c for c in list(frame.columns[:_MAX_COLUMNS]) if isinstance(c, str)]
        table = re.sub(r"^df_|_df$", "", name)  # customers_df read from customers
        if key in columns or len(columns) > 20 or len(lines) == 3:
            continue
        if any(key in _table_columns(connection, table) for connection in connections[:3]):
            chosen = ", ".join([key, *columns])
            lines.append(
                f"{name} has no {key!r} column, but the database table {table} has: select it too "
                f"(SELECT {chosen} FROM {table})."
            )
    return " ".join(lines) or None


def _is_connection(value: Any) -> bool:
    module = type(value).__module__
    return (module.startswith("sqlalchemy") and type(value).__name__ in ("Engine", "Connection")) or (
        module == "sqlite3" and type(value).__name__ == "Connection"
    )


_NO_KEYWORD = re.compile(r"(\w+)\(\) got an unexpected keyword argument '(\w+)'")


def _signature_hint(func: str, keyword: str, namespace: dict[str, Any]) -> str | None:
    """What a function the namespace holds does take, when a call passed it a keyword it lacks (a development task:
    ``skew(x, fisher=True)`` twice; scipy's skew has no ``fisher``, its kurtosis has).

    >>> from scipy.stats import skew
    >>> _signature_hint("skew", "fisher", {"skew": skew})  # doctest: +ELLIPSIS
    "skew() has no 'fisher' argument; it takes (a, axis=0, bias=True, nan_policy='propagate', ...). Leave it out."
    >>> _signature_hint("skew", "fisher", {}) is None
    True
    """
    target = namespace.get(func)
    if not callable(target):
        return None
    try:
        params = str(inspect.signature(target))
    except (TypeError, ValueError):  # a builtin without a signature
        return None
    params = re.sub(r"<[^<>]* at 0x[0-9a-f]+>", "...", params)  # a sentinel default's repr says nothing
    if len(params) > 120:
        params = params[:110].rsplit(",", 1)[0] + ", ...)"
    return f"{func}() has no {keyword!r} argument; it takes {params}. Leave it out."


def _join_line(key: str, owner: str, frames: list[tuple[str, Any]]) -> str | None:
    """The merge that brings ``key`` from ``owner`` into the newest frame without it, on an id column both have.

    >>> import pandas as pd
    >>> frames = [("orders", pd.DataFrame(columns=["order_id", "customer_id", "amount"])),
    ...           ("customers", pd.DataFrame(columns=["customer_id", "city"]))]
    >>> _join_line("city", "customers", frames)
    "To bring it in, merge on the column they share: orders = orders.merge(customers[['customer_id', 'city']], on='customer_id', how='left')"
    """
    columns = {n: [c for c in list(f.columns[:_MAX_COLUMNS]) if isinstance(c, str)] for n, f in frames}
    ids = [c for c in columns.get(owner, []) if c != key and (c.lower() == "id" or c.lower().endswith("_id"))]
    for name, cols in reversed(list(columns.items())):  # the newest frame first: the one just built and used
        shared = [c for c in ids if c in cols]
        if name != owner and key not in cols and shared:
            on = shared[0]
            return (
                f"To bring it in, merge on the column they share: {name} = {name}.merge({owner}[[{on!r}, {key!r}]], "
                f"on={on!r}, how='left')"
            )
    return None


def is_text(column: Any) -> bool:
    """Whether a DataFrame column holds text (object, str, string or category): what a model cannot take as is."""
    return column.dtype.kind in "OSU" or str(column.dtype) in ("string", "str", "category")


# '5,350,380', '$1,234.50', '12.5%', '(1,200)': a number, written for people
_WRITTEN_NUMBER = re.compile(
    r"[-+(]?[$€£]?\s?\d{1,3}(?:[,\s]\d{3})+(?:\.\d+)?\)?%?|[$€£]\s?\d+(?:\.\d+)?|\d+(?:\.\d+)?\s?%"
)


def _text_columns_hint(value: str, namespace: dict[str, Any], pd: Any) -> str | None:
    """Which DataFrame's text column holds ``value`` (the text a number was expected from), and all its text
    columns: a model was fed the whole frame, not the features the task names.

    >>> import pandas as pd
    >>> ns = {"df": pd.DataFrame({"Name": ["Ann", "Bo"], "Age": [3, 4], "Ticket": ["A/5", "S.O.C. 14879"]})}
    >>> print(_text_columns_hint("S.O.C. 14879", ns, pd))
    'S.O.C. 14879' is in df['Ticket'], a text column. df's text columns are 'Name', 'Ticket': use the features the task names (e.g. X = df[[...]]) and turn the text ones into numbers first (pd.get_dummies(X, columns=[...])), rather than dropping one column per error.

    A number written for people (a development task: ``.corr`` of a Volume column holding '5,350,380') is converted:

    >>> ns["df"]["Volume"] = ["5,350,380", "1,200"]
    >>> print(_text_columns_hint("5,350,380", ns, pd))  # doctest: +ELLIPSIS
    '5,350,380' is in df['Volume'], numbers written as text (...). Convert the column first: df['Volume'] = pd.to_numeric(df['Volume'].astype(str).str.replace(r'[^0-9.eE-]', '', regex=True), errors='coerce')
    """
    frames = [(n, v) for n, v in list(namespace.items()) if not n.startswith("_") and type(v) is pd.DataFrame]
    for name, frame in frames[:_MAX_FRAMES]:
        text = [c for c in list(frame.columns[:_MAX_COLUMNS]) if is_text(frame[c])]
        for column in text:
            if bool((frame[column].iloc[:_MAX_ROWS].astype(str) == value).any()):
                if _WRITTEN_NUMBER.fullmatch(value.strip()):  # a number written with separators: convert it
                    return (
                        f"{value!r} is in {name}[{column!r}], numbers written as text (separators, a currency or a "
                        f"% sign). Convert the column first: {name}[{column!r}] = pd.to_numeric({name}[{column!r}]"
                        f".astype(str).str.replace(r'[^0-9.eE-]', '', regex=True), errors='coerce')"
                    )
                listed = ", ".join(repr(c) for c in text[:12]) + (", ..." if len(text) > 12 else "")
                return (
                    f"{value!r} is in {name}[{column!r}], a text column. {name}'s text columns are {listed}: use the "
                    f"features the task names (e.g. X = {name}[[...]]) and turn the text ones into numbers first "
                    "(pd.get_dummies(X, columns=[...])), rather than dropping one column per error."
                )
    return None


_SUGGESTED = re.compile(
    r"""^('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")\. Did you mean ('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""
)


def suggested_column(message: str) -> tuple[str, str] | None:
    """The missing key and the first column ``did_you_mean`` offered for it, read back from a KeyError's message
    (the error crosses the kernel as text; the format is this module's own).

    >>> suggested_column("'avg. waiting time'. Did you mean 'avg. wait time' (a column of df)?")
    ('avg. waiting time', 'avg. wait time')
    >>> suggested_column("'zzz'") is None
    True

    A list of names selected at once, as pandas reports it (a development task: ``df[['MEANGJZH', 'TOTUSJZ']]`` for
    seven steps), gives the one name missing from it:

    >>> suggested_column('''"['MEANGJZH'] not in index". Did you mean 'MEANJZH' (a column of df) or 'MEANJZD'?''')
    ('MEANGJZH', 'MEANJZH')
    """
    m = _SUGGESTED.match(message.strip())
    if m is None:
        return None
    try:
        key, column = ast.literal_eval(m.group(1)), ast.literal_eval(m.group(2))
    except (ValueError, SyntaxError):
        return None
    if not (isinstance(key, str) and isinstance(column, str)):
        return None
    keys = _missing_keys(KeyError(key))  # "['a'] not in index" and "None of [Index(['a'])] ..." name their keys
    if len(keys) > 1:  # which of them the suggestion is for is not said
        return None
    return (keys[0] if keys else key), column


def _close(key: str, columns: list[str]) -> list[str]:
    """Columns equal to ``key`` but for case, spaces and punctuation; else the closest by spelling."""
    same = [c for c in columns if _norm(c) == _norm(key) and _norm(key)]
    if same:
        return same[:3]
    by_norm: dict[str, str] = {}
    for c in columns:
        by_norm.setdefault(_norm(c), c)
    close = difflib.get_close_matches(_norm(key), list(by_norm), n=2, cutoff=0.75)
    return [by_norm[c] for c in close]
