"""The bounds a task's words set, and the code's comparisons against them: "2000 and beyond" and "at least 10"
include their number (>=), "above 4" and "less than 18" leave it out (>, <), "between 3 and 4" includes both ends.
``misread_bound`` finds a comparison that reads a bound the other way (development tasks); ``unapplied_bounds`` a
bound whose number no code of the run uses at all (510: "only brands with at least 10 hotels" never applied).
A number with decimals (p > 0.05) and the answer's own range ("a float between -1 and 1") are no bounds.

``cave.review.misreadings`` holds an answer once for the first; ``cave.review.acceptance`` for the second.
"""

from __future__ import annotations

import ast
import re

from cave.review.estimators import MAX_FIX_LINES, all_nodes, quoted, rewritten

__all__ = [
    "BOUNDS_FIX",
    "BOUND_NOTE",
    "UNAPPLIED_NOTE",
    "bounds_fixed",
    "misread_bound",
    "unapplied",
    "unapplied_bounds",
    "unapplied_operations",
]


BOUND_NOTE = (
    "Not accepted yet: the code's comparison does not match the bound the task's words set:\n{lines}\n"
    "'at least', 'or more', 'and beyond', 'at most', 'or less' and 'between A and B' include the number itself "
    "(>=, <=, .between(A, B)); 'above', 'more than', 'over', 'below', 'less than', 'under' leave it out (>, <). "
    "Fix the comparison and call final_answer again."
)
_NUM = r"(?<![-\d.])(\d+(?:\.\d+)?)"  # not the 1 of "-1 and less"
_AT_LEAST = re.compile(
    _NUM + r"\s+(?:and|or)\s+(?:beyond|later|after|above|more|older|over|greater|higher|onwards?|newer)\b"
    r"|\b(?:at\s+least|no\s+(?:less|fewer)\s+than|not\s+(?:less|fewer)\s+than|a\s+minimum\s+of|since)\s+" + _NUM,
    re.I,
)
_AT_MOST = re.compile(
    _NUM + r"\s+(?:and|or)\s+(?:below|less|earlier|before|under|fewer|younger|lower)\b"
    r"|\b(?:at\s+most|no\s+more\s+than|not\s+more\s+than|a\s+maximum\s+of|up\s+to)\s+" + _NUM,
    re.I,
)
# "above 4", "more than 100": not "no more than" (an upper bound, above), not "more than 4 or equal to it"
_ABOVE = re.compile(
    r"(?<!\bno\s)(?<!\bnot\s)\b(?:above|over|exceeding|(?:more|greater|higher|larger|older)\s+than)\s+"
    + _NUM
    + r"(?!\s+or\s+equal)",
    re.I,
)
_BELOW = re.compile(
    r"(?<!\bno\s)(?<!\bnot\s)\b(?:below|under|(?:less|fewer|lower|smaller|younger)\s+than)\s+"
    + _NUM
    + r"(?!\s+or\s+equal)",
    re.I,
)
_BETWEEN = re.compile(r"\bbetween\s+" + _NUM + r"\s+and\s+" + _NUM, re.I)
_FLIPPED = {ast.Gt: ast.Lt, ast.Lt: ast.Gt, ast.GtE: ast.LtE, ast.LtE: ast.GtE}
# what each comparison in the code should have been, by the bound the number is in
_SIGN = {ast.Gt: ">", ast.Lt: "<", ast.GtE: ">=", ast.LtE: "<="}
_WANTED = {ast.Gt: (">=", "lower"), ast.Lt: ("<=", "upper"), ast.GtE: (">", "above"), ast.LtE: ("<", "below")}


# "a number between 0 and 1", "each value lies between -1 and 1": the answer's range, not a filter
# "is a float between -1 and 1", "should be greater than 0 and less than 1": the answer's range, not a filter
# (while "count the values above 10" is one)
_RANGE_OF = re.compile(
    r"(?:\b(?:floats?|integers?|decimals?|numbers?(?!\s+of))\b"
    r"|\b(?:is|are|be|a|an)\s+(?:\w+\s+){0,2}(?:values?|percentages?|proportions?|ratios?|scores?)\b"
    r"|\b(?:rang(?:e|es|ing)|lies|lie|falls?|should\s+be|must\s+be|will\s+be)\b)"
    r"[^.;\n]{0,40}$",
    re.I,
)


