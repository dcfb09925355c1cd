"""Code whose result means something other than the name it is given: a hypothesis test read backwards
(``is_normal = p < 0.05``), a mean squared error named RMSE, and a standard deviation of the other kind than the
task names (pandas' ``.std()`` is the sample one, ``np.std`` the population one: a development task asked for the
population standard deviation and sent pandas' 49.69 for 49.67).

A p-value below alpha rejects the null hypothesis, so a name that states the null (normal, independent, equal,
same, uniform) holds when the p-value is *at or above* alpha. Small models flip it: a development task computed Shapiro's
p, wrote ``is_normal = shapiro_result.pvalue < 0.05``, then answered "yes" for data that is not normal, and the run
said ``success``. An eighth of the development questions are normality tests. And RMSE is the square root of
``mean_squared_error``: a development task sent the MSE (131440262.76) as ``model_rmse`` after scikit-learn dropped
``squared=False``.

The same holds for the estimator checks of ``cave.review.estimators`` (the other standard deviation or kurtosis than the
task names, a statistic computed by another one's function, pandas' moments where the task says scipy, the task's
denominator constant in the numerator, a share of rows taken as a ratio of one column's sums): ``found`` and
``note`` cover them too.

``found(code)`` lists such lines in the code that sent an answer; the agent holds the answer once with ``note``,
which quotes them (``cave.review.acceptance``), and the same answer sent again ends ``failed_checks``. Only the code is
read: for tests, a comparison of a p-value with alpha (a constant up to 0.1, or a name like ``alpha``), through
``not``, ``bool()``, ``x if cond else y`` and ``if``/``else`` blocks, flowing into a variable or answer key whose
name states the null hypothesis; for RMSE, a variable or answer key named rmse whose value is a
``mean_squared_error(...)`` (directly, rounded, or through a variable) with no root taken.

>>> backwards("stat, p = shapiro(df.x)\\nis_normal = p < 0.05\\nfinal_answer({'is_normal': is_normal})")
['line 2: `is_normal = p < 0.05`']
>>> backwards("p = shapiro(df.x).pvalue\\nfinal_answer({'is_normal': 'yes' if p > 0.05 else 'no'})")
[]
>>> unrooted("mse = mean_squared_error(y, p)\\nfinal_answer({'model_rmse': round(mse, 2)})")
["line 2: `round(mse, 2)` is mean_squared_error's value"]
"""

from __future__ import annotations

import ast
import re

from cave.review.bounds import BOUND_NOTE, BOUNDS_FIX, bounds_fixed, misread_bound
from cave.review.estimators import (
    DENOMINATOR_NOTE,
    FISHER_NOTE,
    HTTP_CLASS_NOTE,
    MAX_FIX_LINES,
    OTHER_STAT_NOTE,
    PANDAS_MOMENT_NOTE,
    STD_NOTE,
    SUM_SHARE_NOTE,
    UNPACKED_FIX,
    UNPACKED_NOTE,
    UNSEEDED_NOTE,
    constant_not_in_denominator,
    http_class,
    name_tokens,
    node_name,
    other_statistic,
    other_std,
    pandas_moments,
    pearson_kurtosis,
    rewritten,
    sum_share,
    unpacked_fixed,
    unpacked_test,
    unseeded,
)

__all__ = [
    "BACKWARDS_NOTE",
    "UNROOTED_NOTE",
    "backwards",
    "constant_not_in_denominator",
    "found",
    "http_class",
    "misread_bound",
    "note",
    "null_word",
    "other_statistic",
    "pandas_moments",
    "other_std",
    "pearson_kurtosis",
    "sum_share",
    "turned_around",
    "unrooted",
    "verdicts",
]

BACKWARDS_NOTE = (
    "Not accepted yet: the code reads the hypothesis test backwards:\n{lines}\nA p-value below alpha rejects the "
    "null hypothesis ({null}), so '{word}' holds when p >= alpha and does not hold when p < alpha. Fix the "
    "comparison and call final_answer again."
)
UNROOTED_NOTE = (
    "Not accepted yet: an RMSE that is not rooted:\n{lines}\nRMSE is the square root of the mean squared error: "
    "use np.sqrt(mean_squared_error(y_true, y_pred)) (or sklearn.metrics.root_mean_squared_error) and call "
    "final_answer again."
)

_NULL = ("normal", "independen", "equal", "same", "uniform")  # token prefixes of what a null hypothesis states
_NOT = ("not", "non", "reject", "signific", "differ", "abnormal", "unequal", "dependen")
_P = re.compile(r"^(p|pv|pval|pvalue|pvals?|pvalues)$|p_?val", re.I)
_ALPHA = re.compile(r"alpha|signific|^sig$|^level$", re.I)
_YES = {"yes", "true", "normal", "y"}
_NO = {"no", "false", "not normal", "n"}


