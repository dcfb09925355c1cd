"""Answers typed in rather than computed: the values a small model writes into ``final_answer(...)`` itself.

A small model writes the answer call in the same reply as the code that computes it, so it guesses the values
before any output exists, and when told, it types them again. These pure functions find such values:

- ``typed_numbers``: float literals in the answer call that no output the model had seen shows (``seen_text``:
  the task and the observations, less what the code printed as a literal string);
- ``typed_call``: the answer call with the cell's variables in place of the typed values;
- ``typed_keys`` and ``disagreements``: the typed values against the live variables of the same names (a development task
  : ``outlier_values`` held two values, the answer typed three).
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping
from typing import Any

from cave.trajectory import Trajectory

__all__ = [
    "assigned_names",
    "agrees",
    "answer_alone",
    "disagreements",
    "less_literals",
    "live_call",
    "only_displays",
    "plain_values",
    "prose_guesses",
    "seen_text",
    "skew_contradictions",
    "typed_call",
    "typed_keys",
    "typed_numbers",
]

_NUMBER = re.compile(r"(?<![A-Za-z_])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")  # not the 1 of answer1


def typed_numbers(code: str, seen: str, *, alone: bool = False) -> list[str]:
    """Numbers typed into the last ``final_answer(...)`` of ``code`` that no text the model had seen shows (``seen``:
    the task and the earlier observations), at the decimals they were typed with. A small model writes the answer
    call in the cell that computes it and guesses the values before any output exists (a development task: it computed
    16.65 and sent 15.45). Only float literals count: an int may be one the model knows (a year, a count), while
    ``100.00`` is written as a computed result (a development task: it printed 141.36 and 118.57, and sent 100.00 and 120.00).

    >>> code = "m = df.x.mean()\\nprint(m)\\nfinal_answer({'mean': 15.45, 'n': 3, 'sd': 6.72})"
    >>> typed_numbers(code, "Observation: sd is 6.7234")
    ['15.45']
    >>> typed_numbers("m = df.x.mean()\\nfinal_answer({'mean': 100.00, 'year': 2018})", "")
    ['100.00']
    >>> typed_numbers("final_answer(s.quantile(0.95))", ""), typed_numbers("final_answer({'m': 40.82})", "40.8234")
    ([], [])

    An answer cell of its own is written after the output it copies, so it is not asked about (``alone``: it is,
    when it comes back after a hold for the numbers it types).
    """
    found = _answer_call(code)
    if found is None or (len(found[0].body) < 2 and not alone):
        return []
    call = found[1]
    literals = [
        n for n in _answer_values([*call.args, *(k.value for k in call.keywords)])
        if type(n.value) is float
    ]  # fmt: skip
    if not literals:
        return []
    shown = [float(x) for x in _NUMBER.findall(seen[-50_000:])[:20_000]]
    out = []
    for node in literals:
        text = ast.get_source_segment(code, node) or repr(node.value)
        places = len(text.split(".")[1]) if "." in text and "e" not in text.lower() else None
        value = float(node.value)
        if not any(_same(x, value, places) for x in shown):
            out.append(text)
    return out


def prose_guesses(traj: Trajectory, code: str, seen: str) -> list[str]:
    """The numbers an answer cell of its own types that no output showed but the model's own earlier prose did
    (a development task: "The final answer is: @mean_familysize_survived[2.00]" written beside code that printed nothing,
    then ``final_answer({'mean_familysize_survived': 2.00, ...})`` alone; the means were 0.94 and 0.88).

    >>> from cave.trajectory import Step
    >>> traj = Trajectory(task="Mean?", steps=[Step(1, completion="```python\\nm = df.x.mean()\\n```\\nIt is 2.00",
    ...                                         code="m = df.x.mean()", observation="(printed nothing)")])
    >>> prose_guesses(traj, "final_answer({'m': 2.00})", seen_text(traj))
    ['2.00']
    >>> prose_guesses(traj, "final_answer({'m': 3.50})", seen_text(traj))  # not from its prose: copied from elsewhere
    []

    A dict the model typed into a cell of its own and ran (its echo is no output either):

    >>> traj.steps.append(Step(2, code="{'m': 3.50}", observation="Out: {'m': 3.5}"))
    >>> prose_guesses(traj, "final_answer({'m': 3.50})", seen_text(traj))
    ['3.50']
    """
    numbers = typed_numbers(code, seen, alone=True)
    if not numbers:
        return []
    prose = "\n".join(re.sub(r"```.*?(```|$)", " ", s.completion or "", flags=re.S) for s in traj.steps)
    # a literal a cell only displayed is prose in a code block (a development task: "The final answer is:" and a typed dict)
    prose += "\n".join(src for s in traj.steps for src, _ in _displayed(_parsed(s.code), s.code or ""))
    written = set(_NUMBER.findall(prose))
    # a number a note gave (the form check's rounded value, "run this: final_answer(2.83)") was not made up
    noted = set(_NUMBER.findall("\n".join(less_literals(s.observation or "", s.code) for s in traj.steps)))
    return [n for n in numbers if n.lstrip("+") in written and n.lstrip("+") not in noted]


def _answer_call(code: str) -> tuple[ast.Module, ast.Call] | None:
    """The parsed code and its last ``final_answer(...)`` call in source order, or None."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "final_answer"]
    return (tree, max(calls, key=lambda n: (n.lineno, n.col_offset))) if calls else None


