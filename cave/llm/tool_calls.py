"""Tool calls written as text, and messages made safe for a chat template: shared by every local backend.

The llama.cpp backend (``cave.llm.local``) and the transformers backends (``cave.llm.hf``, the rollout engine)
render prompts with the model's chat template and read the calls a model without a native tool API wrote as
text; both import these helpers from here, so neither backend module imports the other.
"""

from __future__ import annotations

import json
import re
from typing import Any

from cave.llm.base import Completion, Message

__all__ = ["normalize_messages", "parse_tool_calls", "take_tool_calls", "tool_names"]


def normalize_messages(messages: list[Message]) -> list[Message]:
    """Make OpenAI-format messages safe for a Jinja chat template: None content -> "", content parts -> text."""
    out: list[Message] = []
    for m in messages:
        m = dict(m)
        content = m.get("content")
        if content is None:
            m["content"] = ""
        elif isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
            m["content"] = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        out.append(m)
    return out


_TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def _as_call(obj: Any, i: int, names: set[str] | None) -> dict[str, Any] | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    if names is not None and obj["name"] not in names:
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    return {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": obj["name"], "arguments": args if isinstance(args, str) else json.dumps(args)},
    }


def parse_tool_calls(text: str, names: set[str] | None = None) -> tuple[str, list[dict[str, Any]]]:
    """Tool calls written as text by a model that has no native tool API, in OpenAI format.

    Understands Hermes/Qwen ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks and,
    failing those, a reply that is only a JSON call object (or a list of them), fenced or not, naming
    one of ``names``. Returns the remaining text and the calls (arguments as a JSON string).

    >>> rest, calls = parse_tool_calls('ok <tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>')
    >>> rest, calls[0]["function"]
    ('ok', {'name': 'f', 'arguments': '{"x": 1}'})
    >>> parse_tool_calls('```json\\n{"name": "f", "arguments": {}}\\n```', {"f"})[1][0]["function"]["name"]
    'f'
    """
    calls: list[dict[str, Any]] = []
    for match in _TOOL_CALL.finditer(text):
        try:
            call = _as_call(json.loads(match.group(1)), len(calls), names)
        except json.JSONDecodeError:
            continue
        if call:
            calls.append(call)
    if calls:
        return _TOOL_CALL.sub("", text).strip(), calls
    body = text.strip()
    if fenced := _FENCE.match(body):
        body = fenced.group(1)
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        return text, []
    objs = obj if isinstance(obj, list) else [obj]
    calls = [c for i, o in enumerate(objs) if (c := _as_call(o, i, names))]
    return ("", calls) if calls and len(calls) == len(objs) else (text, [])


def tool_names(tools: list[dict[str, Any]]) -> set[str]:
    """The function names of OpenAI-style tool schemas."""
    return {(t.get("function") or t).get("name", "") for t in tools if isinstance(t, dict)}


def take_tool_calls(completion: Completion, tools: list[dict[str, Any]]) -> None:
    """Move the calls of ``tools`` that the model wrote as text into ``completion.tool_calls``."""
    completion.text, calls = parse_tool_calls(completion.text, tool_names(tools))
    completion.tool_calls = calls or None
    if calls:
        completion.finish_reason = "tool_calls"
