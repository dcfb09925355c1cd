"""Selections that pick nothing real, said out loud: a filter that matched no row, and an idxmax over a wide tie.

A filter that matched nothing: ``signups['signup_date'].str.contains('Mar 2025')`` over dates
written ``2025-03-04`` selects no row, and "how many users signed up in March?" comes back 0 with a ``success``
(a development task). The same happens to ``df['region'] == 'north'`` on ``'North'``, to
``df['year'] == '2024'`` on numbers, and to ``isin([...])`` with values spelled another way.

The cell engine rewrites such comparisons (``==`` with a constant on one side, ``.str.contains/startswith/
endswith/match/fullmatch(...)``, ``.isin([literals])``) to go through ``matched`` (found by name in the cell's
builtins), which computes the same result and, when a pandas Series with values came out all False, writes one
note to the cell's stderr with a few of the values it was compared against. Nothing else changes.

An idxmax over a wide tie: ``requests.groupby('timestamp').size()`` makes one group per timestamp, all of size
1, and ``.idxmax()`` picks the first; "what hour gets the most requests?" came back 2 for 9 (analyst
a development task). ``.idxmax()`` / ``.idxmin()`` of a Series go through the same helper, which notes a tie of at least
3 entries that is at least a fifth of them: the grouping is finer than the question.

>>> import ast
>>> tree = ast.parse("n = (df['region'] == 'north').sum()")
>>> rewrite(tree), ast.unparse(tree)
(True, "n = __cave_match__(1, '==', df['region'], 'north').sum()")
>>> tree = ast.parse("m = s.str.contains('Mar', case=False)")
>>> rewrite(tree), ast.unparse(tree)
(True, "m = __cave_match__(1, 'contains', s, 'Mar', case=False)")
>>> rewrite(ast.parse("if i == 0 or j % 2 == 0:\\n    pass"))  # numbers against names or arithmetic: loops
False
>>> tree = ast.parse("for c in names:\\n    part = df[df['continent'] == c]")  # a column against a loop's value
>>> rewrite(tree), ast.unparse(tree).splitlines()[1]
(True, "    part = df[__cave_match__(2, '==', df['continent'], c)]")

One value written several ways: ``df['species'] == 'Dog'`` over 'Dog', ' dog' and 'DOG' selects a third of the
dogs, and a development probe sent their mean fee as a `success`. The note names the other spellings and the
comparison that takes them all; an ``idxmax`` over groups whose labels split one value that way ('Acme', 'acme ',
'ACME' ranked as three suppliers) is noted too (``cave.runtimes.selection_fixes.one_spelling`` rewrites the cell for the review's note).

A group picked by its position: ``df.groupby('eligible')['runs'].mean().iloc[0]`` is the group whose label sorts
first (eligible = 0), and a development task sent it as the mean of the eligible players, `success`. ``.iloc[k]`` with a
constant ``k`` goes through the helper too, which notes which label the position holds when the index is one of
named labels (a groupby's, value_counts'), not a plain row number.

The largest of a text column: ``df['site'].max()`` is the alphabetically last site ('99'), not the site of the
largest ``positive_diffsel`` (a development task). ``.max()`` / ``.min()`` go through the helper, which says so when the
Series holds text.

A variable's strongest correlate, itself: ``corr['Happiness Score'].abs().idxmax()`` is 'Happiness Score' (its
correlation with itself is 1), and a development task sent it as the variable most correlated with the happiness score.
The idxmax note says so when the pick is the Series' own name at a value of 1.

A test over missing values: ``shapiro(df['nsamplecov'])`` on a column with NaN returns a p-value of nan, and
``"yes" if p > 0.05 else "no"`` then says "no" for any data (a development task). Calls of scipy.stats' tests by name
(``shapiro(x)``, ``stats.pearsonr(a, b)``) go through the helper, which notes a nan result that came from NaN
in the input, with the call that drops them.
"""

from __future__ import annotations