def _is_range(task: str, m: re.Match[str]) -> bool:
    return bool(_RANGE_OF.search(task[max(0, m.start() - 80) : m.start()]))


def _bounds(pattern: re.Pattern[str], task: str) -> dict[float, str]:
    """The whole numbers ``pattern`` bounds in ``task``, with the words. A bound with decimals (p > 0.05, R² above
    0.7) is left out: it compares a continuous value that never equals it, so the two readings agree."""
    out: dict[float, str] = {}
    for m in pattern.finditer(task):
        number = m.group(1) or m.group(2)
        if "." not in number and not _is_range(task, m):
            out.setdefault(float(number), m.group(0))
    return out


def _task_bounds(task: str) -> dict[str, dict[float, str]]:
    """The numbers the task bounds, by the comparison its words mean: an inclusive lower bound (>=), an inclusive
    upper one (<=), a strict lower one (>), a strict upper one (<). A number the words bound both ways on one side
    ("more than 4" and "4 or more"; bins "between 0 and 10, between 10 and 20") is left out: no reading is sure."""
    lower, upper = _bounds(_AT_LEAST, task), _bounds(_AT_MOST, task)
    above, below = _bounds(_ABOVE, task), _bounds(_BELOW, task)
    low_ends: dict[float, str] = {}
    high_ends: dict[float, str] = {}
    for m in _BETWEEN.finditer(task):
        for number, ends in ((m.group(1), low_ends), (m.group(2), high_ends)):
            if "." not in number and not _is_range(task, m):
                ends.setdefault(float(number), m.group(0))
    unsure = set(low_ends) & set(high_ends)
    lower |= {k: v for k, v in low_ends.items() if k not in unsure}
    upper |= {k: v for k, v in high_ends.items() if k not in unsure}
    for inclusive, strict in ((lower, above), (upper, below)):
        for number in set(inclusive) & set(strict):
            del inclusive[number], strict[number]
    return {"lower": lower, "upper": upper, "above": above, "below": below}


def _comparisons(code: str) -> list[tuple[ast.Compare, ast.AST, ast.cmpop, ast.Constant]]:
    """Each comparison of something with a number, as (node, the thing, op, the number): ``3 <= x < 4`` is two,
    ``2000 < x`` reads ``x > 2000``."""
    out = []
    for node in all_nodes(code):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for left, op, right in zip(sides, node.ops, sides[1:], strict=False):
            if isinstance(left, ast.Constant) and not isinstance(right, ast.Constant):
                left, right, op = right, left, _FLIPPED.get(type(op), type(op))()
            if isinstance(right, ast.Constant) and type(right.value) in (int, float):
                out.append((node, left, op, right))
    return sorted(out, key=lambda c: (c[0].lineno, c[0].col_offset))


def misread_bound(task: str, code: str) -> list[str]:
    """The comparisons of ``code`` that read a bound of ``task`` the other way: leave out the number an inclusive
    bound names (a development task: "for the years 2000 and beyond", ``df['Year'] > 2000``; another: "between 3 and 4",
    ``< 4``) or take in the number a strict one leaves out (513: "above 4", ``>= 4``).

    >>> misread_bound("the mean for the years 2000 and beyond", "m = df[df['Year'] > 2000].x.mean()")
    ["line 1: `df['Year'] > 2000` leaves 2000 out; the task says '2000 and beyond': df['Year'] >= 2000"]
    >>> misread_bound("hotels with at least 100 reviews", "d = df[df.reviews >= 100]")
    []
    >>> misread_bound("ages 65 or less", "d = df[65 > df.age]")
    ["line 1: `65 > df.age` leaves 65 out; the task says '65 or less': df.age <= 65"]
    >>> misread_bound("ratings between 3 and 4, and above 4", "m = (r >= 3) & (r < 4)\\nh = r >= 4")
    ["line 1: `r < 4` leaves 4 out; the task says 'between 3 and 4': r <= 4", "line 2: `r >= 4` takes 4 in; the task says 'above 4': r > 4"]
    """
    bounds = _task_bounds(task)
    if not any(bounds.values()):
        return []
    out = []
    for node, left, op, right in _comparisons(code):
        if type(op) not in _WANTED:
            continue
        fixed, kind = _WANTED[type(op)]
        said = bounds[kind].get(float(right.value))
        if said is None:
            continue
        number, thing = ast.unparse(right), ast.unparse(left)
        shown = quoted(code, node) if len(node.ops) == 1 else f"{thing} {_SIGN[type(op)]} {number}"
        wrong = f"leaves {number} out" if kind in ("lower", "upper") else f"takes {number} in"
        out.append(f"line {node.lineno}: `{shown}` {wrong}; the task says {said!r}: {thing} {fixed} {number}")
    return list(dict.fromkeys(out))  # one line for a comparison written twice on a line


