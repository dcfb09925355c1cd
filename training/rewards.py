"""Runtime-verifiable rewards for training: ``reward(result, example) -> float`` by name.

A reward reads the team run's outcome (``result.answer`` is the live object the solver passed to
``final_answer``, retrieved from its runtime; ``result.slots`` holds published objects) and the
example's reference. Never an LLM judge. A reward that raises marks that run's samples as failed:
the trainer counts and logs it and drops them, it does not kill the run.

    @register_reward("exact")
    def exact(result, example): return float(result.answer == example["answer"])
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from cave.registry import Registry

__all__ = [
    "REWARDS",
    "RewardFn",
    "answered",
    "exact_match",
    "exact_match_score",
    "f1_score",
    "math_sympy",
    "normalize_answer",
    "sympy_equal",
]

RewardFn = Callable[[Any, Mapping[str, Any]], float]
REWARDS: Registry[RewardFn] = Registry("reward")
register_reward = REWARDS.register  # @register_reward("name"): ``reward: name`` in train configs
get_reward = REWARDS.get


def sympy_equal(answer: Any, reference: Any, *, rel_tol: float = 1e-6) -> bool:
    """Whether ``answer`` equals ``reference`` as a math expression (numbers, fractions, '2*x', '7/2').

    >>> sympy_equal(3.5, "7/2"), sympy_equal("24", 24), sympy_equal("x+x", "2*x"), sympy_equal(None, 1)
    (True, True, True, False)
    >>> sympy_equal("12 apples", 12)
    False
    """
    import sympy

    if answer is None or isinstance(answer, bool):
        return False
    try:
        a = sympy.sympify(str(answer).strip().replace("^", "**"), rational=True)
        b = sympy.sympify(str(reference).strip().replace("^", "**"), rational=True)
    except (sympy.SympifyError, SyntaxError, TypeError, ValueError):
        return False
    if a.is_number and b.is_number:
        x, y = complex(a.evalf()), complex(b.evalf())
        return math.isclose(x.real, y.real, rel_tol=rel_tol, abs_tol=1e-9) and abs(x.imag - y.imag) < 1e-9
    return sympy.simplify(a - b) == 0


@register_reward("math_sympy")
def math_sympy(result: Any, example: Mapping[str, Any]) -> float:
    """1.0 when the team's final answer object equals the example's ``answer`` (checked with sympy), else 0.0."""
    if "answer" not in example:
        raise KeyError(f"example {dict(example)!r} has no 'answer' field; the math_sympy reward needs one")
    return 1.0 if sympy_equal(result.answer, example["answer"]) else 0.0


@register_reward("answered")
def answered(result: Any, example: Mapping[str, Any]) -> float:
    """1.0 when the team ended with any final answer (a smoke-test reward; not a correctness check)."""
    return 0.0 if result.answer is None else 1.0


def normalize_answer(value: Any) -> str:
    """The usual open-QA normalization of an answer object: its text, lowercased, without punctuation, articles
    (a, an, the) and extra spaces. A one-item list or tuple counts as its item; None as "".

    >>> normalize_answer("The  Kalo Works!"), normalize_answer(1784), normalize_answer(["Teman"]), normalize_answer(None)
    ('kalo works', '1784', 'teman', '')
    """
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    text = "" if value is None else str(value).lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match_score(answer: Any, reference: Any) -> float:
    """1.0 when the normalized answer equals the normalized reference.

    >>> exact_match_score("the river Teman.", "Teman"), exact_match_score("Teman", "Teman"), exact_match_score("", "")
    (0.0, 1.0, 0.0)
    """
    a, b = normalize_answer(answer), normalize_answer(reference)
    return 1.0 if a and a == b else 0.0


def f1_score(answer: Any, reference: Any) -> float:
    """Token F1 between the normalized answer and reference (SQuAD's metric).

    >>> f1_score("the river Teman", "Teman"), f1_score("Kalo Works", "Kalo Works"), f1_score("x", "y")
    (0.6666666666666666, 1.0, 0.0)
    """
    a, b = normalize_answer(answer).split(), normalize_answer(reference).split()
    common = sum((Counter(a) & Counter(b)).values())
    if not common:
        return 0.0
    precision, recall = common / len(a), common / len(b)
    return 2 * precision * recall / (precision + recall)


@register_reward("exact_match")
def exact_match(result: Any, example: Mapping[str, Any]) -> float:
    """1.0 when the team's final answer object matches the example's ``answer`` after normalization (Dr. MAS search)."""
    if "answer" not in example:
        raise KeyError(f"example {dict(example)!r} has no 'answer' field; the exact_match reward needs one")
    return exact_match_score(result.answer, example["answer"])
