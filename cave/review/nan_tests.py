"""A scipy test or statistic that returned nan over missing values: the code with them dropped, to run.

The runtime notes the nan (``cave.runtimes.value_notes``, "returned nan because ..."); the note alone says what
went wrong, and the code that fixes it is what a small model copies (``nan_dropped``). Paired tests lose the rows
of both columns together.
"""

from __future__ import annotations

import ast

from cave.review.estimators import MAX_FIX_LINES, all_nodes, node_name, rewritten

__all__ = ["NAN_FIX", "nan_dropped"]

NAN_FIX = (
    "Your code with the missing values dropped from each test's input (the rows of two columns together), to run:"
    "\n```python\n{code}\n```"
)


def nan_dropped(code: str) -> str | None:
    """``code`` with each scipy test or statistic over columns with missing values given the rows that have them:
    one column ``t['a']`` as ``t['a'].dropna()``, two of one table as ``t[['a', 'b']].dropna()['a']`` (rows dropped
    together, as a paired test needs). The runtime's note names the NaN; a development task still sent the nan
    correlations of male and female passengers and ended failed_checks.

    >>> print(nan_dropped("r, p = pearsonr(m['Age'], m['Fare'])\\ns = skew(df['Age'])"))
    r, p = pearsonr(m[['Age', 'Fare']].dropna()['Age'], m[['Age', 'Fare']].dropna()['Fare'])
    s = skew(df['Age'].dropna())
    >>> nan_dropped("s = skew(df['Age'].dropna())") is None
    True
    """
    from cave.runtimes.matches import ESTIMATES, TESTS

    spans = []
    for node in all_nodes(code):
        if not isinstance(node, ast.Call) or node_name(node.func) not in TESTS | ESTIMATES or node.keywords:
            continue
        args = node.args[:2] if node_name(node.func) in _PAIRED else node.args[:1]
        columns = [_read(a) for a in args]
        if not columns or any(c is None for c in columns) or len({t for t, _ in columns}) != 1:  # type: ignore[misc]
            continue
        table = columns[0][0]  # type: ignore[index]
        keys = [k for _, k in columns]  # type: ignore[misc]
        for arg, key in zip(args, keys, strict=True):
            text = f"{table}[{key!r}].dropna()" if len(keys) == 1 else f"{table}[{keys!r}].dropna()[{key!r}]"
            spans.append((arg, text))
    if not spans or len(code.splitlines()) > MAX_FIX_LINES:
        return None
    return rewritten(code, spans)


# the tests of two samples of paired rows: their two columns lose the same rows
_PAIRED = frozenset({"pearsonr", "spearmanr", "kendalltau", "pointbiserialr", "linregress", "ttest_rel", "wilcoxon"})


def _read(node: ast.AST) -> tuple[str, str] | None:
    """(table, column) of ``t['a']`` with a plain table name; None for anything else."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and isinstance(node.slice, ast.Constant):
        if isinstance(node.slice.value, str):
            return node.value.id, node.slice.value
    return None
