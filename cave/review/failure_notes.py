"""What the model reads after a failed cell, beyond the error itself: the same error again (``loop_note``: the
failing line, the objects' real columns, the line with the column "Did you mean" suggested), a column the task asks
the code to make that it read unmade (``task_column_note``), a file read that found no file in a session given its
tables (``missing_file_note``), and the features the task names when text reached a model (``features_note``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

from cave import prompts
from cave.review.estimators import rewritten
from cave.runtimes.base import VariableInfo
from cave.runtimes.suggest import is_text, suggested_column
from cave.trajectory import Step, Trajectory

__all__ = [
    "column_by_attribute",
    "features_note",
    "loop_note",
    "missing_file_note",
    "missing_filter_note",
    "task_column_note",
    "text_values_note",
    "value_as_label",
]


def loop_note(
    traj: Trajectory,
    step: Step,
    records: list[dict[str, Any]],
    infos: list[VariableInfo],
    tables: Mapping[str, Any] | None = None,
) -> str | None:
    """When the same error comes back step after step, point at the failing line and the real objects; a
    missing key or attribute gets the objects' real columns/attributes the first time. A value of a given table's
    column looked up as a row label of it (``tables``: the given tables) gets the line without the lookup."""
    error = step.execution.error if step.execution is not None else None
    if error is None:
        return None
    code = records[-1]["code"] if records else ""
    failing = _failing_line(code, error)
    if error.type == "KeyError" and tables:
        found = value_as_label(failing, error.message, tables)
        if found is not None:  # every time: the objects' names would not say what is wrong with the line
            return prompts.VALUE_AS_LABEL_LINE.format(**found)
    if error.type in ("AttributeError", "TypeError") and tables and re.search(r"'(?:function|method)'", error.message):
        shadowed = column_by_attribute(failing, tables)
        if shadowed is not None:  # every time: the error names a function, not the column the code meant
            return prompts.SHADOWED_COLUMN_LINE.format(**shadowed)
    signature = (error.type, error.message.strip()[:200])
    n = 0
    for earlier in reversed([s for s in traj.steps if s.kind == "action" and s.code]):  # prose between: same loop
        e = earlier.execution.error if earlier.execution is not None else None
        if e is None or (e.type, e.message.strip()[:200]) != signature:
            break
        n += 1
    if n < 1 and error.type not in ("KeyError", "AttributeError", *_SCALAR_ERRORS):
        return None
    used = set(re.findall(r"[A-Za-z_]\w*", failing or code))
    facts = [f"{v.name}: {v.type} - {v.preview}" for v in infos if v.name in used and v.kind == "variable"]
    made = task_column_note(traj.task, error.message, code) if error.type == "KeyError" else None
    array = _with_numpy_call(failing, error.message) if error.type == "AttributeError" else None
    scalar = _without_scalar_index(code, failing, error.message) if error.type in _SCALAR_ERRORS else None
    rewrite = (
        prompts.ARRAY_FIXED_LINE.format(fixed=array)
        if array
        else prompts.SCALAR_FIXED_LINE.format(fixed=scalar)
        if scalar
        else None
    )
    if n < 1 and error.type in _SCALAR_ERRORS:  # the first time: only a line to run, when there is one
        return rewrite
    if n < 1:  # a missing column or attribute the first time: what the objects on that line really have
        note = prompts.MISSING_KEY_NOTE.format(facts="; ".join(facts)[:900]) if facts and failing else None
        return "\n".join(x for x in (" ".join(x for x in (note, made) if x), rewrite) if x) or None
    fixed = _with_suggested_column(failing, error.message) if error.type == "KeyError" else None
    step_note = prompts.LOOP_FIXED_LINE.format(fixed=fixed) if fixed else rewrite or prompts.LOOP_SMALL_STEP
    return prompts.LOOP_NOTE.format(
        n=n,
        line=f" The failing line: `{failing[:200]}`." if failing else "",
        facts=(" What those objects really are: " + "; ".join(facts)[:900] + ".") if facts else "",
        step=made or step_note,
    )


def value_as_label(line: str, message: str, tables: Mapping[str, Any]) -> dict[str, str] | None:
    """A lookup on ``line`` of a given table's column item by a label (``T['c'][x]``, ``T['c'].loc[x]``,
    ``T.loc[x, 'c']``, ``T.at[x, 'c']``, ``T.loc[x]['c']``) that raised ``KeyError`` with a value of ``T['c']``:
    ``x`` already holds that value, the label an idxmax() over a Series indexed by the column gives (a development
    task: ``sales['product'][top]`` with ``top == 'monitor'``, four steps, to max_steps). The value, the table, the
    column and the line with ``x`` in place of the lookup; None for any other line or key.

    >>> import pandas as pd
    >>> t = {"sales": pd.DataFrame({"product": ["phone", "monitor"], "units": [1, 2]})}
    >>> value_as_label("name = sales['product'][top]", "'monitor'", t)["fixed"]
    'name = top'
    >>> value_as_label("final_answer(sales.loc[best, 'product'])", "'monitor'", t)["fixed"]
    'final_answer(best)'
    >>> value_as_label("p = sales.loc[best]['product']", "'monitor'", t)["fixed"], value_as_label("p = sales['product'][top]", "'tv'", t)
    ('p = best', None)
    """
    key = re.fullmatch(r"'([^'\n]{1,80})'|\"([^\"\n]{1,80})\"", message.strip())
    if key is None:
        return None
    value = key.group(1) if key.group(1) is not None else key.group(2)
    try:
        tree = ast.parse(line)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        found = _item_lookup(node)
        if found is None:
            continue
        table, column, label = found
        frame = tables.get(table)
        if frame is None or column not in getattr(frame, "columns", ()) or isinstance(label, ast.Constant):
            continue
        try:
            holds = bool((frame[column].astype(str) == value).any())
        except Exception:  # a column that cannot be read as text: no claim about it
            continue
        fixed = rewritten(line, [(node, ast.get_source_segment(line, label) or ast.unparse(label))]) if holds else None
        if fixed:
            return {"value": value, "frame": table, "column": column, "fixed": fixed}
    return None


def column_by_attribute(line: str, tables: Mapping[str, Any]) -> dict[str, str] | None:
    """A given table's column read as an attribute on ``line`` where the table has a method of that name
    (``sales.product`` is ``DataFrame.product()``, ``df.count`` is ``DataFrame.count()``): the method came back, and
    the error names a function. The column, the method and the line with the column read by its name (a
    development run: ``sales[...].product.max()``, "'function' object has no attribute 'max'", three times).

    >>> import pandas as pd
    >>> t = {"sales": pd.DataFrame({"product": ["a"], "count": [1], "units": [2]})}
    >>> column_by_attribute("top = sales[sales.units > 1].product.max()", t)["fixed"]
    "top = sales[sales.units > 1]['product'].max()"
    >>> column_by_attribute("n = sales[sales.count > 1]", t)["fixed"], column_by_attribute("n = sales.units.max()", t)
    ("n = sales[sales['count'] > 1]", None)
    """
    import pandas as pd

    try:
        tree = ast.parse(line)
    except SyntaxError:
        return None
    spans = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not callable(getattr(pd.DataFrame, node.attr, None)):
            continue
        root = node.value
        while isinstance(root, ast.Subscript | ast.Attribute):  # sales[...].product, sales.loc[...].product
            root = root.value
        frame = tables.get(root.id) if isinstance(root, ast.Name) else None
        if frame is not None and node.attr in getattr(frame, "columns", ()) and not _called(tree, node):
            owner = ast.get_source_segment(line, node.value) or ast.unparse(node.value)
            spans.append((node, f"{owner}[{node.attr!r}]"))
    fixed = rewritten(line, spans)
    if not fixed:
        return None
    column = spans[0][0].attr  # type: ignore[attr-defined]
    return {"column": column, "fixed": fixed}


def _called(tree: ast.AST, node: ast.Attribute) -> bool:
    """Whether ``node`` is the function of a call (``df.count()`` means the method)."""
    return any(isinstance(n, ast.Call) and n.func is node for n in ast.walk(tree))


def _item_lookup(node: ast.AST) -> tuple[str, str, ast.expr] | None:
    """(table, column, label) of a subscript that takes one column's item by a label, else None."""
    if not isinstance(node, ast.Subscript):
        return None
    outer, index = node.value, node.slice
    at = isinstance(outer, ast.Attribute) and outer.attr in ("loc", "at")
    if at and isinstance(outer.value, ast.Name) and isinstance(index, ast.Tuple) and len(index.elts) == 2:
        column = index.elts[1]  # T.loc[x, 'c']
        return (outer.value.id, column.value, index.elts[0]) if _text_constant(column) else None
    inner = outer.value if at else outer  # T['c'][x], T['c'].loc[x]
    if isinstance(inner, ast.Subscript) and isinstance(inner.value, ast.Name) and _text_constant(inner.slice):
        return inner.value.id, inner.slice.value, index
    rows = outer.value if isinstance(outer, ast.Subscript) else None  # T.loc[x]['c']
    if rows is not None and isinstance(rows, ast.Attribute) and rows.attr == "loc" and isinstance(rows.value, ast.Name):
        return (rows.value.id, index.value, outer.slice) if _text_constant(index) else None
    return None