import ast
import operator
import re
import sys
from typing import Any

from cave.runtimes.sought import EXAMPLES, as_timestamp, date_part, looks_dated, month_of, near_fix, near_values
from cave.runtimes.value_notes import (
    ESTIMATES,
    across_note,
    nan_test_note,
    numtext_note,
    range_note,
    self_pick_note,
    text_extreme_note,
)
from cave.runtimes.value_notes import (
    is_text as _is_text,
)

__all__ = [
    "HELPER",
    "MARK",
    "POLARITY_MARK",
    "TIE_MARK",
    "empty_note",
    "label_note",
    "matched",
    "maybe",
    "rewrite",
    "spelling_note",
    "split_note",
    "tie_note",
]

HELPER = "__cave_match__"  # the name the rewritten comparisons use, from the cell's builtins
MARK = "matched none of"  # in every note: how the agent knows an answer came from an empty selection
TIE_MARK = "entries tied at"  # in every tie note
POLARITY_MARK = "usually means yes"  # in every note on a 'not' value picked from the yes group
SPELLING_MARK = "spelled another way"  # in every note on a selection that missed other spellings of its value
_NO, _YES = frozenset({"0", "0.0", "false", "no", "n", "f"}), frozenset({"1", "1.0", "true", "yes", "y", "t"})
_NEGATIONS = frozenset({"not", "non", "no", "without", "never"})
METHODS = frozenset({"contains", "startswith", "endswith", "match", "fullmatch", "extract"})
# scipy.stats functions that return nan when their input holds NaN (nan_policy='propagate', the default)
TESTS = frozenset(
    {"shapiro", "normaltest", "jarque_bera", "pearsonr", "spearmanr", "kendalltau", "pointbiserialr", "linregress",
     "ttest_ind", "ttest_rel", "ttest_1samp", "mannwhitneyu", "wilcoxon", "kruskal", "f_oneway", "levene",
     "bartlett", "zscore", "skewtest", "kurtosistest", "anderson", "kstest"}
)  # fmt: skip
_STATS_MODULES = frozenset({"stats", "st", "ss", "scipy_stats"})
_HINT = re.compile(
    r"==|[<>]=?\s*-?\d|\.sort_values\(|\.str\.|\.isin\(|\.idxm(?:ax|in)\(|\.iloc\[|\.(?:max|min)\(\)|"
    r"\.(?:diff|pct_change)\(|\b(?:" + "|".join(sorted(TESTS | ESTIMATES)) + r")\("
)
PICKS = frozenset({"idxmax", "idxmin"})
ACROSS = frozenset({"diff", "pct_change"})  # a column's change from the row above: noted where rows take turns
EXTREMES = frozenset({"max", "min"})


def maybe(code: str) -> bool:
    """Whether ``code`` may hold a comparison to audit (a cheap test before parsing)."""
    return bool(_HINT.search(code))


def rewrite(tree: ast.Module) -> bool:
    """Route the comparisons that select rows by a value through the helper, in place; True when any was."""
    rewriter = _Rewriter()
    # names the code binds to a list of constants (weekdays = ['Monday', ...]): an .isin of them is one of literals
    rewriter.lists = {
        n.targets[0].id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign)
        and len(n.targets) == 1
        and isinstance(n.targets[0], ast.Name)
        and _literals(n.value)
    }
    rewriter.visit(tree)
    if rewriter.changed:
        ast.fix_missing_locations(tree)
    return rewriter.changed


def _text_column(node: ast.AST) -> bool:
    """``df['continent']``: a column read by its name."""
    return (
        isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)
    )


