"""The LLM protocol: one verb, ``complete``, plus ``stream`` that yields the same thing.

Every backend implements ``_stream(messages, request)`` (or ``_complete`` for backends
that cannot stream); ``complete`` is always "consume the stream and return its final
Completion", so token accounting is identical in the streaming and non-streaming
paths: the same code runs in both.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from cave.registry import Registry

__all__ = [
    "BACKENDS",
    "Completion",
    "LLM",
    "LLMError",
    "Message",
    "Reply",
    "ReplyFn",
    "Request",
    "Scripted",
    "StreamItem",
    "TextDelta",
    "ToolsUnsupported",
    "Usage",
    "create_backend",
    "register_backend",
]

Message = dict[str, Any]  # OpenAI chat format: {"role": "system"|"user"|"assistant"|"tool", "content": str, ...}


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens served from a prefix cache, when the backend reports it

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
            self.cached_tokens + other.cached_tokens,
        )

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class Completion:
    text: str
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"  # "stop" | "length" | "error" | ...
    token_ids: list[int] | None = None  # response token ids (for training)
    logprobs: list[float] | None = None  # per response token, at sampling time
    prompt_token_ids: list[int] | None = None
    model: str = ""
    tool_calls: list[dict[str, Any]] | None = None  # OpenAI-format tool calls, when the backend returns them

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TextDelta:
    """A piece of streamed text. The stream's last item is always a Completion."""

    text: str


StreamItem = TextDelta | Completion


class LLMError(Exception):
    """A backend failed in a way retries did not fix. The message says what to check."""


class ToolsUnsupported(LLMError):
    """The server refused native tool calling (e.g. vLLM started without a tool-call parser). Callers that can
    fall back to a prompted format do; the message names the server flags that turn it on."""


@dataclass
class Request:
    """The sampling arguments of one call, normalized once by ``LLM.stream`` for the backend's ``_stream``."""

    max_tokens: int = 512
    temperature: float = 0.0
    stop: list[str] = field(default_factory=list)
    seed: int | None = None
    options: dict[str, Any] = field(default_factory=dict)  # backend-specific: tools, top_k, top_p, extra_body, ...
    # The start of the assistant's reply, written for the model (e.g. "```python\n"): see ``LLM.stream``.
    prefix: str = ""

    @property
    def tools(self) -> list[dict[str, Any]] | None:
        return self.options.get("tools")

    def kwargs(self) -> dict[str, Any]:
        """The call's keyword arguments again, for ``_complete`` and request bodies (``prefix`` only when set:
        a ``_complete``-only backend with ``supports_prefix`` gets it and returns text that starts with it)."""
        extra = {"prefix": self.prefix} if self.prefix else {}
        return dict(
            max_tokens=self.max_tokens, temperature=self.temperature, stop=self.stop, seed=self.seed,
            **self.options, **extra,
        )  # fmt: skip


