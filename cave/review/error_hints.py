"""One-line fixes for the errors small models make again and again: APIs that changed under the code they learned
from (scikit-learn's ``squared=False``, ``DataFrame.append``), library errors whose message does not say what to
do (an ndarray used as a Series, dates in several formats), string methods outside ``.str``, a missing import.
``cave.prompts.format_execution`` adds the hint under the error; each one is tested against the messages of the
installed libraries (tests/cave/test_prompts.py).
"""

from __future__ import annotations

import re

__all__ = ["error_help", "error_hint", "line_fix"]


_NO_ATTR = re.compile(r"'(Series|Index)' object has no attribute '(\w+)'")
_ENGINE_ATTR = re.compile(
    r"'(Engine|OptionEngine|Connection)' object has no attribute '(execute|cursor|fetchall|query)'"
)
_NOT_DEFINED = re.compile(r"name '(\w+)' is not defined")
_TIME_OF_DAY = re.compile(r"invalid literal for (?:int|float)\(\)[^:]*: '(\d{1,2}:\d{2}(?::\d{2})?\s*([AaPp][Mm])?)'")
# APIs that changed under the code small models learned from: the error says what is gone, the hint what replaced it.
_API_CHANGES: list[tuple[tuple[str, ...], re.Pattern[str], str]] = [
    (("TypeError",), re.compile(r"unexpected keyword argument 'squared'"),
     "scikit-learn 1.6 removed squared=: the RMSE is sklearn.metrics.root_mean_squared_error(y_true, y_pred) "
     "(without squared=False, mean_squared_error is the MSE, not the RMSE)"),
    (("AttributeError",), re.compile(r"'DataFrame' object has no attribute 'append'"),
     "DataFrame.append was removed in pandas 2: pd.concat([df, other], ignore_index=True)"),
    (("AttributeError",), re.compile(r"object has no attribute 'iteritems'"), "iteritems was removed in pandas 2: .items()"),
    (("AttributeError",), re.compile(r"'DataFrame' object has no attribute 'applymap'"),
     "DataFrame.applymap is DataFrame.map in pandas 3: df.map(func)"),
    (("AttributeError",), re.compile(r"'(Series|DataFrame)' object has no attribute 'mad'"),
     ".mad() was removed in pandas 2: (s - s.mean()).abs().mean()"),
    (("TypeError",), re.compile(r"fillna\(\) got an unexpected keyword argument 'method'"),
     "fillna(method=...) was removed in pandas 3: .ffill() or .bfill()"),
    (("TypeError",), re.compile(r"dtype '(str|object|string)' does not support operation|reduction '\w+' with string dtype"),
     "a column holds text: use only the numeric columns (df.select_dtypes('number'), or numeric_only=True), or "
     "convert it first with pd.to_numeric(df[col], errors='coerce')"),
    (("TypeError",), re.compile(r"datetime64\S* (?:type )?does not support operation"),
     "the frame has a date column, and a sum or mean over the whole frame reduces it too: pick the column to "
     "reduce first, e.g. df.groupby(key)['value'].sum(), or pass numeric_only=True"),
    (("IndexError",), re.compile(r"single positional indexer is out-of-bounds|index 0 is out of bounds"),
     ".iloc[0] (or [0]) of an empty selection: the filter before it kept no row. Print len() after each step and "
     "the values of the column you filtered on (e.g. print(df[col].describe())) before picking a row"),
    (("ValueError",), re.compile(r"Encountered all NA values|attempt to get arg(max|min) of an empty sequence"),
     "the Series is all NaN (or empty). Two selections of different rows subtract by row label, so no pair lines "
     "up and every difference is NaN: put the periods side by side first, e.g. t = df.pivot_table(index='product', "
     "columns='quarter', values='units', aggfunc='sum'), then (t['Q2'] - t['Q1']).idxmax()"),
    (("AttributeError", "ImportError"), re.compile(r"binom_test"),
     "scipy.stats.binom_test was removed: scipy.stats.binomtest(k, n, p).pvalue"),
    (("TypeError",), re.compile(r"OneHotEncoder.*unexpected keyword argument 'sparse'"),
     "scikit-learn 1.2 renamed sparse= to sparse_output=: OneHotEncoder(sparse_output=False)"),
    (("AttributeError",), re.compile(r"'numpy\.ndarray' object has no attribute '(abs|isna|isnull|notna|dropna|fillna|"
                                     r"apply|map|value_counts|idxmax|idxmin|iloc|loc|index|to_list|between|sort_values)'"),
     "this is a NumPy array (scipy.stats.zscore, .values and np functions return one), not a pandas Series: use "
     "np.abs(a) and the like, or make it a Series on the frame's rows first: pd.Series(a, index=df.index)"),
    (("KeyError",), re.compile(r"^-?\d+$"),
     "pandas 3 reads s[1] on a Series as the label 1, not the second item (model.params[1] is a KeyError: its "
     "labels are names like 'const' and 'Age'): take a position with s.iloc[1], or a label, e.g. params['Age']"),
    (("AttributeError",), re.compile(r"Can only use \.dt accessor with datetimelike values"),
     "the column holds text, not dates: convert it first, e.g. df[col] = pd.to_datetime(df[col])"),
    (("ValueError",), re.compile(r"Input (X|y) contains NaN"),
     "the model's input has missing values: drop those rows from X and y together first, e.g. "
     "data = df[features + [target]].dropna(); X, y = data[features], data[target]"),
    (("ValueError",), re.compile(r"Unknown label type: .?continuous"),
     "a classifier needs class labels, and this target is continuous: use a regressor (e.g. LinearRegression), or "
     "turn the target into classes first if the task says so"),
    (("ValueError",), re.compile(r"solver does not support multiclass"),
     "this solver handles two classes only: leave solver= out (the default handles several classes)"),
    (("ValueError",), re.compile(r"Item wrong length (\d+) instead of (\d+)"),
     "the boolean mask has a different number of rows than the frame it selects from (a mask computed after "
     "dropna() or on another frame): compute it on the same frame, e.g. s = df[col].dropna(); kept = s[mask]"),
    (("InvalidParameterError", "ValueError"), re.compile(r"'method' parameter of PowerTransformer .* Got 'log"),
     "PowerTransformer has no log method, and it standardizes its output (mean 0, std 1): a log transform is "
     "np.log(x) (base 10: np.log10(x))"),
    (("ValueError",), re.compile(r"time data .* doesn't match format|unconverted data remains"),
     "the dates are written in more than one format: pd.to_datetime(df[col], format='mixed') reads each one "
     "(add errors='coerce' to make the unreadable ones NaT)"),
    (("AttributeError",), re.compile(r"'float' object has no attribute 'numerator'"),
     "Python's statistics functions fail on NaN (or inf): drop the missing values first, e.g. "
     "statistics.stdev(df[col].dropna().tolist())"),
    (("TypeError",), re.compile(r"'r?(?:and|or|xor)_' (?:not supported for dtype|with a dtyped)"),
     "& and | bind tighter than == and >: wrap each comparison in parentheses, e.g. "
     "df[(df['a'] == 'x') & (df['b'] > 3)]"),
    (("AttributeError", "TypeError"), re.compile(r"ObjectDType' object has no attribute 'dtype'"),
     "a column holds Python objects (text or mixed), not numbers: convert it first, "
     "e.g. pd.to_numeric(df[col], errors='coerce')"),
]  # fmt: skip
# functions of other SQL dialects that SQLite lacks: what SQLite writes instead (its dates are text)
_SQLITE_FUNCTION = re.compile(r"no such function: (\w+)", re.I)
_SQLITE_EQUIVALENTS = {
    "YEAR": "strftime('%Y', date) for the year ('2025'; CAST(... AS INTEGER) for a number)",
    "MONTH": "strftime('%m', date) for the month number ('03'), strftime('%Y-%m', date) for the month of a year",
    "DAY": "strftime('%d', date) for the day of the month, date(date) for the day",
    "HOUR": "strftime('%H', date) for the hour ('09')",
    "DATE_FORMAT": "strftime('%Y-%m', date) (the format comes first in SQLite)",
    "TO_CHAR": "strftime('%Y-%m', date) (the format comes first in SQLite)",
    "EXTRACT": "strftime('%Y', date) / strftime('%m', date)",
    "DATE_TRUNC": "strftime('%Y-%m', date) for the month, date(date) for the day",
    "DATEDIFF": "julianday(a) - julianday(b) for days between dates",
    "NOW": "datetime('now')",
    "CURDATE": "date('now')",
    "CONCAT": "a || b",
    "IF": "CASE WHEN ... THEN ... ELSE ... END (or iif(cond, a, b))",
    "ISNULL": "ifnull(x, y) / x IS NULL",
    "STDDEV": "no standard deviation in SQLite: read the rows with pd.read_sql and use pandas' .std()",
    "STDEV": "no standard deviation in SQLite: read the rows with pd.read_sql and use pandas' .std()",
    "MEDIAN": "no median in SQLite: read the rows with pd.read_sql and use pandas' .median()",
    "PERCENTILE_CONT": "no percentiles in SQLite: read the rows with pd.read_sql and use pandas' .quantile()",
}
_USUAL_IMPORTS = {"pd": "import pandas as pd", "np": "import numpy as np", "plt": "import matplotlib.pyplot as plt"}


