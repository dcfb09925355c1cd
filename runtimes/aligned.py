"""A column assigned from a Series that lines up with no row, said out loud.

``df['monthly'] = df.set_index('date')['revenue'].resample('ME').sum()`` assigns 12 month-end totals to a frame of
365 rows numbered 0..364. pandas puts each value on the row with the same label, and no row has one, so the new
column is all NaN without a word; everything computed from it next (a diff, an idxmax) fails or is NaN (an analyst
development task: "Encountered all NA values" four times, then max_steps).

The cell engine rewrites ``frame['col'] = value`` to ``frame['col'] = __cave_align__(line, 'col', frame, value)``,
which returns ``value`` unchanged and, when it is a Series with values whose labels match none of the frame's rows,
writes one note to the cell's stderr with both sets of labels and the usual fixes. Nothing else changes.

>>> import ast
>>> tree = ast.parse("t['m'] = s.resample('ME').sum()")
>>> rewrite(tree), ast.unparse(tree)
(True, "t['m'] = __cave_align__(1, 'm', t, s.resample('ME').sum())")
>>> rewrite(ast.parse("t['m'] = 0"))  # a scalar, a list, a literal: nothing to line up
False
"""

from __future__ import annotations

import ast
import re
import sys
from typing import Any

__all__ = ["ALIGN_MARK", "HELPER", "assigned", "maybe", "misaligned_note", "rewrite"]

HELPER = "__cave_align__"  # the name the rewritten assignments use, from the cell's builtins
ALIGN_MARK = "lines up with no row"  # in every note
_ASSIGN = re.compile(r"\[\s*['\"][^'\"]+['\"]\s*\]\s*=(?!=)")


def maybe(code: str) -> bool:
    """Whether ``code`` may assign a column by name (a cheap test before parsing)."""
    return bool(_ASSIGN.search(code))


def rewrite(tree: ast.Module) -> bool:
    """Route ``name['col'] = <expression>`` through the helper, in place; True when any was."""
    changed = False
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target = node.targets[0]
        if not (
            isinstance(target, ast.Subscript)
            and isinstance(target.value, ast.Name)
            and isinstance(target.slice, ast.Constant)
            and isinstance(target.slice.value, str)
        ):
            continue
        if isinstance(node.value, ast.Constant | ast.List | ast.Tuple | ast.Dict | ast.Lambda):
            continue  # nothing with labels
        frame = ast.Name(target.value.id, ast.Load())
        args = [ast.Constant(node.lineno), ast.Constant(target.slice.value), frame, node.value]
        node.value = ast.copy_location(ast.Call(ast.Name(HELPER, ast.Load()), args, []), node.value)
        changed = True
    if changed:
        ast.fix_missing_locations(tree)
    return changed


def assigned(line: int, column: str, frame: Any, value: Any) -> Any:
    """``value`` as it was, after a note on the cell's stderr if it lines up with none of ``frame``'s rows."""
    try:
        note = misaligned_note(line, column, frame, value)
        if note:
            sys.stderr.write(note + "\n")
    except Exception:  # a note must never break the user's code
        pass
    return value


def misaligned_note(line: int, column: str, frame: Any, value: Any) -> str | None:
    """The note for a Series with values assigned as a column of a frame none of whose row labels it holds.

    >>> import pandas as pd
    >>> t = pd.DataFrame({"date": pd.date_range("2025-01-01", periods=60), "revenue": 1.0})
    >>> monthly = t.set_index("date")["revenue"].resample("ME").sum()
    >>> misaligned_note(3, "monthly", t, monthly)[:82]
    "Note (line 3): the Series assigned to 'monthly' lines up with no row: its 3 labels"
    >>> misaligned_note(3, "x", t, t["revenue"] * 2) is None  # the frame's own rows
    True
    """
    import pandas as pd

    if not isinstance(frame, pd.DataFrame) or not isinstance(value, pd.Series) or len(frame) == 0:
        return None
    if value.empty or not value.notna().any() or value.index.isin(frame.index).any():
        return None
    theirs = ", ".join(repr(x) for x in list(value.index[:2]))
    ours = ", ".join(repr(x) for x in list(frame.index[:2]))
    return (
        f"Note (line {line}): the Series assigned to {column!r} {ALIGN_MARK}: its {len(value)} labels ({theirs}, ...) "
        f"are none of the frame's row labels ({ours}, ...), and pandas matches rows by label, so the column is all "
        "NaN. Keep the per-group result in its own variable (e.g. monthly = ...; monthly.diff().idxmax()), or give "
        "each row its group's value: df.groupby(key)['col'].transform('sum'), or df[key].map(per_group)"
    )