def _text_constant(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _failing_line(code: str, error: Any) -> str:
    """The line of ``code`` the error points at, stripped ('' when it points at none)."""
    lines = code.splitlines()
    return lines[error.lineno - 1].strip() if error.lineno and 0 < error.lineno <= len(lines) else ""


_QUOTED_KEY = re.compile(r"""^\s*(?:'([^'\n]{1,80})'|"([^"\n]{1,80})")(?:\.|\s|$)""")


def task_column_note(task: str, message: str, code: str) -> str | None:
    """A missing column the task asks the code to make, which the code never made: say so, with the task's words
    for it (a development task: ``df['Volatility']`` read five times; the task defines Volatility = (High - Low) / Open).

    >>> task = "Create a new feature 'Volatility' = (High - Low) / Open. Then correlate Volatility with Volume."
    >>> print(task_column_note(task, "'Volatility'", "r = df['Volatility'].corr(df['Volume'])"))
    'Volatility' is no column yet: it is one the task asks you to make ("Create a new feature 'Volatility' = (High - Low) / Open."). Create it first (df['Volatility'] = ... as the task defines it), then use it.
    >>> task_column_note(task, "'Volatility'", "df['Volatility'] = 1\\nr = df['Volatility'].corr(df['Volume'])") is None
    True
    >>> task_column_note(task, "'Price'", "df['Price']") is None
    True
    >>> task_column_note("Calculate the mean of Close.", "'Close'. Did you mean 'close' (a column of df)?", "") is None
    True
    """
    m = _QUOTED_KEY.match(message)
    if m is None or "Did you mean" in message or "is a column of" in message:  # a misspelling, another table's
        return None
    key = m.group(1) or m.group(2)
    if not re.search(rf"(?<![\w]){re.escape(key)}(?![\w])", task) or key in _stored(code):
        return None
    sentences = [x.strip() for x in re.split(r"(?<=[.;!?])\s+|\n+", task) if re.search(re.escape(key), x)]
    made = rf"{re.escape(key)}['\"]?\s*=|\b(?:creat|new|defin|deriv|add|engineer)"
    defining = [x for x in sentences if re.search(made, x, re.I)]
    if not defining:
        return None
    reads = re.search(rf"([A-Za-z_]\w*)\[\s*['\"]{re.escape(key)}['\"]\s*\]", code)
    said = defining[0] if len(defining[0]) <= 240 else defining[0][:237] + "..."
    return prompts.TASK_COLUMN_NOTE.format(key=key, said=said, frame=reads.group(1) if reads else "df")


def _stored(code: str) -> set[str]:
    from cave.review.column_names import created_columns

    return created_columns(code)


def _with_suggested_column(line: str, message: str) -> str | None:
    """The failing line with the column "Did you mean" suggested in place of the missing key where the line reads it
    (a key the line assigns keeps the model's name): what a small model that retypes the task's words needs.

    >>> msg = "'avg. waiting time'. Did you mean 'avg. wait time' (a column of df)?"
    >>> _with_suggested_column("df['avg. waiting time'] = pd.to_timedelta(df['avg. waiting time'])", msg)
    "df['avg. waiting time'] = pd.to_timedelta(df['avg. wait time'])"
    >>> _with_suggested_column("x = 1", msg) is None
    True

    A name in a list of columns selected at once:

    >>> msg = '''"['MEANGJZH'] not in index". Did you mean 'MEANJZH' (a column of df) or 'MEANJZD' (a column of df)?'''
    >>> _with_suggested_column("X = df[['MEANGJZH', 'TOTUSJZ']]", msg)
    "X = df[['MEANJZH', 'TOTUSJZ']]"
    """
    suggested = suggested_column(message)
    if suggested is None or not line:
        return None
    key, column = suggested
    try:
        tree = ast.parse(line)
    except SyntaxError:
        return None
    reads = [
        c
        for node in ast.walk(tree)
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
        for c in (node.slice.elts if isinstance(node.slice, (ast.List, ast.Tuple)) else [node.slice])
        if isinstance(c, ast.Constant) and c.value == key
    ]  # fmt: skip
    return rewritten(line, [(node, repr(column)) for node in reads])


# pandas methods a small model calls on a NumPy array (scipy.stats.zscore returns one), and NumPy's way to write them
_ARRAY_WAYS = {
    "abs": "np.abs({x})",
    "isna": "np.isnan({x})",
    "isnull": "np.isnan({x})",
    "notna": "~np.isnan({x})",
    "notnull": "~np.isnan({x})",
    "idxmax": "{x}.argmax()",
    "idxmin": "{x}.argmin()",
    "to_list": "{x}.tolist()",
}
_NO_ARRAY_ATTR = re.compile(r"^'numpy\.ndarray' object has no attribute '(\w+)'")


def _with_numpy_call(line: str, message: str) -> str | None:
    """The failing line with a pandas method called on a NumPy array written NumPy's way (a development task:
    ``df[z_scores.abs() > 3]`` on scipy's zscore four times, the hint that says np.abs notwithstanding).

    >>> _with_numpy_call("outliers = df[z_scores.abs() > 3]", "'numpy.ndarray' object has no attribute 'abs'")
    'outliers = df[np.abs(z_scores) > 3]'
    >>> _with_numpy_call("m = stats.zscore(x).abs().max()", "'numpy.ndarray' object has no attribute 'abs'")
    'm = np.abs(stats.zscore(x)).max()'
    >>> _with_numpy_call("y = z.clip(0)", "'numpy.ndarray' object has no attribute 'clip'") is None
    True
    """
    m = _NO_ARRAY_ATTR.match(message)
    way = _ARRAY_WAYS.get(m.group(1)) if m else None
    if way is None or not line:
        return None
    try:
        tree = ast.parse(line)
    except SyntaxError:
        return None
    spans = [
        (node, way.format(x=ast.get_source_segment(line, node.func.value)))
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == m.group(1)
        and not node.args and not node.keywords and node.lineno == node.end_lineno
    ]  # fmt: skip
    return rewritten(line, spans[:1])  # the outermost call: an inner one sits inside its span


_SCALAR_ERRORS = ("IndexError", "TypeError")
_SCALAR_INDEXED = re.compile(
    r"invalid index to scalar variable|'(?:numpy\.)?float(?:64|32)?' object is not subscriptable"
)
# what an assigned name says it holds, and the pandas call that computes it from the test's data
_NAMED_STATISTICS = (
    (re.compile(r"mean|average|avg", re.I), "mean"),
    (re.compile(r"std|stdev|standard_dev|deviation", re.I), "std"),
    (re.compile(r"median", re.I), "median"),
    (re.compile(r"var(?!iable)", re.I), "var"),
)


def _without_scalar_index(code: str, line: str, message: str) -> str | None:
    """The failing line without the index into one number: a test's ``.statistic`` or ``.pvalue`` is a single
    float. Where the name assigned says a statistic of the data (a mean, a standard deviation), the line computes
    it from the data the test was run on (a development task: ``price_range_mean = round(shapiro_result.statistic[0], 2)``
    six times, to max_steps).

    >>> code = "r = shapiro(df['Price Range'])\\nm = 1\\nprice_range_mean = round(r.statistic[0], 2)"
    >>> _without_scalar_index(code, "price_range_mean = round(r.statistic[0], 2)", "invalid index to scalar variable.")
    "price_range_mean = round(df['Price Range'].mean(), 2)"
    >>> _without_scalar_index(code, "w = r.statistic[0]", "invalid index to scalar variable.")
    'w = r.statistic'
    """
    if not _SCALAR_INDEXED.search(message) or not line:
        return None
    try:
        tree, whole = ast.parse(line), ast.parse(code)
    except SyntaxError:
        return None
    tested = {  # r = shapiro(x): what r was computed from
        n.targets[0].id: n.value.args[0]
        for n in ast.walk(whole)
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
        and isinstance(n.value, ast.Call) and n.value.args and isinstance(n.value.func, ast.Name | ast.Attribute)
    }  # fmt: skip
    assigned = tree.body[0].targets[0] if tree.body and isinstance(tree.body[0], ast.Assign) else None
    named = next(
        (way for said, way in _NAMED_STATISTICS if isinstance(assigned, ast.Name) and said.search(assigned.id)), None
    )
    spans = []
    for node in ast.walk(tree):
        indexed = node.value if isinstance(node, ast.Subscript) else None
        if not isinstance(indexed, ast.Attribute) or indexed.attr not in ("statistic", "pvalue", "correlation"):
            continue
        data = tested.get(indexed.value.id) if isinstance(indexed.value, ast.Name) else None
        if named and data is not None and indexed.attr == "statistic":
            spans.append((node, f"{ast.unparse(data)}.{named}()"))
        else:
            spans.append((node, ast.get_source_segment(line, indexed) or ast.unparse(indexed)))
    return rewritten(line, spans[:1])


# a text that says there is no answer (a development task: "No data available." after an IndexError)
def missing_file_note(step: Step, tables: Mapping[str, Any]) -> str | None:
    """A file read that found no file, in a session given its tables: the data is the given objects, not a file
    (a development task: ``df_2010 = pd.read_csv('percent-bachelors-degrees-women-usa.csv')`` under another name than the
    given ``df``; the 1.5B then said the file was missing, and that prose ended the run).

    >>> from cave.runtimes.base import ExecError, Execution
    >>> err = ExecError("FileNotFoundError", "[Errno 2] No such file or directory: 't.csv'", lineno=1)
    >>> step = Step(1, code="d = pd.read_csv('t.csv')", execution=Execution(error=err))
    >>> print(missing_file_note(step, {"df": None}))
    There is no such file here: the data was given to you already loaded, as df. Use it in place of the file: d = df.copy()
    """
    error = step.execution.error if step.execution is not None else None
    if error is None or error.type != "FileNotFoundError" or not tables:
        return None
    failing = _failing_line(step.code or "", error)
    m = re.match(r"([A-Za-z_]\w*)\s*=\s*[\w.]*read_\w+\(", failing)
    names = ", ".join(list(tables)[:6])
    use = f": {m.group(1)} = {next(iter(tables))}.copy()" if m and len(tables) == 1 else ""
    return prompts.MISSING_FILE_NOTE.format(names=names, use=use)


def missing_filter_note(task: str, step: Step, tables: Mapping[str, Any]) -> str | None:
    """A selection by a column the table lacks, of a value the task names and no column holds: the table is all
    about it already (a development task: ``df[df['Symbol'] == 'AAPL']`` on e5_aapl.csv, which has no symbol column; the
    1.5B wrapped it in ``if 'Symbol' in df.columns`` and printed the error to max_steps).

    >>> import pandas as pd
    >>> from cave.runtimes.base import ExecError, Execution
    >>> err = ExecError("KeyError", "'Symbol'", lineno=1)
    >>> step = Step(1, code="aapl = df[df['Symbol'] == 'AAPL']\\nm = aapl['Volume'].mean()", execution=Execution(error=err))
    >>> print(missing_filter_note("What is the mean volume of AAPL stock?", step, {"df": pd.DataFrame({"Volume": [1]})}))
    df has no 'Symbol' column to select 'AAPL' by, and none of its columns holds 'AAPL': the table is all about the 'AAPL' the task names. Use its rows as they are:
    ```python
    aapl = df
    ```
    """
    error = step.execution.error if step.execution is not None else None
    key = (
        re.fullmatch(r"'([^'\n]{1,80})'", error.message.strip())
        if error is not None and error.type == "KeyError"
        else None
    )
    if key is None:
        return None
    try:
        tree = ast.parse(step.code or "")
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Subscript)):
            continue
        table = node.value.value.id if isinstance(node.value.value, ast.Name) else ""
        test = node.value.slice
        if table not in tables or not isinstance(test, ast.Compare) or len(test.ops) != 1:
            continue
        sides = [test.left, test.comparators[0]]
        value = next((x.value for x in sides if isinstance(x, ast.Constant) and isinstance(x.value, str)), None)
        column = next((x for x in sides if isinstance(x, ast.Subscript) and ast.unparse(x.value) == table), None)
        if value is None or column is None or not isinstance(test.ops[0], ast.Eq):
            continue
        if not (isinstance(column.slice, ast.Constant) and column.slice.value == key.group(1)):
            continue
        if not re.search(rf"(?<!\w){re.escape(value)}(?!\w)", task, re.I) or _holds(tables[table], value):
            continue
        if len(node.targets) == 1:
            fixed = f"{ast.unparse(node.targets[0])} = {table}"
            return prompts.MISSING_FILTER_NOTE.format(table=table, key=key.group(1), value=value, fixed=fixed)
    return None


