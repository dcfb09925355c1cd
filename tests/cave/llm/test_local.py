"""The embedded llama.cpp backend on the real shipped models (SmolLM2 for speed, Qwen end to end)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator

import pytest

from cave.llm import Completion, LLMError, LocalLLM, TextDelta, create_backend
from tests.cave.llm.conftest import collect, embedded_or_skip, needs_llama

pytestmark = [pytest.mark.model, needs_llama]

CODE_TASK = [
    {
        "role": "user",
        "content": "Write a Python function is_prime(n) that returns True if n is prime. Reply with only a code block.",
    }
]


@pytest.fixture(scope="module")
def smol() -> Iterator[LocalLLM]:
    embedded_or_skip("smollm2")
    llm = LocalLLM("smollm2", n_ctx=1024, seed=0)
    yield llm
    asyncio.run(llm.aclose())


async def test_stream_and_complete_agree_with_exact_usage(smol: LocalLLM) -> None:
    deltas, final = await collect(smol, CODE_TASK, max_tokens=48)
    assert "".join(deltas) == final.text and len(deltas) > 5
    prompt_ids = smol.encode(CODE_TASK)
    assert final.prompt_token_ids == prompt_ids
    assert final.usage.prompt_tokens == len(prompt_ids)
    assert final.usage.completion_tokens == len(final.token_ids) <= 48
    assert final.usage.total_tokens == final.usage.prompt_tokens + final.usage.completion_tokens
    assert final.model == "smollm2"
    again = await smol.complete(CODE_TASK, max_tokens=48)  # greedy: the same text, same accounting
    assert (again.text, again.usage.completion_tokens) == (final.text, final.usage.completion_tokens)
    assert again.usage.cached_tokens == len(prompt_ids) - 1  # the KV cache still held this prompt
    smol.forget_prefixes()  # a measurement's cold start: nothing of the earlier call serves the next
    cold = await smol.complete(CODE_TASK, max_tokens=48)
    assert cold.usage.cached_tokens == 0 and cold.text == final.text


async def test_concurrent_requests_share_the_model_safely(smol: LocalLLM) -> None:
    """Two agents on one loaded model: requests take turns; each gets what it would get alone."""
    other = [{"role": "user", "content": "Name three colors."}]
    alone = [await smol.complete(m, max_tokens=12) for m in (CODE_TASK, other)]
    together = await asyncio.gather(smol.complete(CODE_TASK, max_tokens=12), smol.complete(other, max_tokens=12))
    assert [c.token_ids for c in together] == [c.token_ids for c in alone]


async def test_max_tokens_gives_length(smol: LocalLLM) -> None:
    c = await smol.complete(CODE_TASK, max_tokens=5)
    assert c.finish_reason == "length" and c.usage.completion_tokens == 5


async def test_stop_sequences_cut_text_and_stream(smol: LocalLLM) -> None:
    full = await smol.complete(CODE_TASK, max_tokens=48)
    stop = "return"  # stop at the first occurrence of a word the reply contains
    assert stop in full.text
    deltas, cut = await collect(smol, CODE_TASK, max_tokens=48, stop=[stop, "never-appears"])
    assert cut.text == full.text[: full.text.index(stop)] and cut.finish_reason == "stop"
    assert "".join(deltas) == cut.text  # nothing of the stop sequence leaked into the stream


async def test_seed_makes_sampling_reproducible(smol: LocalLLM) -> None:
    a = await smol.complete(CODE_TASK, max_tokens=24, temperature=1.0, seed=7)
    b = await smol.complete(CODE_TASK, max_tokens=24, temperature=1.0, seed=7)
    assert a.token_ids == b.token_ids
    others = [await smol.complete(CODE_TASK, max_tokens=24, temperature=1.0, seed=s) for s in (8, 9)]
    assert any(o.token_ids != a.token_ids for o in others)


async def test_generation_does_not_block_the_event_loop(smol: LocalLLM) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    task = asyncio.create_task(ticker())
    loop = asyncio.get_running_loop()
    start = loop.time()
    c = await smol.complete([{"role": "user", "content": "Count from 1 to 30."}], max_tokens=40)
    elapsed = loop.time() - start
    task.cancel()
    assert c.usage.completion_tokens > 10
    # a blocked loop would tick ~0 times; allow for a very busy machine
    assert ticks >= min(20, elapsed / 0.005 / 4), (ticks, elapsed)


async def test_breaking_out_of_a_stream_frees_the_model(smol: LocalLLM) -> None:
    async for item in smol.stream(CODE_TASK, max_tokens=200):
        if isinstance(item, TextDelta):
            break  # the agent gave up on this generation
    c = await asyncio.wait_for(smol.complete(CODE_TASK, max_tokens=3), timeout=60)
    assert c.usage.completion_tokens == 3


async def test_prompt_longer_than_the_window_is_a_clear_error(smol: LocalLLM) -> None:
    with pytest.raises(LLMError, match="context window is 1024: compact the conversation"):
        await smol.complete([{"role": "user", "content": "word " * 2000}])


def test_registry_and_hf_directory_dispatch(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(LLMError, match="without config.json"):
        create_backend("local", model=str(tmp_path))
    with pytest.raises(LLMError, match="neither an embedded model"):
        create_backend("local", model=str(tmp_path / "missing.gguf"))


def test_default_model_writes_a_correct_function() -> None:
    """End to end on the default embedded model: it writes is_prime, and the function works."""
    embedded_or_skip("qwen-1.5b")

    async def run() -> Completion:
        llm = create_backend("local")  # the default: Qwen2.5-Coder-1.5B-Instruct
        try:
            assert isinstance(llm, LocalLLM) and llm.model_name == "qwen-1.5b" and llm.context_window == 4096
            return await llm.complete(CODE_TASK, max_tokens=200, temperature=0.0)
        finally:
            await llm.aclose()

    c = asyncio.run(run())
    match = re.search(r"```(?:python)?\n(.*?)```", c.text, re.DOTALL)
    assert match, c.text
    namespace: dict = {}
    exec(match.group(1), namespace)  # noqa: S102 - the point of the test
    is_prime = namespace["is_prime"]
    assert [n for n in range(-3, 40) if is_prime(n)] == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37]
    assert c.finish_reason == "stop" and c.usage.completion_tokens == len(c.token_ids) > 10


def test_default_model_calls_tools_through_its_template() -> None:
    """Qwen's GGUF template has a tools section; its JSON reply becomes an OpenAI-format tool call."""
    embedded_or_skip("qwen")
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather in a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            },
        }
    ]

    async def run() -> Completion:
        llm = LocalLLM("qwen", n_ctx=1024)
        try:
            assert llm.supports_tools
            assert "get_weather" in llm.render([{"role": "user", "content": "hi"}], tools)
            return await llm.complete([{"role": "user", "content": "What's the weather in Paris?"}], tools=tools)
        finally:
            await llm.aclose()

    c = asyncio.run(run())
    assert c.tool_calls, c.text
    assert c.tool_calls[0]["function"]["name"] == "get_weather" and "Paris" in c.tool_calls[0]["function"]["arguments"]
    assert c.finish_reason == "tool_calls"