def _constant(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (str, int, float)


def _literals(node: ast.AST) -> bool:
    return isinstance(node, ast.List | ast.Tuple | ast.Set) and bool(node.elts) and all(map(_constant, node.elts))


class _Rewriter(ast.NodeTransformer):
    changed = False
    target: str | None = None  # the name the statement being visited assigns, for the .iloc note
    lists: set[str] = set()  # names bound to a list of constants in this code

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        name = node.targets[0].id if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) else None
        self.target = name
        self.generic_visit(node)
        self.target = None
        return node

    def _helper(self, node: ast.AST, op: str, source: ast.expr, args: list[ast.expr], keywords: list) -> ast.AST:
        self.changed = True
        call = ast.Call(
            ast.Name(HELPER, ast.Load()), [ast.Constant(node.lineno), ast.Constant(op), source, *args], keywords
        )  # type: ignore[attr-defined]
        return ast.copy_location(call, node)

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if len(node.ops) == 1 and type(node.ops[0]) in _BOUNDS and _column_read(node.left):
            right = node.comparators[0]
            if _constant(right) and type(right.value) in (int, float):  # type: ignore[attr-defined]
                return self._helper(node, _BOUNDS[type(node.ops[0])], node.left, [right], [])
        if len(node.ops) != 1 or not isinstance(node.ops[0], ast.Eq):
            return node
        left, right = node.left, node.comparators[0]
        if _constant(left) and not _constant(right):
            left, right, op = right, left, "==r"  # 'north' == s: the constant on the left
        else:
            op = "=="
        if _text_column(left) and isinstance(right, ast.Name):
            # a column against a loop's value (for c in ['asia', ...]: df[df['continent'] == c]; a development task typed
            # continents the table spells 'Asia' and 'Americas', and pearsonr failed on the empty rows to max_steps)
            return self._helper(node, op, left, [right], [])
        if not _constant(right) or _constant(left):
            return node
        # a str is compared with anything; a number only with a column (df['year'], df.year), never with a name
        # or arithmetic: `j % 2 == 0` in a loop is not a filter, and auditing it would cost a call per pass
        column = isinstance(left, ast.Attribute) or (
            isinstance(left, ast.Subscript)
            and isinstance(left.slice, ast.Constant)
            and isinstance(left.slice.value, str)
        )
        if not isinstance(right.value, str) and not column:  # type: ignore[attr-defined]
            return node
        return self._helper(node, op, left, [right], [])

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        value, index = node.value, node.slice
        if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):  # .iloc[-1]
            index = index.operand
        position = isinstance(index, ast.Constant) and type(index.value) is int
        if isinstance(node.ctx, ast.Load) and isinstance(value, ast.Attribute) and value.attr == "iloc" and position:
            named = [ast.keyword("target", ast.Constant(self.target))] if self.target else []
            return self._helper(node, "iloc", value.value, [node.slice], named)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        # a test by name (from scipy.stats import shapiro); with a nan_policy the code chose what NaN does
        policy = any(k.arg == "nan_policy" for k in node.keywords)
        if isinstance(func, ast.Name) and func.id in TESTS | ESTIMATES and node.args and not policy:
            return self._helper(node, "test", func, list(node.args), node.keywords)
        if not isinstance(func, ast.Attribute):
            return node
        if func.attr in METHODS and isinstance(func.value, ast.Attribute) and func.value.attr == "str" and node.args:
            return self._helper(node, func.attr, func.value.value, list(node.args), node.keywords)
        listed = isinstance(node.args[0], ast.Name) and node.args[0].id in self.lists if node.args else False
        if func.attr == "isin" and len(node.args) == 1 and not node.keywords and (_literals(node.args[0]) or listed):
            return self._helper(node, "isin", func.value, list(node.args), [])
        if func.attr in PICKS and not node.args:
            return self._helper(node, func.attr, func.value, [], node.keywords)
        if func.attr == "sort_values":
            return self._helper(node, "sort", func.value, list(node.args), node.keywords)
        frame = func.value.value if isinstance(func.value, ast.Subscript | ast.Attribute) else None
        if func.attr in ACROSS and isinstance(frame, ast.Name) and _column_read(func.value):
            # df['units'].diff(): the frame goes along, for the note on rows of several things in turn
            named = [ast.keyword("_cave_frame", ast.Name(frame.id, ast.Load())), ast.keyword("_cave_name", ast.Constant(frame.id))]  # fmt: skip
            return self._helper(node, func.attr, func.value, list(node.args), [*node.keywords, *named])
        if func.attr in EXTREMES and not node.args and not node.keywords:
            return self._helper(node, func.attr, func.value, [], [])
        if func.attr in TESTS | ESTIMATES and _stats_module(func.value) and node.args and not policy:
            return self._helper(node, "test", func, list(node.args), node.keywords)
        return node