def null_word(name: str) -> str | None:
    """The null hypothesis a name states ("normal" for ``is_normal``), or None (also for ``not_normal``).

    >>> null_word("is_normal"), null_word("isNormal"), null_word("not_normal"), null_word("significant")
    ('normal', 'normal', None, None)
    """
    tokens = name_tokens(name)
    if any(t.startswith(_NOT) for t in tokens):
        return None
    for t in tokens:
        for word in _NULL:
            if t.startswith(word):
                return "independent" if word == "independen" else word
    return None


def _is_p(node: ast.AST) -> bool:
    if isinstance(node, ast.Subscript):  # shapiro(x)[1], result[1]: a test's (statistic, p-value) pair
        index = node.slice
        return isinstance(index, ast.Constant) and index.value == 1
    return bool(_P.search(node_name(node))) and not _ALPHA.search(node_name(node))


def _is_alpha(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return type(node.value) is float and 0 < node.value <= 0.1
    return bool(_ALPHA.search(node_name(node)))


def _when_below(node: ast.AST) -> bool | None:
    """The truth of ``node`` when the p-value is below alpha (None: it does not depend on that, or unknown)."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, op, right = node.left, node.ops[0], node.comparators[0]
        if _is_p(left) and _is_alpha(right):
            return isinstance(op, ast.Lt | ast.LtE) if isinstance(op, ast.Lt | ast.LtE | ast.Gt | ast.GtE) else None
        if _is_alpha(left) and _is_p(right):
            return isinstance(op, ast.Gt | ast.GtE) if isinstance(op, ast.Lt | ast.LtE | ast.Gt | ast.GtE) else None
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _when_below(node.operand)
        return None if inner is None else not inner
    if isinstance(node, ast.Call) and node_name(node.func) == "bool" and len(node.args) == 1:
        return _when_below(node.args[0])
    if isinstance(node, ast.IfExp):
        test = _when_below(node.test)
        return None if test is None else _truth(node.body if test else node.orelse)
    return None


def _truth(node: ast.AST) -> bool | None:
    """True for a constant that says yes (True, "yes", "normal"), False for one that says no, else None."""
    if not isinstance(node, ast.Constant):
        return None
    if isinstance(node.value, bool):
        return node.value
    if isinstance(node.value, str):
        word = node.value.strip().lower()
        return True if word in _YES else False if word in _NO else None
    return None


def found(code: str, task: str = "") -> list[str]:
    """Every misreading in ``code``: tests read backwards, RMSEs without the root, the other standard deviation
    than the one ``task`` names."""
    return (
        backwards(code) + unrooted(code) + other_std(task, code) + other_statistic(code)
        + pearson_kurtosis(task, code) + constant_not_in_denominator(task, code) + pandas_moments(task, code)
        + sum_share(task, code) + http_class(task, code) + misread_bound(task, code) + unpacked_test(code)
        + unseeded(task, code)
    )  # fmt: skip


def note(code: str, task: str = "") -> str | None:
    """The note that holds an answer whose code misreads a result (None when it does not).

    >>> print(note("rmse = mean_squared_error(y, p)"))  # doctest: +ELLIPSIS
    Not accepted yet: an RMSE that is not rooted:
    - line 1: `rmse = mean_squared_error(y, p)` is mean_squared_error's value
    RMSE is the square root ...
    >>> print(note("is_normal = p < 0.05"))
    Not accepted yet: the code reads the hypothesis test backwards:
    - line 1: `is_normal = p < 0.05`
    A p-value below alpha rejects the null hypothesis (the data is normal), so 'normal' holds when p >= alpha and does not hold when p < alpha. Fix the comparison and call final_answer again.
    Your code with the test read the right way round (run it):
    ```python
    is_normal = p >= 0.05
    ```
    """
    notes = []
    rmse = unrooted(code)
    if rmse:
        notes.append(UNROOTED_NOTE.format(lines="\n".join(f"- {x}" for x in rmse)))
    std = other_std(task, code)
    if std:
        notes.append(STD_NOTE.format(lines="\n".join(f"- {x}" for x in std)))
    for lines, text in (
        (other_statistic(code), OTHER_STAT_NOTE),
        (pearson_kurtosis(task, code), FISHER_NOTE),
        (constant_not_in_denominator(task, code), DENOMINATOR_NOTE),
        (pandas_moments(task, code), PANDAS_MOMENT_NOTE),
        (sum_share(task, code), SUM_SHARE_NOTE),
        (http_class(task, code), HTTP_CLASS_NOTE),
        (misread_bound(task, code), BOUND_NOTE),
        (unpacked_test(code), UNPACKED_NOTE),
        (unseeded(task, code), UNSEEDED_NOTE),
    ):
        if lines:
            notes.append(text.format(lines="\n".join(f"- {x}" for x in lines)))
            fix, fixed = {
                BOUND_NOTE: (BOUNDS_FIX, bounds_fixed(task, code)),
                UNPACKED_NOTE: (UNPACKED_FIX, unpacked_fixed(code)),
            }.get(text, ("", None))
            if fixed is not None:  # the code to run: what the 1.5B copies right, where it misapplies a description
                notes.append(fix.format(code=fixed))
    lines = backwards(code)
    if lines:
        notes.append(_backwards_note(lines))
        turned = turned_around(code)
        if turned is not None:  # the 1.5B, told what is wrong, resent the same code: give it the code to run
            notes.append(TURNED_FIX.format(code=turned))
    return "\n".join(notes) or None


_FLIP = {ast.Lt: ast.GtE, ast.LtE: ast.Gt, ast.Gt: ast.LtE, ast.GtE: ast.Lt}
TURNED_FIX = "Your code with the test read the right way round (run it):\n```python\n{code}\n```"


def _flipped(node: ast.AST) -> str | None:
    """The source of ``node`` with its p-value reading turned around (None when there is no simple way)."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _FLIP:
        return ast.unparse(ast.Compare(node.left, [_FLIP[type(node.ops[0])]()], node.comparators))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return ast.unparse(node.operand)
    if isinstance(node, ast.Call) and node_name(node.func) == "bool" and len(node.args) == 1:
        inner = _flipped(node.args[0])
        return None if inner is None else f"bool({inner})"
    if isinstance(node, ast.IfExp):
        return ast.unparse(ast.IfExp(node.test, node.orelse, node.body))
    return None


def turned_around(code: str) -> str | None:
    """``code`` with each backwards reading turned around (the comparison flipped, ``x if c else y`` swapped, an
    ``if`` block's test flipped), or None when there is none or one cannot be turned simply.

    >>> print(turned_around("p = shapiro(x).pvalue\\nis_normal = p < 0.05\\nfinal_answer({'is_normal': is_normal})"))
    p = shapiro(x).pvalue
    is_normal = p >= 0.05
    final_answer({'is_normal': is_normal})
    >>> print(turned_around("if p < 0.05:\\n    normal = 'yes'\\nelse:\\n    normal = 'no'"))
    if p >= 0.05:
        normal = 'yes'
    else:
        normal = 'no'
    """
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    targets: dict[tuple[int, int], ast.AST] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and null_word(t.id) for t in node.targets) and _when_below(node.value):
                targets[(node.value.lineno, node.value.col_offset)] = node.value
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and null_word(key.value):
                    if value is not None and _when_below(value):
                        targets[(value.lineno, value.col_offset)] = value
        elif isinstance(node, ast.If) and _when_below(node.test) is not None and _if_backwards(node):
            targets[(node.test.lineno, node.test.col_offset)] = node.test
    if not targets:
        return None
    spans = [(node, _flipped(node)) for node in targets.values()]
    if any(text is None for _, text in spans) or len(code.splitlines()) > MAX_FIX_LINES:
        return None
    return rewritten(code, spans)  # type: ignore[arg-type]