def _holds(frame: Any, value: str) -> bool:
    """Whether a text column of ``frame`` holds ``value`` (any case): then the selection needs that column."""
    for name in getattr(frame, "columns", []):
        column = frame[name]
        if is_text(column) and bool((column.astype(str).str.strip().str.casefold() == value.casefold()).any()):
            return True
    return False


_TEXT_MATH = re.compile(
    r"dtype '(?:str|object|string)' does not support operation|reduction '\w+' with string dtype"
    r"|unsupported operand type\(s\) for [-+/*]+: 'str'|can't multiply sequence by non-int"
)
_DURATION = re.compile(r"\d{1,3}:\d{2}:\d{2}(?:\.\d+)?")
_NUMBER_TEXT = re.compile(r"[$\u20ac\u00a3]?\s*-?[\d,]*\.?\d+\s*%?")


def text_values_note(step: Step, records: list[dict[str, Any]], tables: Mapping[str, Any]) -> str | None:
    """Arithmetic on a given column that holds numbers written as text: the conversion its values need, as a line
    to run (a development task: ``df['avg. wait time'].mean()`` on '00:00:51' durations; the hint to keep the numeric
    columns dropped the column the task asks about, then the 1.5B read files that were not there).

    >>> import pandas as pd
    >>> from cave.runtimes.base import ExecError, Execution
    >>> err = ExecError("TypeError", "Cannot perform reduction 'mean' with string dtype", lineno=1)
    >>> code = "m = df['wait'].mean()"
    >>> step = Step(1, code=code, execution=Execution(error=err))
    >>> print(text_values_note(step, [{"code": code}], {"df": pd.DataFrame({"wait": ["00:00:51", "00:01:02"]})}))
    Note: df['wait'] holds durations written as text ('00:00:51'): convert it first (durations to seconds), then compute:
    ```python
    df['wait'] = pd.to_timedelta(df['wait']).dt.total_seconds()
    ```
    """
    error = step.execution.error if step.execution is not None else None
    if error is None or error.type != "TypeError" or not _TEXT_MATH.search(error.message):
        return None
    failing = _failing_line(records[-1]["code"] if records else step.code or "", error)
    try:
        tree = ast.parse(failing)
    except SyntaxError:
        return None
    notes, fixes = [], []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in tables):
            continue
        written = node.slice.value if isinstance(node.slice, ast.Constant) else None
        frame = tables[node.value.id]
        names = [c for c in getattr(frame, "columns", []) if isinstance(c, str)]
        # the name as written, or the table's name with the spaces at its ends the guard put back
        column = next((c for c in names if isinstance(written, str) and c.strip() == written.strip()), None)
        if column is None or not is_text(frame[column]):
            continue
        read = f"{node.value.id}[{column!r}]"
        if any(f.startswith(f"{read} = ") for f in fixes):
            continue
        values = frame[column].dropna().astype(str).str.strip()
        values = values[values != ""].iloc[:500]
        if len(values) and all(_DURATION.fullmatch(v) for v in values):
            what, way = "durations", f"pd.to_timedelta({read}).dt.total_seconds()"
        elif len(values) and sum(bool(_NUMBER_TEXT.fullmatch(v)) for v in values) >= 0.9 * len(values):
            what, way = "numbers", rf"pd.to_numeric({read}.str.replace(r'[^0-9.\-]', '', regex=True), errors='coerce')"
        else:
            continue
        example = next((v for v in values if v not in ("0", "00:00:00")), values.iloc[0])
        notes.append(f"{read} holds {what} written as text ({example!r})")
        fixes.append(f"{read} = {way}")
    if not notes:
        return None
    return (
        f"Note: {'; '.join(notes)}: convert {'it' if len(notes) == 1 else 'them'} first (durations to seconds), "
        "then compute:\n"
        "```python\n" + "\n".join(fixes) + "\n```"
    )