_BOUNDS = {ast.Gt: ">", ast.GtE: ">=", ast.Lt: "<", ast.LtE: "<="}


def _column_read(node: ast.AST) -> bool:
    """``df['age']`` or ``df.age``: a column, where a comparison with a number is a filter."""
    return _text_column(node) or (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name))


def _stats_module(node: ast.expr) -> bool:
    """``stats`` / ``st`` / ``scipy.stats``: where a call by that name is scipy's test, not a pandas method."""
    if isinstance(node, ast.Name):
        return node.id in _STATS_MODULES
    return isinstance(node, ast.Attribute) and node.attr == "stats"


def matched(line: int, op: str, source: Any, *args: Any, **kwargs: Any) -> Any:
    """The comparison itself, then a note on the cell's stderr if a Series with values matched none of them."""
    if op == "==":
        result = source == args[0]
        if result is True or result is False:  # plain Python values (a loop's dict items): the fast way out
            return result
    elif op == "==r":
        result = args[0] == source
    elif op == "isin":
        result = source.isin(*args)
    elif op in PICKS:
        result = getattr(source, op)(**kwargs)
    elif op == "iloc":
        result = source.iloc[args[0]]
    elif op in EXTREMES:
        result = getattr(source, op)()
        if not isinstance(result, str):  # a number, a frame's row: nothing to say, and no more work
            return result
    elif op == "sort":
        result = source.sort_values(*args, **kwargs)
    elif op in ACROSS:
        frame, name = kwargs.pop("_cave_frame", None), kwargs.pop("_cave_name", "df")
        result = getattr(source, op)(*args, **kwargs)
    elif op == "test":
        result = source(*args, **kwargs)
    elif op in _BOUND_OPS:
        result = _BOUND_OPS[op](source, args[0])
        if result is True or result is False:  # plain Python values: the fast way out
            return result
    else:
        result = getattr(source.str, op)(*args, **kwargs)
    try:
        if op in PICKS:
            note = (
                self_pick_note(op, line, source, result)
                or tie_note(op, line, source, kwargs)
                or split_note(op, line, source, result)
            )
        elif op == "iloc":
            note = label_note(line, source, args[0], kwargs.get("target"))
        elif op in EXTREMES:
            note = numtext_note(op, line, source) or text_extreme_note(op, line, source, result)
        elif op == "sort":
            by = kwargs.get("by", args[0] if args else None)
            note = numtext_note(op, line, source, by)
        elif op == "test":
            note = nan_test_note(line, source, args, result)
        elif op in ACROSS:
            note = across_note(op, line, source, frame, name)
        elif op in _BOUND_OPS:
            note = range_note(op, line, source, args[0], result)
        else:
            from cave.runtimes.capture import may_note

            value = args[0] if args else None
            note = empty_note(op, line, source, value, result)
            if note is None and may_note(line, getattr(source, "name", None)):  # it counts the column's values
                note = spelling_note(op, line, source, value, kwargs)
        if note:
            from cave.runtimes.capture import first_note

            if first_note(line, getattr(source, "name", None)):
                sys.stderr.write(note + "\n")
    except Exception:  # a note must never break the user's code
        pass
    return result


