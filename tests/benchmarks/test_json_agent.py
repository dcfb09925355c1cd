"""The JSON function-calling baseline: both formats, usage per step, context overflow."""

from __future__ import annotations

import json

from cave.benchmarks.json_agent import JsonAgent, ToolSpec, parse_prompted_calls

from cave.llm.base import Completion, Scripted, Usage

ADD = ToolSpec(
    "add",
    "Add two numbers.",
    {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]},
    fn=lambda a, b: a + b,
)


def test_prompted_format_runs_tools_and_records_steps() -> None:
    llm = Scripted(['{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}', "The sum is 5."])
    result = JsonAgent(llm, [ADD], native=False).run("What is 2 + 3?")
    assert result.status == "success" and result.answer == "The sum is 5."
    steps = result.trajectory.steps
    assert len(steps) == 2
    assert steps[0].meta["tool_calls"][0] == {
        "id": "call_0_0",
        "name": "add",
        "arguments": {"a": 2, "b": 3},
        "output": "5",
        "error": False,
    }
    assert all(s.usage.prompt_tokens > 0 and s.usage.completion_tokens > 0 for s in steps)
    # The tool schemas are in the system prompt; the tool result went back as a user message.
    assert '"name": "add"' in llm.calls[0][0]["content"]
    assert llm.calls[1][-1] == {"role": "user", "content": 'Tool results:\n[{"name": "add", "output": "5"}]'}
    assert result.usage.total_tokens == sum(s.usage.total_tokens for s in steps)


class NativeScripted(Scripted):
    supports_tools = True


def test_native_format_sends_tools_and_tool_messages() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": json.dumps({"a": 1, "b": 1})}}
    llm = NativeScripted(
        [Completion(text="", tool_calls=[call], usage=Usage(10, 3, 13)), Completion("2", usage=Usage(20, 1, 21))]
    )
    seen: list[dict] = []
    orig = llm.stream

    async def spy(messages, **kwargs):  # record the tools the backend was offered
        seen.append(kwargs)
        async for item in orig(messages, **kwargs):
            yield item

    llm.stream = spy
    result = JsonAgent(llm, [ADD]).run("1+1?")
    assert result.answer == "2"
    assert seen[0]["tools"] == [ADD.openai()]
    assert llm.calls[1][-1] == {"role": "tool", "tool_call_id": "c1", "name": "add", "content": "2"}
    assert llm.calls[1][-2]["tool_calls"][0]["function"]["name"] == "add"
    assert result.usage.prompt_tokens == 30


def test_bad_calls_are_observations_not_crashes() -> None:
    llm = Scripted(
        ['{"tool_calls": [{"name": "mul", "arguments": {}}, {"name": "add", "arguments": {"a": 1}}]}', "sorry"]
    )
    result = JsonAgent(llm, [ADD], native=False).run("?")
    calls = result.trajectory.steps[0].meta["tool_calls"]
    assert calls[0]["error"] and "no tool named 'mul'" in calls[0]["output"]
    assert calls[1]["error"] and "TypeError" in calls[1]["output"]


def test_context_overflow_stops_before_the_call() -> None:
    big = ToolSpec(
        "rows", "All rows.", {"type": "object", "properties": {}}, fn=lambda: [{"x": i} for i in range(5000)]
    )
    llm = Scripted(['{"tool_calls": [{"name": "rows", "arguments": {}}]}', "never sent"], context_window=2000)
    result = JsonAgent(llm, [big], native=False).run("sum x")
    assert result.status == "context_overflow"
    assert result.trajectory.meta["overflow"]["prompt_tokens"] > 2000
    assert len(llm.calls) == 1  # the second call was never made


def test_history_continues_across_runs() -> None:
    llm = Scripted(["first", "second"])
    agent = JsonAgent(llm, [ADD], native=False)
    agent.run("turn one")
    agent.run("turn two")
    contents = [m["content"] for m in llm.calls[1]]
    assert contents[1:] == ["turn one", "first", "turn two"]


def test_parse_prompted_calls_shapes() -> None:
    assert parse_prompted_calls('[{"name": "f", "arguments": {"x": 1}}]')[0][0].arguments == {"x": 1}
    assert parse_prompted_calls('{"name": "f", "parameters": {"x": 2}}')[0][0].arguments == {"x": 2}
    calls, err = parse_prompted_calls('{"tool_calls": [{"name": "f", "arguments": {"x": }]}')
    assert calls == [] and err and "invalid JSON" in err