def _if_backwards(node: ast.If) -> bool:
    """Whether an ``if``/``else`` on the p-value assigns a null-stating name the wrong way round."""
    below = _when_below(node.test)
    for branch, runs_below in ((node.body, below), (node.orelse, not below)):
        for stmt in branch:
            if (
                isinstance(stmt, ast.Assign)
                and any(isinstance(t, ast.Name) and null_word(t.id) for t in stmt.targets)
                and _truth(stmt.value) is runs_below
            ):
                return True
    return False


def _backwards_note(lines: list[str]) -> str:
    word = next((w for w in map(null_word, re.findall(r"\w+", " ".join(lines))) if w), "normal")
    null = {"normal": "the data is normal", "uniform": "the data is uniform"}.get(word, f"the groups are {word}")
    return BACKWARDS_NOTE.format(lines="\n".join(f"- {x}" for x in lines), null=null, word=word)


_RMSE = re.compile(r"rmse|root_?mean_?sq", re.I)
_WRAPPERS = frozenset({"round", "float", "abs"})  # keep the value what it was


def _mse_call(node: ast.AST) -> bool:
    """``mean_squared_error(...)`` (any module path) without ``squared=False``."""
    if not (isinstance(node, ast.Call) and node_name(node.func) == "mean_squared_error"):
        return False
    return not any(k.arg == "squared" and isinstance(k.value, ast.Constant) and k.value.value is False
                   for k in node.keywords)  # fmt: skip