def _answer_values(nodes: list[Any]) -> list[Any]:
    """The constants that are the answer's values: the arguments themselves and what dicts, lists and tuples hold,
    not a parameter inside a computation (``quantile(0.95)``, ``round(x, 2)``)."""
    out = []
    for node in nodes:
        if isinstance(node, ast.Constant):
            out.append(node)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
            out.append(node.operand)
        elif isinstance(node, ast.Dict):
            out += _answer_values(list(node.values))
        elif isinstance(node, ast.List | ast.Tuple | ast.Set):
            out += _answer_values(list(node.elts))
    return out


def _same(shown: float, typed: float, places: int | None) -> bool:
    if places is not None:
        return abs(round(shown, places) - typed) <= 10 ** -(places + 3)
    return abs(shown - typed) <= 1e-9 * max(1.0, abs(typed))


def seen_text(traj: Trajectory) -> str:
    """What the model had seen before its current reply: the task and every earlier observation, less the text its
    own code printed as a literal. A printed guess is not a result (a development task: the model printed the string
    ``"@outlier_values[9.03, 9.00, 8.42]"`` it had made up, then sent those numbers as "shown").

    >>> from cave.trajectory import Step
    >>> traj = Trajectory(task="Outliers?", steps=[Step(1, code='print("values [9.03, 8.42]")\\nprint(v)',
    ...                                              observation="values [9.03, 8.42]\\n[9.03]")])
    >>> seen_text(traj).split()
    ['Outliers?', '[9.03]']
    """
    return "\n".join([traj.task, *(less_literals(_output(s.observation), s.code) for s in traj.steps)])


def _output(observation: str) -> str:
    """An observation without the hold note at its end (the numbers it quotes are the answer's, not output) and
    without its ``[block 2]`` labels (a typed 2.00 is not shown by them).

    >>> _output("[block 2]\\nOut: 0.5\\nNot accepted yet: final_answer got 0.55")
    '\\nOut: 0.5\\n'
    """
    return _BLOCK_LABEL.sub("", observation.split("Not accepted yet:", 1)[0])


_BLOCK_LABEL = re.compile(r"^\[block \d+\]$", re.M)


def less_literals(observation: str, code: str | None) -> str:
    """``observation`` without the string literals of ``code`` that hold a digit (what a print of them shows), and
    without what a literal the code only displays shows (a development task: a typed dict ran alone, ``Out: {'r': 0.0}``,
    and its made-up numbers then passed as shown).

    >>> less_literals("[9.03]\\nOut: {'r': 0.0, 'p': 0.99}", "print(v)\\n{'r': 0.00, 'p': 0.99}")
    '[9.03]\\nOut:  '
    """
    try:
        tree = ast.parse(code or "")
    except SyntaxError:
        return observation
    texts = {
        n.value for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and len(n.value) > 2 and _NUMBER.search(n.value)
    }  # fmt: skip
    texts |= _displayed_literals(tree)
    for text in sorted(texts, key=len, reverse=True):
        observation = observation.replace(text, " ")
    return observation


