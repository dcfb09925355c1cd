"""Silent data loss in coercion, said out loud: ``pd.to_numeric(s, errors="coerce")`` (and ``to_datetime`` /
``to_timedelta``) turns every value it cannot parse into NaN/NaT without a word, and whatever is computed next
runs on what is left. A column of estimates written ``"298[110-510]"`` becomes 61% NaN, its max and its
correlation come out wrong, and the run looks done.

``pd.cut`` does the same to every value outside its bins: bins are closed on the right, so with
``bins=[0, 12, 19, ...]`` an age of 0 falls in none and the "Child" mean leaves it out (a development task).

The cell engine rewrites each such call to go through ``audited`` (found by name in the cell's builtins), which
makes the call unchanged and, when non-empty values were lost, writes one note to the cell's stderr (the model
reads it) with the count and examples. Nothing else changes: the result, errors and side effects are the call's.

>>> import ast
>>> tree = ast.parse("x = pd.to_numeric(df['a'], errors='coerce')")
>>> rewrite(tree), print(ast.unparse(tree))
x = __cave_coerce__(pd.to_numeric, (1, "df['a']"), df['a'], errors='coerce')
(True, None)
>>> rewrite(ast.parse("x = pd.to_numeric(df['a'])"))  # raising on bad values loses nothing silently
False
>>> tree = ast.parse("g = pd.cut(df.age, bins=[0, 12, 99])")
>>> rewrite(tree), ast.unparse(tree)
(True, "g = __cave_coerce__(pd.cut, (1, 'df.age'), df.age, bins=[0, 12, 99])")
"""

from __future__ import annotations

import ast
import sys
from typing import Any

__all__ = ["EPOCH_MARK", "HELPER", "LOSS_MARK", "audited", "epoch_note", "loss_note", "numbers_kept", "rewrite"]

LOSS_MARK = "so they now count as missing"  # in every note: how the agent knows an answer came from lossy data
EPOCH_MARK = "as nanoseconds since 1970"  # in every note on integers to_datetime took for nanoseconds
HELPER = "__cave_coerce__"  # the name the rewritten calls use, from the cell's builtins
FUNCTIONS = frozenset({"to_numeric", "to_datetime", "to_timedelta"})  # lossy with errors="coerce"
BINNING = frozenset({"cut"})  # lossy always: as pd.cut / pandas.cut
_PANDAS = frozenset({"pd", "pandas"})
EXAMPLES = 3


def rewrite(tree: ast.Module) -> bool:
    """Route every ``to_numeric/to_datetime/to_timedelta(..., errors="coerce")`` call and every ``pd.cut(...)``
    in ``tree`` through the helper, in place; True when something was rewritten."""
    rewriter = _Rewriter()
    rewriter.visit(tree)
    if rewriter.changed:
        ast.fix_missing_locations(tree)
    return rewriter.changed


class _Rewriter(ast.NodeTransformer):
    changed = False

    def visit_Call(self, node: ast.Call) -> ast.AST:
        source = ast.unparse(node.args[0])[:120] if node.args else ""  # before inner calls are rewritten
        self.generic_visit(node)
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        coerces = any(
            k.arg == "errors" and isinstance(k.value, ast.Constant) and k.value.value == "coerce" for k in node.keywords
        )
        of_pandas = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in _PANDAS
        binning = name in BINNING and of_pandas
        # pd.to_datetime of integers without a unit reads them as nanoseconds: Unix seconds become 1970-01-01
        dated = name == "to_datetime" and of_pandas and not any(k.arg == "unit" for k in node.keywords)
        if not binning and not dated and (name not in FUNCTIONS or not coerces):
            return node
        self.changed = True
        helper = ast.Name(HELPER, ast.Load())
        where = ast.Constant((node.lineno, source))  # the line, and the source text for the note's fix
        return ast.copy_location(ast.Call(helper, [func, where, *node.args], node.keywords), node)


def audited(func: Any, where: int | tuple[int, str], *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)``, then a note on the cell's stderr if it turned non-empty values into NaN/NaT.
    ``where``: the call's line and the source text of its first argument."""
    result = func(*args, **kwargs)
    line, text = where if isinstance(where, tuple) else (where, "")
    try:
        source = args[0] if args else kwargs.get("arg", kwargs.get("x"))
        binned = result[0] if isinstance(result, tuple) else result  # cut(..., retbins=True): (bins, edges)
        name = getattr(func, "__name__", "to_numeric")
        # without errors="coerce" a bad value raises: nothing is lost, and the costly comparison is skipped
        lossy = kwargs.get("errors") == "coerce" or name in BINNING
        note = loss_note(name, line, source, binned, text) if lossy else None
        if note is None and name == "to_datetime" and "unit" not in kwargs:
            note = epoch_note(line, source, result, text)
        from cave.runtimes.capture import first_note

        if note and first_note(line, getattr(source, "name", None)):
            sys.stderr.write(note + "\n")
    except Exception:  # a note must never break the user's code
        pass
    return result