def empty_note(op: str, line: int, source: Any, value: Any, result: Any) -> str | None:
    """The note for a comparison over a Series that selected nothing (None when something matched).

    >>> import pandas as pd
    >>> s = pd.Series(["2025-03-04", "03/15/2025", None], name="signup_date")
    >>> print(empty_note("contains", 2, s, "Mar 2025", s.str.contains("Mar 2025")))  # doctest: +ELLIPSIS
    Note (line 2): .str.contains('Mar 2025') matched none of the 2 values of 'signup_date'; they are only '2025-03-04', '03/15/2025'. ...
    >>> empty_note("==", 1, s, "03/15/2025", s == "03/15/2025") is None
    True
    >>> print(empty_note("extract", 3, s, "(Mar)", s.str.extract("(Mar)")))  # doctest: +ELLIPSIS
    Note (line 3): .str.extract('(Mar)') matched none of the 2 values of 'signup_date'; they are only ...
    >>> empty_note("extract", 3, s, "(2025)", s.str.extract("(2025)")) is None
    True
    """
    pd = sys.modules.get("pandas")
    if pd is None or not isinstance(source, pd.Series) or len(source) == 0:
        return None
    if op in ("==", "==r") and (isinstance(value, list | tuple | set | dict) or getattr(value, "shape", ()) != ()):
        return None  # a name that held a Series or an array: an elementwise comparison, not a sought value
    if op == "extract":  # a pattern that fits no value: every row's part is NaN (a development task: r'(\d{4}-\d{2})'
        # over '01/01/2015 00:00' made an empty per-month mean, confirmed as the answer)
        if not isinstance(result, pd.Series | pd.DataFrame) or bool(result.notna().to_numpy().any()):
            return None
    elif not isinstance(result, pd.Series) or len(result) == 0:
        return None
    elif result.dtype.kind != "b" and "bool" not in str(result.dtype):
        return None
    elif bool(result.fillna(False).any()):
        return None
    values = source.dropna()
    if len(values) == 0:
        return None
    shown = list(dict.fromkeys(repr(v.item() if hasattr(v, "item") else v)[:40] for v in values.iloc[:5000]))
    label = f" of {source.name!r}" if isinstance(source.name, str) else ""
    what = _selection(op, value)
    text = _is_text(values)
    if isinstance(value, int | float) and text:
        fix = f"They are text: compare with {str(value)!r}, or convert the column first."
    elif isinstance(value, str) and values.dtype.kind in "iuf" and re.fullmatch(r"-?\d+(\.\d+)?", value.strip()):
        fix = f"They are numbers: compare with {value.strip()} (no quotes)."
    elif near := near_values(values, value):
        fix = near_fix(what, op, value, near)
    elif op in ("==", "==r") and text and (stamp := as_timestamp(value, values)) is not None:
        column = _column(source)
        day = "" if ":" in stamp else ".dt.normalize()"  # a day sought: every time of that day
        fix = (
            f"They are dates written another way, and {value!r} reads as {stamp}: compare them as dates, e.g. "
            f"pd.to_datetime({column}, format='mixed'){day} == pd.Timestamp('{stamp}')."
        )
    elif text and (month := month_of(value)) and looks_dated(values):
        column = _column(source)
        fix = (
            f"They are dates, and {value!r} names the month {month}: compare each date's month, e.g. "
            f"pd.to_datetime({column}, format='mixed').dt.to_period('M') == '{month}'."
        )
    elif (part := date_part(value)) and text and looks_dated(values):
        column = _column(source)
        fix = (
            f"They are dates, and {value!r} names {part[0]}: compare that part of each date, e.g. "
            f"pd.to_datetime({column}, format='mixed'){part[1]}.isin({value!r})."
        )
    else:
        fix = (
            "Match what the values hold (their case, spaces and format; parse dates with "
            "pd.to_datetime(..., format='mixed') and compare .dt.month / .dt.year); if no row truly matches, keep going."
        )
    if len(shown) <= 2 * EXAMPLES and values.nunique() == len(shown):  # a category: all of them, so none is guessed
        seen = f"they are only {', '.join(shown)}"
    else:
        seen = f"they look like {', '.join(shown[:EXAMPLES])}{', ...' if len(shown) > EXAMPLES else ''}"
    return f"Note (line {line}): {what[:80]} {MARK} the {len(values)} values{label}; {seen}. {fix}"