def _parsed(code: str | None) -> ast.Module:
    try:
        return ast.parse(code or "")
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


def _is_print(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"


def _displayed_literals(tree: ast.Module) -> set[str]:
    """What the literals a cell displays (a bare expression, or a print of one) look like in its output."""
    return {shown for _, shown in _displayed(tree, "")}


def _displayed(tree: ast.Module, code: str) -> list[tuple[str, str]]:
    """The literals a cell displays: each one's source in ``code`` and what it looks like in the output."""
    out = []
    for stmt in tree.body:
        if not isinstance(stmt, ast.Expr):
            continue
        node = stmt.value
        printed = _is_print(node)
        for arg in node.args if printed else [node]:
            try:
                value = ast.literal_eval(arg)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            shown = str(value) if printed else repr(value)
            if _NUMBER.search(shown):
                out.append(((ast.get_source_segment(code, arg) or "") if code else "", shown))
    return out


def typed_call(code: str) -> str | None:
    """The answer call with each typed value replaced by the variable of the same name the cell assigned, when every
    typed number has one (a typed word or bool stays as it is): ``final_answer({'mean': mean})``.

    >>> typed_call("mean = df.x.mean()\\nfinal_answer({'mean': 15.45})")
    "final_answer({'mean': mean})"
    >>> typed_call("m = 1\\nfinal_answer({'mean': 15.45})") is None
    True

    Names unpacked from a test; a verdict typed beside them (a development task: the call without it was sent twice):

    >>> typed_call("r, p_value = pearsonr(a, b)\\nfinal_answer({'r': 0.85, 'p_value': 0.0001, 'significant': True})")
    "final_answer({'r': r, 'p_value': p_value, 'significant': True})"
    """
    found = _answer_call(code)
    if found is None or not found[1].args or not isinstance(found[1].args[0], ast.Dict):
        return None
    call = found[1]
    assigned = set(assigned_names(code))
    items, replaced = [], 0
    for key, node in zip(call.args[0].keys, call.args[0].values, strict=True):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            return None
        if key.value.isidentifier() and key.value in assigned:
            items.append(f"{key.value!r}: {key.value}")
            replaced += 1
        elif any(type(n.value) is float for n in _answer_values([node])):
            return None  # a typed number with no variable to send instead
        else:
            items.append(f"{key.value!r}: {ast.get_source_segment(code, node) or ast.unparse(node)}")
    if not replaced:
        return None
    return "final_answer({" + ", ".join(items) + "})"


def answer_alone(code: str) -> bool:
    """The cell is the answer call and nothing else, with values that compute nothing (literals, names): it
    copies what an earlier cell computed or printed.

    >>> answer_alone("final_answer({'m': 4.5, 'n': n})"), answer_alone("m = df.x.mean()\\nfinal_answer(m)")
    (True, False)
    >>> answer_alone("final_answer(df.loc[df.x.idxmax(), 'site'])")
    False
    """
    found = _answer_call(code)
    if found is None or len(found[0].body) != 1:
        return False
    call = found[1]
    values = [*call.args, *(k.value for k in call.keywords)]
    return not any(
        isinstance(n, ast.Call | ast.Attribute | ast.Subscript | ast.BinOp) for v in values for n in ast.walk(v)
    )


def only_displays(code: str) -> bool:
    """The cell does nothing but show literals it types, numbers among them (``{'r': 0.00, 'p': 0.99}``, or a
    print of one): it computes nothing, whatever its output looks like.

    >>> only_displays("{'r': 0.00, 'p': 0.99}"), only_displays("print({'r': 0.5})"), only_displays("{'r': r}")
    (True, True, False)
    >>> only_displays("x = 0.5\\nx"), only_displays("'done'")
    (False, False)
    """
    tree = _parsed(code)
    shown = _displayed(tree, "")
    return (
        bool(shown)
        and len(shown)
        == sum(len(s.value.args) if _is_print(s.value) else 1 for s in tree.body if isinstance(s, ast.Expr))
        == len(tree.body)
        and any(_NUMBER.search(text) for _, text in shown)
    )


def assigned_names(code: str) -> list[str]:
    """The names ``code`` assigns (``x = ...``, ``a, b = ...``), in order, once each.

    >>> assigned_names("stat, p = shapiro(x)\\nskewness = skew(x)\\np = 1")
    ['stat', 'p', 'skewness']
    """
    out: list[str] = []
    for node in ast.walk(_parsed(code)):
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name) and n.id not in out:
                        out.append(n.id)
    return out


