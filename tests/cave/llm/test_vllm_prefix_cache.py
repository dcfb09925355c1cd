"""The ``openai`` backend against a REAL vLLM server (the CPU build): cached prompt tokens and the response prefix.

vLLM reports the prompt tokens its prefix cache served in ``usage.prompt_tokens_details.cached_tokens`` when
started with ``--enable-prompt-tokens-details``; an agent's later steps re-send the earlier ones, so after
step 1 most of each prompt must come from the cache. The server is started as tests/training/test_vllm_server.py
does (a Python with vLLM: ``$CAVE_VLLM_PYTHON`` or ``.venv-vllm``; skipped without one unless
``$CAVE_REQUIRE_VLLM``/``$CI`` is set), serving a tiny random Llama with SmolLM2's tokenizer (it starts in
30-80 s on a CPU; the requests take milliseconds).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from cave.llm import Completion, TextDelta
from cave.llm.base import StreamItem
from cave.llm.openai import OpenAICompatible

pytestmark = pytest.mark.slow

PREFIX = "```python\n"


class Recording(OpenAICompatible):
    """Keeps every Completion it returned."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.completions: list[Completion] = []

    async def _stream(self, messages: list[dict], request: Any) -> AsyncIterator[StreamItem]:
        async for item in super()._stream(messages, request):
            if isinstance(item, Completion):
                self.completions.append(item)
            yield item


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.training.test_rollout import smollm2_tokenizer
    from tests.training.test_vllm_server import vllm_python

    python = vllm_python()  # skips (or fails on CI) without a vLLM
    from cave.training.vllm_server import launch_vllm_server

    from tests.conftest import tiny_llama

    tok = smollm2_tokenizer()
    root = tmp_path_factory.mktemp("vllm-cache")
    model = tiny_llama(len(tok), hidden=64, intermediate=128, heads=2, kv_heads=1, positions=8192,
                       bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)  # fmt: skip
    model.generation_config.eos_token_id = tok.eos_token_id
    model_dir = Path(root / "tiny")
    model.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    args = ["--enforce-eager", "--enable-prefix-caching", "--enable-prompt-tokens-details"]
    with launch_vllm_server(model_dir, python=python, dtype="float32", max_model_len=8192,
                            kv_cache_bytes=256 << 20, extra_args=args, log_path=root / "server.log") as srv:  # fmt: skip
        yield srv


def backend(server: Any) -> Recording:
    return Recording(server.url, server.model, context_window=8192, token_ids=True)


def test_an_agent_run_is_served_from_the_prefix_cache_after_step_1(server: Any) -> None:
    """A 3-step agent run: every call after the first finds the conversation so far in vLLM's prefix cache.

    The replies are a code block the random model never closes within ``max_tokens``, so each step ends
    "cut" and the run goes on to the next step (no continuations), until ``max_steps``.
    """
    from cave.agent import Agent

    llm = backend(server)
    agent = Agent(llm, "inprocess", max_steps=3, max_tokens=8, max_continuations=0, response_prefix=PREFIX)
    try:
        result = agent.run("Print the sum of 2 and 3.")
    finally:
        agent.runtime.close()
    steps = result.trajectory.steps
    calls = llm.completions
    assert len(steps) >= 2 and len(calls) >= 2, (result.status, [s.observation for s in steps])
    assert calls[0].usage.prompt_tokens > 100
    for c in calls[1:]:
        assert c.usage.cached_tokens > 0, c.usage
        # at least the first call's prompt, less vLLM's partial last block, came from the cache
        assert c.usage.cached_tokens >= calls[0].usage.prompt_tokens // 2, (c.usage, calls[0].usage)
    assert sum(s.usage.cached_tokens for s in steps[1:]) > 0  # and the trajectory records it
    # code steps are opened by the prefix; the summary at max_steps asks for prose and goes without it
    # (a step whose reply repeated one already cut off made more calls: it was sampled again, see meta["resampled"])
    kinds = [s.kind for s in steps for _ in range(1 + len(s.meta.get("resampled", ())))]
    assert len(kinds) == len(calls) and kinds[-1] == "summary", kinds
    assert [c.text.startswith(PREFIX) for c in calls] == [k != "summary" for k in kinds], kinds


def test_prefix_is_continued_by_vllm_and_counted_as_prompt(server: Any) -> None:
    """``prefix`` over the openai backend: vLLM continues the trailing assistant message (continue_final_message)."""
    llm = backend(server)
    msgs = [{"role": "user", "content": "What is 2 + 3?"}]

    async def go() -> tuple[list[str], Completion, Completion]:
        deltas, final = [], None
        async for item in llm.stream(msgs, prefix=PREFIX, max_tokens=6, seed=1):
            if isinstance(item, TextDelta):
                deltas.append(item.text)
            else:
                final = item
        plain = await llm.complete(msgs, max_tokens=6, seed=1)
        await llm.aclose()
        return deltas, final, plain

    deltas, c, plain = asyncio.run(go())
    assert c.text.startswith(PREFIX) and deltas[0] == PREFIX and "".join(deltas) == c.text
    # the prompt is the plain one with the prefix appended (in place of nothing: the generation prompt ends it)
    head, tail = c.prompt_token_ids[: len(plain.prompt_token_ids)], c.prompt_token_ids[len(plain.prompt_token_ids) :]
    assert head == plain.prompt_token_ids and tokenizer(server).decode(tail) == PREFIX
    assert c.usage.prompt_tokens == len(c.prompt_token_ids) > plain.usage.prompt_tokens
    assert len(c.token_ids) == c.usage.completion_tokens <= 6  # generated tokens only


def tokenizer(server: Any) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(server.command[server.command.index("--model") + 1], local_files_only=True)