def error_hint(etype: str, message: str) -> str | None:
    """A one-line fix for errors small models make again and again (None when there is none).

    >>> error_hint("AttributeError", "'Series' object has no attribute 'title'")
    'string methods of a Series are under .str: write .str.title(...), e.g. s.str.strip().str.title()'
    >>> error_hint("NameError", "name 'pd' is not defined")
    'add `import pandas as pd` at the top of the code'
    >>> error_hint("AttributeError", "'Engine' object has no attribute 'cursor'").startswith("a SQLAlchemy 2 engine")
    True
    >>> error_hint("TypeError", "got an unexpected keyword argument 'squared'")[:43]
    'scikit-learn 1.6 removed squared=: the RMSE'
    >>> error_hint("IndexError", "single positional indexer is out-of-bounds")[:40]
    '.iloc[0] (or [0]) of an empty selection:'
    >>> error_hint("ValueError", "Encountered all NA values")[:36]
    'the Series is all NaN (or empty). Tw'
    >>> error_hint("AttributeError", "'numpy.ndarray' object has no attribute 'abs'")[:40]
    'this is a NumPy array (scipy.stats.zscor'
    >>> error_hint("KeyError", "1")[:44]  # a development task: model.params[1] three times, then prose
    'pandas 3 reads s[1] on a Series as the label'
    >>> error_hint("ValueError", "invalid literal for int() with base 10: '7:13 PM'")  # a development task, six times
    "'7:13 PM' is a time of day, not a number: parse the column as times and take the part, e.g. pd.to_datetime(df[col], format='%I:%M %p').dt.hour (24-hour)"
    >>> error_hint("DatabaseError", "Execution failed on sql 'SELECT YEAR(date) ...': no such function: YEAR")
    "SQLite has no YEAR(): use strftime('%Y', date) for the year ('2025'; CAST(... AS INTEGER) for a number); strftime('%Y-%m', date) gives the month of a year ('2025-03')"
    >>> error_hint("ValueError", "bad") is None
    True
    """
    if etype == "AttributeError" and (m := _NO_ATTR.search(message)) and hasattr(str, m.group(2)):
        return f"string methods of a {m.group(1)} are under .str: write .str.{m.group(2)}(...), e.g. s.str.strip().str.title()"
    if etype == "AttributeError" and _ENGINE_ATTR.search(message):
        return (
            "a SQLAlchemy 2 engine has no execute()/cursor(): query it with pandas, "
            'e.g. pd.read_sql("SELECT ...", db) (use the engine\'s own name)'
        )
    if etype in ("ObjectNotExecutableError", "ArgumentError") and "Not an executable object" in message:
        return 'pass SQL text to pandas instead: pd.read_sql("SELECT ...", db)'
    if etype in _SQL_ERRORS and (m := _SQLITE_FUNCTION.search(message)):
        return _sqlite_function(m.group(1))
    if etype == "NameError" and (m := _NOT_DEFINED.search(message)) and m.group(1) in _USUAL_IMPORTS:
        return f"add `{_USUAL_IMPORTS[m.group(1)]}` at the top of the code"
    if etype == "ValueError" and (m := _TIME_OF_DAY.search(message)):
        fmt = "%I:%M %p" if m.group(2) else "%H:%M"
        return (
            f"{m.group(1)!r} is a time of day, not a number: parse the column as times and take the part, e.g. "
            f"pd.to_datetime(df[col], format='{fmt}').dt.hour (24-hour)"
        )
    return next((hint for types, pattern, hint in _API_CHANGES if etype in types and pattern.search(message)), None)