def typed_keys(code: str) -> dict[str, str]:
    """The keys of the answer dict whose values are typed literals (a constant, or a list of constants), with the
    source they were typed as.

    >>> typed_keys("final_answer({'ids': ['A1', 'B2'], 'mean': m, 'sd': -1.5})")
    {'ids': "['A1', 'B2']", 'sd': '-1.5'}
    """
    found = _answer_call(code)
    if found is None or not found[1].args or not isinstance(found[1].args[0], ast.Dict):
        return {}
    out = {}
    for key, node in zip(found[1].args[0].keys, found[1].args[0].values, strict=True):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            continue
        items = node.elts if isinstance(node, ast.List | ast.Tuple) else [node]
        if items and all(isinstance(n, ast.Constant) or _negative(n) for n in items):
            out[key.value] = ast.get_source_segment(code, node) or ""
    return out


def _negative(node: ast.AST) -> bool:
    return isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant)


def disagreements(value: Any, live: Mapping[str, Any], typed: Mapping[str, str]) -> list[str]:
    """Typed answer values that a live variable of the same name contradicts: the code computed one thing and the
    answer says another. Numbers agree at the decimals they were typed with; a value whose type says nothing
    comparable (a table, a model) agrees.

    >>> disagreements({"vals": [9.03, 9.0, 8.42], "mean": 4.5}, {"vals": [9.0312, 9.0], "mean": 4.4987},
    ...               {"vals": "[9.03, 9.00, 8.42]", "mean": "4.5"})
    ["'vals' is [9.03, 9.00, 8.42], but your variable `vals` holds [9.0312, 9.0]"]
    """
    if not isinstance(value, dict):
        return []
    out = []
    for key, text in typed.items():
        if key in value and key in live and not _agrees(value[key], live[key]):
            out.append(f"{key!r} is {text[:120]}, but your variable `{key}` holds {_short(live[key])}")
    return out


_RIGHT = re.compile(r"right|positiv", re.I)
_LEFT = re.compile(r"left|negativ", re.I)


def skew_contradictions(value: Any, live: Mapping[str, Any]) -> list[str]:
    """Skew directions the answer states that the code's own skewness contradicts by sign: right (positive) skew
    is a skewness above zero, whatever band the task calls symmetric (a development task: skew() gave -0.53, held for the
    form, the answer typed 'skewed_right').

    >>> skew_contradictions({"distribution_skew": "skewed_right"}, {"skewness": -0.5315})
    ["'distribution_skew' is 'skewed_right', but your variable `skewness` is -0.5315: below zero, skewed to the left"]
    >>> skew_contradictions({"distribution_skew": "skewed_left"}, {"skewness": -0.5315})
    []
    """
    if not isinstance(value, dict):
        return []
    numbers = {n: float(v) for n, v in live.items() if "skew" in n.lower() and _real(v)}
    out = []
    for key, said in value.items():
        if not (isinstance(said, str) and ("skew" in said.lower() or "skew" in str(key).lower())):
            continue
        right, left = bool(_RIGHT.search(said)), bool(_LEFT.search(said))
        for name, x in numbers.items():
            if right != left and ((right and x < 0) or (left and x > 0)):
                side = "below zero, skewed to the left" if x < 0 else "above zero, skewed to the right"
                out.append(f"{key!r} is {said!r}, but your variable `{name}` is {x:.4g}: {side}")
    return out


