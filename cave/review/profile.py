"""The data profile the model reads before its first step: an analyst's first look at every given table.

For each column: its dtype and missing count; for a text column, its distinct values with counts (the most
frequent few), the groups of values that differ only by case, spaces or punctuation (``'Brooklyn'``,
``' brooklyn'``, ``'BROOKLYN'``: one place written three ways), and numbers or dates stored as text with the
format they are written in; for a numeric column, its range. For the table: its shape and its exact duplicate
rows. The profile is bounded (about 600 tokens for a 20-column table) and is rendered once, into the stable
system prompt, so it costs nothing after the first call.

>>> import pandas as pd
>>> df = pd.DataFrame({"borough": ["Brooklyn", " brooklyn", "Queens", "BROOKLYN"], "fare": ["$1,200", "30", "7", "8"]})
>>> print(profile(df))
4 rows x 2 columns
- borough: text, 4 distinct: 'Brooklyn' (1 rows), ' brooklyn' (1 rows), 'Queens' (1 rows), 'BROOKLYN' (1 rows); written several ways: 'Brooklyn'/' brooklyn'/'BROOKLYN' (3 rows)
- fare: text, 4 distinct; numbers stored as text (4 of 4, e.g. '$1,200')
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["profile", "spelling_groups", "normal_key"]

LIMIT = 2600  # characters: about 600 tokens, for a 20-column table
TOP = 6  # distinct values listed for a text column
MAX_GROUPS = 3  # groups of spellings shown per column
_NUMBER_TEXT = re.compile(r"^\s*[-+(]?\s*[$€£¥]?\s*[-+]?\d[\d,\s]*(\.\d+)?\s*%?\s*\)?\s*$")
_DATE_HINT = re.compile(r"\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}|\b(?:19|20)\d{2}\b.*\d|[A-Za-z]{3,9}\s+\d{1,2},?\s+\d{4}")


def normal_key(value: str) -> str:
    """What a text value says once case, spaces and punctuation are set aside.

    >>> normal_key("  New-York. "), normal_key("NEW YORK")
    ('newyork', 'newyork')
    """
    return re.sub(r"[\W_]+", "", str(value).casefold())


def spelling_groups(values: Any) -> list[list[str]]:
    """Groups of distinct values that differ only by case, spaces or punctuation, most rows first.

    >>> spelling_groups(["Queens", "queens ", "Bronx", "Queens", "BRONX", "x"])
    [['Queens', 'queens '], ['Bronx', 'BRONX']]
    """
    import pandas as pd

    counts = pd.Series(list(values), dtype="object").dropna().astype(str).value_counts(sort=True)
    groups: dict[str, list[str]] = {}
    for value in counts.index:
        key = normal_key(value)
        if key:
            groups.setdefault(key, []).append(value)
    found = [g for g in groups.values() if len(g) > 1]
    return sorted(found, key=lambda g: -int(counts[g].sum()))


def profile(df: Any, limit: int = LIMIT) -> str:
    """A compact profile of a DataFrame (see the module's doc); at most ``limit`` characters."""
    rows, cols = df.shape
    head = f"{rows} rows x {cols} columns"
    dups = _duplicate_rows(df)
    if dups:
        head += f"; {dups} exact duplicate rows"
    lines = [head]
    for name in df.columns:
        try:
            lines.append("- " + _column(df[name], name))
        except Exception:  # a profile is a courtesy: a column it cannot read is listed by dtype only
            lines.append(f"- {name}: {df[name].dtype}")
    return _bounded(lines, limit)


def _duplicate_rows(df: Any) -> int:
    try:
        return int(df.duplicated().sum())
    except TypeError:  # unhashable cells (lists, dicts)
        return 0


def _column(s: Any, name: Any) -> str:
    import pandas as pd

    missing = int(s.isna().sum())
    miss = f", {missing} missing" if missing else ""
    if pd.api.types.is_bool_dtype(s):
        return f"{name}: bool{miss}, {int(s.sum())} true"
    if pd.api.types.is_numeric_dtype(s):
        return f"{name}: {s.dtype}{miss}" + _range(s)
    if pd.api.types.is_datetime64_any_dtype(s):
        return f"{name}: {s.dtype}{miss}" + (f", {s.min()} .. {s.max()}" if s.notna().any() else "")
    return f"{name}: text{miss}" + _text(s)


def _range(s: Any) -> str:
    values = s.dropna()
    if values.empty:
        return ""
    lo, hi = values.min(), values.max()
    return f", {_short(lo)} .. {_short(hi)}, {values.nunique()} distinct"


def _short(x: Any) -> str:
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def _text(s: Any) -> str:
    values = s.dropna()
    if values.empty:
        return ""
    text = values.astype(str)
    counts = text.value_counts()
    out = f", {len(counts)} distinct"
    stored = _stored_as_text(text)
    if stored:
        return out + "; " + stored
    if len(counts) <= max(TOP * 4, len(text) // 2):  # a category, not free text or ids: show its values
        # "(64 rows)", not "64": a bare count next to a product's name reads like its price to a small model
        shown = ", ".join(f"{_quote(v)} ({n} rows)" for v, n in counts.head(TOP).items())
        out += ": " + shown + (", ..." if len(counts) > TOP else "")
    groups = spelling_groups(text) if len(counts) < 5000 else []
    if groups:
        shown = "; ".join(
            "/".join(_quote(v) for v in g[:4]) + f" ({int(counts[g].sum())} rows)" for g in groups[:MAX_GROUPS]
        )
        more = f"; {len(groups) - MAX_GROUPS} more groups" if len(groups) > MAX_GROUPS else ""
        out += f"; written several ways: {shown}{more}"
    return out


def _stored_as_text(text: Any) -> str:
    """'numbers stored as text (...)' or 'dates stored as text (...)' when most values read as one; else ''."""
    sample = text.head(200)
    n = len(sample)
    numeric = sample[sample.str.match(_NUMBER_TEXT)]
    if len(numeric) >= 0.8 * n:
        example = next((v for v in numeric if re.search(r"[$€£¥,%()]", v)), numeric.iloc[0])
        return f"numbers stored as text ({len(numeric)} of {n}, e.g. {_quote(example)})"
    dated = sample[sample.str.contains(_DATE_HINT)]
    if len(dated) >= 0.8 * n:
        shapes = dated.map(_shape).value_counts()
        formats = ", ".join(f"{_quote(v)}" for v in dated.groupby(dated.map(_shape)).first()[shapes.index[:3]])
        several = f"; {len(shapes)} formats" if len(shapes) > 1 else ""
        return f"dates stored as text (e.g. {formats}{several})"
    return ""


def _shape(value: str) -> str:
    """A value's written form: digits as 9, letters as a (``'2024-01-05'`` -> ``'9999-99-99'``)."""
    return re.sub(r"[A-Za-z]+", "a", re.sub(r"\d", "9", value.strip()))


def _quote(value: Any) -> str:
    text = str(value)
    return repr(text if len(text) <= 30 else text[:27] + "...")


def _bounded(lines: list[str], limit: int) -> str:
    """The lines within ``limit`` characters: each line cut to a fair share, the last ones dropped if need be."""
    share = max(80, limit // max(1, len(lines)))
    out, used = [], 0
    for i, line in enumerate(lines):
        cap = max(share, 80)  # every column keeps a line; long ones are cut to their fair share
        line = line if len(line) <= cap else line[: cap - 3] + "..."
        if used + len(line) + 1 > limit - (30 if i < len(lines) - 1 else 0):  # room for the "more columns" line
            out.append(f"- ... {len(lines) - i} more columns")
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)
