"""dataframe-analysis: profile, summarize and chart pandas DataFrames.

Imported inside the agent's runtime when the skill is activated; everything in ``__all__`` lands in
the agent's namespace. Charts are drawn with matplotlib's object API on an Agg canvas (no pyplot, no
GUI, no global figure state), so they work in any process and never touch the host's backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = [
    "PLOT_DEFAULTS",
    "Profile",
    "frequency",
    "group_summary",
    "pivot",
    "plot_bar",
    "plot_hist",
    "plot_line",
    "plot_scatter",
    "profile",
    "top_n",
]

# Shared with the plotting functions: change an entry (e.g. PLOT_DEFAULTS["dpi"] = 150) to affect every chart.
PLOT_DEFAULTS: dict[str, Any] = {"figsize": (8.0, 4.5), "dpi": 100, "max_bars": 40}


@dataclass
class Profile:
    """A DataFrame's profile: its size and one row of statistics per column (``table``)."""

    rows: int
    columns: int
    memory_bytes: int
    duplicate_rows: int | None
    table: pd.DataFrame

    def __repr__(self) -> str:
        dup = "?" if self.duplicate_rows is None else self.duplicate_rows
        head = (
            f"Profile: {self.rows} rows x {self.columns} columns, {self.memory_bytes / 1e6:.2f} MB, "
            f"{dup} duplicate rows"
        )
        with pd.option_context("display.width", 160, "display.max_columns", 20, "display.max_rows", 60):
            return head + "\n" + self.table.to_string()

    def columns_with_nulls(self) -> list[str]:
        """Names of the columns that have at least one missing value."""
        return [str(c) for c in self.table.index[self.table["nulls"] > 0]]


def _safe(fn, default=None):
    try:
        return fn()
    except (TypeError, ValueError):  # unhashable or unorderable values (lists, mixed objects)
        return default


def profile(df: pd.DataFrame) -> Profile:
    """Profile every column: dtype, non-null and null counts, null %, distinct values, top value, numeric stats.

    >>> p = profile(pd.DataFrame({"a": [1, 2, None], "b": ["x", "x", "y"]}))
    >>> p.table.loc["a", "nulls"], p.table.loc["b", "top"]
    (np.int64(1), 'x')
    """
    rows = []
    n = len(df)
    for col in df.columns:
        s = df[col]
        nulls = int(s.isna().sum())
        row: dict[str, Any] = {
            "column": str(col),
            "dtype": str(s.dtype),
            "non_null": n - nulls,
            "nulls": nulls,
            "null_pct": round(100.0 * nulls / n, 2) if n else 0.0,
            "unique": _safe(lambda s=s: int(s.nunique(dropna=True))),
            "top": None,
            "mean": None,
            "std": None,
            "min": None,
            "median": None,
            "max": None,
        }
        valid = s.dropna()
        if pd.api.types.is_bool_dtype(s):
            row["top"] = _safe(lambda v=valid: v.mode().iloc[0] if len(v) else None)
            row["mean"] = float(valid.mean()) if len(valid) else None
        elif pd.api.types.is_numeric_dtype(s):
            if len(valid):
                row.update(
                    mean=float(valid.mean()),
                    std=float(valid.std()) if len(valid) > 1 else None,
                    min=float(valid.min()),
                    median=float(valid.median()),
                    max=float(valid.max()),
                )
        elif pd.api.types.is_datetime64_any_dtype(s):
            if len(valid):
                row.update(min=str(valid.min()), median=str(valid.median()), max=str(valid.max()))
        else:
            row["top"] = _safe(lambda v=valid: v.value_counts().index[0] if len(v) else None)
        rows.append(row)
    table = pd.DataFrame(rows).set_index("column")
    return Profile(
        rows=n,
        columns=df.shape[1],
        memory_bytes=int(df.memory_usage(deep=True).sum()),
        duplicate_rows=_safe(lambda: int(df.duplicated().sum())),
        table=table,
    )


