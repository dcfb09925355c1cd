"""The code a held answer carries for a selection a runtime note found wrong: the same cell, the selection rewritten.

Told in words to compare a column's values as one spelling, or its dates by month, the 1.5B ran the same selection
again (development runs). The review's hold then carries the cell with the note's fix made in place
(``cave.review.acceptance``); these functions read the notes ``cave.runtimes.matches`` wrote and edit the code's
spans, leaving every other character as the model wrote it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from cave.runtimes.matches import METHODS, SPELLING_MARK

__all__ = ["dated_selection", "one_spelling"]

_SPELLED_COLUMN = re.compile(r"of '([^']+)' that hold (?:it|one label) " + SPELLING_MARK)
_FOLD = ".str.strip().str.lower()"


def one_spelling(code: str, notes: str) -> str | None:
    """``code`` with each selection by, and grouping on, a column that a spelling note in ``notes`` names rewritten
    to take the column's values as one spelling (stripped, lower case); None when nothing changes. Told to compare
    the values as one spelling, the 1.5B ran the same selection again (a development probe): the code to run is
    what it uses.

    >>> note = "Note (line 1): == 'Dog' left out 3 rows of 'species' that hold it spelled another way"
    >>> print(one_spelling("n = (pets['species'] == 'Dog').sum()  # dogs\\nfinal_answer(n)", note))
    n = (pets['species'].str.strip().str.lower() == 'dog').sum()  # dogs
    final_answer(n)
    >>> print(one_spelling("t = d.groupby('species')['fee'].sum()\\nx = d[d.species.isin(['Cat', 'Dog '])]", note))
    t = d.groupby(d['species'].str.strip().str.lower())['fee'].sum()
    x = d[d.species.str.strip().str.lower().isin(['cat', 'dog'])]
    >>> one_spelling("n = (pets['vet'] == 'Lee').sum()", note) is None
    True
    """
    columns = set(_SPELLED_COLUMN.findall(notes))
    parsed = _parsed(code) if columns else None
    if parsed is None:
        return None
    tree, span = parsed

    def text(node: ast.AST) -> str:
        a, b = span(node)
        return code[a:b]

    def column(node: ast.AST) -> bool:
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            return node.slice.value in columns
        return isinstance(node, ast.Attribute) and node.attr in columns

    def words(node: ast.AST) -> list[str] | None:
        items = node.elts if isinstance(node, ast.List | ast.Tuple | ast.Set) else []
        found = [e.value for e in items if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return found if found and len(found) == len(items) else None

    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq | ast.NotEq):
            left, right = node.left, node.comparators[0]
            if column(right) and not column(left):
                left, right = right, left
            if column(left) and isinstance(right, ast.Constant) and isinstance(right.value, str):
                op = "==" if isinstance(node.ops[0], ast.Eq) else "!="
                edits.append((*span(node), f"{text(left)}{_FOLD} {op} {right.value.strip().lower()!r}"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func, args = node.func, node.args
            if func.attr == "isin" and column(func.value) and len(args) == 1 and words(args[0]):
                folded = [w.strip().lower() for w in words(args[0]) or []]
                edits.append((*span(node), f"{text(func.value)}{_FOLD}.isin({list(dict.fromkeys(folded))!r})"))
            elif func.attr == "groupby" and args and isinstance(args[0], ast.Constant) and args[0].value in columns:
                edits.append((*span(args[0]), f"{text(func.value)}[{args[0].value!r}]{_FOLD}"))
            elif (
                func.attr in ("contains", "startswith", "endswith")
                and isinstance(func.value, ast.Attribute)
                and func.value.attr == "str"
                and column(func.value.value)
                and len(args) == 1
                and isinstance(args[0], ast.Constant)
                and isinstance(args[0].value, str)
                and not node.keywords
            ):
                sought = args[0].value.strip().lower()
                edits.append((*span(node), f"{text(func.value.value)}{_FOLD}.str.{func.attr}({sought!r})"))
    return _edited(code, edits)


def _parsed(code: str) -> tuple[ast.Module, Callable[[ast.AST], tuple[int, int]]] | None:
    """The code's tree and a function giving each node's span in ``code`` (characters), None when it does not parse."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    lines = code.splitlines(keepends=True)
    starts = [0]
    for text in lines:
        starts.append(starts[-1] + len(text))

    def at(line: int, col: int) -> int:  # ast offsets are UTF-8 bytes within a line
        return starts[line - 1] + len(lines[line - 1].encode()[:col].decode(errors="ignore"))

    def span(node: ast.AST) -> tuple[int, int]:
        return at(node.lineno, node.col_offset), at(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined,arg-type]

    return tree, span


