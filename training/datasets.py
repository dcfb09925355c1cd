"""Seeded data generators with train/test splits, by name (``data: {generator: math_word, split: train}``).

A generator is ``fn(split, n, seed) -> list[example]``; each example has the ``question`` the team is given and
the reward's reference (``answer``). A generator is named by its registered name or by an import path
``package.module:function`` (any function with that signature, e.g. the search benchmark's questions,
``cave.benchmarks.search.corpus:split_questions``: the trainer never imports a benchmark itself).
``math_word`` writes arithmetic word problems of one to three steps with
exact integer answers and numbers large enough that guessing fails. Which split a problem belongs to is a
function of its normalized question text alone (a hash), so train and test can never share a problem, whatever
the seeds and sizes::

    >>> train = math_word_problems("train", 5, seed=0)
    >>> test = math_word_problems("test", 5, seed=0)
    >>> sorted(train[0])
    ['answer', 'question', 'steps', 'template']
    >>> train == math_word_problems("train", 5, seed=0)          # seeded: the same problems every time
    True
    >>> {p["question"] for p in train} & {p["question"] for p in test}
    set()
    >>> split_of(train[0]["question"]), split_of(test[0]["question"])
    ('train', 'test')
"""

from __future__ import annotations

import hashlib
import importlib
import random
from collections.abc import Callable
from typing import Any

from cave.registry import Registry

__all__ = [
    "GENERATORS",
    "SPLITS",
    "Generator",
    "generate",
    "math_word_problems",
    "resolve_generator",
    "normalize_question",
    "split_of",
]

Generator = Callable[[str, int, int], list[dict[str, Any]]]
GENERATORS: Registry[Generator] = Registry("data generator")
register_generator = GENERATORS.register  # @register_generator("name"): ``data: {generator: name}`` in train configs

SPLITS = ("train", "test")
TEST_SHARE = 20  # percent of the question-hash space that belongs to the test split
DEFAULT_SIZES = {"train": 1000, "test": 200}


def normalize_question(text: str) -> str:
    """Lower case, single spaces: the form that decides a problem's identity and split.

    >>> normalize_question("  What is  2 + 3? ")
    'what is 2 + 3?'
    """
    return " ".join(text.lower().split())


def split_of(question: str) -> str:
    """``test`` for a fixed 20% of the sha256 space of normalized questions, else ``train``.

    >>> split_of("what is 2 + 3?") == split_of("  What is 2 + 3?")
    True
    """
    h = int.from_bytes(hashlib.sha256(normalize_question(question).encode()).digest()[:8], "big")
    return "test" if h % 100 < TEST_SHARE else "train"


def resolve_generator(name: str) -> Generator:
    """A registered generator, or the function an import path ``package.module:function`` names.

    >>> resolve_generator("math_word") is math_word_problems
    True
    >>> resolve_generator("cave.training.datasets:math_word_problems").__name__
    'math_word_problems'
    >>> resolve_generator("cave.training.datasets:nope")
    Traceback (most recent call last):
    ...
    ValueError: module cave.training.datasets has no function 'nope'; give a registered name (math_word) or package.module:function
    """
    if ":" not in name:
        return GENERATORS.get(name)
    module_name, _, attr = name.partition(":")
    hint = f"give a registered name ({', '.join(GENERATORS.names())}) or package.module:function"
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"cannot import {module_name!r} ({e}); {hint}") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ValueError(f"module {module_name} has no function {attr!r}; {hint}")
    return fn


