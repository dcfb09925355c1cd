"""Conditions the code adds that the task never states: a selection by a text value the task's words do not name.

"What's the average age of female billionaires?" answered with ``df[(df.gender == 'F') & (df.category ==
'Finance & Investments')]`` (a development probe): the second condition comes from nowhere in the task (a value
the model saw in the data's profile), and the independent attempt, prompted the same way, added it too and agreed.
``unasked(task, code)`` finds such selections: ``==`` / ``!=`` / ``.isin`` / ``.str.contains`` (and the like) with a
text literal whose words the task does not name in any form — a word, its stem or a prefix ('tech' for
'Technology'), an initial ('F' for female), initials ('US' for United States). ``cave.review.acceptance`` holds
an answer once with the note; the answer sent again stands (the task may name it in words no rule reads).

>>> unasked("What's the average age of female billionaires?",
...         "x = df[(df['gender'] == 'F') & (df['category'] == 'Finance & Investments')]['age'].mean()")
["df['category'] == 'Finance & Investments'"]
>>> unasked("How many listings in Brooklyn are entire homes?",
...         "n = len(df[(df.borough == 'Brooklyn') & (df.room_type == 'Entire home/apt')])")
[]
"""

from __future__ import annotations

import ast
import re

from cave.review.contract.words import stem as _stem

__all__ = ["UNAPPLIED_NOTE", "UNASKED_NOTE", "mentioned", "unapplied", "unasked"]

UNASKED_NOTE = (
    "Not accepted yet: the code selects rows by a condition the task does not state:\n{lines}\n"
    "Keep only the conditions the task asks for: drop the others and compute the answer again. If the task does ask "
    "for it in other words, send the same answer again."
)
UNAPPLIED_NOTE = (
    "Not accepted yet: the task states a condition that no code so far applies:\n{lines}\n"
    "Select the rows it names, compute the answer again and pass it to final_answer. If the task does not ask for "
    "it, send the same answer again."
)
_METHODS = frozenset({"contains", "startswith", "endswith", "match", "fullmatch"})
_WORD = re.compile(r"[a-z0-9]+")


