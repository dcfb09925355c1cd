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
from collections.abc import Callable, Mapping
from typing import Any

from cave.registry import Registry

__all__ = ["REWARDS", "RewardFn", "answered", "math_sympy", "sympy_equal"]

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
