"""The continuous-batching generation engine: what it decodes together is what each call decodes alone."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.cave.llm.conftest import needs_torch
from tests.cave.llm.test_hf import MSGS, tiny_model

pytestmark = needs_torch


@pytest.fixture(scope="module")
def tiny() -> tuple[Any, Any]:
    return tiny_model()


# a fixed prompt set of different lengths (so the batch is really left-padded), one repeated (shared prefill)
PROMPTS = [
    MSGS,
    [{"role": "user", "content": "hi"}],
    [{"role": "system", "content": "Be brief."}, *MSGS],
    [{"role": "user", "content": "import pandas as pd\nfor i in range(10): print(i * i)"}],
    MSGS,
]


def encoded(tok: Any) -> list[list[int]]:
    from cave.llm.hf import encode_chat

    return [encode_chat(tok, p) for p in PROMPTS]


def alone(model: Any, tok: Any, ids: list[int], **options: Any) -> Any:
    from cave.llm.hf import generate_batch

    [g] = generate_batch(model, tok, [ids], **options)
    return g


def assert_same(batched: Any, single: Any) -> None:
    assert batched.token_ids == single.token_ids
    assert batched.text == single.text and batched.finish_reason == single.finish_reason
    assert max(abs(a - b) for a, b in zip(batched.logprobs, single.logprobs, strict=True)) < 1e-4


def test_greedy_batch_is_identical_to_unbatched_decoding(tiny: tuple[Any, Any]) -> None:
    from cave.llm.engine import GenerationEngine

    model, tok = tiny
    ids = encoded(tok)
    engine = GenerationEngine(model, tok, stop_ids=set())
    gens = engine.generate_many(ids, max_new_tokens=24, temperature=0)
    assert engine.stats.prefill_calls == [5] and engine.stats.prefilled_prompts == 4  # the repeat is prefilled once
    assert engine.stats.step_rows[0] == 5
    for p, g in zip(ids, gens, strict=True):
        assert g.prompt_ids == p
        assert_same(g, alone(model, tok, p, max_new_tokens=24, temperature=0, stop_ids=set()))


def test_calls_join_a_running_batch_and_leave_it_when_done(tiny: tuple[Any, Any]) -> None:
    """A call that arrives mid-decode joins between two steps; short calls leave early; all equal their solo decode."""
    from cave.llm.engine import GenerationEngine

    model, tok = tiny
    ids = encoded(tok)
    engine = GenerationEngine(model, tok, stop_ids=set(), window_s=0.001, max_wait_s=0.001)
    lengths = [120, 5, 40, 9]
    first = engine.submit(ids[0], max_new_tokens=lengths[0], temperature=0)
    deadline = time.monotonic() + 30
    while len(engine.stats.step_rows) < 3 and time.monotonic() < deadline:  # the first call is decoding
        time.sleep(0.001)
    later = [engine.submit(p, max_new_tokens=n, temperature=0) for p, n in zip(ids[1:4], lengths[1:], strict=True)]
    gens = [first.result(timeout=60)] + [f.result(timeout=60) for f in later]
    assert engine.stats.joined == 3 and max(engine.stats.step_rows) == 4
    assert engine.stats.step_rows[-1] == 1  # the others left; the long call finished alone
    for p, n, g in zip(ids[:4], lengths, gens, strict=True):
        assert len(g.token_ids) == n
        assert_same(g, alone(model, tok, p, max_new_tokens=n, temperature=0, stop_ids=set()))
    assert not engine.busy  # the worker is gone once idle


def test_prompts_that_share_a_start_run_it_once_and_decode_as_alone(tiny: tuple[Any, Any]) -> None:
    """A role's system prompt shared by many calls: the second and later prompts run only their own tokens on the
    first's kept KV (the prefix is learned from the prompts), and every call still decodes what it decodes alone."""
    from cave.llm.engine import GenerationEngine
    from cave.llm.hf import encode_chat
    from cave.llm.prefixes import MIN_PREFIX

    model, tok = tiny
    system = {"role": "system", "content": "You solve word problems in Python. " * 4}
    asks = ["How many eggs are in 3 boxes of 12?", "hi", "Add 2 and 40, then print it twice.", "Sum 1..10."]
    ids = [encode_chat(tok, [system, {"role": "user", "content": a}]) for a in asks]
    shared = len(__import__("os").path.commonprefix(ids))
    assert shared >= MIN_PREFIX
    engine = GenerationEngine(model, tok, stop_ids=set(), window_s=0.001, max_wait_s=0.001)
    first = engine.generate_many(ids[:1], max_new_tokens=8, temperature=0)  # alone: no start to share
    assert engine.stats.prefix_tokens == 0
    together = engine.submit_many(ids[1:3], max_new_tokens=40, temperature=0)  # their shared start runs once
    deadline = time.monotonic() + 30
    while len(engine.stats.step_rows) < 8 + 3 and time.monotonic() < deadline:  # they are decoding
        time.sleep(0.001)
    joined = engine.submit(ids[3], max_new_tokens=12, temperature=0)  # joins: runs only its tokens after the start
    gens = first + [f.result(timeout=60) for f in together] + [joined.result(timeout=60)]
    for p, g in zip(ids, gens, strict=True):
        assert_same(g, alone(model, tok, p, max_new_tokens=len(g.token_ids), temperature=0, stop_ids=set()))
    stats = engine.stats
    assert stats.joined == 1 and stats.prefix_tokens == 3 * shared
    assert stats.prefill_tokens == sum(map(len, ids)) - 3 * shared + shared  # the start itself ran once


