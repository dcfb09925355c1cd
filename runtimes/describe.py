"""Bounded previews of live objects, for ``Runtime.describe()``.

A preview tells an agent what a variable *is* without printing its contents:
shape, dtypes and columns of a DataFrame; length and element types of a container;
signature and first docstring line of a callable; fields of a pydantic model or a
dataclass; dialect and tables of a SQLAlchemy engine. Every preview is at most
``MAX_PREVIEW`` characters, and computing one never raises.

This module is imported both in the host process (InProcessRuntime) and inside the
kernel (KernelRuntime), so it uses only the standard library and never imports a
third-party package itself: a pandas object can only exist if pandas is loaded.

>>> preview([1, 2, "a"])
'list len 3 of int|str'
>>> preview({"a": 1})
"dict len 1 of str -> int; keys: 'a'"
>>> def area(w: float, h: float = 1.0) -> float:
...     '''Area of a rectangle.
...
...     More text.'''
>>> preview(area)
'area(w: float, h: float = 1.0) -> float — Area of a rectangle.'
>>> type_name(1.5), kind_of(area), kind_of(int)
('float', 'function', 'type')
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import reprlib
import sys
import types
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from cave.runtimes.base import VariableInfo, VariableKind

MAX_PREVIEW = 300  # characters; the bound on any one variable's preview
MAX_SIGNATURE = 1200  # characters; the bound on a function's preview (signature + first doc line)
MAX_LISTED = 12  # columns, keys, fields or tables named before "(+N more)"

_repr = reprlib.Repr()
_repr.maxstring = 80
_repr.maxother = 80
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxdict = 6


def clip(text: str, limit: int = MAX_PREVIEW) -> str:
    """Cut ``text`` to ``limit`` characters, marking the cut.

    >>> clip("abcdef", 4)
    'abc…'
    """
    text = " ".join(text.split()) if "\n" in text else text
    return text if len(text) <= limit else text[: limit - 1] + "…"


def type_name(obj: Any) -> str:
    """A short qualified name of ``obj``'s type: ``pandas.DataFrame``, ``int``, ``Point``.

    The public path is preferred when the top-level package re-exports the type.
    """
    t = type(obj)
    mod = t.__module__ or ""
    if mod in ("builtins", "__main__"):
        return t.__qualname__
    top = mod.split(".")[0]
    pkg = sys.modules.get(top)
    if pkg is not None and getattr(pkg, t.__name__, None) is t:
        return f"{top}.{t.__qualname__}"
    return f"{mod}.{t.__qualname__}"


def kind_of(obj: Any) -> VariableKind:
    if isinstance(obj, types.ModuleType):
        return "module"
    if isinstance(obj, type):
        return "type"
    if inspect.isroutine(obj) or type(obj).__name__ == "partial":
        return "function"
    return "variable"


def _names(items: Iterable[str], limit: int = MAX_LISTED) -> str:
    items = list(items)
    shown = ", ".join(items[:limit])
    return shown + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def _elem_types(values: Iterable[Any], sample: int = 20) -> str:
    seen: dict[str, None] = {}
    for i, v in enumerate(values):
        if i >= sample:
            break
        seen[type_name(v)] = None
    return "|".join(seen) or "nothing"


def _has_type(obj: Any, qualified: str) -> bool:
    """isinstance by name ("package.Class"), so we never import the package to check."""
    return _has_type_cls(type(obj), qualified)


def _has_type_cls(cls: type, qualified: str) -> bool:
    package, _, name = qualified.partition(".")
    return any(c.__qualname__ == name and c.__module__.split(".")[0] == package for c in cls.__mro__)


def _first_doc_line(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.strip().splitlines()[0].strip() if doc.strip() else ""


def _signature(obj: Any) -> str:
    try:
        return str(inspect.signature(obj, eval_str=True))  # "x: int", not "x: 'int'", under PEP 563
    except Exception:
        pass
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"


# -- previews by kind ----------------------------------------------------------------------


def _preview_callable(obj: Any) -> str:
    name = getattr(obj, "__name__", None) or type(obj).__name__
    doc = _first_doc_line(obj)
    return f"{name}{_signature(obj)}" + (f" — {doc}" if doc else "")


def _fields_of_class(cls: type) -> str | None:
    if dataclasses.is_dataclass(cls):
        parts = []
        for f in dataclasses.fields(cls):
            t = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", repr(f.type))
            parts.append(f"{f.name}: {t}")
        return "dataclass fields: " + _names(parts)
    model_fields = getattr(cls, "model_fields", None)  # pydantic v2
    if isinstance(model_fields, Mapping) and _has_type_cls(cls, "pydantic.BaseModel"):
        parts = []
        for fname, info in model_fields.items():
            ann = getattr(info, "annotation", None)
            parts.append(f"{fname}: {getattr(ann, '__name__', None) or repr(ann)}")
        return "pydantic model fields: " + _names(parts)
    return None


def _preview_type(cls: type) -> str:
    fields = _fields_of_class(cls)
    if fields:
        return f"class {cls.__qualname__} — {fields}"
    if issubclass(cls, BaseException):
        return f"exception class {cls.__qualname__}"
    doc = _first_doc_line(cls) if cls.__doc__ else ""
    return f"class {cls.__qualname__}{_signature(cls)}" + (f" — {doc}" if doc else "")


def _preview_instance_fields(obj: Any) -> str | None:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        pairs = [f"{f.name}={_repr.repr(getattr(obj, f.name, None))}" for f in dataclasses.fields(obj)]
        return f"{type(obj).__qualname__}({_names(pairs, 8)})"
    if _has_type(obj, "pydantic.BaseModel"):
        fields = getattr(type(obj), "model_fields", {})
        pairs = [f"{n}={_repr.repr(getattr(obj, n, None))}" for n in fields]
        return f"{type(obj).__qualname__}({_names(pairs, 8)})"
    return None


def _preview_dataframe(df: Any) -> str:
    rows, cols = df.shape
    columns = [f"{c}: {t}" for c, t in zip(df.columns, df.dtypes, strict=False)]
    text = f"{rows} rows x {cols} columns; " + _names(columns)
    index = df.index
    if type(index).__name__ != "RangeIndex":
        text += f"; index {type(index).__name__}"
        if index.name is not None:
            text += f" {index.name!r}"
        text += f" {index.dtype}"
    return text


def _preview_series(s: Any) -> str:
    name = f", name {s.name!r}" if s.name is not None else ""
    return f"Series len {len(s)}, dtype {s.dtype}{name}"


def _preview_ndarray(a: Any) -> str:
    text = f"array shape {tuple(a.shape)} dtype {a.dtype}"
    if a.size <= 10:
        text += ": " + " ".join(repr(a.tolist()).split())
    return text


def _preview_engine(engine: Any) -> str:
    url = engine.url
    text = f"{engine.dialect.name} engine {url!r}"  # repr(url) hides the password
    try:
        from sqlalchemy import inspect as sa_inspect  # loaded already: an Engine exists

        tables = sa_inspect(engine).get_table_names()
        text += "; tables: " + (_names(tables) if tables else "(none)")
    except Exception as e:  # an unreachable database must not break describe()
        text += f"; tables unavailable ({type(e).__name__})"
    return text


def _preview_mapping(d: Mapping[Any, Any]) -> str:
    text = f"{type(d).__name__} len {len(d)}"
    if d:
        text += f" of {_elem_types(d.keys())} -> {_elem_types(d.values())}"
        keys = [_repr.repr(k) for _, k in zip(range(MAX_LISTED), d.keys(), strict=False)]
        more = f" (+{len(d) - len(keys)} more)" if len(d) > len(keys) else ""
        text += "; keys: " + ", ".join(keys) + more
    return text


def _preview_module(m: types.ModuleType) -> str:
    version = getattr(m, "__version__", None)
    return f"module {m.__name__}" + (f" {version}" if isinstance(version, str) else "")


_SCALARS = (int, float, complex, bool, type(None))


def preview(obj: Any) -> str:
    """A short description of ``obj`` (never more than MAX_PREVIEW characters, never raises). A function's
    signature is how to call it, so a callable gets up to MAX_SIGNATURE characters: enough for a long one whole."""
    try:
        routine = inspect.isroutine(obj) or type(obj).__name__ == "partial"
        return clip(_preview(obj), MAX_SIGNATURE if routine else MAX_PREVIEW)
    except Exception as e:
        return f"<no preview: {type(e).__name__}>"


def _preview(obj: Any) -> str:
    if isinstance(obj, types.ModuleType):
        return _preview_module(obj)
    if isinstance(obj, type):
        return _preview_type(obj)
    if isinstance(obj, _SCALARS):
        return _repr.repr(obj)
    if isinstance(obj, str):
        return f"str len {len(obj)}: {_repr.repr(obj)}"
    if isinstance(obj, bytes | bytearray | memoryview):
        return f"{type(obj).__name__} len {len(obj)}"
    if inspect.isroutine(obj) or type(obj).__name__ == "partial":
        return _preview_callable(obj)
    for qualified, fn in _BY_TYPE:
        if _has_type(obj, qualified):
            return fn(obj)
    fields = _preview_instance_fields(obj)
    if fields is not None:
        return fields
    if isinstance(obj, Mapping):
        return _preview_mapping(obj)
    if isinstance(obj, list | tuple | set | frozenset) or type(obj).__name__ == "deque":
        return f"{type(obj).__name__} len {len(obj)} of {_elem_types(obj)}"
    return _repr.repr(obj)


# Third-party types recognised by qualified name (their packages are never imported here).
_BY_TYPE: list[tuple[str, Callable[[Any], str]]] = [
    ("pandas.DataFrame", _preview_dataframe),
    ("pandas.Series", _preview_series),
    ("numpy.ndarray", _preview_ndarray),
    ("sqlalchemy.Engine", _preview_engine),
]


# -- a whole namespace ------------------------------------------------------------------------


def user_names(namespace: Mapping[str, Any], hidden: Iterable[str] = ()) -> list[str]:
    """The names an agent should see: no ``_private`` names, no runtime machinery."""
    hidden = set(hidden)
    return [n for n in namespace if not n.startswith("_") and n not in hidden]


def describe_namespace(
    namespace: Mapping[str, Any],
    hidden: Iterable[str] = (),
    registered: Mapping[str, Any] | None = None,
) -> list[VariableInfo]:
    """One VariableInfo per user-visible name, in definition order.

    ``registered`` maps injected names to their ``Registration`` (for kind and description).
    """
    registered = registered or {}
    infos = []
    for name in user_names(namespace, hidden):
        obj = namespace[name]
        reg = registered.get(name)
        infos.append(
            VariableInfo(
                name=name,
                type=type_name(obj),
                kind=reg.kind if reg is not None and reg.kind != "variable" else kind_of(obj),
                preview=preview(obj),
                description=reg.description if reg is not None else None,
                injected=reg is not None,
            )
        )
    return infos


# -- how to use a given object (the system prompt's longer description of injected inputs) -----------
GUIDE_LIMIT = 900  # characters


def guide(obj: Any, name: str) -> str | None:
    """How to use a given object, for the prompt: a DataFrame's columns with dtypes and first rows; an engine's
    tables with their columns and how to query it (SQLAlchemy 2). None for objects the one-line preview covers.

    >>> import pandas as pd
    >>> print(guide(pd.DataFrame({"a": [1, 2], "b": [0.5, None]}), "df"))
    2 rows x 2 columns; a: int64, b: float64 (1 missing)
    first rows:
       a    b
    0  1  0.5
    1  2  NaN
    """
    try:
        if _has_type(obj, "pandas.DataFrame"):
            return _guide_dataframe(obj)
        if _has_type(obj, "sqlalchemy.Engine"):
            return _guide_engine(obj, name)
    except Exception:  # a guide is a courtesy: never break the prompt
        return None
    return None


def _guide_dataframe(df: Any) -> str:
    rows, cols = df.shape
    missing = df.isna().sum()
    columns = []
    for c, t in zip(df.columns, df.dtypes, strict=False):
        n = int(missing[c]) if c in missing.index else 0
        columns.append(f"{c}: {t}" + (f" ({n} missing)" if n else ""))
    text = f"{rows} rows x {cols} columns; " + _names(columns, 30)
    index = df.index
    if type(index).__name__ != "RangeIndex":
        text += f"; index {type(index).__name__} {index.name!r} {index.dtype}"
    if rows:
        import pandas as pd

        with pd.option_context("display.width", 120, "display.max_columns", 12, "display.max_colwidth", 24):
            head = df.head(3).to_string()
        text += "\nfirst rows:\n" + head
    return text[:GUIDE_LIMIT]


def _guide_engine(engine: Any, name: str) -> str:
    from sqlalchemy import inspect as sa_inspect

    insp = sa_inspect(engine)
    tables = []
    for table in insp.get_table_names()[:MAX_LISTED]:
        cols = [f"{c['name']} {c['type']}" for c in insp.get_columns(table)]
        tables.append(f"{table}({', '.join(cols[:MAX_LISTED])}{', ...' if len(cols) > MAX_LISTED else ''})")
    text = f"{engine.dialect.name} database; tables: " + ("; ".join(tables) if tables else "(none)")
    text += f'\nquery it with pandas: pd.read_sql("SELECT ... FROM table", {name}) (SQLAlchemy 2: no {name}.execute)'
    return text[:GUIDE_LIMIT]


def _entries_summary(obj: dict | list | tuple, tables: Collection[str] = (), empty_ok: bool = False) -> str:
    """One line per entry of a small dict/list answer (key, type, value) and warnings for missing values: an
    answer of several named values is reviewed value by value (is each the kind the task asks for?)."""
    items = list(obj.items()) if isinstance(obj, dict) else list(enumerate(obj))
    lines = [f"{type(obj).__name__} of {len(items)}:"]
    numbers = []  # the plain numeric values, for "every value is the same"
    for key, value in items:
        plain = value.item() if hasattr(value, "item") and getattr(value, "ndim", None) == 0 else value
        number = isinstance(plain, int | float) and not isinstance(plain, bool)
        if number:
            numbers.append(plain)
        shown = repr(plain) if isinstance(plain, str | int | float | bool) else preview(value)
        line = f"  {key!r}: {type_name(value)} {shown[:160]}"
        if value is None or (isinstance(plain, float) and plain != plain) or repr(value) == "NaT":
            line += f" (WARNING: {key!r} is {'None' if value is None else 'NaN'})"
        elif (
            isinstance(obj, dict) and not empty_ok and _empty(value)
        ):  # a development task: an empty Series for 12 means
            line += f" (WARNING: {key!r} is empty)"
        elif (
            isinstance(obj, dict) and key not in tables and (rows := _table_rows(value)) > 1
        ):  # one value, rarely a table
            line += f" (WARNING: {key!r} is a whole table of {rows} rows, not one value)"
        elif number and (bad := out_of_range(key, plain)):
            line += f" (WARNING: {bad})"
        lines.append(line)
    if len(items) >= 3 and len(numbers) == len(items) and len({float(v) for v in numbers}) == 1:
        lines[0] += " (WARNING: every value is the same)"  # four different quantities, all 27.7
    elif isinstance(obj, dict) and (shared := shared_statistic(obj)):
        lines[0] += f" (WARNING: {shared})"
    return "\n".join(lines)


# the statistic a value's name says it is (a key's words): two different ones rarely give the same fraction
_STATISTICS = {
    "mean": ("mean", "average", "avg"), "median": ("median",), "std": ("std", "stdev", "stddev", "sd"),
    "variance": ("var", "variance"), "skewness": ("skew", "skewness"), "kurtosis": ("kurt", "kurtosis"),
    "shapiro": ("shapiro", "w"), "p-value": ("p", "pvalue", "pval"), "correlation": ("corr", "correlation", "r"),
}  # fmt: skip


def _statistic(key: str) -> str | None:
    words = re.split(r"[^a-z0-9]+", key.lower())
    found = {stat for stat, names in _STATISTICS.items() if any(w in names for w in words)}
    return found.pop() if len(found) == 1 else None


def shared_statistic(obj: dict) -> str | None:
    """When values named for different statistics are one and the same fraction, which ones (a development task: the
    Shapiro W, 0.9543, sent as the skewness and the kurtosis too).

    >>> shared_statistic({"shapiro_w": 0.9543, "p_value": 0.0027, "skewness": 0.9543, "kurtosis": 0.9543})
    "'shapiro_w', 'skewness', 'kurtosis' are different statistics with the same value 0.9543"
    >>> shared_statistic({"mean_before": 3.25, "mean_after": 3.25}) is None  # one statistic, twice
    True
    >>> shared_statistic({"mean": 2.0, "median": 2.0}) is None  # whole numbers coincide
    True
    """
    by_value: dict[float, list[str]] = {}
    for key, value in list(obj.items())[:50]:
        plain = value.item() if hasattr(value, "item") and getattr(value, "ndim", None) == 0 else value
        if isinstance(key, str) and isinstance(plain, float) and plain == plain and not plain.is_integer():
            by_value.setdefault(plain, []).append(key)
    for value, keys in by_value.items():
        stats = {_statistic(k) for k in keys} - {None}
        if len(stats) >= 2:
            named = [k for k in keys if _statistic(k) is not None]
            return f"{', '.join(repr(k) for k in named)} are different statistics with the same value {value!r}"
    return None


# What a named statistic can be (no parentheses in the reasons: recovery.summary_warnings reads them back): a value
# outside is a wrong answer, whatever the task (a development task sent a p-value
# of -0.13; 30 sent an RMSE that was the mean squared error). Matched on the words of the answer's name.
_RANGES: list[tuple[re.Pattern[str], float, float, str]] = [
    (re.compile(r"(^|_)(p_?val(ue)?s?|pvalue)($|_)"), 0.0, 1.0, "a p-value is between 0 and 1"),
    (re.compile(r"(^|_)(corr|correlation|pearson|spearman|kendall|r_value|rvalue)($|_)"), -1.0, 1.0,
     "a correlation coefficient is between -1 and 1"),
    (re.compile(r"(^|_)(std|sd|stdev|std_dev|standard_deviation|variance|mse|rmse|mae)($|_)"), 0.0, float("inf"),
     "it cannot be negative"),
    (re.compile(r"(^|_)(accuracy|precision|recall|f1|f1_score|auc|roc_auc)($|_)"), 1e-9, 100.0,
     "a score of 0 means no prediction was right: check the target column and the labels"),
    (re.compile(r"(^|_)(r2|r_squared|r2_score|rsquared)($|_)"), float("-inf"), 1.0, "R-squared is at most 1"),
]  # fmt: skip

# Values inside the range that a real computation on real data almost never gives exactly: each was a wrong answer
# that said `success` (a development task: a p-value of 1.0 from a test on the wrong input; another: a model score of 1.0, the
# target among the features; another: skewness and kurtosis of 0.0 from a constant).
_EXACT: list[tuple[re.Pattern[str], tuple[float, ...], str]] = [
    (re.compile(r"(^|_)(p_?val(ue)?s?|pvalue)($|_)"), (1.0,),
     "a p-value of exactly 1 means the test saw no difference at all: check its inputs"),
    (re.compile(r"(^|_)(accuracy|precision|recall|f1|f1_score|auc|roc_auc|model_score)($|_)"), (1.0, 100.0),
     "a perfect score usually means the target is among the features or the rows scored were the training rows"),
    (re.compile(r"(^|_)(skew|skewness|kurt|kurtosis)($|_)"), (0.0,),
     "exactly 0 comes from a constant or an empty column: check which values it was computed on"),
]  # fmt: skip


def out_of_range(key: Any, value: float) -> str | None:
    """Why a named number cannot be right, or None.

    >>> out_of_range("p_value", -0.13), out_of_range("correlation_coefficient", 0.97), out_of_range("mean", -5)
    ("'p_value' is -0.13; a p-value is between 0 and 1", None, None)
    >>> out_of_range("model_rmse", -1.0)
    "'model_rmse' is -1.0; it cannot be negative"
    >>> out_of_range("accuracy_score", 0.0)[:61], out_of_range("accuracy", 0.98), out_of_range("r2", -0.2)
    ("'accuracy_score' is 0.0; a score of 0 means no prediction was", None, None)
    >>> out_of_range("p_value", 1.0)[:46], out_of_range("skewness_value", 0.0)[:30], out_of_range("kurtosis", 0.1)
    ("'p_value' is 1.0; a p-value of exactly 1 means", "'skewness_value' is 0.0; exact", None)
    """
    if not isinstance(key, str) or value != value:
        return None
    name = re.sub(r"[^a-z0-9]+", "_", key.lower()).strip("_")
    for pattern, low, high, why in _RANGES:
        if pattern.search(name) and not low - 1e-12 <= value <= high + 1e-12:
            return f"{key!r} is {value!r}; {why}"
    for pattern, exact, why in _EXACT:
        if pattern.search(name) and value in exact:
            return f"{key!r} is {value!r}; {why}"
    return None


def _empty(value: Any) -> bool:
    """A table, list or dict with nothing in it."""
    if _has_type(value, "pandas.DataFrame") or _has_type(value, "pandas.Series"):
        return len(value) == 0
    return isinstance(value, list | tuple | dict | set) and len(value) == 0  # not a string: an empty note is one


def _table_rows(value: Any) -> int:
    return len(value) if _has_type(value, "pandas.DataFrame") or _has_type(value, "pandas.Series") else 0


def answer_summary(obj: Any, rows: int = 5, tables: Collection[str] = (), empty_ok: bool = False) -> str:
    """What an answer object is, for the model's review before it is accepted: type and shape, the first rows,
    and warnings for answers that are rarely right (empty, None, every value the same). ``tables``: the names the
    task asks a table, dict or list for (no "a whole table, not one value" warning for them); ``empty_ok``: the task
    allows for nothing found ("are there any outliers? if so, which"), so an empty answer gets no warning.

    >>> answer_summary(None)
    'None (WARNING: nothing)'
    >>> import pandas as pd
    >>> answer_summary(pd.Series([3, 3, 3], name="m")).endswith("(WARNING: every value is the same)")
    True
    >>> print(answer_summary({"is_normal": False, "r": float("nan")}))
    dict of 2:
      'is_normal': bool False
      'r': float nan (WARNING: 'r' is NaN)
    >>> answer_summary({"wind": 27.7, "temp": 27.7, "rain": 27.7}).splitlines()[0]
    'dict of 3: (WARNING: every value is the same)'
    """
    warnings = []
    text = f"{type_name(obj)}: {preview(obj)}"
    if obj is None:
        return "None (WARNING: nothing)"
    try:
        if isinstance(obj, dict | list | tuple) and 0 < len(obj) <= MAX_LISTED:  # each value and its type
            text = _entries_summary(obj, tables, empty_ok)
        elif _has_type(obj, "pandas.DataFrame") or _has_type(obj, "pandas.Series"):
            import numpy as np
            import pandas as pd

            if len(obj) == 0 and not empty_ok:
                warnings.append("it is empty")
            elif len(obj) > 1 and bool(np.all(np.asarray(obj.nunique(dropna=False)) <= 1)):
                warnings.append("every value is the same")
            with pd.option_context("display.width", 120, "display.max_columns", 10, "display.max_colwidth", 24):
                text += "\nfirst rows:\n" + obj.head(rows).to_string()
        elif isinstance(obj, str | list | tuple | dict | set) and len(obj) == 0 and not empty_ok:
            warnings.append("it is empty")
    except Exception:  # a summary must not fail the run
        pass
    if warnings:
        text += f" (WARNING: {'; '.join(warnings)})"
    return text[:GUIDE_LIMIT]