_SQL_ERRORS = ("DatabaseError", "OperationalError")


def _sqlite_function(name: str) -> str | None:
    """What SQLite writes for a function of another dialect (a development run: YEAR(date) three times, then rows
    made up to reach the twelve months the check asked for)."""
    instead = _SQLITE_EQUIVALENTS.get(name.upper())
    if instead is None:
        return None
    hint = f"SQLite has no {name.upper()}(): use {instead}"
    if name.upper() in ("YEAR", "DAY", "HOUR"):
        hint += "; strftime('%Y-%m', date) gives the month of a year ('2025-03')"
    return hint


_REDUCE_THEN_PICK = re.compile(
    r"\.(sum|mean|median|min|max|std|var|first|last|prod)\(\s*\)(\[\[?[^\]]+\]?\]|\.[A-Za-z_]\w*\b(?!\())"
)
_REDUCE_ALL = re.compile(r"\.(sum|mean|median|std|var|prod)\(\s*\)")
_PICKED = re.compile(r"\.idx(?:max|min)\(\s*\)$")
_CELL_LINE = re.compile(r'File "<cell[^"]*>", line \d+[^\n]*\n\s+(.+)')


def line_fix(etype: str, message: str, traceback: str) -> str | None:
    """The failing line rewritten, for errors whose fix is mechanical on that line: a grouped reduction over every
    column (a date or text column among them) before the column it wanted was picked, or with no column picked; a
    row label from idxmax/idxmin looked up as a column (``df[s.idxmax()]``: a development task's runs, four times).

    >>> tb = 'File "<cell-3>", line 2, in <module>\\n    m = t.groupby(pd.to_datetime(t["d"]).dt.to_period("M")).sum()["visits"]'
    >>> print(line_fix("TypeError", "datetime64 type does not support operation 'sum'", tb))
    m = t.groupby(pd.to_datetime(t["d"]).dt.to_period("M"))["visits"].sum()
    >>> print(line_fix("TypeError", "datetime64 type does not support operation 'mean'", 'File "<cell-1>", line 1\\n    x = df.groupby("k").mean()'))
    x = df.groupby("k").mean(numeric_only=True)
    >>> line_fix("TypeError", "unsupported operand", tb) is None
    True
    >>> print(line_fix("KeyError", "'2025-01-11'", 'File "<cell-2>", line 5\\n    p = sales[sales["d"].idxmax()]["product"]'))
    p = sales.loc[sales["d"].idxmax()]["product"]
    """
    lines = _CELL_LINE.findall(traceback)
    if not lines:
        return None
    line = lines[-1].strip()
    if etype == "KeyError":
        # df[s.idxmax()] looks the row label up among the columns: the row is df.loc[s.idxmax()]
        fixed = _row_by_label(line)
        return fixed if fixed != line else None
    if etype != "TypeError" or not re.search(r"does not support operation|reduction '\w+' with string dtype", message):
        return None
    start = line.find(".groupby(")
    if start < 0:
        return None
    end = _closing(line, start + len(".groupby("))
    if end is None:
        return None
    m = _REDUCE_THEN_PICK.match(line, end + 1)
    if m:
        pick = m.group(2) if m.group(2).startswith("[") else f"[{m.group(2)[1:]!r}]"
        fixed = line[: end + 1] + pick + f".{m.group(1)}()" + line[m.end() :]
        return fixed
    m = _REDUCE_ALL.match(line, end + 1)
    if m:
        fixed = line[: end + 1] + f".{m.group(1)}(numeric_only=True)" + line[m.end() :]
        return fixed
    return None