def test_each_call_keeps_its_seed_and_its_settings(tiny: tuple[Any, Any]) -> None:
    from cave.llm.engine import GenerationEngine

    model, tok = tiny
    ids = encoded(tok)
    engine = GenerationEngine(model, tok, stop_ids=set())
    seeds = [11, 12, 13, 14, 11]
    sampled = engine.submit_many(ids, max_new_tokens=16, temperature=1.0, seed=seeds)
    greedy = engine.submit_many(ids[:2], max_new_tokens=16, temperature=0)
    hot = engine.submit(ids[2], max_new_tokens=16, temperature=0.7, top_k=20, seed=5)
    for p, s, f in zip(ids, seeds, sampled, strict=True):
        assert_same(f.result(), alone(model, tok, p, max_new_tokens=16, temperature=1.0, seed=s, stop_ids=set()))
    for p, f in zip(ids, greedy, strict=False):
        assert_same(f.result(), alone(model, tok, p, max_new_tokens=16, temperature=0, stop_ids=set()))
    expect = alone(model, tok, ids[2], max_new_tokens=16, temperature=0.7, top_k=20, seed=5, stop_ids=set())
    assert_same(hot.result(), expect)
    # the same prompt and seed twice in one batch (prompts 0 and 4): the same sample
    assert sampled[0].result().token_ids == sampled[4].result().token_ids
    assert sampled[0].result().token_ids != sampled[1].result().token_ids


def test_stop_strings_end_tokens_and_logprobs_for_training(tiny: tuple[Any, Any]) -> None:
    from cave.llm.engine import GenerationEngine
    from cave.llm.hf import score_responses

    model, tok = tiny
    ids = encoded(tok)
    engine = GenerationEngine(model, tok)  # the tokenizer's end-of-turn token stops a call
    solo = alone(model, tok, ids[0], max_new_tokens=40, temperature=1.0, seed=3)
    stop = [solo.text[len(solo.text) // 2 : len(solo.text) // 2 + 2]] if len(solo.text) > 4 else []
    gens = engine.generate_many(ids, max_new_tokens=40, temperature=1.0, seed=3, stop=stop)
    for p, g in zip(ids, gens, strict=True):
        assert_same(g, alone(model, tok, p, max_new_tokens=40, temperature=1.0, seed=3, stop=stop))
        again = score_responses(model, [p], [g.token_ids], pad_id=0)[0]
        assert again == pytest.approx(g.logprobs, abs=1e-3)  # the logprobs the tokens were sampled with


def test_a_cancelled_call_leaves_and_the_others_finish(tiny: tuple[Any, Any]) -> None:
    from cave.llm.engine import GenerationEngine

    model, tok = tiny
    ids = encoded(tok)
    engine = GenerationEngine(model, tok, stop_ids=set())

    async def run() -> list[Any]:
        calls = [asyncio.ensure_future(engine.generate(p, max_new_tokens=100, temperature=0)) for p in ids[:3]]
        await asyncio.sleep(0.05)
        calls[1].cancel()
        return await asyncio.gather(*calls, return_exceptions=True)

    done = asyncio.run(run())
    assert isinstance(done[1], asyncio.CancelledError)
    assert len(done[0].token_ids) == len(done[2].token_ids) == 100


def test_errors_reach_every_caller_and_the_engine_recovers(tiny: tuple[Any, Any]) -> None:
    from cave.llm import LLMError
    from cave.llm.engine import GenerationEngine

    model, tok = tiny
    engine = GenerationEngine(model, tok, stop_ids=set())
    with pytest.raises(LLMError, match="empty prompt"):
        engine.submit([])
    unknown = [len(tok) + 1000] * 3  # no such token: the embedding lookup fails
    failing = engine.submit_many([unknown, encoded(tok)[0]], max_new_tokens=4, temperature=0)
    for f in failing:
        with pytest.raises(IndexError):  # the model's own error, for both calls of the batch
            f.result(timeout=60)
    assert len(engine.generate_many(encoded(tok)[:1], max_new_tokens=4, temperature=0)[0].token_ids) == 4
