"""The engine's kept prompt starts: which start a prompt reuses, which starts are learned, and the budget."""

import doctest

import cave.llm.prefixes
from cave.llm.prefixes import PrefixCache


def test_doctests() -> None:
    result = doctest.testmod(cave.llm.prefixes, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 4 and result.failed == 0


def cut(state: str, n: int) -> str:
    return f"{state}[:{n}]"


def test_a_prompt_reuses_its_longest_kept_start_and_keeps_a_token_to_run() -> None:
    cache = PrefixCache(budget=100, min_prefix=2)
    cache.keep((1, 2), "short")
    cache.keep((1, 2, 3, 4), "long")
    assert cache.longest((1, 2, 3, 4, 5)) == (1, 2, 3, 4)
    assert cache.longest((1, 2, 3, 4)) == (1, 2)  # the whole prompt kept would leave nothing to run
    assert cache.longest((1, 9)) == ()


def test_learning_keeps_the_start_shared_with_a_recent_prompt_only_when_long_enough() -> None:
    cache = PrefixCache(budget=100, min_prefix=3, recent=2)
    cache.learn((1, 2, 5), "a", cut)
    cache.learn((1, 2, 6), "b", cut)  # shares 2 < 3 tokens: not kept
    assert len(cache) == 0
    cache.learn((7, 7, 7, 1), "c", cut)
    cache.learn((7, 7, 7, 2), "d", cut)
    assert cache[(7, 7, 7)] == "d[:3]"
    cache.learn((1, 2, 5, 0), "e", cut)  # (1, 2, 5) fell out of the 2 recent prompts: nothing to share with
    assert list(cache.kept) == [(7, 7, 7)]


def test_the_least_recently_used_start_goes_first_past_the_budget() -> None:
    cache = PrefixCache(budget=6, min_prefix=1)
    cache.keep((1, 1, 1), "a")
    cache.keep((2, 2, 2), "b")
    assert cache.longest((1, 1, 1, 0)) == (1, 1, 1)  # used: now the most recent
    cache.keep((3, 3), "c")
    assert list(cache.kept) == [(1, 1, 1), (3, 3)]


def test_prompts_admitted_together_run_each_shared_start_once() -> None:
    cache = PrefixCache(budget=100, min_prefix=2)
    cache.keep((1, 2), "system")
    prompts = [(1, 2, 3, 4, 5, 6), (1, 2, 3, 4, 5, 7), (1, 2, 3, 4, 9), (8, 8, 8)]
    runs = []
    for start, kept in cache.shared_starts(prompts):
        runs.append((start, kept))
        cache.keep(start, "kv")
    # (1,2,3,4,5) extends the kept (1,2) by 3 tokens; the third prompt's start (1,2,3,4) extends (1,2) by 2
    assert runs == [((1, 2, 3, 4, 5), (1, 2)), ((1, 2, 3, 4), (1, 2))]
    assert PrefixCache(budget=0).on is False
