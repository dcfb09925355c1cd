"""Tagged JSON: the everyday answers that plain JSON does not round-trip, in a form a hostile kernel can send.

numpy scalars (np.float64 is what ``df.col.mean()`` returns), tuples, sets, dicts with non-string keys, dates and
timestamps, non-finite floats, and small pandas/numpy containers of numeric dtypes (an Index such as
``df.columns[mask]``, a Series, a frame, an array). Each is written as ``{"__t": tag, ...}``; decoding only ever
calls the fixed constructors below, so it is as safe to read as plain JSON (``cave.runtimes.transfer``'s
``tjson`` format).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from cave.runtimes.base import TransferError

__all__ = ["NoSafeForm", "from_tagged", "is_type", "qualified_type", "tagged_pandas", "to_tagged"]


def qualified_type(obj: Any) -> str:
    t = type(obj)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def is_type(value: Any, package: str, name: str) -> bool:
    """Whether ``value`` is an instance of ``package``'s class ``name``, without importing the package."""
    return any(c.__qualname__ == name and c.__module__.split(".")[0] == package for c in type(value).__mro__)


_TAG = "__t"
_NUMPY_KINDS = "biufcmM"  # bool, int, uint, float, complex, timedelta, datetime: never object dtypes


class NoSafeForm(Exception):
    pass


def to_tagged(value: Any, budget: list[int], depth: int = 0) -> Any:
    """``value`` as tagged JSON, or raise NoSafeForm.

    >>> import numpy as np
    >>> to_tagged({"n": np.float64(2.5), (1, 2): {3}}, [100])
    {'__t': 'dict', 'items': [['n', {'__t': 'np', 'dtype': 'float64', 'v': 2.5}], [{'__t': 'tuple', 'v': [1, 2]}, {'__t': 'set', 'v': [3]}]]}
    """
    budget[0] -= 1
    if budget[0] < 0 or depth > 20:
        raise NoSafeForm("too large or too deep")
    t = type(value)
    if t in (str, int, bool) or value is None:
        return value
    if t is float:
        return value if math.isfinite(value) else {_TAG: "float", "v": repr(value)}
    if t is list:
        return [to_tagged(v, budget, depth + 1) for v in value]
    if t in (tuple, set, frozenset):
        items = list(value)
        return {_TAG: t.__name__, "v": [to_tagged(v, budget, depth + 1) for v in items]}
    if t is dict:
        if all(type(k) is str and k != _TAG for k in value):
            return {k: to_tagged(v, budget, depth + 1) for k, v in value.items()}
        return {
            _TAG: "dict",
            "items": [[to_tagged(k, budget, depth + 1), to_tagged(v, budget, depth + 1)] for k, v in value.items()],
        }
    if (
        is_type(value, "numpy", "generic")
        and getattr(value, "dtype", None) is not None
        and value.dtype.kind in _NUMPY_KINDS
    ):
        v = str(value) if value.dtype.kind in "mM" else value.item()
        if value.dtype.kind == "c":
            v = [value.real.item(), value.imag.item()]
        elif value.dtype.kind == "f" and not math.isfinite(v):
            v = repr(v)
        return {_TAG: "np", "dtype": value.dtype.str if value.dtype.kind in "mM" else value.dtype.name, "v": v}
    if depth > 0:  # inside a container (a top-level Series/array goes as Arrow/npy): small pandas/numpy values
        nested = _tag_nested(value, budget, depth)
        if nested is not None:
            return nested
    if is_type(value, "pandas", "Timestamp"):
        return {_TAG: "timestamp", "v": value.isoformat()}
    if is_type(value, "pandas", "Timedelta"):
        return {_TAG: "timedelta", "ns": int(value.value)}
    import datetime as dt
    import decimal

    if t in (dt.datetime, dt.date, dt.time):
        return {_TAG: t.__name__, "v": value.isoformat()}
    if t is dt.timedelta:
        return {_TAG: "pytimedelta", "s": value.total_seconds()}
    if t is decimal.Decimal:
        return {_TAG: "decimal", "v": str(value)}
    return _number(value)