BOUNDS_FIX = "Your code with each bound read as the task says (run it):\n```python\n{code}\n```"


def bounds_fixed(task: str, code: str) -> str | None:
    """``code`` with each comparison ``misread_bound`` finds written the task's way, or None when there is none or
    one sits in a chained comparison (a development task: told "`r < 4` ... r <= 4", the 1.5B rewrote the other side of
    the range, ``(r <= 4) & (r < 5)``; a whole cell to run is what it copies right).

    >>> print(bounds_fixed("ratings between 3 and 4, and above 4", "m = (r >= 3) & (r < 4)\\nh = r >= 4"))
    m = (r >= 3) & (r <= 4)
    h = r > 4
    >>> bounds_fixed("ratings above 4", "h = r > 4") is None
    True
    """
    bounds = _task_bounds(task)
    if not any(bounds.values()):
        return None
    spans = []
    for node, left, op, right in _comparisons(code):
        if type(op) not in _WANTED or float(right.value) not in bounds[_WANTED[type(op)][1]]:
            continue
        if len(node.ops) != 1 or node.end_lineno != node.lineno:
            return None
        spans.append((node, f"{ast.unparse(left)} {_WANTED[type(op)][0]} {ast.unparse(right)}"))
    return rewritten(code, spans) if len(code.splitlines()) <= MAX_FIX_LINES else None


UNAPPLIED_NOTE = (
    "Not accepted yet: the task names something that no code of yours does:\n{lines}\n"
    "Apply each one to the data (keep only the rows or groups a bound names, compare the value it bounds, transform "
    "the column as it says) and call final_answer again."
)
_NOT_A_FILTER = re.compile(r"\s*(?:decimal|digits?|significant|places?|%|percent|[ap]\.?m\b|:)", re.I)
_FILLER = {"in", "and", "or", "as", "the", "of", "to", "for", "a", "an", "than", "with", "from", "on", "at"}


def _numbers_used(codes: list[str]) -> tuple[set[float], str]:
    """The numbers the code writes (numeric constants) and the text of its strings (a query, a SQL statement)."""
    numbers: set[float] = set()
    strings = []
    for code in codes:
        for node in all_nodes(code):
            if isinstance(node, ast.Constant) and type(node.value) in (int, float):
                numbers.add(float(node.value))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                strings.append(node.value)
    return numbers, "\n".join(strings)


def unapplied_bounds(task: str, codes: list[str]) -> list[str]:
    """The bounds of ``task`` ("at least 10 hotels", "more than 100 reviews") whose number no code of the run
    writes, in a comparison or anywhere else (a development task: "only brands with at least 10 hotels" never applied,
    the wrong brand sent as `success`).

    >>> unapplied_bounds("Among hotels with at least 100 reviews, only brands with at least 10 hotels.",
    ...                  ["d = df[df.review_count >= 100]", "b = d.groupby('brand').star.mean().idxmax()"])
    ["'at least 10 hotels': no code uses 10"]
    >>> unapplied_bounds("Only brands with at least 10 hotels.", ["n = 10", "b = counts[counts >= n]"])
    []
    >>> unapplied_bounds("Rows with more than 5 items.", ["d = pd.read_sql('SELECT * FROM t WHERE items > 5', db)"])
    []
    """
    bounds = _task_bounds(task)
    said = {n: words for kind in bounds.values() for n, words in kind.items()}
    if not said:
        return []
    numbers, strings = _numbers_used(codes)
    out = []
    for number, words in said.items():
        where = re.search(re.escape(words) + r"(?!\d)", task)  # "at least 10", not the start of "at least 100"
        after = task[where.end() : where.end() + 30] if where else ""
        if _NOT_A_FILTER.match(after) or number in numbers:
            continue
        if re.search(rf"(?<![\d.]){int(number)}(?:\.0+)?(?![\d.])", strings):
            continue
        noun = re.match(r"\s+([A-Za-z]+)", after)  # "at least 10 hotels"
        shown = f"{words} {noun.group(1)}" if noun and noun.group(1).lower() not in _FILLER else words
        out.append(f"{shown!r}: no code uses {int(number)}")
    return out