_BOUND_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}


def _selection(op: str, value: Any) -> str:
    """How a note names the selection: ``== 'North'``, ``.isin([...])``, ``.str.contains('x')``."""
    return {"==": f"== {value!r}", "==r": f"== {value!r}", "isin": f".isin({value!r})"}.get(op, f".str.{op}({value!r})")


def _column(source: Any) -> str:
    """The Series as a fix's code names it: ``df['region']``, or ``df[col]`` when it has no name."""
    return f"df[{source.name!r}]" if isinstance(source.name, str) else "df[col]"


def _spelled(text: str) -> str:
    return re.sub(r"[\s_\-]+", " ", text).strip().casefold()


def spelling_note(op: str, line: int, source: Any, value: Any, kwargs: dict[str, Any] | None = None) -> str | None:
    """The note for a selection by a text value that matched some rows but not the same value spelled another way
    (case, spaces, underscores): ``df['borough'] == 'Brooklyn'`` over 'Brooklyn', ' brooklyn' and 'BROOKLYN'
    counts only the first. None when no other spelling of the value is there.

    >>> import pandas as pd
    >>> s = pd.Series(["Brooklyn", " brooklyn", "BROOKLYN", "Queens", "Brooklyn"], name="borough")
    >>> print(spelling_note("==", 4, s, "Brooklyn"))  # doctest: +ELLIPSIS
    Note (line 4): == 'Brooklyn' left out 2 rows of 'borough' that hold it spelled another way (' brooklyn', 'BROOKLYN'); ...
    >>> spelling_note("==", 4, s, "Queens") is None, spelling_note("contains", 1, s, "Bro", {"case": False}) is None
    (True, True)
    >>> print(spelling_note("isin", 2, s, ["Queens", "brooklyn"]))  # doctest: +ELLIPSIS
    Note (line 2): .isin(['Queens', 'brooklyn']) left out 4 rows ... e.g. df['borough'].str.strip().str.lower().isin(['queens', 'brooklyn']).
    """
    pd = sys.modules.get("pandas")
    if pd is None or not isinstance(source, pd.Series) or len(source) == 0:
        return None
    if op in ("==", "==r", "contains", "startswith", "endswith"):
        sought = [value]
    elif op == "isin" and isinstance(value, list | tuple | set):
        sought = list(value)
    else:
        return None
    sought = [v for v in sought if isinstance(v, str) and v.strip()]
    if not sought or (op == "contains" and (kwargs or {}).get("case") is False):
        return None
    if not _is_text(source):
        return None
    counts = source.dropna().value_counts()
    if len(counts) > 100_000:  # an id column: no spellings to speak of, and too many values to look at
        return None
    texts = [v for v in counts.index if isinstance(v, str)]
    if op in ("==", "==r", "isin"):
        wanted = {_spelled(v) for v in sought}
        exact = set(sought)
        others = [v for v in texts if v not in exact and _spelled(v) in wanted]
    else:  # a substring: other values that hold it in another case
        wanted = [_spelled(v) for v in sought]
        method = {"contains": str.__contains__, "startswith": str.startswith, "endswith": str.endswith}[op]
        others = [
            v for v in texts
            if not any(method(v, w) for w in sought) and any(method(_spelled(v), w) for w in wanted)
        ]  # fmt: skip
    if not others:
        return None
    rows = int(sum(counts[v] for v in others))
    label = f" of {source.name!r}" if isinstance(source.name, str) else ""
    column, what = _column(source), _selection(op, value)
    shown = ", ".join(repr(v) for v in others[:EXAMPLES])
    fix = (
        f"compare the values as one spelling, e.g. {column}.str.strip().str.lower().isin("
        f"{[_spelled(v) for v in sought][:EXAMPLES]!r})"
        if op == "isin"
        else f"compare the values as one spelling, e.g. {column}.str.strip().str.lower() == "
        f"{_spelled(str(sought[0]))!r}"
        if op in ("==", "==r")
        else f"match them all, e.g. {column}.str.{op}({sought[0]!r}, case=False)"
        if op == "contains"
        else f"match them all, e.g. {column}.str.strip().str.lower().str.{op}({_spelled(str(sought[0]))!r})"
    )
    return (
        f"Note (line {line}): {what[:80]} left out {rows} rows{label} that hold it {SPELLING_MARK} ({shown}"
        f"{', ...' if len(others) > EXAMPLES else ''}); {fix}."
    )