def _number(value: Any) -> Any:
    """A number of a type the host may not have (sympy's Integer, an IntEnum, a Fraction) as an int or a float,
    else NoSafeForm: ``final_answer(sp.diff(2*x**2, x).subs(x, 1))`` was refused as "sympy.core.numbers.Integer".

    >>> from fractions import Fraction
    >>> _number(Fraction(3, 4)), type(_number(Fraction(4, 2)))
    (0.75, <class 'float'>)
    """
    import numbers

    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        f = float(value)
        return f if math.isfinite(f) else {_TAG: "float", "v": repr(f)}
    raise NoSafeForm(qualified_type(value))


def tagged_pandas(value: Any, max_items: int) -> dict[str, Any]:
    """A Series or DataFrame as tagged JSON, item by item (at most ``max_items`` values), or raise NoSafeForm: the
    safe form of one that Arrow cannot carry, an object column of mixed plain values (a frame's row ``df.loc[i]``).

    >>> import pandas as pd
    >>> row = pd.DataFrame({"region": ["west"], "amount": [12.5]}).iloc[0]
    >>> from_tagged(tagged_pandas(row, 100)).to_dict()
    {'region': 'west', 'amount': 12.5}
    """
    tagged = _tag_nested(value, [max_items], 1)
    if tagged is None or tagged.get(_TAG) not in ("series", "frame"):
        raise NoSafeForm(qualified_type(value))
    return tagged


def _tag_nested(value: Any, budget: list[int], depth: int) -> dict[str, Any] | None:
    """A pandas Index or Series or a numpy array inside an answer (``{"cols": df.columns[mask]}``), or None.

    >>> import pandas as pd
    >>> to_tagged({"c": pd.Index(["a", "b"])}, [100])["c"]
    {'__t': 'pdindex', 'v': ['a', 'b'], 'name': None}
    """
    dtype = getattr(value, "dtype", None)
    kind = getattr(dtype, "kind", None)
    dtype_name = (
        dtype.name if isinstance(kind, str) and kind in _NUMPY_KINDS else None
    )  # else (object, str, category): inferred on arrival
    if is_type(value, "pandas", "Index") and not is_type(value, "pandas", "MultiIndex"):
        items = [to_tagged(v, budget, depth + 1) for v in value.tolist()]
        return {_TAG: "pdindex", "v": items, "name": to_tagged(value.name, budget, depth + 1)}
    if is_type(value, "pandas", "Series"):
        index = _tag_nested(value.index, budget, depth + 1)
        if index is None:  # a MultiIndex: no tagged form (a Series without its index would not be the same one)
            raise NoSafeForm(f"a Series indexed by a {qualified_type(value.index)}")
        return {
            _TAG: "series",
            "v": [to_tagged(v, budget, depth + 1) for v in value.tolist()],
            "index": index,
            "name": to_tagged(value.name, budget, depth + 1),
            "dtype": dtype_name,
        }
    if is_type(value, "pandas", "DataFrame") and value.columns.is_unique:
        columns = [to_tagged(c, budget, depth + 1) for c in value.columns]
        return {
            _TAG: "frame",
            "columns": columns,
            "v": [_tag_nested(value[c], budget, depth + 1) for c in value.columns],
        }
    if is_type(value, "numpy", "ndarray") and (dtype_name or (kind == "O" and value.ndim == 1)):
        return {_TAG: "ndarray", "v": to_tagged(value.tolist(), budget, depth + 1), "dtype": dtype_name or "object"}
    return None


def from_tagged(value: Any, depth: int = 0) -> Any:
    """The object ``to_tagged`` described (only fixed constructors run; an unknown tag is an error).

    >>> import numpy as np
    >>> v = from_tagged(to_tagged({"n": np.float64(2.5), (1, 2): {3}}, [100]))
    >>> v == {"n": 2.5, (1, 2): {3}}, type(v["n"]).__name__
    (True, 'float64')
    """
    if depth > 22:
        raise TransferError("tagged JSON nested too deep")
    if isinstance(value, list):
        return [from_tagged(v, depth + 1) for v in value]
    if not isinstance(value, dict):
        return value
    tag = value.get(_TAG)
    if tag is None:
        return {k: from_tagged(v, depth + 1) for k, v in value.items()}
    try:
        return _BUILD_TAGGED[tag](value, depth)
    except KeyError as e:
        raise TransferError(f"unknown tagged-JSON type {tag!r}") from e
    except TransferError:
        raise
    except Exception as e:  # malformed payload from the other side
        raise TransferError(f"malformed tagged-JSON {tag!r}: {type(e).__name__}: {e}") from e