def loss_note(name: str, line: int, source: Any, result: Any, text: str = "") -> str | None:
    """The note for a coercion that lost values (None when it lost none).

    >>> import pandas as pd
    >>> s = pd.Series(["12", "298[110-510]", None, "", "7"], name="deaths")
    >>> print(loss_note("to_numeric", 3, s, pd.to_numeric(s, errors="coerce")))  # doctest: +ELLIPSIS
    Note (line 3): to_numeric(errors="coerce") turned 1 of 3 non-empty values of 'deaths' into NaN, e.g. '298[110-510]'...
    >>> loss_note("to_numeric", 1, s.iloc[[0, 4]], pd.to_numeric(s.iloc[[0, 4]], errors="coerce")) is None
    True
    """
    import numpy as np
    import pandas as pd

    if isinstance(source, pd.DataFrame) or getattr(source, "ndim", 1) > 1:
        return None  # to_datetime of year/month/day columns: no one-to-one values to compare
    scalar = pd.api.types.is_scalar(source)
    values = np.asarray([source] if scalar else list(source), dtype=object)
    out = np.asarray([result] if scalar else list(result), dtype=object)
    if len(values) != len(out):
        return None
    empty = pd.isna(values) | np.array([isinstance(v, str) and not v.strip() for v in values], dtype=bool)
    lost = ~empty & pd.isna(out)
    if not lost.any():
        return None
    plain = (v.item() if isinstance(v, np.generic) else v for v in values[lost])  # 0.0, not np.float64(0.0)
    examples = list(dict.fromkeys(repr(v)[:40] for v in plain))[:EXAMPLES]
    label = getattr(source, "name", None)
    of = f" of {label!r}" if isinstance(label, str) else ""
    counts = f"{int(lost.sum())} of {int((~empty).sum())} non-empty values{of}"
    if scalar:
        counts = f"the value {examples[0]} (and maybe more in a loop)"
        examples = []
    eg = f", e.g. {', '.join(examples)}" if examples else ""
    if name in BINNING:
        return (
            f"Note (line {line}): pd.cut turned {counts} into NaN{eg}: they fall in no bin (bins are closed on the "
            f"right: a value equal to the lowest edge, or past the last, is in none), {LOSS_MARK} and every group leaves them out. If "
            "they belong to a group, pass include_lowest=True or widen the bins; if leaving them out is meant, "
            "keep going."
        )
    missing, kind, fix = _WORDS.get(name, _WORDS["to_numeric"])
    if name == "to_numeric" and text and not scalar:  # the line to run, on the model's own expression
        fix = (
            "keep the number in each: pd.to_numeric("
            f"{text}.astype(str).str.replace(',', '').str.extract(r'(-?\\d+(?:\\.\\d+)?)')[0], errors='coerce')"
        )
    if name == "to_datetime" and text and not scalar and _mixed_reads(values[lost]):
        # the dates are written several ways: format='mixed' reads each (a dev run coerced 80 of 103 and went on)
        fix = f"they read as dates each in its own format: pd.to_datetime({text}, format='mixed', errors='coerce')"
    return (
        f'Note (line {line}): {name}(errors="coerce") turned {counts} into {missing}{eg}. They are not {kind} as '
        f"written, {LOSS_MARK} and every result from them leaves them out. If they hold one, {fix}; if they are "
        "truly missing, keep going."
    )


def _mixed_reads(values: Any) -> bool:
    """Whether half or more of these text values read as dates with ``format='mixed'`` (each parsed on its own).

    >>> _mixed_reads(["Apr 12 2025", "07 May 2025"]), _mixed_reads(["n/a", "unknown"])
    (True, False)
    """
    import pandas as pd

    texts = [v for v in values if isinstance(v, str)][:200]
    if not texts:
        return False
    try:
        read = pd.to_datetime(pd.Series(texts), format="mixed", errors="coerce")
    except (ValueError, TypeError, OverflowError):
        return False
    return bool(read.notna().mean() >= 0.5)