# operations a task names that code must do somewhere: the words, and the calls (or operators) that do it
_OPERATIONS = (
    # not a bare "log": log.txt, a log file, the server log (BFCL's file system)
    (re.compile(r"\blogarithm\w*|\blog[- ]?transform\w*|\blog10\b|\bnatural log\b|\blog[- ]scale\b"
                r"|\b(?:the|a) log of\b", re.I),
     re.compile(r"\blog(?:10|2|1p)?\s*\(|\.log(?:10|2|1p)?\b|FunctionTransformer"),
     "a logarithm", "np.log(x) (base 10: np.log10(x))"),
    (re.compile(r"\bsquare[- ]root\b", re.I), re.compile(r"\bsqrt\b|\*\*\s*\(?\s*(?:0?\.5|1\s*/\s*2)"),
     "a square root", "np.sqrt(x)"),
    # "some repairs were entered twice; count each once" (a development probe: the mean over every row, `success`)
    (re.compile(r"\b(?:entered|recorded|logged|listed|stored|included|appears?|counted)\s+(?:twice|more than once)\b"
                r"|\bduplicat\w*|\bcount (?:each|every) (?:\w+ )?once\b|\bdouble[- ](?:entered|counted)\b", re.I),
     re.compile(r"drop_duplicates|duplicated|\.unique\(|nunique|\bset\(|DISTINCT", re.I),
     "duplicate rows out", "df = df.drop_duplicates() first"),
)  # fmt: skip


def unapplied_operations(task: str, codes: list[str]) -> list[str]:
    """The operations ``task`` names (a logarithm, a square root) that no code of the run does (a development task: a
    column named ``log_gdppercap`` that held GDP per capita itself; its mean sent as the log's, `success`).

    >>> unapplied_operations("Create the GDP per capita in logarithmic scale (base 10).", ["df['log_gdp'] = df.gdp"])
    ["'logarithmic': no code takes a logarithm (e.g. np.log(x) (base 10: np.log10(x)))"]
    >>> unapplied_operations("Apply a log transformation.", ["df['x'] = np.log(df.x)"])
    []

    A power transform is no logarithm (a development task: yeo-johnson, standardized, sent as the log's mean 0.0 and
    standard deviation 1.0):

    >>> unapplied_operations("Apply a log transformation.", ["x = PowerTransformer(method='yeo-johnson').fit_transform(a)"])
    ["'log transformation': no code takes a logarithm (e.g. np.log(x) (base 10: np.log10(x)))"]

    Rows the task says are entered twice:

    >>> unapplied_operations("Mean cost? Some repairs were entered twice.", ["repairs['cost'].mean()"])
    ["'entered twice': no code takes duplicate rows out (e.g. df = df.drop_duplicates() first)"]
    """
    text = "\n".join(codes)
    out = []
    for words, calls, what, example in _OPERATIONS:
        said = next((m for m in words.finditer(task) if not _conditional(task, m.start())), None)
        if said and not calls.search(text):
            out.append(f"{said.group(0)!r}: no code takes {what} (e.g. {example})")
    return out


def _conditional(task: str, at: int) -> bool:
    """Whether the sentence around ``at`` makes it conditional ("If the p-value is below 0.05, apply a log
    transformation": with normal data no log is taken)."""
    ends = [m.end() for m in re.finditer(r"[.!?](?=\s)|\n", task[:at])]  # not the point of 0.05
    start = ends[-1] if ends else 0
    return bool(re.search(r"\b(?:if|when|whether|unless)\b", task[start:at], re.I))


def unapplied(task: str, codes: list[str]) -> list[str]:
    """The bounds and the operations of ``task`` that no code of the run applies."""
    return unapplied_bounds(task, codes) + unapplied_operations(task, codes)
