"""Whether an answer has the form the task names, and the answer fixed where it can be.

Small models compute the right number and hand back 34.6543 for "rounded to two decimal places", True for
"Yes or No", a dict without a key the task spelled out, or a table of 162 days for "revenue per month". These
pure functions compare the answer object with the task's own words; the agent sends an answer with problems
back once, with the call that fixes it where there is one (``review`` on, no checks), and adds the
granularity problem to a failed check's note.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from numbers import Number
from typing import Any, NamedTuple

from cave.review.grouping import granularity_problem, messy_keys
from cave.review.plain import plain_scalar
from cave.review.things import ids_for_names, number_for_a_name
from cave.runtimes.tagged import is_type

__all__ = [
    "Form",
    "absence_possible",
    "as_count",
    "asks_yes_no",
    "is_array",
    "collection_keys",
    "listed_words",
    "missing_keys",
    "number_asked",
    "form_problems",
    "is_bool",
    "is_number",
    "literal",
    "rounding_for",
]

_YES_NO = re.compile(r"""\b(yes)\b["'\u201d]?\s*(?:or|/|,)\s*["'\u201c]?(no)\b""", re.I)
# 'a string that takes the value "yes" if the data follows a normal distribution, and "no" if it does not'
_YES_NO_QUOTED = re.compile(r"""["'\u201c](yes)["'\u201d].{0,200}?["'\u201c](no)["'\u201d]""", re.I | re.S)

_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "first": 1, "second": 2, "third": 3}
_PLACES = re.compile(
    r"\b(\d|one|two|three|four|five|six|first|second|third)\s+decimals?\b(?:\s+(?:places?|points?|digits?))?", re.I
)
_SENTENCE_END = re.compile(r"[.;](?=\s)|\n")
_WANTED_KEYS = re.compile(r"final_answer\(\s*\{([^{}]*)\}\s*\)")
_FLOAT_TEXT = re.compile(r"-?\d+\.\d+")