def _as_list(value: str | list[str] | tuple | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def group_summary(
    df: pd.DataFrame,
    by: str | list[str],
    values: str | list[str] | None = None,
    aggs: list[str] | tuple = ("count", "mean", "sum", "min", "max"),
    sort_by: str | None = None,
    ascending: bool = False,
) -> pd.DataFrame:
    """Group ``df`` by ``by`` and aggregate ``values`` (default: every numeric column) with ``aggs``.

    Returns a flat table: the group columns, then one ``<value>_<agg>`` column per pair, e.g.
    ``group_summary(sales, "region", "amount", ["sum", "mean"])`` -> region, amount_sum, amount_mean.
    ``sort_by`` names one of the output columns.
    """
    keys = _as_list(by)
    missing = [k for k in keys + _as_list(values) if k not in df.columns]
    if missing:
        raise KeyError(f"columns {missing} not in the DataFrame; it has {list(df.columns)}")
    cols = _as_list(values) or [c for c in df.select_dtypes("number").columns if c not in keys]
    if not cols:
        raise ValueError("no numeric columns to aggregate; pass values=[...]")
    out = df.groupby(keys, dropna=False, observed=True)[cols].agg(list(aggs))
    out.columns = [f"{c}_{a}" for c, a in out.columns]
    out = out.reset_index()
    if sort_by is not None:
        out = out.sort_values(sort_by, ascending=ascending, ignore_index=True)
    return out


def pivot(
    df: pd.DataFrame,
    index: str | list[str],
    columns: str | list[str],
    values: str,
    aggfunc: str = "sum",
    fill_value: Any = None,
    margins: bool = False,
) -> pd.DataFrame:
    """A pivot table: ``index`` rows x ``columns`` columns of ``aggfunc(values)`` (margins adds 'All')."""
    return pd.pivot_table(
        df,
        index=index,
        columns=columns,
        values=values,
        aggfunc=aggfunc,
        fill_value=fill_value,
        margins=margins,
        observed=True,
    )


def top_n(df: pd.DataFrame, column: str, n: int = 10, ascending: bool = False) -> pd.DataFrame:
    """The ``n`` rows with the largest (or, ascending=True, smallest) ``column``; missing values last."""
    return df.sort_values(column, ascending=ascending, na_position="last").head(n)


def frequency(df: pd.DataFrame, column: str, n: int = 20, dropna: bool = False) -> pd.DataFrame:
    """The ``n`` most frequent values of ``column`` with count and share (0..1)."""
    counts = df[column].value_counts(dropna=dropna)
    out = pd.DataFrame({column: counts.index, "count": counts.to_numpy()})
    out["share"] = out["count"] / max(int(counts.sum()), 1)
    return out.head(n)


# -- charts ---------------------------------------------------------------------------------------------
def _figure():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=PLOT_DEFAULTS["figsize"])
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _save(fig, ax, path: str | Path, title: str | None) -> str:
    if title:
        ax.set_title(title)
    path = Path(path)
    if path.suffix.lower() != ".png":
        path = path.with_suffix(".png")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=PLOT_DEFAULTS["dpi"], bbox_inches="tight")
    return str(path.resolve())


def plot_bar(
    data: pd.Series | pd.DataFrame,
    x: str | None = None,
    y: str | list[str] | None = None,
    path: str = "bar.png",
    title: str | None = None,
    horizontal: bool = False,
) -> str:
    """Bar chart to a PNG file; returns its absolute path.

    ``data`` is a Series (index = labels) or a DataFrame with label column ``x`` and value column(s) ``y``.
    At most PLOT_DEFAULTS["max_bars"] bars are drawn (the first ones: sort before plotting).
    """
    if isinstance(data, pd.Series):
        frame = data.to_frame(name=data.name or "value")
        labels, ys = frame.index.astype(str), [frame.columns[0]]
    else:
        if x is None:
            raise ValueError("pass x= (the label column) when plotting a DataFrame")
        frame, labels, ys = data, data[x].astype(str), _as_list(y) or list(data.select_dtypes("number").columns)
    limit = int(PLOT_DEFAULTS["max_bars"])
    frame, labels = frame.iloc[:limit], list(labels[:limit])
    fig, ax = _figure()
    width = 0.8 / len(ys)
    positions = range(len(labels))
    for i, col in enumerate(ys):
        offsets = [p + (i - (len(ys) - 1) / 2) * width for p in positions]
        values = frame[col].to_numpy(dtype=float, na_value=float("nan"))
        (ax.barh if horizontal else ax.bar)(offsets, values, width, label=str(col))
    (ax.set_yticks if horizontal else ax.set_xticks)(list(positions), labels)
    if not horizontal and len(labels) > 8:
        ax.tick_params(axis="x", labelrotation=60)
    if len(ys) > 1:
        ax.legend()
    return _save(fig, ax, path, title)


def plot_line(
    df: pd.DataFrame,
    x: str,
    y: str | list[str],
    path: str = "line.png",
    title: str | None = None,
) -> str:
    """Line chart of column(s) ``y`` against ``x`` (sorted by x) to a PNG file; returns its path."""
    data = df.sort_values(x)
    fig, ax = _figure()
    for col in _as_list(y):
        ax.plot(data[x], data[col], label=str(col))
    ax.set_xlabel(str(x))
    if len(_as_list(y)) > 1:
        ax.legend()
    else:
        ax.set_ylabel(str(_as_list(y)[0]))
    if pd.api.types.is_datetime64_any_dtype(data[x]):
        fig.autofmt_xdate()
    return _save(fig, ax, path, title)


def plot_hist(df: pd.DataFrame, column: str, path: str = "hist.png", bins: int = 30, title: str | None = None) -> str:
    """Histogram of a numeric column (missing values dropped) to a PNG file; returns its path."""
    fig, ax = _figure()
    ax.hist(df[column].dropna().to_numpy(dtype=float), bins=bins)
    ax.set_xlabel(str(column))
    ax.set_ylabel("count")
    return _save(fig, ax, path, title)


def plot_scatter(
    df: pd.DataFrame,
    x: str,
    y: str,
    path: str = "scatter.png",
    title: str | None = None,
    hue: str | None = None,
) -> str:
    """Scatter plot of ``y`` against ``x``, one colour per value of ``hue`` (optional); returns its path."""
    fig, ax = _figure()
    groups = df.groupby(hue, observed=True) if hue else [(None, df)]
    for key, part in groups:
        ax.scatter(part[x], part[y], s=12, alpha=0.7, label=None if key is None else str(key))
    ax.set_xlabel(str(x))
    ax.set_ylabel(str(y))
    if hue:
        ax.legend(title=str(hue), fontsize="small")
    return _save(fig, ax, path, title)