def unasked(task: str, code: str) -> list[str]:
    """The selections in ``code`` by a text value that ``task`` never names (as written in the code)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    words = _words(task)
    found: list[str] = []
    for node in ast.walk(tree):
        column, literals = _literals(node)
        if column is not None and mentioned(column.replace("_", " "), words, task, column=True):
            continue  # a value of a column the task names ("vegan dishes": is_vegan == 'Y')
        for literal in literals:
            if not mentioned(literal, words, task):
                text = ast.unparse(node)
                if text not in found and len(text) <= 200:
                    found.append(text)
    return found


def _literals(node: ast.AST) -> tuple[str | None, list[str]]:
    """The column and the text values a selection node compares it with: ``col == 'x'``, ``col.isin(['x', 'y'])``,
    ``col.str.contains('x')``."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq | ast.NotEq):
        for side, other in ((node.left, node.comparators[0]), (node.comparators[0], node.left)):
            column = _column(side)
            if column is not None and isinstance(other, ast.Constant) and isinstance(other.value, str):
                return column, [other.value]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        first = node.args[0]
        if node.func.attr == "isin" and isinstance(first, ast.List | ast.Tuple | ast.Set):
            column = _column(node.func.value)
            values = [e.value for e in first.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            return (column, values) if column is not None else (None, [])
        on_str = isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "str"
        if node.func.attr in _METHODS and on_str and isinstance(first, ast.Constant) and isinstance(first.value, str):
            column = _column(node.func.value.value)
            return (column, [first.value]) if column is not None else (None, [])
    return None, []


def _column(node: ast.AST) -> str | None:
    """The name of the column ``df['col']``, ``df.col`` or ``df['col'].str.lower()`` reads (None: not a column)."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value
        if isinstance(node, ast.Attribute) and node.attr == "str":
            node = node.value
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.attr
    return None


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


# values the task names by a common word that shares no letters with them
_SAME = {
    "female": {"women", "woman", "girl", "girls", "ladies", "lady", "her", "she"},
    "male": {"men", "man", "boy", "boys", "gentlemen", "his", "he"},
    "am": {"morning", "mornings"},
    "pm": {"afternoon", "afternoons", "evening", "evenings", "night", "nights"},
    "saturday": {"weekend", "weekends"},
    "sunday": {"weekend", "weekends"},
    **{
        d: {"weekday", "weekdays", "workday", "workdays"}
        for d in ("monday", "tuesday", "wednesday", "thursday", "friday")
    },
    "y": {"yes"},
    "n": {"no", "not", "without", "non"},
    "true": {"yes"},
    "false": {"no", "not", "without", "non"},
}


def mentioned(literal: str, words: list[str], task: str = "", *, column: bool = False) -> bool:
    """Whether a text value is named by the task's ``words`` in some form; values without letters, patterns and
    markers of missing data are not conditions this check reads (True).

    >>> w = "average age of female us tech billionaires in new york city".split()
    >>> [mentioned(x, w) for x in ("F", "Technology", "United States", "NYC", "Finance & Investments", "N/A")]
    [True, True, True, True, False, True]
    """
    if not re.search(r"[A-Za-z]", literal) or re.search(r"[\\^$*+?()\[\]{}|]", literal):
        return not column
    lit = _words(literal)
    if column:  # a column name: its words past the usual prefixes ("is_vegan", "has_pool")
        lit = [w for w in lit if w not in ("is", "has", "num", "n", "no", "flag", "id")]
        if not lit:
            return False
    elif any(set(words) & _SAME.get(w, set()) for w in lit):
        return True
    if not column and (not lit or set(lit) <= {"na", "n", "a", "nan", "none", "null", "unknown", "missing", "other"}):
        return True
    if task and literal.strip().lower() in task.lower():
        return True
    stems = {_stem(w) for w in words}
    for w in lit:
        s = _stem(w)
        if s in stems or (len(s) >= 3 and any(_prefixed(s, t) for t in stems)):
            return True
    if column:
        return False
    joined = "".join(lit)
    if len(joined) <= 3 and any(t.startswith(joined) for t in words):
        return True  # 'F' for female, 'M' for male
    initials = "".join(w[0] for w in lit)
    if len(lit) >= 2 and initials in words:
        return True  # 'United States' for US
    if len(lit) == 1 and 2 <= len(joined) <= 5:
        return any("".join(x[0] for x in words[i : i + len(joined)]) == joined for i in range(len(words)))  # NYC
    return False


def _prefixed(a: str, b: str) -> bool:
    """One word begins the other, three letters at least ('tech' and 'technolog')."""
    short, long_ = sorted((a, b), key=len)
    return len(short) >= 3 and long_.startswith(short)


# -- the other way: a condition the task states that the code never applies ------------------------------------
_FLAGS = {"yes", "no", "y", "n", "true", "false", "t", "f", "0", "1"}  # the values of a yes/no column
_NOT_CONDITIONS = {"other", "others", "all", "none", "unknown", "total", "missing", "n/a", "na", "nan", "null"}


def unapplied(task: str, code: list[str] | str, tables: dict[str, object]) -> list[str]:
    """The conditions ``task`` states by a value of a given text column ("fire hydrant" fines, where
    ``tickets['violation']`` holds 'Fire Hydrant') or by a yes/no column's name ("unpaid", a column ``paid`` of
    yes/no) that ``code`` (the run's cells) never applies: it reads no column holding that value and never writes
    the value (a development probe: "unpaid fire hydrant fines" summed over every paid ticket; the attempt did the
    same and agreed).

    >>> import pandas as pd
    >>> tickets = pd.DataFrame({"violation": ["Fire Hydrant", "No Permit", "fire hydrant "], "paid": ["yes", "no", "no"],
    ...                         "fine": [115.0, 45.0, 65.0]})
    >>> unapplied("How much is owed in unpaid fire hydrant fines?", "tickets[tickets.violation == 'Fire Hydrant'].fine.sum()", {"tickets": tickets})
    ["'unpaid': tickets['paid'] (yes/no) is never read"]
    >>> unapplied("How many fire hydrant tickets?", "len(tickets)", {"tickets": tickets})
    ["'fire hydrant': a value of tickets['violation'], which is never read"]
    >>> unapplied("Total unpaid fire hydrant fines", "t = tickets[tickets['paid'] == 'no']; t[t['violation'].str.lower().str.strip() == 'fire hydrant'].fine.sum()", {"tickets": tickets})
    []
    """
    import pandas as pd

    text = "\n".join(code) if isinstance(code, list) else code
    low_code = text.lower()
    low = " " + re.sub(r"[^a-z0-9]+", " ", task.lower()) + " "
    named: dict[str, list[tuple[str, str, bool]]] = {}  # a value the task names -> the columns holding it
    found: list[str] = []
    for table, frame in tables.items():
        if not isinstance(frame, pd.DataFrame):
            continue
        for column in list(frame.columns)[:100]:
            if not isinstance(column, str):
                continue
            read = _reads(text, column)
            series = frame[column]
            if series.dtype.kind not in "OSUb" and not pd.api.types.is_string_dtype(series):
                continue
            values = {" ".join(_words(str(v))) for v in series.dropna().unique()[:200]}
            if not 2 <= len(values) <= 50:
                continue
            if values <= _FLAGS:  # a yes/no column: named by its own name, or its negation ("unpaid", "non-smoker")
                name = " ".join(_words(column))
                said = re.search(rf" ((?:un|non |non|not )?{re.escape(name)}) ", low) if name and not read else None
                if said:
                    found.append(f"{said.group(1)!r}: {table}[{column!r}] (yes/no) is never read")
                continue
            for value in values:
                if len(value) >= 3 and value not in _NOT_CONDITIONS and re.search(r"[a-z]", value):
                    if f" {value} " in low:
                        named.setdefault(value, []).append((table, column, read))
    for value, columns in named.items():
        if any(read for *_, read in columns):
            continue  # a column holding it is read: the condition may be applied there
        if value in low_code or value.replace(" ", "") in re.sub(r"[^a-z0-9]", "", low_code):
            continue  # the value is written in the code: applied some way (a derived column, a regex)
        if _in_column_name(value, tables):
            continue  # "fine" the column, not a value of one
        table, column, _ = columns[0]
        found.append(f"{value!r}: a value of {table}[{column!r}], which is never read")
    return found


def _reads(code: str, column: str) -> bool:
    """Whether the code names the column anywhere (``['col']``, ``.col``, a list, a ``query("col == 1")``).

    >>> _reads("t.query('paid == \\'no\\'')", "paid"), _reads("unpaid = 3", "paid")
    (True, False)
    """
    return bool(re.search(rf"(?<![\w]){re.escape(column)}(?![\w])", code))


def _in_column_name(value: str, tables: dict[str, object]) -> bool:
    import pandas as pd

    return any(
        value == " ".join(_words(str(c))) for f in tables.values() if isinstance(f, pd.DataFrame) for c in f.columns
    )