async def test_callers_taking_turns_keep_their_prefixes_and_their_outputs(smol: LocalLLM) -> None:
    """Two conversations alternate on one model (a team's roles): each one's next prompt is served from its own
    saved KV state, not re-read from the start, and greedy outputs are what they are without saved states."""
    sys_a = {"role": "system", "content": "You write Python. " + "Keep every answer short and exact. " * 12}
    sys_b = {"role": "system", "content": "You check answers. " + "Say only OK or WRONG, then one reason. " * 12}
    a1 = [sys_a, {"role": "user", "content": "Write a function that adds two numbers."}]
    b1 = [sys_b, {"role": "user", "content": "Is 2 + 2 = 5?"}]

    async def turns(llm: LocalLLM) -> list[Completion]:
        ra1 = await llm.complete(a1, max_tokens=24)
        rb1 = await llm.complete(b1, max_tokens=12)
        a2 = [*a1, {"role": "assistant", "content": ra1.text}, {"role": "user", "content": "Now multiply."}]
        ra2 = await llm.complete(a2, max_tokens=24)
        b2 = [*b1, {"role": "assistant", "content": rb1.text}, {"role": "user", "content": "Is 3 * 3 = 9?"}]
        rb2 = await llm.complete(b2, max_tokens=12)
        return [ra1, rb1, ra2, rb2]

    plain = LocalLLM("smollm2", n_ctx=1024, seed=0, kv_slots=0)
    try:
        without = await turns(plain)
    finally:
        await plain.aclose()
    restored_before = smol.restored
    with_states = await turns(smol)
    assert [c.token_ids for c in with_states] == [c.token_ids for c in without]
    a1_len = len(with_states[0].prompt_token_ids)
    # Without saved states, the second turn of each conversation shares only the chat header with the other's.
    assert without[2].usage.cached_tokens < 10 and without[3].usage.cached_tokens < 10
    assert with_states[2].usage.cached_tokens >= a1_len and with_states[3].usage.cached_tokens >= 100
    assert smol.restored - restored_before == 2