def _place_count(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBER_WORDS[word.lower()]


# "where mean_value is a positive integer", "rounded to the nearest integer": no decimal places (a development task)
_INTEGER = re.compile(
    r"\b(?:is|as|be|are)\s+(?:an?\s+)?(?:positive\s+|non-negative\s+|whole\s+)?(?:integers?|whole\s+numbers?)\b"
    r"|\bnearest\s+(?:integer|whole\s+number)\b|\brounded\s+to\s+(?:an?\s+)?integer\b",
    re.I,
)


def _mentions(text: str) -> list[tuple[int, int]]:
    """Where the text asks for decimal places, and how many: (position, places); an integer asked is 0.

    >>> _mentions("the mean rounded to two decimals, where count is a positive integer")
    [(20, 2), (46, 0)]
    """
    found = [(m.start(), _place_count(m.group(1))) for m in _PLACES.finditer(text)]
    return sorted(found + [(m.start(), 0) for m in _INTEGER.finditer(text)])


def _asked(places: int) -> str:
    return f"{places} decimal places" if places else "a whole number"


def _places(text: str) -> set[int]:
    return {places for _, places in _mentions(text)}


def asks_yes_no(task: str) -> bool:
    """Whether the task asks for the words "Yes" or "No".

    >>> asks_yes_no('Answer "Yes" or "No".'), asks_yes_no("Is it normal?")
    (True, False)
    """
    return yes_no_words(task) is not None


def yes_no_words(task: str) -> tuple[str, str] | None:
    """The words for yes and no as the task writes them, when it asks for them (side by side, or each quoted in
    the sentences that say when).

    >>> yes_no_words('Answer "Yes" or "No".')
    ('Yes', 'No')
    >>> yes_no_words('a string that is "yes" if the data is normal, and "no" if it is not')
    ('yes', 'no')
    >>> yes_no_words("Is it normal? Say no more.") is None
    True
    """
    m = _YES_NO.search(task) or _YES_NO_QUOTED.search(task)
    return (m.group(1), m.group(2)) if m else None


def _aliases(task: str, key: str) -> set[str]:
    """How the task may refer to the answer named ``key``: the name, its words, and a placeholder written as
    ``key[placeholder]`` (InfiAgent-style answer formats)."""
    names = {key.lower(), key.replace("_", " ").lower(), key.replace("_", "-").lower()}
    for m in re.finditer(rf"\b{re.escape(key)}\[([^\]\s]{{1,40}})\]", task):
        names.add(m.group(1).lower())
    return {n for n in names if len(n) > 1}


def rounding_for(task: str, key: str | None = None, keys: Iterable[str] = ()) -> int | None:
    """The decimal places the task asks for, or None. Where it names several, each mention of decimal places
    belongs to the answer (of ``keys``) named closest before it in its sentence: ``key``'s is returned.

    >>> rounding_for("Report the mean, rounded to two decimal places.")
    2
    >>> task = '@r[r_value] @p[p_value] where "r_value" is rounded to two decimal places. "p_value" to 4 decimals.'
    >>> rounding_for(task, "r", ["r", "p"]), rounding_for(task, "p", ["r", "p"]), rounding_for(task)
    (2, 4, None)
    >>> task = '@n[count] @m[mean] where "count" is an integer and "mean" is a float.'
    >>> rounding_for(task, "n", ["n", "m"]), rounding_for(task, "m", ["n", "m"]), rounding_for("It is a whole number.")
    (0, None, 0)
    """
    every = _places(task)
    integer = bool(_INTEGER.search(task))  # "n is an integer" is one answer's, never the others'
    if key is not None and (len(every) > 1 or integer):
        low = task.lower()
        mentions = sorted(
            (m.start(), k)
            for k in {key, *keys}
            for n in _aliases(task, k)
            for m in re.finditer(rf"(?<![\w]){re.escape(n)}", low)  # "skew" names "skewness" too
        )
        near = set()
        for start, places in _mentions(task):
            ends = [e.end() for e in _SENTENCE_END.finditer(task, 0, start)]
            floor = ends[-1] if ends else 0  # the start of the sentence this mention is in
            owner = [k for pos, k in mentions if floor <= pos < start]
            if owner and owner[-1] == key:
                near.add(places)
        if len(near) == 1:
            return near.pop()
        if integer:
            decimals = {_place_count(m) for m in _PLACES.findall(task)}
            return decimals.pop() if len(decimals) == 1 else None
    return every.pop() if len(every) == 1 else None


def _form_fix(
    task: str, key: str | None, value: Any, label: str, yes_no: tuple[str, str] | None, keys: list[str] | None = None
) -> tuple[Any, list[str]]:
    """One value, fixed to the form the task names, and what was wrong with it."""
    value = plain_scalar(value)
    if isinstance(value, bool):
        if yes_no:
            word = yes_no[0] if value else yes_no[1]
            return word, [f"{label} is the bool {value}; the task asks for the word: {word!r}"]
        return value, []
    if isinstance(value, float) and value == value and abs(value) != float("inf"):
        places = rounding_for(task, key, keys or ())
        if places is not None and abs(round(value, places) - value) > 1e-12 * max(1.0, abs(value)):
            fixed = round(value, places) if places else round(value)  # no decimals asked: an int, not 12.0
            return fixed, [f"{label} is {value!r}; the task asks for {_asked(places)}: {fixed!r}"]
        return value, []
    if isinstance(value, str) and _FLOAT_TEXT.fullmatch(value.strip()):
        places = rounding_for(task, key, keys or ())
        digits = len(value.strip().split(".")[1])
        if places is not None and digits > places:
            fixed = f"{round(float(value), places):.{places}f}" if places else str(round(float(value)))
            return fixed, [f"{label} is {value!r}; the task asks for {_asked(places)}: {fixed!r}"]
        return value, []
    if isinstance(value, list | tuple) and 0 < len(value) <= 20:
        out, problems = [], []
        for v in value:
            fixed, p = _form_fix(task, key, v, label, yes_no, keys)
            out.append(fixed)
            problems += p[:1]
        if problems:
            fixed_seq = type(value)(out)
            return fixed_seq, [f"{label} has values the task asks for in another form: {fixed_seq!r}"]
    return value, []


def literal(value: Any) -> str | None:
    """``value`` as a Python literal the model can run (the fixed answer in a note), or None when it has none.

    >>> literal({"m": 34.65, "ok": "Yes"}), literal(float("nan"))
    ("{'m': 34.65, 'ok': 'Yes'}", None)
    """
    text = repr(value)
    try:
        return text if len(text) <= 600 and ast.literal_eval(text) == value else None
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


class Form(NamedTuple):
    problems: list[str]  # where the answer misses the form the task names
    fixed: Any  # the answer with what could be fixed fixed
    fixable: bool  # ``fixed`` has every problem fixed


_COLLECTION_KEY = re.compile(r"@(\w+)\[\s*[\[{]")


_ABSENCE = re.compile(
    r"\bif any\b|\b(?:are|is) there any\b|\bif so\b|\bif there (?:are|is)\b|\bor (?:none|nothing)\b"
    r"|\b(?:identify|find|detect|flag|check for|look for|list|report|return) any\b"
    r"|\b(?:are|is|were|was|do|does|did) (?:\w+ ){0,4}any\b[^.?!]{0,80}\?",
    re.I,
)


def absence_possible(task: str) -> bool:
    """Whether the task allows for nothing found ("Are there any outliers? If so, which?"): then an empty answer
    is a finding, not a warning sign.

    >>> absence_possible("Are there any outliers in the scores? If so, which countries?")
    True
    >>> absence_possible("Identify any outliers in the Fare column using the Z-score method.")  # a development task
    True
    >>> absence_possible("List the customers who ordered in 2025.")
    False
    """
    return bool(_ABSENCE.search(task))


def collection_keys(task: str) -> set[str]:
    """The answer names whose format is a dict or a list (``@missing_values_per_column[{'DATE TIME': val_1, ...``).

    >>> sorted(collection_keys("@counts[{'a': v1, 'b': v2}] @mean[value] @top[[x, y]]"))
    ['counts', 'top']
    """
    return set(_COLLECTION_KEY.findall(task))


def missing_keys(task: str, value: Any) -> list[str]:
    """The answer names the task's ``final_answer({...})`` spells out that the answer lacks (a development task: the
    per-column counts sent as the dict itself, without 'missing_values_per_column').

    >>> missing_keys("Call final_answer({'a': ..., 'b': ...})", {"a": 1}), missing_keys("What is it?", {"x": 1})
    (['b'], [])
    >>> missing_keys("Call final_answer({'total': ...})", 12)
    ['total']
    """
    wanted = list(
        dict.fromkeys(k for m in _WANTED_KEYS.finditer(task) for k in re.findall(r"""['"](\w+)['"]\s*:""", m.group(1)))
    )
    if not wanted:
        return []
    if not isinstance(value, dict):
        return wanted
    return [k for k in wanted if k not in value]


_PLACEHOLDER = re.compile(r"@(\w+)\[(\w+)\]")


def listed_words(task: str, key: str) -> list[str]:
    """The words the task lists for an answer name's value ('"skewness" is a string that can be "symmetric",
    "skewed_right", or "skewed_left"'), or [].

    >>> task = '@distribution_skew[skewness] where "skewness" is a string that can be "symmetric", "skewed_right", or "skewed_left" based on the criteria.'
    >>> listed_words(task, "distribution_skew")
    ['symmetric', 'skewed_right', 'skewed_left']
    >>> listed_words(task, "other")
    []
    >>> listed_words('@kind[type] where "type" is a string that can either be "normal" or "not normal".', "kind")
    ['normal', 'not normal']
    """
    names = {key} | {p for k, p in _PLACEHOLDER.findall(task) if k == key}
    for name in names:
        m = re.search(
            rf"""["']{re.escape(name)}["']\s+is\s+a\s+(?:string|word|label|text)\b[^.;"']{{0,40}}?"""
            rf"""\b(?:be|is|either|of|as)\s+([^.]*)""",
            task,
        )
        if m:
            words = re.findall(r"""["']([^"']{1,40})["']""", m.group(1))
            if len(words) >= 2:
                return words
    return []


def dict_asked(task: str, key: str) -> list[str]:
    """The keys of the dict the task writes an answer name's value as (``@counts[{'DATE TIME':val_1,
    'WINDSPEED':val_2}]``), or [].

    >>> dict_asked("@counts[{'DATE TIME':val_1, 'WINDSPEED':val_2, ...}]", "counts")
    ['DATE TIME', 'WINDSPEED']
    >>> dict_asked("@counts[n]", "counts")
    []
    >>> dict_asked("@counts[{'A':val_1, 'B':val_2\\nCall final_answer({'counts': ...})", "counts")
    ['A', 'B']
    """
    m = re.search(rf"@{re.escape(key)}\[\{{([^\]}}\n]*)", task)
    return re.findall(r"""['"]([^'"]{1,80})['"]\s*:""", m.group(1)) if m else []


def _as_asked_dict(value: Any, keys: list[str]) -> dict[str, Any] | None:
    """A Series as the dict the task writes, under the task's keys (an index equal to them but for spaces at its
    ends or case), or None when they do not all match."""
    if not (hasattr(value, "to_dict") and hasattr(value, "index")) or hasattr(value, "columns"):
        return None
    by_name = {str(i).strip().lower(): i for i in value.index}
    if len(by_name) != len(value.index) or any(k.strip().lower() not in by_name for k in keys):
        return None
    return {k: plain_scalar(value[by_name[k.strip().lower()]]) for k in keys}


def number_asked(task: str, key: str) -> str | None:
    """'an integer' or 'a number' when the task says an answer name's value is one ('"outliers_count" is an
    integer'; a placeholder named for a count), else None.

    >>> number_asked('@outliers[outliers_count], where "outliers_count" is an integer indicating the total', "outliers")
    'an integer'
    >>> number_asked('@mean[mean] where "mean" is a number rounded to 2 decimals', "mean"), number_asked("", "x")
    ('a number', None)
    """
    names = {key} | {p for k, p in _PLACEHOLDER.findall(task) if k == key}
    for name in names:
        m = re.search(
            rf"""["']{re.escape(name)}["']\s+(?:is|are)\s+(?:an?\s+)?(?:positive\s+|non-negative\s+|whole\s+)?"""
            r"(integer|int|number|float|count)s?\b",
            task,
        )
        if m:
            return "an integer" if m.group(1) in ("integer", "int", "count") else "a number"
    if re.search(rf"@{re.escape(key)}\[[^\]]*,", task):  # @sex_encoded_count[label_0_count, label_1_count]: several
        return None
    return "an integer" if any(re.search(r"(?:^|_)count$|^(?:number|num|n)_of_", n) for n in names) else None


def _collection_size(value: Any) -> str | None:
    """'a table of 3 rows' (a list of 3, a dict of 3) for a collection, else None."""
    kind = type(value).__name__
    if kind in ("DataFrame", "Series") and type(value).__module__.startswith("pandas"):
        return f"a table of {len(value)} row{'s' * (len(value) != 1)}"
    if isinstance(value, list | tuple | set | dict):
        return f"a {type(value).__name__} of {len(value)}"
    return None


def form_problems(
    task: str, value: Any, given: Mapping[str, Any] | None = None, sources: Mapping[str, str] | None = None
) -> Form:
    """Where an answer misses the form the task names, and the answer with what can be fixed fixed.

    Checked: the decimal places the task asks for (per answer name when it names several), "Yes"/"No" where a
    bool was given, the keys of a ``final_answer({...})`` the task spells out, one row per month (hour, day,
    week, quarter, year) in a table (``granularity_problem``), and ids where the task asks for the things
    themselves (``ids_for_names``, with the ``given`` tables; ``sources`` names the database variable a table is read
    from, where it is a database's table rather than a given DataFrame). Small models compute the
    right number and hand back 34.6543 for "rounded to two decimal places", or True for "Yes or No".

    >>> form = form_problems("Mean fare, rounded to two decimal places. Is it normal? Yes or No.", {"m": 34.6543, "ok": True})
    >>> form.problems
    ["'m' is 34.6543; the task asks for 2 decimal places: 34.65", "'ok' is the bool True; the task asks for the word: 'Yes'"]
    >>> form.fixed, form.fixable
    ({'m': 34.65, 'ok': 'Yes'}, True)
    >>> form_problems("How many rows?", 12)
    Form(problems=[], fixed=12, fixable=True)
    >>> form_problems("Call final_answer({'a': ..., 'b': ...})", {"a": 1})[::2]
    (["the answer has no 'b' (the task asks for the keys 'a', 'b')"], False)
    >>> form_problems('@s[skew] where "skew" is a string that can be "symmetric" or "skewed_left".', {"s": -0.53})[::2]
    (["'s' is the number -0.53; the task asks for one of the words 'symmetric', 'skewed_left'"], False)
    >>> form_problems('@n[n_count] where "n_count" is an integer.', {"n": [3, 9]})[::2]
    (["'n' is a list of 2; the task asks for an integer (for a count of rows: len(...))"], False)
    """
    yes_no = yes_no_words(task)
    if isinstance(value, dict) and len(value) <= 20:
        problems, fixed, names = [], {}, [str(k) for k in value]
        words_wanted = []
        for k, v in value.items():
            fixed[k], p = _form_fix(task, str(k), v, repr(k), yes_no, names)
            problems += p
            plain = plain_scalar(v)
            if (size := _collection_size(v)) and (number := number_asked(task, str(k))):
                # a development task: the outlier rows sent for "outliers_count" is an integer
                count = " (for a count of rows: len(...))" if number == "an integer" else ""
                words_wanted.append(f"{k!r} is {size}; the task asks for {number}{count}")
            if hasattr(v, "index") and not hasattr(v, "columns") and (asked := dict_asked(task, str(k))):
                # a development task: the per-column counts sent as a Series, where the task writes {'DATE TIME': val_1, ...}
                as_dict = _as_asked_dict(v, asked)
                problems.append(
                    f"{k!r} is a pandas Series; the task writes it as a dict with the keys {asked[:8]}"
                    + ("" if as_dict is not None else f": send {k}.to_dict() with those keys")
                )
                if as_dict is not None:
                    fixed[k] = as_dict
                else:
                    words_wanted.append(problems.pop())
            if isinstance(plain, int | float) and not isinstance(plain, bool) and (words := listed_words(task, str(k))):
                # a development task: the skewness itself sent where the task lists "symmetric", "skewed_right", ...
                listed = ", ".join(repr(w) for w in words)
                words_wanted.append(f"{k!r} is the number {plain!r}; the task asks for one of the words {listed}")
        wanted = missing_keys(task, {})  # every name the task spells out
        missing = missing_keys(task, value)
        if missing:
            keys = ", ".join(repr(k) for k in wanted)
            problems += [f"the answer has no {', '.join(repr(k) for k in missing)} (the task asks for the keys {keys})"]
        return Form(problems + words_wanted, fixed, not missing and not words_wanted)
    rows = granularity_problem(task, value, given, sources) or messy_keys(value)
    if rows is not None:
        return Form([rows], value, False)
    ids = ids_for_names(task, value, given or {}, sources)
    if ids is not None:
        return Form([ids], value, False)
    number = number_for_a_name(task, value, given or {}, sources)
    if number is not None:
        return Form([number], value, False)
    fixed, problems = _form_fix(task, None, value, "the answer", yes_no)
    return Form(problems, fixed, True)


def is_bool(value: Any) -> bool:
    """True or False, numpy's too."""
    return isinstance(value, bool) or type(value).__name__ == "bool_"


def is_number(value: Any) -> bool:
    """A number, numpy's too; not a bool.

    >>> import numpy as np
    >>> is_number(np.int64(3)), is_number(2.5), is_number(True), is_number(np.True_), is_number("3")
    (True, True, False, False, False)
    """
    return isinstance(value, Number) and not is_bool(value)


def is_array(value: Any) -> bool:
    """A one-dimensional array of values: numpy's, a pandas Index, or a pandas array (``df['city'].unique()`` of a
    text column is an ArrowStringArray).

    >>> import pandas as pd
    >>> is_array(pd.Series(["a", "b"]).unique()), is_array(pd.Index([1])), is_array([1]), is_array(pd.Series([1]))
    (True, True, False, False)
    """
    return type(value).__name__ in ("ndarray", "Index") or is_type(value, "pandas", "ExtensionArray")


def as_count(value: Any) -> int | None:
    """The answer as a count of things (an int, numpy's too; not a bool), else None.

    >>> as_count(3), as_count(True), as_count(3.0)
    (3, None, None)
    """
    if is_bool(value):
        return None
    if isinstance(value, int) or type(value).__name__ in ("int64", "int32", "intc", "int_"):
        return int(value)
    return None
