"""Any OpenAI-compatible ``/v1/chat/completions`` endpoint: a vLLM server, llama.cpp's server, OpenAI itself.

Always streams (SSE) and asks for usage in the last chunk (``stream_options.include_usage``), so
``complete`` and ``stream`` run the same code and both record usage. Retries 408/429/5xx and
connection errors with exponential backoff and full jitter, honouring ``Retry-After`` (seconds
or an HTTP date), for a bounded number of attempts; then raises an LLMError that names the URL,
the status and what to check. A request is retried only before any text was streamed: after
that a retry would repeat text the caller has already seen.

Tool calls streamed as deltas are assembled into ``Completion.tool_calls`` (OpenAI format).
Against vLLM, ``token_ids=True`` asks for prompt and response token ids and ``logprobs=True``
for per-token logprobs; plain OpenAI servers reject those extras, so both are off by default.

``usage.cached_tokens`` is the server's ``usage.prompt_tokens_details.cached_tokens`` (streamed or not):
vLLM reports it when started with ``--enable-prompt-tokens-details`` (its prefix cache is on by default
in the V1 engine; ``--enable-prefix-caching`` otherwise); 0 when the server says nothing.

A response ``prefix`` (``stream(..., prefix="```python\n")``) is sent as a trailing assistant message
that the server continues. ``prefill="vllm"`` (the default) adds vLLM's ``continue_final_message: true,
add_generation_prompt: false`` to the body, so the chat template leaves that message open and
``prompt_tokens`` / ``prompt_token_ids`` include the prefix; the server streams only the continuation,
and cave puts the prefix in front (``text`` and the first TextDelta). ``prefill="message"`` sends the
assistant message alone, for servers that continue a final assistant message by themselves (llama.cpp's
server). OpenAI's own API has no such option: it rejects ``continue_final_message`` (status 400,
"unrecognized request argument"), and with ``prefill="message"`` it would answer the assistant message
with a new reply instead of continuing it, so do not use a prefix against it.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import os
import random
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import httpx

from cave.llm.base import (
    LLM,
    Completion,
    LLMError,
    Message,
    Request,
    StreamItem,
    TextDelta,
    ToolsUnsupported,
    Usage,
    register_backend,
)

__all__ = ["OpenAICompatible", "PASSTHROUGH", "RETRY_STATUSES", "backoff", "chat_url", "retry_after"]

RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
PASSTHROUGH = ("tools", "tool_choice", "parallel_tool_calls", "top_p", "presence_penalty", "frequency_penalty",
               "response_format", "logit_bias", "n", "user", "top_k", "min_p", "repetition_penalty")  # fmt: skip


def chat_url(base_url: str) -> str:
    """The chat-completions URL for a server root or a ``/v1`` base.

    >>> chat_url("http://127.0.0.1:8000"), chat_url("https://api.example.com/v1/")
    ('http://127.0.0.1:8000/v1/chat/completions', 'https://api.example.com/v1/chat/completions')
    """
    base = base_url.rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    last = urlsplit(base).path.rsplit("/", 1)[-1]
    if not (last[:1] == "v" and last[1:].isdigit()):  # no version segment: the OpenAI convention is /v1
        base += "/v1"
    return base + "/chat/completions"


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date; None if absent/unreadable.

    >>> retry_after("2"), retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0), retry_after("soon")
    (2.0, 10.0, None)
    """
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def backoff(attempt: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Full-jitter exponential backoff: uniform in [0, min(cap, base * 2**attempt)]."""
    return (rng or random).uniform(0, min(cap, base * 2**attempt))


def _hint(status: int | None, url: str, model: str) -> str:
    if status is None:
        return f"check that the server is running and reachable at {url}; if it is up but slow, raise timeout="
    if status in (401, 403):
        return "check the API key (api_key= or OPENAI_API_KEY) and that it may use this model"
    if status == 404:
        return f"check base_url (requests go to {url}) and that the server serves model {model!r}"
    if status in (400, 422):
        return "the server rejected the request: check the model name, max_tokens vs the context window, and options"
    if status == 429:
        return "the server is rate limiting: lower concurrency or raise max_attempts"
    return "the server failed: check its logs"


def _refuses_tools(text: str) -> bool:
    """A 400 body that says the server cannot do native tool calling (vLLM without --enable-auto-tool-choice /
    --tool-call-parser; other servers word it as tools not being supported)."""
    t = text.lower()
    return any(s in t for s in ("tool-call-parser", "auto-tool-choice", "tool_choice", "tools are not supported",
                                "does not support tools"))  # fmt: skip


class _Retry(Exception):
    def __init__(self, status: int | None, detail: str, wait: float | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.wait = status, detail, wait


@register_backend("openai")
class OpenAICompatible(LLM):
    """A chat model behind an OpenAI-compatible HTTP API.

    ``base_url``: the server root (``http://host:8000``) or its ``/v1`` base. ``api_key``: sent as a
    bearer token; defaults to ``$OPENAI_API_KEY`` (none is fine for a local vLLM server).
    ``context_window``: what the agent should budget for (servers do not say it in a standard way).
    """

    name = "openai"
    supports_tools = True
    supports_prefix = True  # against vLLM (or a server that continues a trailing assistant message)

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000/v1",
        model: str = "default",
        api_key: str | None = None,
        *,
        context_window: int = 8192,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        max_attempts: int = 5,
        backoff_base: float = 0.5,
        backoff_cap: float = 20.0,
        max_retry_after: float = 60.0,
        logprobs: bool = False,
        token_ids: bool = False,
        extra_body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        prefill: str = "vllm",
    ) -> None:
        if prefill not in ("vllm", "message"):
            raise ValueError(f"prefill must be 'vllm' or 'message', not {prefill!r}")
        self.prefill = prefill
        self.base_url, self.model = base_url, model
        self.url = chat_url(base_url)
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.context_window = context_window
        self.timeout = httpx.Timeout(timeout, connect=connect_timeout)
        self.max_attempts = max(1, max_attempts)
        self.backoff_base, self.backoff_cap, self.max_retry_after = backoff_base, backoff_cap, max_retry_after
        self.logprobs, self.token_ids = logprobs, token_ids
        self.extra_body = dict(extra_body or {})
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        if self.api_key:
            self.headers["Authorization"] = f"Bearer {self.api_key}"
        self._include_usage = True  # dropped if a (older) server rejects stream_options
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def _http(self) -> httpx.AsyncClient:
        # An AsyncClient belongs to the loop it first ran on; sync wrappers call asyncio.run per call.
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop or self._client.is_closed:
            self._client = httpx.AsyncClient(timeout=self.timeout, headers=self.headers)
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._client_loop is asyncio.get_running_loop():
            await client.aclose()  # a client of a loop that is gone was closed with its loop

    def body(self, messages: list[Message], prefix: str = "", **options: Any) -> dict[str, Any]:
        """The JSON request body (exposed for tests and debugging). ``prefix``: see the module doc."""
        if prefix:
            messages = [*messages, {"role": "assistant", "content": prefix}]
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": options["max_tokens"],
            "temperature": options["temperature"],
            "stream": True,
        }
        if self._include_usage:
            body["stream_options"] = {"include_usage": True}
        if options.get("stop"):
            body["stop"] = list(options["stop"])
        if options.get("seed") is not None:
            body["seed"] = options["seed"]
        for key in PASSTHROUGH:
            if options.get(key) is not None:
                body[key] = options[key]
        if options.get("logprobs", self.logprobs):
            body["logprobs"] = True
        if options.get("token_ids", self.token_ids):  # vLLM extensions
            body["return_token_ids"] = True
            if body.get("logprobs"):
                body["return_tokens_as_token_ids"] = True
        if prefix and self.prefill == "vllm":
            body["continue_final_message"], body["add_generation_prompt"] = True, False
        body.update(self.extra_body)
        body.update(options.get("extra_body") or {})
        return body

    async def _stream(self, messages: list[Message], request: Request) -> AsyncIterator[StreamItem]:
        options = request.kwargs()  # with the prefix, when there is one
        if request.prefix:
            yield TextDelta(request.prefix)
        last: _Retry | None = None
        for attempt in range(self.max_attempts):
            if attempt:
                wait = last.wait if last and last.wait is not None else None
                wait = min(wait, self.max_retry_after) if wait is not None else None
                await asyncio.sleep(
                    wait if wait is not None else backoff(attempt - 1, self.backoff_base, self.backoff_cap)
                )
            acc = _Accumulator(self.model, request.prefix)
            try:
                async with contextlib.aclosing(self._attempt(messages, options, acc)) as attempt_items:
                    async for item in attempt_items:  # closed with us if the caller stops early
                        yield item
                return
            except _Retry as e:
                if acc.emitted:  # text already reached the caller: a retry would duplicate it
                    raise self._error(e.status, f"the stream broke after {len(acc.text)} characters: {e.detail}") from e
                last = e
        assert last is not None
        raise self._error(last.status, f"gave up after {self.max_attempts} attempts; last: {last.detail}")

    def _error(self, status: int | None, detail: str) -> LLMError:
        where = f"status {status}" if status is not None else "no HTTP response"
        return LLMError(f"{self.url} ({where}): {detail}. {_hint(status, self.url, self.model)}")

    async def _attempt(
        self, messages: list[Message], options: dict[str, Any], acc: _Accumulator
    ) -> AsyncIterator[StreamItem]:
        body = self.body(messages, **options)
        try:
            async with self._http().stream("POST", self.url, json=body) as response:
                if response.status_code >= 400:
                    text = (await response.aread()).decode("utf-8", "replace")[:500]
                    if response.status_code in RETRY_STATUSES:
                        raise _Retry(
                            response.status_code,
                            text or response.reason_phrase,
                            retry_after(response.headers.get("retry-after")),
                        )
                    if response.status_code == 400 and body.get("tools") and _refuses_tools(text):
                        self.supports_tools = False  # this server: later requests use the prompted format
                        raise ToolsUnsupported(
                            f"{self.url} refused native tool calls (status 400: {text[:200]}). Start vLLM with "
                            "--enable-auto-tool-choice --tool-call-parser NAME (hermes for Qwen2.5, llama3_json for "
                            "Llama 3.x), or use the prompted JSON format"
                        )
                    if response.status_code == 400 and "stream_options" in text and self._include_usage:
                        self._include_usage = False  # an older server: ask again without it, count usage ourselves
                        raise _Retry(400, text, 0.0)
                    raise self._error(response.status_code, text or response.reason_phrase)
                if "text/event-stream" in response.headers.get("content-type", ""):
                    async for line in response.aiter_lines():
                        for delta in acc.feed_line(line, self):
                            yield delta
                    if not acc.done and acc.finish is None:
                        raise _Retry(None, "the event stream ended before a finish_reason or [DONE]")
                else:  # a server that ignored stream=True and sent one JSON object
                    raw = await response.aread()
                    for delta in acc.feed_json(raw.decode("utf-8", "replace"), self):
                        yield delta
        except httpx.TransportError as e:  # refused, reset, timed out, protocol errors
            # str(e) is empty for timeouts; say what happened instead of "ReadTimeout: ."
            reason = str(e) or ("no answer in time" if isinstance(e, httpx.TimeoutException) else "connection failed")
            raise _Retry(None, f"{type(e).__name__}: {reason}") from e
        yield acc.completion(self, messages)


class _Accumulator:
    """Folds SSE chunks (or one JSON body) into text deltas and a final Completion."""

    def __init__(self, model: str, prefix: str = "") -> None:
        self.text, self.model, self.finish, self.prefix = "", model, None, prefix
        self.usage: Usage | None = None
        self.tool_calls: dict[int, dict[str, Any]] = {}
        self.token_ids: list[int] = []
        self.logprobs: list[float] = []
        self.prompt_token_ids: list[int] | None = None
        self.emitted = False
        self.done = False

    def _parse(self, data: str, llm: OpenAICompatible) -> dict[str, Any]:
        try:
            obj = json.loads(data)
        except json.JSONDecodeError as e:
            raise llm._error(200, f"the body is not OpenAI chat-completions JSON: {data[:200]!r}") from e
        if not isinstance(obj, dict):
            raise llm._error(200, f"expected a JSON object, got {data[:200]!r}")
        if "error" in obj and "choices" not in obj:  # errors sent inside a 200 stream
            raise llm._error(200, f"the server reported an error: {json.dumps(obj['error'])[:300]}")
        return obj

    def feed_line(self, line: str, llm: OpenAICompatible) -> list[TextDelta]:
        line = line.strip()
        if not line or line.startswith(":") or not line.startswith("data:"):
            return []  # blank separators, comments/keep-alives, event:/id: fields
        data = line[5:].strip()
        if data == "[DONE]":
            self.done = True
            return []
        return self._chunk(self._parse(data, llm), delta_key="delta")

    def feed_json(self, raw: str, llm: OpenAICompatible) -> list[TextDelta]:
        return self._chunk(self._parse(raw, llm), delta_key="message")

    def _chunk(self, obj: dict[str, Any], delta_key: str) -> list[TextDelta]:
        self.model = obj.get("model") or self.model
        if obj.get("usage"):
            u = obj["usage"]
            details = u.get("prompt_tokens_details") or {}
            self.usage = Usage(
                int(u.get("prompt_tokens") or 0),
                int(u.get("completion_tokens") or 0),
                int(u.get("total_tokens") or 0),
                int(details.get("cached_tokens") or 0),
            )
        if obj.get("prompt_token_ids") is not None:  # vLLM return_token_ids
            self.prompt_token_ids = list(obj["prompt_token_ids"])
        out: list[TextDelta] = []
        for choice in obj.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            if choice.get("prompt_token_ids") is not None:
                self.prompt_token_ids = list(choice["prompt_token_ids"])
            delta = choice.get(delta_key) or {}
            if text := delta.get("content"):
                self.text += text
                self.emitted = True
                out.append(TextDelta(text))
            for call in delta.get("tool_calls") or []:
                self._tool_delta(call)
            if choice.get("token_ids"):
                self.token_ids.extend(int(t) for t in choice["token_ids"])
            for entry in (choice.get("logprobs") or {}).get("content") or []:
                self.logprobs.append(float(entry.get("logprob", 0.0)))
                token = str(entry.get("token", ""))
                if token.startswith("token_id:") and not choice.get("token_ids"):
                    self.token_ids.append(int(token[9:]))  # vLLM return_tokens_as_token_ids
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]
        return out

    def _tool_delta(self, call: dict[str, Any]) -> None:
        slot = self.tool_calls.setdefault(
            int(call.get("index", len(self.tool_calls))),
            {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
        )
        if call.get("id"):
            slot["id"] = call["id"]
        fn = call.get("function") or {}
        if fn.get("name"):
            slot["function"]["name"] += fn["name"]
        if fn.get("arguments"):
            args = fn["arguments"]
            slot["function"]["arguments"] += args if isinstance(args, str) else json.dumps(args)

    def completion(self, llm: OpenAICompatible, messages: list[Message]) -> Completion:
        usage = self.usage
        if usage is None:  # the server sent none: estimate, so totals are never silently zero
            prompt = len(self.prompt_token_ids or []) or sum(
                llm.count_tokens(str(m.get("content") or "")) for m in messages
            ) + (llm.count_tokens(self.prefix) if self.prefix else 0)
            completion_tokens = len(self.token_ids) or (llm.count_tokens(self.text) if self.text else 0)
            usage = Usage(prompt, completion_tokens, prompt + completion_tokens)
        calls = [self.tool_calls[i] for i in sorted(self.tool_calls)] or None
        return Completion(
            text=self.prefix + self.text,
            usage=usage,
            finish_reason=self.finish or ("tool_calls" if calls else "stop"),
            token_ids=self.token_ids or None,
            logprobs=self.logprobs or None,
            prompt_token_ids=self.prompt_token_ids,
            model=self.model,
            tool_calls=calls,
        )