def _numpy_scalar(value: dict[str, Any], depth: int) -> Any:
    import numpy as np

    dtype = np.dtype(str(value["dtype"]))
    if dtype.kind not in _NUMPY_KINDS:
        raise TransferError(f"numpy dtype {dtype} is not allowed in tagged JSON")
    v = value["v"]
    if dtype.kind == "c":
        v = complex(float(v[0]), float(v[1]))
    elif dtype.kind == "f" and isinstance(v, str):
        v = float(v)
    return np.array(v, dtype=dtype)[()]


def _builders() -> dict[str, Callable[[dict[str, Any], int], Any]]:
    import datetime as dt
    import decimal

    def items(value: dict[str, Any], depth: int) -> list[Any]:
        return [from_tagged(v, depth + 1) for v in value["v"]]

    def pandas(name: str) -> Any:
        import pandas as pd

        return getattr(pd, name)

    return {
        "float": lambda v, d: float(v["v"]),
        "tuple": lambda v, d: tuple(items(v, d)),
        "set": lambda v, d: set(items(v, d)),
        "frozenset": lambda v, d: frozenset(items(v, d)),
        "dict": lambda v, d: {from_tagged(k, d + 1): from_tagged(x, d + 1) for k, x in v["items"]},
        "np": _numpy_scalar,
        "timestamp": lambda v, d: pandas("Timestamp")(str(v["v"])),
        "timedelta": lambda v, d: pandas("Timedelta")(int(v["ns"]), unit="ns"),
        "datetime": lambda v, d: dt.datetime.fromisoformat(str(v["v"])),
        "date": lambda v, d: dt.date.fromisoformat(str(v["v"])),
        "time": lambda v, d: dt.time.fromisoformat(str(v["v"])),
        "pytimedelta": lambda v, d: dt.timedelta(seconds=float(v["s"])),
        "decimal": lambda v, d: decimal.Decimal(str(v["v"])),
    }


def _pandas_index(value: dict[str, Any], depth: int) -> Any:
    import pandas as pd

    if value.get(_TAG) == "pdindex":
        return pd.Index(from_tagged(value["v"], depth + 1), name=from_tagged(value["name"], depth + 1))
    raise TransferError("a tagged Series needs a tagged index")


def _series(value: dict[str, Any], depth: int) -> Any:
    import pandas as pd

    dtype = _allowed_dtype(value.get("dtype"))
    index = _pandas_index(value["index"], depth + 1)
    return pd.Series(
        from_tagged(value["v"], depth + 1), index=index, name=from_tagged(value["name"], depth + 1), dtype=dtype
    )


def _frame(value: dict[str, Any], depth: int) -> Any:
    import pandas as pd

    columns = from_tagged(value["columns"], depth + 1)
    series = [_series(v, depth + 1) for v in value["v"]]
    if len(columns) != len(series):
        raise TransferError("a tagged DataFrame needs one Series per column")
    return pd.DataFrame(dict(zip(range(len(series)), series, strict=True))).set_axis(columns, axis=1)


def _ndarray(value: dict[str, Any], depth: int) -> Any:
    import numpy as np

    items = from_tagged(value["v"], depth + 1)
    if value.get("dtype") == "object":  # 1-D only: its items were built by the fixed constructors above
        out = np.empty(len(items), dtype=object)
        out[:] = items
        return out
    return np.array(items, dtype=_allowed_dtype(value.get("dtype")))


def _allowed_dtype(name: Any) -> Any:
    import numpy as np

    if name is None:
        return None
    dtype = np.dtype(str(name))
    if dtype.kind not in _NUMPY_KINDS:
        raise TransferError(f"numpy dtype {dtype} is not allowed in tagged JSON")
    return dtype


_BUILD_TAGGED = {**_builders(), "pdindex": _pandas_index, "series": _series, "ndarray": _ndarray, "frame": _frame}