def _edited(code: str, edits: list[tuple[int, int, str]]) -> str | None:
    """``code`` with each (start, end, text) edit made; None when nothing changes."""
    out, end = code, len(code) + 1
    for a, b, new in sorted(edits, reverse=True):  # right to left: earlier offsets stay valid; nested edits skipped
        if b <= end:
            out, end = out[:a] + new + out[b:], a
    return out if out != code else None


_DATED = re.compile(
    r"values of '([^']+)'; .*? They are dates(?: written another way)?, and ('[^']*'|\"[^\"]*\") (?:names|reads as)"
    r".*?, e\.g\. pd\.to_datetime\(df\['[^']+'\], format='mixed'\)(.*)\.$",
    re.M,
)


def dated_selection(code: str, notes: str) -> str | None:
    """``code`` with each selection by text on a column that a note in ``notes`` says holds dates written several
    ways (``.str.contains('Mar 2025')``, ``== 'March 3, 2025'``) rewritten as the note's comparison of dates; None
    when nothing changes. Told to compare each date's month, the 1.5B sent the same selection again with
    ``na=False`` (a development task): the code to run is what it uses.

    >>> note = ("Note (line 1): .str.contains('Mar 2025') matched none of the 9 values of 'signup_date'; they look like "
    ...         "'2025/02/08', .... They are dates, and 'Mar 2025' names the month 2025-03: compare each date's month, "
    ...         "e.g. pd.to_datetime(df['signup_date'], format='mixed').dt.to_period('M') == '2025-03'.")
    >>> print(dated_selection("m = s[s['signup_date'].str.contains('Mar 2025', na=False)]\\nfinal_answer(len(m))", note))
    import pandas as pd
    m = s[(pd.to_datetime(s['signup_date'], format='mixed').dt.to_period('M') == '2025-03')]
    final_answer(len(m))
    >>> dated_selection("m = s[s['city'].str.contains('Mar')]", note) is None
    True
    >>> dated_selection("m = s[s['signup_date'].str.contains('Apr 2025')]", note) is None  # not the text noted
    True
    """
    found: dict[tuple[str, str], str] = {}  # (column, the text sought) -> the date comparison's tail
    for m in _DATED.finditer(notes or ""):
        try:
            found[(m.group(1), ast.literal_eval(m.group(2)))] = m.group(3)
        except (ValueError, SyntaxError):
            continue
    parsed = _parsed(code) if found else None
    if parsed is None:
        return None
    tree, span = parsed

    def named(node: ast.AST) -> str | None:
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            return node.slice.value if isinstance(node.slice.value, str) else None
        return node.attr if isinstance(node, ast.Attribute) else None

    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        column, sought = None, None
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
            column, sought = node.left, node.comparators[0]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in METHODS
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == "str"
            and node.args
        ):
            column, sought = node.func.value.value, node.args[0]
        if column is None or not (isinstance(sought, ast.Constant) and isinstance(sought.value, str)):
            continue
        key = (named(column) or "", sought.value)
        if key not in found:  # another column, or another text than the one the note says matched nothing
            continue
        a, b = span(column)
        edits.append((*span(node), f"(pd.to_datetime({code[a:b]}, format='mixed'){found[key]})"))
    out = _edited(code, edits)
    if out is None:
        return None
    return out if re.search(r"^import pandas as pd\b", out, re.M) else "import pandas as pd\n" + out