class LLM(ABC):  # noqa: B024 - abstract by convention: subclasses override _stream or _complete
    """Base class of every backend.

    Backends implement ``_stream(messages, request)`` (preferred) or ``_complete``; the public
    ``stream`` and ``complete`` turn the call's arguments into one ``Request`` and return the same
    Completion, usage included. (A subclass that overrides ``stream`` itself still works.)
    """

    name: str = "llm"
    context_window: int = 8192
    supports_tools: bool = False  # native OpenAI tool calling
    supports_prefix: bool = False  # honours ``prefix=`` (a response prefix); others refuse it

    async def complete(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        stop: list[str] | None = None,
        seed: int | None = None,
        prefix: str | None = None,
        **kwargs: Any,
    ) -> Completion:
        final: Completion | None = None
        if prefix:  # only when given: wrappers that override ``stream`` need not know the option
            kwargs["prefix"] = prefix
        async for item in self.stream(
            messages, max_tokens=max_tokens, temperature=temperature, stop=stop, seed=seed, **kwargs
        ):
            if isinstance(item, Completion):
                final = item
        if final is None:
            raise LLMError(f"{type(self).__name__}.stream ended without a Completion")
        return final

    def stream(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        stop: list[str] | None = None,
        seed: int | None = None,
        prefix: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[StreamItem]:
        """Text deltas as they come, then the Completion. Keyword arguments other than these reach the
        backend in ``request.options`` (``tools``, ``top_k``, ...).

        ``prefix``: the assistant's reply starts with this text (e.g. ``"```python\n"`` makes a small model
        answer with code). It is part of the prompt: the model continues after it, ``prompt_token_ids`` and
        ``usage.prompt_tokens`` include its tokens and ``token_ids`` are only the generated ones (so a
        trainer never trains on it). ``Completion.text`` is the whole reply, prefix included, and the first
        TextDelta is the prefix. Stop sequences are matched in the generated text only. Backends with
        ``supports_prefix = False`` raise an LLMError rather than ignore it.
        """
        if prefix and not self.supports_prefix:
            raise LLMError(
                f"the {self.name!r} backend ({type(self).__name__}) does not support a response prefix "
                f"(prefix={prefix!r}); use local, transformers, vllm, scripted, or openai against a vLLM server"
            )
        request = Request(max_tokens, temperature, list(stop or []), seed, kwargs, prefix or "")
        return self._stream(messages, request)

    async def _stream(self, messages: list[Message], request: Request) -> AsyncIterator[StreamItem]:
        completion = await self._complete(messages, **request.kwargs())
        if completion.text:
            yield TextDelta(completion.text)
        yield completion

    async def _complete(self, messages: list[Message], **kwargs: Any) -> Completion:
        raise NotImplementedError(f"{type(self).__name__} must implement _stream() or _complete()")

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` by this backend's tokenizer; a 4-chars-per-token estimate by default."""
        return max(1, len(text) // 4)

    async def aclose(self) -> None:  # noqa: B027 - optional
        """Release resources (HTTP clients, model memory)."""


# -- registry ----------------------------------------------------------------------------
def _import_builtin_backends() -> None:
    import cave.llm  # noqa: F401 - importing the package registers the built-in backends


# Built-in names are valid in task files before their (heavy) modules are imported.
BACKENDS: Registry[Callable[..., LLM]] = Registry(
    "backend", builtins=("local", "openai", "scripted", "transformers", "vllm"), loader=_import_builtin_backends
)


def register_backend(name: str) -> Callable[[Callable[..., LLM]], Callable[..., LLM]]:
    """Decorator: make a backend available by name (``backend: NAME`` in task files)."""
    return BACKENDS.register(name, name_attr="name")


def create_backend(name: str, **options: Any) -> LLM:
    """Instantiate a registered backend by name, e.g. ``create_backend("openai", base_url=..., model=...)``."""
    return BACKENDS.get(name)(**options)


# -- the public test double -----------------------------------------------------------------
Reply = str | Completion
ReplyFn = Callable[[list[Message]], Reply]


def _prefixed(prefix: str, reply: str) -> str:
    """A scripted reply as it reads when the call's response starts with ``prefix``.

    >>> _prefixed("```python\\n", "x = 1\\n```"), _prefixed("```python\\n", "I will.\\n```python\\nx = 1\\n```")
    ('```python\\nx = 1\\n```', '```python\\nx = 1\\n```')
    """
    at = reply.find(prefix)
    return reply[at:] if at >= 0 else prefix + reply


@register_backend("scripted")
class Scripted(LLM):
    """Replays given replies, in order (or a function of the messages), reporting usage.

    >>> import asyncio
    >>> llm = Scripted(["```python\\nfinal_answer(1 + 1)\\n```"])
    >>> c = asyncio.run(llm.complete([{"role": "user", "content": "add"}]))
    >>> c.text.splitlines()[1], c.usage.completion_tokens > 0
    ('final_answer(1 + 1)', True)

    Usage is counted with the same 4-chars-per-token estimate as ``count_tokens``,
    so tests can check totals. ``calls`` records every message list it was sent.

    A response ``prefix`` is emulated: the reply's text is ``prefix + reply``, unless the scripted reply
    already holds the prefix: then it is the reply from there on (what the model would have written, had it
    started there: a sentence, then the code block a ``"```python\n"`` prefix opens), so one script serves
    callers with and without a prefix. The prefix is counted as prompt tokens, not completion tokens.
    ``prefixes`` records each call's prefix.
    """

    supports_prefix = True

    def __init__(
        self,
        replies: list[Reply] | ReplyFn | None = None,
        *,
        repeat_last: bool = False,
        context_window: int = 8192,
        stream_chunk: int = 16,
    ) -> None:
        if isinstance(replies, str | bytes) or not (
            replies is None or callable(replies) or isinstance(replies, list | tuple)
        ):
            raise TypeError(
                f"replies must be a list of replies (or a function of the messages), not {type(replies).__name__}; "
                'write replies: ["```python\\nfinal_answer(1)\\n```"]'
            )
        self.replies = list(replies) if isinstance(replies, tuple) else (replies if replies is not None else [])
        self.repeat_last = repeat_last
        self.context_window = context_window
        self.stream_chunk = stream_chunk
        self.calls: list[list[Message]] = []
        self.prefixes: list[str] = []
        self._i = 0

    def _next(self, messages: list[Message], prefix: str = "") -> Completion:
        if callable(self.replies):
            reply = self.replies(messages)
        elif self._i < len(self.replies):
            reply = self.replies[self._i]
        elif self.repeat_last and self.replies:
            reply = self.replies[-1]
        else:
            raise LLMError(
                f"Scripted backend ran out of replies after {self._i} calls; give more replies or repeat_last=True"
            )
        self._i += 1
        if isinstance(reply, Completion):
            return replace(reply, text=_prefixed(prefix, reply.text)) if prefix else reply
        prompt = sum(self.count_tokens(str(m.get("content") or "")) for m in messages)
        if prefix:
            prompt += self.count_tokens(prefix)
            reply = _prefixed(prefix, reply)
        generated = reply[len(prefix) :]
        completion = self.count_tokens(generated) if generated else 0
        return Completion(
            text=reply,
            usage=Usage(prompt, completion, prompt + completion),
            finish_reason="stop",
            model="scripted",
        )

    async def _stream(self, messages: list[Message], request: Request) -> AsyncIterator[StreamItem]:
        self.calls.append([dict(m) for m in messages])
        self.prefixes.append(request.prefix)
        completion = self._next(messages, request.prefix)
        text = completion.text
        for i in range(0, len(text), self.stream_chunk):
            yield TextDelta(text[i : i + self.stream_chunk])
        yield completion
