"""The response prefix option (``stream/complete(..., prefix=...)``) on every backend that has it.

The prefix is part of the prompt (prompt ids and prompt tokens include it, response token ids do not),
``Completion.text`` and the stream start with it, and stop sequences are matched in the generated text only.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from cave.llm import LLM, Completion, LLMError, Scripted, create_backend
from tests.cave.llm.conftest import collect, embedded_or_skip, needs_llama, needs_torch
from tests.cave.llm.test_hf import tiny  # noqa: F401 - the tiny random Llama fixture
from tests.cave.llm.test_openai import MESSAGES, FakeServer, chunk, make, sse, status, usage_chunk

PREFIX = "```python\n"
ASK = [{"role": "user", "content": "Print the sum of 2 and 3 in Python."}]


# -- Scripted: emulated --------------------------------------------------------------------------------
async def test_scripted_puts_the_prefix_in_front_unless_the_reply_has_it() -> None:
    llm = Scripted(["print(5)\n```", PREFIX + "print(6)\n```", "no prefix asked"])
    deltas, c = await collect(llm, ASK, prefix=PREFIX)
    assert c.text == PREFIX + "print(5)\n```" and deltas[0].startswith(PREFIX) and "".join(deltas) == c.text
    plain = await Scripted(["print(5)\n```"]).complete(ASK)
    assert c.usage.prompt_tokens == plain.usage.prompt_tokens + llm.count_tokens(PREFIX)
    assert c.usage.completion_tokens == plain.usage.completion_tokens  # the prefix is not generated
    assert (await llm.complete(ASK, prefix=PREFIX)).text == PREFIX + "print(6)\n```"  # not doubled
    assert (await llm.complete(ASK)).text == "no prefix asked"
    assert llm.prefixes == [PREFIX, PREFIX, ""]


async def test_a_backend_without_prefix_support_refuses_it() -> None:
    class Plain(LLM):
        async def _complete(self, messages: list[dict], **kwargs: Any) -> Completion:
            return Completion("hi")

    with pytest.raises(LLMError, match="does not support a response prefix"):
        await Plain().complete(ASK, prefix=PREFIX)
    assert (await Plain().complete(ASK)).text == "hi"


async def test_a_complete_only_backend_that_supports_it_gets_the_prefix() -> None:
    class Prefilled(LLM):
        supports_prefix = True

        async def _complete(self, messages: list[dict], prefix: str = "", **kwargs: Any) -> Completion:
            return Completion(prefix + "print(5)")

    deltas, c = await collect(Prefilled(), ASK, prefix=PREFIX)
    assert c.text == PREFIX + "print(5)" and "".join(deltas) == c.text


# -- openai: a trailing assistant message that vLLM continues ---------------------------------------------
@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    yield s
    s.close()


async def test_openai_sends_a_final_assistant_message_to_continue(server: FakeServer) -> None:
    server.script = [sse([chunk("print(5)"), chunk("\n", "stop"), usage_chunk(20, 3, cached=16)])]
    llm = make(server)
    deltas, c = await collect(llm, MESSAGES, prefix=PREFIX, stop=["```"])
    body = server.requests[0]["body"]
    assert body["messages"] == [*MESSAGES, {"role": "assistant", "content": PREFIX}]
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    assert deltas == [PREFIX, "print(5)", "\n"] and c.text == PREFIX + "print(5)\n"
    assert (c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.cached_tokens) == (20, 3, 16)
    await llm.aclose()


async def test_openai_prefill_message_mode_and_no_prefix(server: FakeServer) -> None:
    server.script = [sse([chunk("x", "stop")]), sse([chunk("y", "stop")])]
    llm = make(server, prefill="message")
    assert (await llm.complete(MESSAGES, prefix=PREFIX)).text == PREFIX + "x"
    body = server.requests[0]["body"]
    assert body["messages"][-1] == {"role": "assistant", "content": PREFIX}
    assert "continue_final_message" not in body and "add_generation_prompt" not in body
    assert (await llm.complete(MESSAGES)).text == "y"
    assert server.requests[1]["body"]["messages"] == MESSAGES and "continue_final_message" not in body
    await llm.aclose()
    with pytest.raises(ValueError, match="prefill"):
        make(server, prefill="anthropic")


async def test_openai_cached_tokens_from_a_json_body_too(server: FakeServer) -> None:
    """A server that ignores stream=True and answers one JSON object still reports its cached prompt tokens."""
    body = {
        "model": "m",
        "choices": [{"index": 0, "message": {"content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 1, "total_tokens": 41,
                  "prompt_tokens_details": {"cached_tokens": 32}},
    }  # fmt: skip
    server.script = [status(200, json.dumps(body))]
    c = await make(server).complete(MESSAGES)
    assert c.text == "ok" and c.usage.cached_tokens == 32


# -- local: the real SmolLM2 -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def smol() -> Iterator[LLM]:
    embedded_or_skip("smollm2")
    llm = create_backend("local", model="smollm2", n_ctx=1024, seed=0)
    yield llm
    asyncio.run(llm.aclose())


@pytest.mark.model
@needs_llama
async def test_local_reply_starts_with_the_prefix_which_counts_as_prompt(smol: Any) -> None:
    deltas, c = await collect(smol, ASK, prefix=PREFIX, max_tokens=24)
    assert c.text.startswith(PREFIX) and len(c.text) > len(PREFIX)
    assert deltas[0] == PREFIX and "".join(deltas) == c.text
    prompt_ids = smol.encode(ASK, prefix=PREFIX)
    assert c.prompt_token_ids == prompt_ids and c.usage.prompt_tokens == len(prompt_ids)
    assert len(prompt_ids) > len(smol.encode(ASK))  # the prefix tokens are prompt tokens
    assert c.usage.completion_tokens == len(c.token_ids) <= 24
    # the response ids are the generated text alone: they decode to the text after the prefix
    ids = c.token_ids[:-1] if c.finish_reason == "stop" else c.token_ids  # less the end-of-turn token
    assert PREFIX + smol._llm.detokenize(ids).decode("utf-8") == c.text


@pytest.mark.model
@needs_llama
async def test_local_stop_sequences_match_generated_text_only(smol: Any) -> None:
    """A stop string that the prefix itself contains does not end the reply at once."""
    c = await smol.complete(ASK, prefix=PREFIX, stop=["```"], max_tokens=48)
    assert c.text.startswith(PREFIX) and len(c.token_ids) > 1
    assert "```" not in c.text[len(PREFIX) :]


# -- transformers: the tiny model of test_hf ---------------------------------------------------------------
@needs_torch
async def test_transformers_prefix_is_prompt_not_response(tiny: tuple[Any, Any]) -> None:  # noqa: F811
    from cave.llm import TransformersLLM, generate_batch
    from cave.llm.hf import encode_chat

    model, tok = tiny
    llm = TransformersLLM(model, tok, seed=0)
    prefix = "def add("
    deltas, c = await collect(llm, ASK, prefix=prefix, max_tokens=8, temperature=0.0)
    ids = encode_chat(tok, ASK, prefix=prefix)
    assert c.prompt_token_ids == ids and c.usage.prompt_tokens == len(ids) > len(encode_chat(tok, ASK))
    assert c.text.startswith(prefix) and deltas[0] == prefix and "".join(deltas) == c.text
    assert tok.decode(c.token_ids, skip_special_tokens=True) == c.text[len(prefix) :]
    g = generate_batch(model, tok, [ASK], max_new_tokens=8, temperature=0.0, prefix=prefix)[0]
    assert g.prompt_ids == ids and g.token_ids == c.token_ids and g.completion("m").text == c.text
