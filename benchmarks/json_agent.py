"""The JSON function-calling baseline: the agent design cave is compared against, on the same backend.

Each step is one LLM call that either calls tools or answers in text. Tools are described as
JSON schemas; their results go back into the context as text (the "JSON way": data travels
through the message stream). Two formats, picked by the backend:

- native: OpenAI ``tools`` / ``tool_calls`` when ``llm.supports_tools`` (vLLM, OpenAI, GGUF chat
  templates with a tool section); results come back as ``role: tool`` messages;
- prompted: the tool schemas and a JSON reply format in the system prompt, for backends without
  native tool calling; results come back as a user message.

Every step is recorded in the same ``Trajectory`` record as the code agent's (usage per step,
the tool calls with their outputs in ``step.meta["tool_calls"]``), so tables compare like with like.

    >>> import asyncio
    >>> from cave.llm.base import ToolsUnsupported, Scripted
    >>> add = ToolSpec("add", "Add two numbers.", {"type": "object", "properties": {
    ...     "a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}, fn=lambda a, b: a + b)
    >>> llm = Scripted(['{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}', "The sum is 5."])
    >>> result = JsonAgent(llm, [add]).run("What is 2 + 3?")
    >>> result.answer, result.status, result.trajectory.steps[0].meta["tool_calls"][0]["output"]
    ('The sum is 5.', 'success', '5')
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from cave.agent import RunResult
from cave.llm.base import LLM, Completion, Message, ToolsUnsupported
from cave.trajectory import Step, Trajectory

log = logging.getLogger(__name__)


@dataclass
class ToolSpec:
    """A tool as a JSON function-calling model sees it, plus the Python callable that runs it."""

    name: str
    description: str
    parameters: dict[str, Any]  # JSON Schema of the arguments (an object schema)
    fn: Callable[..., Any] | None = None

    def openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any]
    id: str = ""
    output: str | None = None
    error: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Decision:
    """One LLM call's outcome: tool calls, or a text answer (when ``calls`` is empty)."""

    text: str
    calls: list[ToolCall]
    completion: Completion
    step: Step
    parse_error: str | None = None  # the reply looked like a tool call but was not valid JSON


JsonRunResult = RunResult  # the code agent's result record: answer, status, trajectory (and usage, run_id, ok)


PROMPTED_FORMAT = """\
You can call these tools (JSON Schema of each tool's arguments):
{tools}

To call tools, reply with only a JSON object, nothing else:
{{"tool_calls": [{{"name": "<tool name>", "arguments": {{<argument name>: <value>, ...}}}}]}}
You may put several calls in the list. You will then see their results.
When you have the answer (or if no tool fits the request), reply in plain text without JSON."""

NATIVE_NOTE = "Call the tools you need; when you have the answer (or if no tool fits the request), reply in plain text."


class ContextOverflow(Exception):
    """The prompt no longer fits the backend's context window."""

    def __init__(self, prompt_tokens: int, window: int) -> None:
        super().__init__(f"the prompt needs ~{prompt_tokens} tokens but the model's context window is {window}")
        self.prompt_tokens, self.window = prompt_tokens, window


