"""An answer of None from a call that works in place: ``x = names.sort()``, ``df = df.dropna(inplace=True)``.

A small model assigns the result of a method that changes its object and returns None, then sends that None as
its answer (a development probe sent ``sorted_hotels = list(groups.keys()).sort()`` twice). The note names the
line and gives the one that keeps the result.
"""

from __future__ import annotations

import ast

__all__ = ["none_from_in_place"]

# methods that change their object in place and return None (list, dict, set, random.shuffle, DataFrame.update)
_IN_PLACE = frozenset({"sort", "reverse", "append", "extend", "insert", "remove", "update", "clear", "shuffle"})


def none_from_in_place(code: str, name: str | None = None) -> str | None:
    """The note for a variable set to None by a call that works in place (``x = names.sort()``,
    ``df = df.dropna(inplace=True)``), with the line that keeps the result; None when ``code`` has no such line
    (for ``name`` only, when given). A dev probe sent ``sorted_hotels = list(groups.keys()).sort()``, None, twice.

    >>> print(none_from_in_place("h = list(g.keys()).sort()\\nfinal_answer(h)"))  # doctest: +NORMALIZE_WHITESPACE
    `h = list(g.keys()).sort()` set h to None: .sort() changes the object in place and returns None. Keep the
    result instead:
    ```python
    h = sorted(list(g.keys()))
    ```
    >>> print(none_from_in_place("df = df.dropna(subset=['a'], inplace=True)").splitlines()[-2])
    df = df.dropna(subset=['a'])
    >>> none_from_in_place("h = sorted(names)") is None, none_from_in_place("x = a.sort()", name="y") is None
    (True, True)
    """
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        target, call = node.targets[0].id, node.value
        if (name is not None and target != name) or not isinstance(call, ast.Call):
            continue
        func = call.func
        method = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        inplace = [
            k for k in call.keywords if k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value
        ]
        line = ast.get_source_segment(code, node) or ""
        if inplace:
            kept = [k for k in call.keywords if k.arg != "inplace"]
            fix = f"{target} = " + ast.unparse(ast.Call(func=func, args=call.args, keywords=kept))
            why = "inplace=True changes the table in place and returns None"
        elif method in _IN_PLACE and isinstance(func, ast.Attribute):
            obj = ast.unparse(func.value)
            if method == "sort":
                keys = "".join(f", {ast.unparse(k)}" for k in call.keywords)
                fix = f"{target} = sorted({obj}{keys})"
            elif method == "reverse":
                fix = f"{target} = list(reversed({obj}))"
            else:
                fix = f"{ast.unparse(call)}\n{target} = {obj}"
            why = f".{method}() changes the object in place and returns None"
        elif method == "shuffle" and call.args:
            fix = f"{ast.unparse(call)}\n{target} = {ast.unparse(call.args[0])}"
            why = "shuffle() changes the list in place and returns None"
        else:
            continue
        return f"`{line[:160]}` set {target} to None: {why}. Keep the result instead:\n```python\n{fix}\n```"
    return None