def _stem_named(column: str, columns: list[str], task: str) -> bool:
    """A ticker-like column named by its stem: 'MSFT.O' or 'EUR=' where the task writes MSFT or EUR (a development task),
    when no other column has that stem."""
    stem = re.split(r"[.=]", column.lstrip("."), maxsplit=1)[0]
    if len(stem) < 3 or stem == column.lstrip(".") or sum(c.lstrip(".").startswith(stem) for c in columns) > 1:
        return False
    return bool(re.search(rf"(?<![\w.]){re.escape(stem)}(?![\w])", task))


_TEXT_IN = re.compile(r"is in (\w+)\[('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\], a text column")


def features_note(task: str, step: Step, tables: dict[str, Any]) -> str | None:
    """When text reached a model (``could not convert string to float``, which ``suggest`` traced to a column of a
    given frame): the line that selects the columns the task names and one-hot encodes the text ones. The 1.5B,
    told which columns were text, still dropped one per step and ran out of steps (a development task).

    >>> import pandas as pd
    >>> from cave.runtimes.base import ExecError, Execution
    >>> df = pd.DataFrame({"Name": ["a"], "Sex": ["m"], "Age": [3.0], "Fare": [7.2], "Survived": [1]})
    >>> step = Step(index=0, code="model.fit(X, y)")
    >>> step.execution = Execution(error=ExecError("ValueError", "could not convert string to float: 'a'. 'a' is in df['Name'], a text column. ..."))
    >>> print(features_note("Predict Survived from the features 'Sex', 'Age' and 'Fare'.", step, {"df": df}))
    Note: the task names the columns 'Sex', 'Age', 'Fare' of df; 'Sex' holds text. Build the features from them alone: X = pd.get_dummies(df[['Sex', 'Age', 'Fare']], columns=['Sex'], dtype=float) (then drop or fill missing values in X and y together).
    """
    error = step.execution.error if step.execution is not None else None
    m = _TEXT_IN.search(error.message) if error is not None and error.type == "ValueError" else None
    frame = tables.get(m.group(1)) if m else None
    if frame is None:
        return None
    names = list(map(str, frame.columns))
    named = [c for c in names if re.search(rf"(?<![\w.]){re.escape(c)}(?![\w])", task) or _stem_named(c, names, task)]
    quoted = [c for c in named if re.search(rf"['\"`]{re.escape(c)}['\"`]", task)]
    features = quoted or named  # a quoted list is the features; the target is usually named in words
    if not features:
        return None
    text = [c for c in features if is_text(frame[c])]
    name = m.group(1) if m else "df"
    cols = ", ".join(repr(c) for c in features)
    line = f"{name}[[{cols}]]"
    if text:
        line = f"pd.get_dummies({line}, columns={text!r}, dtype=float)"
    holds = f"; {', '.join(repr(c) for c in text)} {'holds' if len(text) == 1 else 'hold'} text" if text else ""
    return (
        f"Note: the task names the columns {cols} of {name}{holds}. Build the features from them alone: X = {line} "
        "(then drop or fill missing values in X and y together)."
    )