def tie_note(op: str, line: int, source: Any, kwargs: dict[str, Any] | None = None) -> str | None:
    """The note for an idxmax/idxmin of a Series whose extreme is shared by many entries (None otherwise).

    >>> import pandas as pd
    >>> per_timestamp = pd.Series([1, 1, 1, 1, 1], index=pd.date_range("2025-01-01 02:00", periods=5, freq="min"))
    >>> print(tie_note("idxmax", 4, per_timestamp))  # doctest: +ELLIPSIS
    Note (line 4): idxmax() picked the first of 5 entries tied at 1 (of 5): ...
    >>> tie_note("idxmax", 1, pd.Series([3, 9, 9, 1])) is None  # two winners: a real tie, the task decides
    True
    """
    pd = sys.modules.get("pandas")
    if pd is None or not isinstance(source, pd.Series) or len(source) < 3:
        return None
    values = source.dropna()
    if len(values) < 3 or values.dtype.kind not in "iufb":
        return None
    extreme = values.max() if op == "idxmax" else values.min()
    tied = int((values == extreme).sum())
    if tied < 3 or tied * 5 < len(values):
        return None
    shown = extreme.item() if hasattr(extreme, "item") else extreme
    return (
        f"Note (line {line}): {op}() picked the first of {tied} {TIE_MARK} {shown!r} (of {len(values)}): so many ties "
        "usually mean the grouping is finer than the question (one group per timestamp or id, each of one row); "
        "group by what the task asks about (e.g. df['timestamp'].dt.hour) and look at the counts first."
    )


def split_note(op: str, line: int, source: Any, result: Any) -> str | None:
    """The note for an idxmax/idxmin over groups whose labels split one value written several ways: a total per
    supplier over 'Acme', 'acme ' and 'ACME' ranks three parts of Acme, and the pick may be another supplier's.

    >>> import pandas as pd
    >>> per = pd.Series([50, 40, 30, 20], index=pd.Index(["Cobalt", "Acme", "acme ", "ACME"], name="supplier"))
    >>> print(split_note("idxmax", 3, per, "Cobalt"))  # doctest: +ELLIPSIS
    Note (line 3): idxmax() picked 'Cobalt' from groups of 'supplier' that hold one label spelled another way ('Acme'/'acme '/'ACME'); ...
    >>> split_note("idxmax", 3, per.iloc[:2], "Cobalt") is None
    True
    >>> daily = pd.Series([1.0, 5.0, 2.0], index=pd.Index(["2025-01-01", "2025-01-01", "2025-01-02"], name="date"))
    >>> split_note("idxmax", 3, daily, "2025-01-01") is None  # one label on several rows: no spellings
    True
    """
    pd = sys.modules.get("pandas")
    if pd is None or not isinstance(source, pd.Series) or not 2 <= len(source) <= 100_000:
        return None
    if isinstance(source.index, pd.MultiIndex) or not _is_text(source.index):
        return None
    if not source.index.is_unique:
        return None  # rows under repeated labels (a date per row), not one group per label
    groups: dict[str, list[str]] = {}
    for label in source.index:
        if isinstance(label, str) and label.strip():
            groups.setdefault(_spelled(label), []).append(label)
    split = [g for g in groups.values() if len(set(g)) > 1]
    if not split:
        return None
    shown = "; ".join("/".join(repr(v) for v in g[:EXAMPLES]) for g in split[:2])
    name = source.index.name
    key = f"df[{name!r}]" if isinstance(name, str) else "df[col]"
    label = f" of {name!r}" if isinstance(name, str) else ""
    return (
        f"Note (line {line}): {op}() picked {result!r} from groups{label} that hold one label {SPELLING_MARK} ({shown}"
        f"{'; ...' if len(split) > 2 else ''}); group the values as one spelling first, e.g. "
        f"df.groupby({key}.str.strip().str.lower())[...], and pick again."
    )


