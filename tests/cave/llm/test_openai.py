"""OpenAICompatible against a real HTTP server on 127.0.0.1 that misbehaves on purpose."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from cave.llm import Completion, LLMError, TextDelta, create_backend
from cave.llm.openai import OpenAICompatible, chat_url, retry_after

Behaviour = Callable[[BaseHTTPRequestHandler, dict[str, Any]], None]


class FakeServer:
    """A /v1/chat/completions server that plays a script of behaviours, one per request."""

    def __init__(self) -> None:
        self.script: list[Behaviour] = []
        self.requests: list[dict[str, Any]] = []
        self.times: list[float] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "body": body, "headers": dict(self.headers)})
                server.times.append(time.monotonic())
                behaviour = server.script.pop(0) if server.script else status(500, "script exhausted")
                behaviour(self, body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def status(code: int, text: str = "", headers: dict[str, str] | None = None) -> Behaviour:
    def play(h: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        data = text.encode()
        h.send_response(code)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    return play


def sse(chunks: list[dict[str, Any] | str], done: bool = True, then_drop: bool = False) -> Behaviour:
    def play(h: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        if then_drop:  # promise more bytes than we send, so the client sees a broken stream
            h.send_header("Content-Length", "100000")
        h.end_headers()
        h.wfile.write(b": keep-alive comment\n\n")
        for c in chunks:
            payload = c if isinstance(c, str) else json.dumps(c)
            h.wfile.write(f"data: {payload}\n\n".encode())
            h.wfile.flush()
        if done:
            h.wfile.write(b"data: [DONE]\n\n")
        h.close_connection = True

    return play


def drop(h: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    """Close the connection without answering."""
    h.close_connection = True
    h.connection.shutdown(socket.SHUT_RDWR)


def chunk(content: str | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    delta = {"content": content} if content is not None else {}
    choice = {"index": 0, "delta": delta, "finish_reason": finish, **extra}
    return {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}


def usage_chunk(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    }


HELLO = [chunk("Hel"), chunk("lo, "), chunk("world"), chunk(None, "stop"), usage_chunk(12, 3, cached=8)]
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    yield s
    s.close()


def make(server: FakeServer, **kw: Any) -> OpenAICompatible:
    kw.setdefault("backoff_base", 0.01)
    return OpenAICompatible(server.url, "m", api_key="sk-test", **kw)


async def test_stream_records_usage_from_last_chunk(server: FakeServer) -> None:
    server.script = [sse(HELLO), sse(HELLO)]
    llm = make(server)
    items = [i async for i in llm.stream(MESSAGES, max_tokens=7, temperature=0.5, stop=["```"], seed=3)]
    deltas = [i.text for i in items if isinstance(i, TextDelta)]
    final = items[-1]
    assert deltas == ["Hel", "lo, ", "world"] and isinstance(final, Completion)
    assert final.text == "Hello, world" and final.finish_reason == "stop"
    assert final.usage.to_dict() == {
        "prompt_tokens": 12,
        "completion_tokens": 3,
        "total_tokens": 15,
        "cached_tokens": 8,
    }
    req = server.requests[0]
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == "Bearer sk-test"
    body = req["body"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert (body["model"], body["max_tokens"], body["temperature"], body["stop"], body["seed"]) == (
        "m",
        7,
        0.5,
        ["```"],
        3,
    )
    # the non-streaming call runs the same code and reports the same usage
    completion = await llm.complete(MESSAGES)
    assert completion.text == final.text and completion.usage == final.usage
    client = llm._client
    await llm.aclose()
    assert client is not None and client.is_closed


async def test_429_honours_retry_after(server: FakeServer) -> None:
    server.script = [status(429, '{"error": "slow down"}', {"Retry-After": "1"}), sse(HELLO)]
    llm = make(server, backoff_cap=0.01)  # backoff alone would retry at once: the wait must come from the header
    completion = await llm.complete(MESSAGES)
    assert completion.text == "Hello, world"
    assert len(server.requests) == 2
    assert server.times[1] - server.times[0] >= 0.95


async def test_500_then_success(server: FakeServer) -> None:
    server.script = [status(500, "boom"), status(503, "busy"), sse(HELLO)]
    completion = await make(server).complete(MESSAGES)
    assert completion.text == "Hello, world" and completion.usage.total_tokens == 15
    assert len(server.requests) == 3


async def test_dropped_connection_before_any_text_is_retried(server: FakeServer) -> None:
    server.script = [drop, sse(HELLO)]
    completion = await make(server).complete(MESSAGES)
    assert completion.text == "Hello, world" and len(server.requests) == 2


async def test_persistent_5xx_gives_up_with_a_clear_error(server: FakeServer) -> None:
    server.script = [status(502, "bad gateway")] * 3
    with pytest.raises(LLMError) as err:
        await make(server, max_attempts=3).complete(MESSAGES)
    msg = str(err.value)
    assert server.url in msg and "status 502" in msg and "3 attempts" in msg and "bad gateway" in msg
    assert len(server.requests) == 3


async def test_connection_refused() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = OpenAICompatible(f"http://127.0.0.1:{port}/v1", "m", max_attempts=2, backoff_base=0.01)
    with pytest.raises(LLMError) as err:
        await llm.complete(MESSAGES)
    msg = str(err.value)
    assert f"127.0.0.1:{port}/v1/chat/completions" in msg and "ConnectError" in msg
    assert "server is running" in msg


async def test_client_errors_are_not_retried(server: FakeServer) -> None:
    server.script = [status(401, '{"error": {"message": "bad key"}}'), sse(HELLO)]
    with pytest.raises(LLMError) as err:
        await make(server).complete(MESSAGES)
    assert "status 401" in str(err.value) and "API key" in str(err.value) and "bad key" in str(err.value)
    assert len(server.requests) == 1


async def test_garbage_body_is_a_clear_error(server: FakeServer) -> None:
    server.script = [sse(["<html>502 proxy</html>"]), status(200, "not json at all")]
    llm = make(server)
    with pytest.raises(LLMError, match="not OpenAI chat-completions JSON.*<html>502 proxy"):
        await llm.complete(MESSAGES)
    with pytest.raises(LLMError, match="not OpenAI chat-completions JSON"):
        await llm.complete(MESSAGES)


async def test_stream_broken_after_text_raises_instead_of_duplicating(server: FakeServer) -> None:
    server.script = [sse([chunk("partial ")], done=False, then_drop=True), sse(HELLO)]
    seen: list[str] = []
    with pytest.raises(LLMError, match="stream broke after 8 characters"):
        async for item in make(server).stream(MESSAGES):
            if isinstance(item, TextDelta):
                seen.append(item.text)
    assert seen == ["partial "] and len(server.requests) == 1


async def test_stream_without_finish_is_retried_when_nothing_was_shown(server: FakeServer) -> None:
    server.script = [sse([], done=False), sse(HELLO)]
    completion = await make(server).complete(MESSAGES)
    assert completion.text == "Hello, world" and len(server.requests) == 2


async def test_tool_calls_assembled_from_deltas(server: FakeServer) -> None:
    def call_delta(**fields: Any) -> dict[str, Any]:
        c = chunk()
        c["choices"][0]["delta"] = {"tool_calls": [fields]}
        return c

    server.script = [
        sse(
            [
                call_delta(index=0, id="call_a", type="function", function={"name": "get_weather", "arguments": ""}),
                call_delta(index=0, function={"arguments": '{"city": '}),
                call_delta(index=1, id="call_b", type="function", function={"name": "add", "arguments": '{"a": 1'}),
                call_delta(index=0, function={"arguments": '"Paris"}'}),
                call_delta(index=1, function={"arguments": ', "b": 2}'}),
                chunk(None, "tool_calls"),
                usage_chunk(30, 20),
            ]
        )
    ]
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    completion = await make(server).complete(MESSAGES, tools=tools, tool_choice="auto")
    assert server.requests[0]["body"]["tools"] == tools and server.requests[0]["body"]["tool_choice"] == "auto"
    assert completion.finish_reason == "tool_calls" and completion.text == ""
    calls = completion.tool_calls
    assert [c["id"] for c in calls] == ["call_a", "call_b"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": "Paris"}
    assert calls[1]["function"] == {"name": "add", "arguments": '{"a": 1, "b": 2}'}


async def test_vllm_token_ids_and_logprobs(server: FakeServer) -> None:
    def lp(token_id: int, logprob: float) -> dict[str, Any]:
        return {"logprobs": {"content": [{"token": f"token_id:{token_id}", "logprob": logprob}]}}

    server.script = [
        sse(
            [
                {**chunk(), "prompt_token_ids": [1, 2, 3]},
                chunk("a", **lp(10, -0.5)),
                chunk("b", **lp(11, -0.25)),
                chunk(None, "length"),
                usage_chunk(3, 2),
            ]
        )
    ]
    completion = await make(server, logprobs=True, token_ids=True).complete(MESSAGES, max_tokens=2)
    body = server.requests[0]["body"]
    assert body["logprobs"] is True and body["return_token_ids"] is True and body["return_tokens_as_token_ids"] is True
    assert completion.prompt_token_ids == [1, 2, 3]
    assert completion.token_ids == [10, 11] and completion.logprobs == [-0.5, -0.25]
    assert completion.finish_reason == "length"


async def test_server_that_ignores_stream_and_sends_json(server: FakeServer) -> None:
    reply = {
        "id": "x",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "plain"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 4, "completion_tokens": 1, "total_tokens": 5},
    }
    server.script = [status(200, json.dumps(reply))]
    items = [i async for i in make(server).stream(MESSAGES)]
    assert [i.text for i in items if isinstance(i, TextDelta)] == ["plain"]
    assert items[-1].usage.total_tokens == 5


async def test_old_server_rejecting_stream_options_still_works(server: FakeServer) -> None:
    server.script = [
        status(400, '{"error": "unknown field stream_options"}'),
        sse([chunk("0123456789abcdef"), chunk(None, "stop")]),  # and it sends no usage
    ]
    completion = await make(server).complete([{"role": "user", "content": "x" * 40}])
    assert "stream_options" not in server.requests[1]["body"]
    assert completion.text == "0123456789abcdef"
    # estimated (4 chars per token) rather than silently zero
    assert completion.usage.prompt_tokens == 10 and completion.usage.completion_tokens == 4


async def test_retry_after_is_capped(server: FakeServer) -> None:
    server.script = [status(503, "", {"Retry-After": "3600"}), sse(HELLO)]
    start = time.monotonic()
    completion = await make(server, max_retry_after=0.05).complete(MESSAGES)
    assert completion.text == "Hello, world" and time.monotonic() - start < 5


def test_client_survives_a_new_event_loop_per_call(server: FakeServer) -> None:
    """Sync wrappers call asyncio.run per call: the backend must not reuse a client bound to a dead loop."""
    server.script = [sse(HELLO), sse(HELLO)]
    llm = create_backend("openai", base_url=server.url + "/v1", model="m")
    assert isinstance(llm, OpenAICompatible) and llm.name == "openai"
    assert asyncio.run(llm.complete(MESSAGES)).text == "Hello, world"
    assert asyncio.run(llm.complete(MESSAGES)).text == "Hello, world"


def test_urls_and_retry_after_parsing() -> None:
    assert chat_url("http://h:1") == "http://h:1/v1/chat/completions"
    assert chat_url("http://h:1/v1") == "http://h:1/v1/chat/completions"
    assert chat_url("http://h:1/openai/v2/") == "http://h:1/openai/v2/chat/completions"
    assert retry_after("1.5") == 1.5 and retry_after(None) is None and retry_after("-3") == 0.0
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412480.0 + 30) == 0.0  # a date in the past