def _real(v: Any) -> bool:
    try:
        return not isinstance(v, bool | str) and math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def live_call(value: dict[str, Any], wrong: list[str]) -> str:
    """The answer call with each contradicted key sent as its variable (``wrong``: ``disagreements``' lines).

    >>> live_call({"vals": [9.0], "n": 2}, ["'vals' is [9.0], but your variable `vals` holds [9.03]"])
    "final_answer({'vals': vals, 'n': 2})"
    """
    named = {line.split("`")[1] for line in wrong if line.count("`") >= 2}
    items = [f"{k!r}: {k if k in named else repr(v)}" for k, v in value.items()]
    return "final_answer({" + ", ".join(items) + "})"


def plain_values(value: Any) -> Any:
    """An answer as JSON values (numbers, text, lists of them, a dict of those), or None when it holds anything else:
    what a held answer is remembered as, to tell whether the next one is the same (``agrees``).

    >>> import numpy as np
    >>> plain_values({"skew": np.float64(0.1545633), "n": 3}), plain_values(object()) is None
    ({'skew': 0.1545633, 'n': 3}, True)
    """
    value = _plain(value)
    if isinstance(value, dict):
        out = {str(k): plain_values(v) for k, v in value.items()}
        return None if any(v is None for v in out.values()) else out
    if isinstance(value, list | tuple):
        items = [plain_values(v) for v in value]
        return None if any(v is None for v in items) else items
    return value if isinstance(value, str | int | float | bool) else None


def agrees(answer: Any, held: Any) -> bool:
    """The answer says what ``held`` (``plain_values`` of an earlier one) said, at the decimals it is written with:
    a held 0.1545633 sent again as 0.1546 is the same answer.

    >>> agrees({"skew": 0.1546, "n": 3}, {"skew": 0.1545633, "n": 3}), agrees({"skew": 0.152}, {"skew": 0.1545633})
    (True, False)
    >>> agrees({"is_normal": "no"}, {"is_normal": True})  # a word for a bool: not known to be the same
    False
    """
    if held is None:
        return False
    answer = _plain(answer)
    if isinstance(held, dict):
        return (
            isinstance(answer, dict)
            and set(map(str, answer)) == set(held)
            and all(_agrees(v, held[str(k)], unknown=False) for k, v in answer.items())
        )
    return _agrees(answer, held, unknown=False)


def _plain(value: Any) -> Any:
    """numpy scalars, arrays, pandas Series and Index as Python values; anything else as it is."""
    if type(value).__module__.startswith(("numpy", "pandas")) and hasattr(value, "tolist"):
        try:
            return value.tolist()
        except Exception:  # a frame's tolist does not exist; anything odd: compare as it is
            return value
    return value


def _agrees(typed: Any, actual: Any, unknown: bool = True) -> bool:
    """``typed`` says ``actual`` (at the decimals it is typed with, or as a percentage); ``unknown``: what a pair
    of values that cannot be compared (a table, a bool and a word) counts as."""
    actual = _plain(actual)
    if isinstance(typed, list | tuple):
        if isinstance(actual, list | tuple):
            return len(typed) == len(actual) and all(_agrees(t, a, unknown) for t, a in zip(typed, actual, strict=True))
        return len(typed) == 1 and _agrees(typed[0], actual, unknown)
    if isinstance(typed, bool) or isinstance(actual, bool):
        return typed == actual if isinstance(typed, bool) and isinstance(actual, bool) else unknown
    typed_number, actual_number = _number(typed), _number(actual)
    if typed_number is not None and actual_number is not None:
        if not (math.isfinite(typed_number) and math.isfinite(actual_number)):
            return repr(typed_number) == repr(actual_number)
        text = repr(typed) if isinstance(typed, float) else ""
        places = len(text.split(".")[1]) if "." in text and "e" not in text else 0
        # the same number as a percentage (ratio 0.2456 sent as 24.56) is the same result
        return any(_same(actual_number * k, typed_number, p) for k in (1, 100) for p in (places, None))
    if isinstance(typed, str) and isinstance(actual, str | int | float):
        return typed.strip().lower() == str(actual).strip().lower()
    return unknown


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.replace(",", ""))
        except ValueError:
            return None
    return None


def _short(value: Any) -> str:
    text = repr(_plain(value))
    return text if len(text) <= 160 else text[:157] + "..."