def generate(name: str, split: str, n: int | None = None, seed: int = 0) -> list[dict[str, Any]]:
    """The examples of generator ``name``: ``n`` of ``split`` (default: 1,000 train / 200 test)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; the generators' splits are {', '.join(SPLITS)}")
    return resolve_generator(name)(split, n or DEFAULT_SIZES[split], seed)


# -- math word problems ---------------------------------------------------------------------------------
NAMES = ("Ava", "Ben", "Chloe", "Diego", "Emma", "Farid", "Grace", "Hiro", "Isla", "Jonas", "Kemi", "Liam", "Mei")
ITEMS = ("apples", "books", "bolts", "candles", "cards", "eggs", "marbles", "pencils", "stamps", "tiles")


def _problem(rng: random.Random) -> tuple[str, int, int, str]:
    """One random problem: (question, answer, arithmetic steps, template name)."""
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    big, mid, small = (lambda: rng.randint(120, 999)), (lambda: rng.randint(13, 99)), (lambda: rng.randint(3, 12))
    kind = rng.randrange(11)
    if kind == 0:
        a, b = big(), big()
        return f"{name} has {a} {item} and buys {b} more. How many {item} does {name} have now?", a + b, 1, "add"
    if kind == 1:
        a, b = big(), mid()
        q = f"A store had {a + b} {item} and sold {b} of them. How many {item} are left?"
        return q, a, 1, "sub"
    if kind == 2:
        a, b = mid(), mid()
        return f"{name} packs {a} boxes with {b} {item} in each box. How many {item} is that?", a * b, 1, "mul"
    if kind == 3:
        a, b = mid(), small()
        q = f"{a * b} {item} are shared equally among {b} friends. How many {item} does each friend get?"
        return q, a, 1, "div"
    if kind == 4:
        a, b = mid(), mid()
        c = rng.randint(10, a * b - 1)
        q = f"{name} has {a} crates with {b} {item} in each crate and gives away {c} {item}. How many {item} are left?"
        return q, a * b - c, 2, "mul_sub"
    if kind == 5:
        a, b = big(), big()
        c = rng.randint(10, a + b - 1)
        q = f"A library had {a} {item}, received {b} more, then lent out {c}. How many {item} does it have now?"
        return q, a + b - c, 2, "add_sub"
    if kind == 6:
        a, b, p = mid(), mid(), small()
        q = f"Tickets cost {p} dollars each. A club buys {a} adult and {b} child tickets. How many dollars does it pay?"
        return q, (a + b) * p, 2, "add_mul"
    if kind == 7:
        a, w = mid(), small()
        c = rng.randint(10, a * w - 1)
        q = f"{name} saves {a} dollars a week for {w} weeks, then spends {c} dollars. How many dollars are left?"
        return q, a * w - c, 2, "mul_sub_money"
    if kind == 8:
        a, b, c, d, e = mid(), mid(), mid(), small(), mid()
        c = min(c, a * b - 1)
        q = (
            f"A shop has {a} shelves with {b} {item} on each. It sells {c} {item}, then receives {d} boxes of "
            f"{e} {item}. How many {item} does it have now?"
        )
        return q, a * b - c + d * e, 3, "mul_sub_add_mul"
    if kind == 9:
        a, h, d = mid(), small(), small()
        c = rng.randint(10, a * h * d - 1)
        q = (
            f"A machine makes {a} {item} an hour for {h} hours a day, {d} days in a row. Then {c} {item} are "
            f"shipped. How many {item} remain?"
        )
        return q, a * h * d - c, 3, "mul_mul_sub"
    a, b, c = mid(), small(), mid()
    k = rng.randint(2, b)
    q = (
        f"{a * b} {item} are split equally into {b} bags. {name} takes {k} of the bags and finds {c} more {item}. "
        f"How many {item} does {name} have?"
    )
    return q, a * k + c, 3, "div_mul_add"


@register_generator("math_word")
def math_word_problems(split: str, n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` distinct arithmetic word problems of ``split`` (1-3 steps, exact integer answers), seeded.

    The stream of problems is fixed by ``seed``; a problem goes to the split its question hashes to
    (``split_of``), so a smaller ``n`` is a prefix of a larger one and the splits never overlap.

    >>> [p["answer"] for p in math_word_problems("test", 3, seed=1)] == [
    ...     p["answer"] for p in math_word_problems("test", 5, seed=1)[:3]]
    True
    >>> {p["steps"] for p in math_word_problems("train", 200)}
    {1, 2, 3}
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; math_word has {', '.join(SPLITS)}")
    rng = random.Random(f"math_word:{seed}")
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for _ in range(200 * n + 10_000):  # a bound, never reached in practice (about 1.25 draws per train problem)
        if len(out) == n:
            break
        question, answer, steps, template = _problem(rng)
        key = normalize_question(question)
        if key in seen or split_of(question) != split:
            continue
        seen.add(key)
        out.append({"question": question, "answer": int(answer), "steps": steps, "template": template})
    return out