def _closing(text: str, i: int, pair: str = "()") -> int | None:
    """The index of the bracket (``pair``: its opening and closing characters) that closes the one opened just
    before ``i``."""
    depth = 1
    for j in range(i, len(text)):
        depth += {pair[0]: 1, pair[1]: -1}.get(text[j], 0)
        if depth == 0:
            return j
    return None


def _row_by_label(line: str) -> str:
    """``name[<...>.idxmax()]`` made ``name.loc[<...>.idxmax()]`` (brackets inside are kept whole)."""
    for i, ch in enumerate(line):
        if ch != "[" or i == 0 or not (line[i - 1].isalnum() or line[i - 1] == "_"):
            continue
        j = _closing(line, i + 1, "[]")
        if j is not None and _PICKED.search(line[i + 1 : j]):
            return line[:i] + ".loc" + line[i:]
    return line


def error_help(etype: str, message: str, traceback: str) -> tuple[str | None, str | None]:
    """What an error's observation gets: the general hint and the failing line rewritten, either None. A row label
    taken for a column (a KeyError with a rewritten line) gets the line only: the hint's reading of a Series'
    label or position is not what went wrong there.

    >>> error_help("NameError", "name 'pd' is not defined", "")
    ('add `import pandas as pd` at the top of the code', None)
    >>> hint, fixed = error_help("KeyError", "'2025-01-11'", 'File "<cell-2>", line 5\\n    p = sales[sales["d"].idxmax()]["product"]')
    >>> hint, fixed is not None
    (None, True)
    """
    fixed = line_fix(etype, message, traceback)
    hint = None if fixed and etype == "KeyError" else error_hint(etype, message)
    return hint, fixed
