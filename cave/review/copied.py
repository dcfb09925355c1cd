"""Numbers copied from the wrong column of a printed table: a development task printed ``df.describe()`` (columns JDTDB,
X, Y, Z), then typed the mean and std of Z (1.124736e+08, 4.306439e+07) as those of the X-coordinate the task asks
about, and the run said `success`. Typed values that were shown are no guesses (``cave.review.typed``), so nothing held it.

``wrong_columns(task, value, seen)`` reads the tables pandas printed (right-aligned: a value ends where its column's
name ends), finds the cells that hold each number of the answer, and returns those found only under columns the
task does not name, in a table where it names another. The agent holds the answer once with ``note``.

>>> seen = '''                 X             Y             Z
... mean -2.591630e+08 -2.182199e+08  1.124736e+08
... std   5.352918e+07  1.247702e+08  4.306439e+07'''
>>> wrong_columns("Remove the outliers of the X column; report its new mean.", {"new_mean": 1.124736e+08}, seen)
[Copied(number='1.124736e+08', row='mean', column='Z', named=['X'])]
>>> wrong_columns("Report the new mean of the X column.", {"new_mean": -2.59163e+08}, seen)
[]
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["COPIED_NOTE", "Copied", "note", "wrong_columns"]

COPIED_NOTE = (
    "Not accepted yet: the answer copies numbers from another column of a table printed above than the one the task "
    "asks about:\n{lines}\nCompute each value with code from the column the task names (e.g. {example}) and call "
    "final_answer again."
)

_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|NaN|nan")
# names of statistics that hold a letter a column may be called: "Z-score", "t-test", "p-value", "R-squared"
_TERMS = re.compile(r"\b[A-Za-z][- ](?:scores?|tests?|statistics?|values?|squared|distribution)\b", re.I)


@dataclass
class Copied:
    number: str  # as printed
    row: str  # the row's label: mean, std, an index
    column: str  # the column it was printed under
    named: list[str]  # the columns of that table the task names


def _cells(text: str) -> list[tuple[str, str, str, list[str]]]:
    """Every number printed in a pandas table of ``text``: (number, row label, column, the table's columns)."""
    out = []
    header: str | None = None
    for line in text.splitlines():
        tokens = list(re.finditer(r"\S+", line))
        numeric = len(tokens) >= 2 and all(_NUMBER.fullmatch(t.group(0)) for t in tokens[1:])
        if not numeric:
            header = line if tokens else None
            continue
        if header is None:
            continue
        names = []
        for previous, token in zip(tokens, tokens[1:], strict=False):
            if token.end() > len(header):
                break
            names.append(header[previous.end() : token.end()].strip())
        for token, name in zip(tokens[1:], names, strict=False):
            if name:
                out.append((token.group(0), tokens[0].group(0), name, names))
    return out


def _named(task: str, columns: list[str]) -> list[str]:
    """The columns ``task`` names, as whole words ("the X-coordinate column" names X; "Z-score" names no Z)."""
    text = _TERMS.sub(" ", task)
    return [c for c in columns if c and re.search(rf"(?<![\w.]){re.escape(c)}(?![\w])", text)]


def _numbers(value: Any) -> list[float]:
    """The real numbers of an answer (a dict's values, a list, or one number)."""
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list | tuple) else [value]
    return [float(v) for v in items if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)]


def _same(printed: str, number: float) -> bool:
    """Whether ``number`` is the printed value (to the digits printed: 1.124736e+08 is 112473600.0)."""
    try:
        shown = float(printed)
    except ValueError:
        return False
    if shown == 0 or not math.isfinite(shown):
        return False
    return abs(shown - number) <= max(abs(shown) * 5e-7, 0.005 if "e" not in printed.lower() else 0.0)


def wrong_columns(task: str, value: Any, seen: str) -> list[Copied]:
    """The answer's numbers printed only under columns the task does not name, in a table where it names another."""
    cells = _cells(seen)
    out = []
    for number in _numbers(value):
        found = [c for c in cells if _same(c[0], number)]
        if not found or any(column in _named(task, names) for _, _, column, names in found):
            continue
        printed, row, column, names = found[-1]  # the latest table it was printed in
        named = [c for c in _named(task, names) if c != column]
        if named:
            out.append(Copied(printed, row, column, named))
    return out


def note(found: list[Copied], table: str = "df") -> str:
    """The note that holds an answer copied from the wrong column.

    >>> print(note([Copied("1.124736e+08", "mean", "Z", ["X"])]))  # doctest: +ELLIPSIS
    Not accepted yet: ...
    - 1.124736e+08 is the mean of 'Z' in the printed table; the task asks about 'X'
    Compute each value with code from the column the task names (e.g. df['X'].mean()) and call final_answer again.
    """
    lines = "\n".join(
        f"- {c.number} is the {c.row} of {c.column!r} in the printed table; the task asks about "
        + ", ".join(map(repr, c.named))
        for c in found
    )
    row = found[0].row if found[0].row in ("mean", "std", "min", "max", "median", "count") else "mean"
    return COPIED_NOTE.format(lines=lines, example=f"{table}[{found[0].named[0]!r}].{row}()")