def _is_mse(node: ast.AST, names: set[str]) -> bool:
    """Whether ``node`` is an MSE with no root: the call, a name assigned one, either rounded or cast."""
    while isinstance(node, ast.Call) and node_name(node.func) in _WRAPPERS and node.args:
        node = node.args[0]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("round", "item"):
        node = node.func.value  # mse.round(2), np.float64's .item()
    return _mse_call(node) or (isinstance(node, ast.Name) and node.id in names)


def unrooted(code: str) -> list[str]:
    """The lines of ``code`` where a variable or answer key named rmse gets a mean squared error with no root
    taken, each as ``line N: `source` is mean_squared_error's value``."""
    if "mean_squared_error" not in code:
        return []
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    mse: set[str] = set()  # names assigned an MSE, in source order
    out: dict[int, str] = {}
    nodes = sorted(
        (n for n in ast.walk(tree) if isinstance(n, ast.Assign | ast.Dict)), key=lambda n: (n.lineno, n.col_offset)
    )
    for node in nodes:
        if isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if not _is_mse(node.value, mse):
                mse.difference_update(names)
                continue
            mse.update(names)
            pairs = [(n, node) for n in names if _RMSE.search(n)]
        else:
            pairs = [
                (k.value, v) for k, v in zip(node.keys, node.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and _RMSE.search(k.value)
                and v is not None and _is_mse(v, mse)
            ]  # fmt: skip
        for _, where in pairs:
            text = ast.get_source_segment(code, where) or ast.unparse(where)
            out.setdefault(
                where.lineno, f"line {where.lineno}: `{text.splitlines()[0][:120]}` is mean_squared_error's value"
            )
    return [out[k] for k in sorted(out)]


def backwards(code: str) -> list[str]:
    """The lines of ``code`` where a name that states a null hypothesis is true exactly when p < alpha, each as
    ``line N: `source```. Empty when there are none (or the code does not parse)."""
    if "<" not in code and ">" not in code:
        return []
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    found: dict[int, str] = {}

    def flag(node: ast.AST) -> None:
        text = ast.get_source_segment(code, node) or ast.unparse(node)
        found.setdefault(node.lineno, f"line {node.lineno}: `{text.splitlines()[0][:120]}`")

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            named = any(isinstance(t, ast.Name) and null_word(t.id) for t in node.targets)
            if named and _when_below(node.value):
                flag(node)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and null_word(key.value):
                    if value is not None and _when_below(value):
                        flag(value)
        elif isinstance(node, ast.If):
            below = _when_below(node.test)
            if below is None:
                continue
            for branch, runs_below in ((node.body, below), (node.orelse, not below)):
                for stmt in branch:  # a branch that runs when p < alpha must not say the null holds, and v.v.
                    if (
                        isinstance(stmt, ast.Assign)
                        and any(isinstance(t, ast.Name) and null_word(t.id) for t in stmt.targets)
                        and _truth(stmt.value) is runs_below
                    ):
                        test = ast.get_source_segment(code, node.test) or ast.unparse(node.test)
                        found.setdefault(
                            stmt.lineno,
                            f"line {stmt.lineno}: `{ast.unparse(stmt)[:80]}` when `{test[:60]}` is {runs_below}",
                        )
    return [found[k] for k in sorted(found)]


def verdicts(value: object) -> dict[str, bool] | None:
    """What an answer says about null hypotheses: each key that states one (or ``""`` for a bare answer) mapped to
    yes or no; None when it says nothing. A held answer sent again with the same verdicts kept its reading.

    >>> verdicts({"is_normal": "Yes", "mean": 3.2}), verdicts(False), verdicts({"mean": 3.2})
    ({'is_normal': True}, {'': False}, None)
    >>> import pandas as pd
    >>> verdicts(pd.Series([1.0, 2.0]))  # a held Series (a development run crashed here)
    """

    def truth(v: object) -> bool | None:
        if hasattr(v, "item") and not isinstance(v, str | bytes) and getattr(v, "size", 1) == 1:
            v = v.item()  # numpy's bool_ (a Series or an array of several values says no one verdict)
        if isinstance(v, bool):
            return v
        if isinstance(v, str):
            word = v.strip().lower()
            return True if word in _YES else False if word in _NO else None
        return None  # 1 and 0 are counts, not verdicts

    if isinstance(value, dict):
        out = {str(k): t for k, v in value.items() if null_word(str(k)) and (t := truth(v)) is not None}
        return out or None
    t = truth(value)
    return None if t is None else {"": t}


# A statistic by what its name says and by the function that computes it: `skewness = kurtosis(x)` (a development task)