def epoch_note(line: int, source: Any, result: Any, text: str = "") -> str | None:
    """The note for ``pd.to_datetime`` of integers that are Unix times (seconds, milliseconds or microseconds since
    1970) read without a ``unit``, as nanoseconds: every moment lands in the first second of 1970 (a development task: all
    24 hourly readings counted as night, `success`). None when the integers are not such times.

    >>> import pandas as pd
    >>> s = pd.Series([1437730851, 1437734494], name="dt")
    >>> print(epoch_note(3, s, pd.to_datetime(s), "df['dt']"))  # doctest: +ELLIPSIS
    Note (line 3): pd.to_datetime read the integers of 'dt' as nanoseconds since 1970 (1437730851 became 1970-01-01 00:00:01.437730851); ... pd.to_datetime(df['dt'], unit='s') ...
    >>> epoch_note(1, pd.Series([20150724, 20150725]), pd.to_datetime(pd.Series([20150724, 20150725]))) is None
    True
    """
    import numpy as np
    import pandas as pd

    if not isinstance(source, pd.Series) or source.dtype.kind not in "iu" or not isinstance(result, pd.Series):
        return None
    values = source.dropna()
    if len(values) == 0:
        return None
    low, high = int(np.abs(values).min()), int(np.abs(values).max())
    unit = next((u for u, (a, b) in _EPOCH_UNITS.items() if a <= low and high < b), None)
    if unit is None:
        return None
    first = values.iloc[0]
    label = f" of {source.name!r}" if isinstance(source.name, str) else ""
    call = f"pd.to_datetime({text or 'x'}, unit={unit!r})"
    return (
        f"Note (line {line}): pd.to_datetime read the integers{label} {EPOCH_MARK} "
        f"({first} became {result.iloc[0]}); they look like Unix times in {_UNIT_WORDS[unit]} since 1970 "
        f"({pd.to_datetime(first, unit=unit)}): {call} reads them as such."
    )


# Unix times from 1973 to 2286 in each unit: what a column of such integers holds
_EPOCH_UNITS = {"s": (10**8, 10**10), "ms": (10**11, 10**13), "us": (10**14, 10**16)}
_UNIT_WORDS = {"s": "seconds", "ms": "milliseconds", "us": "microseconds"}


_EXTRACT = ".astype(str).str.replace(',', '').str.extract(r'(-?\\d+(?:\\.\\d+)?)')[0]"


def numbers_kept(code: str, notes: str) -> str | None:
    """``code`` with each ``to_numeric(x, errors='coerce')`` whose note (in ``notes``) said it lost numbers written
    with more around them ('298[110-510]') converting the number in each instead; None when there is none. The
    1.5B, told how to keep them, ran the same lossy line again (a development task-59): the code to run is what it uses.

    >>> code = "df['n'] = pd.to_numeric(df['n'], errors='coerce')\\nfinal_answer(df['n'].mean())"
    >>> note = "keep the number in each: pd.to_numeric(df['n'].astype(str).str.replace"
    >>> print(numbers_kept(code, note))
    df['n'] = pd.to_numeric(df['n'].astype(str).str.replace(',', '').str.extract(r'(-?\\d+(?:\\.\\d+)?)')[0], errors='coerce')
    final_answer(df['n'].mean())
    >>> numbers_kept(code, "") is None
    True
    """
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    spans = []
    for node in ast.walk(tree):
        func = node.func if isinstance(node, ast.Call) else None
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name != "to_numeric" or not node.args or node.args[0].end_lineno != node.args[0].lineno:  # type: ignore[union-attr]
            continue
        arg = node.args[0]  # type: ignore[union-attr]
        text = ast.get_source_segment(code, arg)
        if text and f"keep the number in each: pd.to_numeric({text}.astype(str)" in notes:
            spans.append((arg.lineno, arg.col_offset, arg.end_col_offset, text))
    if not spans:
        return None
    lines = code.splitlines()
    for line, start, end, text in sorted(spans, reverse=True):  # right to left, bottom up: offsets stay valid
        row = lines[line - 1].encode()  # ast columns are UTF-8 byte offsets
        lines[line - 1] = (row[:start] + (text + _EXTRACT).encode() + row[end:]).decode()  # type: ignore[operator]
    return "\n".join(lines)


_WORDS = {  # name: (what lost values become, what they are not, how to keep them)
    "to_numeric": (
        "NaN",
        "numbers",
        "extract it first (a range, unit or thousands separator: e.g. s.str.extract(r'(-?[\\d.]+)')[0])",
    ),
    "to_datetime": ("NaT", "dates", "give the format they are in (format=...)"),
    "to_timedelta": ("NaT", "durations", "convert them to a form to_timedelta reads first"),
}