def label_note(line: int, source: Any, position: int, target: str | None = None) -> str | None:
    """Which label ``.iloc[position]`` picked, when the index holds named labels (a groupby's) and not row numbers;
    stronger when ``target``, the name it is assigned to, names the 'not' group and the label picked is the yes of
    a 0/1 (False/True, no/yes) grouping (a development task: ``not_eligible = means.iloc[1]``, the eligible players).

    >>> import pandas as pd
    >>> means = pd.DataFrame({"eligible": [1, 0, 1], "runs": [50, 40, 60]}).groupby("eligible")["runs"].mean()
    >>> print(label_note(7, means, 0))
    Note (line 7): .iloc[0] is the entry labelled 0 of 'eligible' (labels in order: 0, 1); pick a group by its label with .loc[label].
    >>> print(label_note(8, means, 1, "runs_not_eligible"))  # doctest: +ELLIPSIS
    Note (line 8): ... but `runs_not_eligible` names the 'not' group, and 1 usually means yes: the 'not' group is .loc[0]. ...
    >>> label_note(1, pd.Series([5, 6]), 0) is None  # row numbers: nothing to say
    True
    """
    pd = sys.modules.get("pandas")
    if pd is None or not isinstance(source, pd.Series | pd.DataFrame) or not 1 < len(source) <= 50:
        return None
    index = source.index
    if index.name is None or isinstance(index, pd.RangeIndex | pd.MultiIndex):
        return None
    labels = [repr(v.item() if hasattr(v, "item") else v)[:30] for v in index[:8]]
    picked = index[position]
    picked = picked.item() if hasattr(picked, "item") else picked
    where = (
        f"Note (line {line}): .iloc[{position}] is the entry labelled {picked!r} of {index.name!r} (labels in order: "
        f"{', '.join(labels)}{', ...' if len(index) > 8 else ''})"
    )
    no = _the_no(list(index), picked) if target and _negated(target) else None
    if no is not None:
        return (
            f"{where}, but `{target}` names the 'not' group, and {picked!r} {POLARITY_MARK}: the 'not' group is "
            f".loc[{no!r}]. Pick each group by its label."
        )
    return f"{where}; pick a group by its label with .loc[label]."


def _negated(name: str) -> bool:
    """The name speaks of a 'not' group: ``not_eligible``, ``nonSmoker``, ``runs_without_bonus``.

    >>> _negated("avg_not_eligible"), _negated("nonSmokerMean"), _negated("notes_mean"), _negated("eligible")
    (True, True, False, False)
    """
    words = re.findall(r"[a-z]+", re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower())
    return any(w in _NEGATIONS or (w.startswith("non") and len(w) > 5 and w != "nonzero") for w in words)


def _the_no(labels: list[Any], picked: Any) -> Any:
    """The 'no' label of a two-label yes/no index when ``picked`` is its 'yes' (None otherwise)."""
    if len(labels) != 2:
        return None
    plain = [v.item() if hasattr(v, "item") else v for v in labels]
    words = [str(v).strip().lower() for v in plain]
    if str(picked).strip().lower() not in _YES or not any(w in _NO for w in words):
        return None
    return next(v for v, w in zip(plain, words, strict=True) if w in _NO)