class JsonAgent:
    """A JSON function-calling agent on any cave LLM backend.

    ``native``: force native tool calling on (True) or off (False); by default it follows
    ``llm.supports_tools``. ``result_limit``: cut each tool result to this many characters
    (None keeps whole results, as a plain JSON agent does). ``stop_after_calls``: end the run
    after the first reply with tool calls (one-shot function calling). ``history`` keeps earlier turns,
    so a second ``run`` continues the conversation (multi-turn benchmarks).
    """

    def __init__(
        self,
        llm: LLM,
        tools: list[ToolSpec],
        *,
        instructions: str | None = None,
        max_steps: int = 8,
        max_tokens: int = 512,
        temperature: float = 0.0,
        seed: int | None = None,
        native: bool | None = None,
        result_limit: int | None = None,
        stop_after_calls: bool = False,
        role: str = "json_agent",
    ) -> None:
        self.llm = llm
        self.tools = {t.name: t for t in tools}
        self.instructions = instructions
        self.max_steps = max_steps
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.native = bool(getattr(llm, "supports_tools", False)) if native is None else native
        self.native_forced = native is True
        self.result_limit = result_limit
        self.stop_after_calls = stop_after_calls
        self.role = role
        self.history: list[Message] = []
        self._count = getattr(llm, "count_tokens", lambda s: max(1, len(s) // 4))

    # -- prompt ---------------------------------------------------------------------------------
    def system_prompt(self) -> str:
        parts = [self.instructions or "You are a helpful assistant that uses tools to answer requests."]
        if self.native:
            parts.append(NATIVE_NOTE)
        else:
            schemas = "\n".join(
                json.dumps({"name": t.name, "description": t.description, "parameters": t.parameters})
                for t in self.tools.values()
            )
            parts.append(PROMPTED_FORMAT.format(tools=schemas))
        return "\n\n".join(parts)

    def prompt_tokens(self, messages: list[Message]) -> int:
        n = sum(self._count(_content_text(m)) + 4 for m in messages)
        if self.native:
            n += self._count(json.dumps([t.openai() for t in self.tools.values()]))
        return n

    # -- one decision -----------------------------------------------------------------------------
    async def decide(self, messages: list[Message], *, index: int = 0, run_id: str = "") -> Decision:
        """One LLM call on ``messages`` (the whole conversation, system prompt included)."""
        window = int(getattr(self.llm, "context_window", 0) or 0)
        needed = self.prompt_tokens(messages)
        if window and needed > window:
            raise ContextOverflow(needed, window)
        kwargs: dict[str, Any] = dict(max_tokens=self.max_tokens, temperature=self.temperature, seed=self.seed)
        if self.native and self.tools:
            kwargs["tools"] = [t.openai() for t in self.tools.values()]
        t0 = time.time()
        try:
            completion = await self.llm.complete(messages, **kwargs)
        except ToolsUnsupported as e:
            if self.native_forced:  # asked for native calls: say what the server needs, do not change format
                raise
            # the server cannot do native tool calls: the prompted JSON format, for this and later decisions
            log.warning("%s; falling back to the prompted JSON format", e)
            self.native = False
            messages[0] = {"role": "system", "content": self.system_prompt()}
            kwargs.pop("tools", None)
            t0 = time.time()
            completion = await self.llm.complete(messages, **kwargs)
        dt = time.time() - t0
        step = Step(index=index, role=self.role, messages=[dict(m) for m in messages], run_id=run_id, started_at=t0)
        step.completion, step.usage, step.finish_reason = completion.text, completion.usage, completion.finish_reason
        step.llm_duration = step.duration = dt
        step.token_ids, step.logprobs, step.prompt_token_ids = (
            completion.token_ids,
            completion.logprobs,
            completion.prompt_token_ids,
        )
        step.meta["format"] = "native" if self.native else "prompted"
        parse_error = None
        if completion.tool_calls:
            calls = [_from_openai(c, i) for i, c in enumerate(completion.tool_calls)]
            text = completion.text or ""
        else:
            calls, parse_error = parse_prompted_calls(completion.text)
            text = "" if calls else completion.text
        for i, c in enumerate(calls):
            c.id = c.id or f"call_{index}_{i}"
        step.meta["tool_calls"] = [c.to_dict() for c in calls]
        return Decision(text=text, calls=calls, completion=completion, step=step, parse_error=parse_error)

    def assistant_message(self, decision: Decision) -> Message:
        """The assistant turn to append to the conversation after ``decision``."""
        if self.native and decision.calls:
            return {
                "role": "assistant",
                "content": decision.text or "",
                "tool_calls": [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                    for c in decision.calls
                ],
            }
        return {"role": "assistant", "content": decision.completion.text}

    def result_messages(self, calls: list[ToolCall]) -> list[Message]:
        """How tool results go back into the context."""
        if self.native:
            return [{"role": "tool", "tool_call_id": c.id, "name": c.name, "content": c.output or ""} for c in calls]
        results = [{"name": c.name, "output": c.output} for c in calls]
        return [{"role": "user", "content": "Tool results:\n" + json.dumps(results, ensure_ascii=False)}]

    # -- running tools ----------------------------------------------------------------------------
    def call_tool(self, call: ToolCall) -> None:
        """Run one call with its ToolSpec.fn; the output (or the error) is stored on the call as text."""
        spec = self.tools.get(call.name)
        if spec is None or spec.fn is None:
            known = ", ".join(sorted(self.tools)) or "(none)"
            call.output, call.error = f"Error: no tool named {call.name!r}; the tools are: {known}", True
            return
        try:
            out = spec.fn(**call.arguments)
        except Exception as e:  # the model's bad call is an observation, not a crash
            call.output, call.error = f"Error: {type(e).__name__}: {e}", True
            return
        text = to_text(out)
        if self.result_limit is not None and len(text) > self.result_limit:
            text = text[: self.result_limit] + f"... [{len(text) - self.result_limit} characters cut]"
        call.output = text

    # -- the loop ---------------------------------------------------------------------------------
    def run(self, task: str) -> JsonRunResult:
        return asyncio.run(self.arun(task))

    async def arun(self, task: str, *, on_step: Callable[[Step], None] | None = None) -> JsonRunResult:
        traj = Trajectory(task=task)
        traj.meta["agent"] = "json"
        messages: list[Message] = [{"role": "system", "content": self.system_prompt()}, *self.history]
        messages.append({"role": "user", "content": task})
        try:
            while len(traj.steps) < self.max_steps:
                decision = await self.decide(messages, index=len(traj.steps), run_id=traj.run_id)
                step = decision.step
                messages.append(self.assistant_message(decision))
                if not decision.calls:
                    traj.steps.append(step)
                    traj.status, traj.final_answer = "success", decision.text.strip()
                    if on_step:
                        on_step(step)
                    break
                for call in decision.calls:
                    self.call_tool(call)
                step.meta["tool_calls"] = [c.to_dict() for c in decision.calls]
                results = self.result_messages(decision.calls)
                step.observation = "\n".join(_content_text(m) for m in results)
                messages.extend(results)
                traj.steps.append(step)
                if on_step:
                    on_step(step)
                if self.stop_after_calls:  # one-shot function calling (BFCL single-turn): the calls are the answer
                    traj.status, traj.final_answer = "success", None
                    break
            else:
                traj.status, traj.final_answer = "max_steps", None
        except ContextOverflow as e:
            traj.status, traj.error = "context_overflow", str(e)
            traj.meta["overflow"] = {"prompt_tokens": e.prompt_tokens, "context_window": e.window}
        except Exception as e:  # a backend failure ends the run with a clear status
            traj.status, traj.error = "error", f"{type(e).__name__}: {e}"
        traj.finished_at = time.time()
        self.history = messages[1:]  # everything but the system prompt, for the next turn
        return JsonRunResult(traj.final_answer, traj.status, traj)


# -- parsing and formatting ---------------------------------------------------------------------
_FENCE = re.compile(r"```(?:json)?\s*\n?(.*?)```", re.S)


def parse_prompted_calls(text: str) -> tuple[list[ToolCall], str | None]:
    """Tool calls in a prompted-format reply; ``([], None)`` for a plain-text answer.

    Accepts ``{"tool_calls": [...]}``, one ``{"name": ..., "arguments": ...}`` object, a list of
    them, Hermes ``<tool_call>`` tags, with or without a ```json fence around them.

    >>> calls, err = parse_prompted_calls('```json\\n{"tool_calls": [{"name": "f", "arguments": {"x": 1}}]}\\n```')
    >>> [(c.name, c.arguments) for c in calls], err
    ([('f', {'x': 1})], None)
    >>> parse_prompted_calls("The answer is 4.")
    ([], None)
    >>> parse_prompted_calls('<tool_call>{"name": "g", "arguments": {}}</tool_call>')[0][0].name
    'g'
    """
    candidates = [m.group(1) for m in re.finditer(r"<tool_call>\s*(.*?)\s*</tool_call>", text, re.S)]
    if candidates:
        calls = [c for cand in candidates for c in _calls_in(_loads(cand))]
        return calls, None if calls else "could not read the <tool_call> blocks as JSON"
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced else text
    start = min((i for i in (body.find("{"), body.find("[")) if i != -1), default=-1)
    if start == -1:
        return [], None
    try:
        obj, _ = json.JSONDecoder().raw_decode(body[start:])
    except json.JSONDecodeError as e:
        looks_like_call = '"name"' in body or "tool_calls" in body
        return [], f"invalid JSON in a tool call: {e}" if looks_like_call else None
    return _calls_in(obj), None


def _loads(s: str) -> Any:
    try:
        return json.loads(s)
    except json.JSONDecodeError:
        return None


def _calls_in(obj: Any) -> list[ToolCall]:
    if isinstance(obj, dict) and isinstance(obj.get("tool_calls"), list):
        obj = obj["tool_calls"]
    items = obj if isinstance(obj, list) else [obj]
    calls = []
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("function"), dict):  # OpenAI shape
            item = item["function"]
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        args = item.get("arguments", item.get("parameters", {}))
        if isinstance(args, str):
            args = _loads(args) or {}
        calls.append(ToolCall(name=item["name"], arguments=args if isinstance(args, dict) else {}))
    return calls


def _from_openai(call: dict[str, Any], i: int) -> ToolCall:
    fn = call.get("function") or {}
    args = fn.get("arguments") or {}
    if isinstance(args, str):
        args = _loads(args)
        if not isinstance(args, dict):
            args = {}
    return ToolCall(name=str(fn.get("name", "")), arguments=args, id=str(call.get("id") or f"call_{i}"))


def to_text(value: Any) -> str:
    """A tool result as context text: strings as they are, everything else as JSON when it can be.

    >>> to_text({"a": 1}), to_text("x"), to_text(2.5)
    ('{"a": 1}', 'x', '2.5')
    """
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _content_text(m: Message) -> str:
    content = m.get("content")
    text = content if isinstance(content, str) else json.dumps(content) if content else ""
    if m.get("tool_calls"):
        text += json.dumps(m["tool_calls"])
    return text


__all__ = [
    "ContextOverflow",
    "Decision",
    "JsonAgent",
    "JsonRunResult",
    "ToolCall",
    "ToolSpec",
    "parse_prompted_calls",
    "sql_tool",
    "to_text",
]


def sql_tool(con: Any, description: str) -> ToolSpec:
    """``run_sql(query)`` on ``con``: the result rows as records."""

    def run_sql(query: str) -> list[dict[str, Any]]:
        cur = con.execute(query)
        cols = [d[0] for d in cur.description or []]
        return [dict(zip(cols, row, strict=False)) for row in cur.fetchall()]

    schema = {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "SQLite SELECT"}},
        "required": ["query"],
    }
    return ToolSpec("run_sql", description, schema, fn=run_sql)
