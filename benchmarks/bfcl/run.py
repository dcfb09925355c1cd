"""Running the two agents on BFCL entries, capturing their calls, scoring them.

- ``code``: the cave agent; its code runs in a sandbox (a process-mode kernel where no sandbox can
  run; ``runtime="inprocess"`` only on request, see ``cave.benchmarks.runtime``). Every documented
  function is a recording stub injected as a *host function*: the kernel calls a proxy, the stub
  runs here and records into this process's Recorder. Single-turn stubs only record; multi-turn
  stubs run on the live BFCL backend (file system, trading bot, ...) so the agent sees real results
  across turns.
- ``json``: the JSON function-calling baseline with the same functions as tools.

One ``EntryResult`` per entry: the checker's verdict, the captured calls and one combined
``Trajectory`` (all turns), with the entry id and the calls in ``trajectory.meta`` so
``cave.benchmarks.rewards.bfcl_reward`` can score it again later.
"""

from __future__ import annotations

import asyncio
import copy
import importlib
import inspect
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cave.benchmarks.bfcl.data import Entry
from cave.benchmarks.bfcl.score import error_summary, score
from cave.benchmarks.bfcl.stubs import Recorder, make_stub, param_notes, py_name, tool_spec, written_calls
from cave.benchmarks.json_agent import JsonAgent, ToolSpec
from cave.benchmarks.runtime import code_runtime

from cave.llm.base import LLM
from cave.trajectory import Trajectory

CODE_SINGLE = """\
This task is a function-calling test: answer the user's request by calling the functions listed below in one
```python block, with the arguments the request gives. The calls are the answer: do not work the result out
yourself, and do not define or import the functions (they already exist). Calls are recorded for grading (they
return a receipt, not a real result). If the request asks for several things, make several calls in the same
block. If none of the functions fits the request, call none and reply in plain text saying so. After the calls,
call final_answer("done"). For example, for "What is the weather in Oslo, in celsius?" and a function
get_weather(city: str, unit: str = 'f'), the whole reply is:
```python
get_weather(city='Oslo', unit='c')
final_answer("done")
```
When no function does what the request asks (for "What is the capital of France?", get_weather does not give
capitals), call nothing; the whole reply is one sentence, e.g.: None of the functions can answer this."""

CODE_SINGLE_BASE = """\
You work in a persistent Python session: the functions listed below already exist in it. Reply with one \
```python code block; you will see what it prints."""

CODE_MULTI = """\
You operate the user's system through the functions listed below: they act on live state and return real
results. For each user request, call the functions it needs in ```python blocks (print results you need to see).
When the request is done, call final_answer with a short message to the user. If the request cannot be done
with these functions, do not call any; reply in plain text saying what is missing."""

JSON_SINGLE = """\
This task is a function-calling test. Call the tools the user's request needs, with the arguments it gives; if
the request asks for several things, make several calls. If no tool fits the request, call none and say so."""

JSON_MULTI = """\
You operate the user's system through the tools: they act on live state and return real results. For each user
request, call the tools it needs; when it is done, answer in plain text. If it cannot be done with the tools,
call none and say what is missing."""


@dataclass
class EntryResult:
    id: str
    category: str
    agent: str
    valid: bool
    error: str
    calls: Any  # single-turn: [{name, arguments}]; multi-turn: per turn, per step
    trajectory: Trajectory
    duration: float = 0.0
    checker: dict[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The JSONL row."""
        u = self.trajectory.usage
        return {
            "suite": "bfcl",
            "id": self.id,
            "category": self.category,
            "agent": self.agent,
            "valid": self.valid,
            "score": 1.0 if self.valid else 0.0,
            "error": self.error,
            "calls": self.calls,
            "status": self.trajectory.status,
            "steps": len(self.trajectory.steps),
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            "total_tokens": u.total_tokens,
            "duration": round(self.duration, 3),
        }


# -- live backends for multi-turn entries ------------------------------------------------------------
def backends(entry: Entry) -> dict[str, Any]:
    """Fresh BFCL backend instances for a multi-turn entry, loaded with its initial config."""
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES

    out = {}
    long_context = "long_context" in entry.category
    for cls_name in entry.raw["involved_classes"]:
        cls = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[cls_name]), cls_name)
        inst = cls()
        if cls_name not in STATELESS_CLASSES:
            inst._load_scenario(copy.deepcopy(entry.raw["initial_config"].get(cls_name, {})), long_context=long_context)
        out[cls_name] = inst
    return out


def _methods(instances: dict[str, Any]) -> dict[str, Callable[..., Any]]:
    # Same resolution as bfcl-eval's executor: public methods, a later class wins a name clash.
    methods: dict[str, Callable[..., Any]] = {}
    for inst in instances.values():
        for name, m in inspect.getmembers(inst, predicate=inspect.ismethod):
            if not name.startswith("_"):
                methods[name] = m
    return methods


# -- the agents -------------------------------------------------------------------------------------
async def run_code(
    entry: Entry,
    llm: LLM,
    *,
    max_steps: int = 4,
    runtime: str | None = None,
    agent_options: dict[str, Any] | None = None,
    single_turn_steps: int = 1,
) -> tuple[Any, Trajectory]:
    """``runtime``: where the agent's code runs (default: ``cave.benchmarks.runtime.default_runtime()``);
    ``agent_options``: more ``Agent`` keyword arguments (e.g. ``response_prefix``); ``single_turn_steps``: the
    replies a single-turn entry gets (1: one-shot, as BFCL scores it and as the JSON baseline answers; more lets
    the agent go on after a reply that made no call, e.g. one whose code failed before its calls)."""
    from cave.agent import Agent, RunStarted, StepFinished, StepStarted

    rec = Recorder()
    impls = {name: _json_result(m) for name, m in _methods(backends(entry)).items()} if entry.multi_turn else {}
    runtime = code_runtime(runtime, timeout=30, memory_limit_mb=2048)
    try:
        for doc in entry.functions:
            runtime.inject_function(make_stub(doc, rec, impls.get(doc["name"])), param_notes(doc), host=True)
        instructions = "\n\n".join(
            s for s in [CODE_MULTI if entry.multi_turn else CODE_SINGLE, entry.system_text()] if s
        )
        # The function docs are the task: give them half the window (the JSON agent gets its schemas whole).
        budget = max(1500, int(getattr(llm, "context_window", 8192) or 8192) // 2)
        agent = Agent(
            model=llm,
            runtime=runtime,
            max_steps=max_steps,
            instructions=instructions,
            stream=False,
            prompt_budget=budget,
            verify=None,  # the calls are the answer and the benchmark scores them: re-solving would call tools again
            # single-turn: a call is the whole answer; the data-analysis base prompt is tokens it does not need
            **{"base_prompt": None if entry.multi_turn else CODE_SINGLE_BASE, **(agent_options or {})},
        )

        trajs, turns = [], []
        for t in range(len(entry.turns)):
            for doc in entry.holdout(t):  # miss_func: held-out functions arrive with this turn
                runtime.inject_function(make_stub(doc, rec, impls.get(doc["name"])), param_notes(doc), host=True)
            rec.steps = [[]]
            traj, finished = None, 0
            async for ev in agent.stream(entry.turn_text(t)):
                if isinstance(ev, RunStarted):
                    traj = ev.trajectory
                elif isinstance(ev, StepStarted):
                    rec.new_step()
                elif isinstance(ev, StepFinished) and not entry.multi_turn:
                    finished += 1
                    if rec.steps[-1] or finished >= single_turn_steps:
                        break  # single-turn: the first step that made calls, or the last reply allowed, is the answer
            assert traj is not None
            if not entry.multi_turn:
                _count_written_calls(traj, rec, entry.functions)
            if traj.status == "running":
                traj.status, traj.finished_at = "success", time.time()
            trajs.append(traj)
            turns.append(rec.step_calls())
    finally:
        runtime.close()
    captured = turns if entry.multi_turn else [c for turn in turns for step in turn for c in step]
    return captured, combine(trajs, entry, "code")


def _count_written_calls(traj: Trajectory, rec: Recorder, docs: list[dict[str, Any]]) -> None:
    """A single-turn reply whose cell failed is scored on the calls it wrote, as BFCL's AST checker reads a text
    reply: the calls that ran, then those the code wrote after them (a call whose arguments named an undefined
    variable never ran, yet it is a call to an unrelated function in an irrelevance entry)."""
    last = traj.steps[-1] if traj.steps else None
    if last is None or not last.code or last.execution is None or last.execution.error is None:
        return
    ran = rec.steps[-1]
    ran.extend(written_calls(last.code, docs)[len(ran) :])


async def run_json(entry: Entry, llm: LLM, *, max_steps: int = 4, native: bool | None = None) -> tuple[Any, Trajectory]:
    rec = Recorder()
    impls = _methods(backends(entry)) if entry.multi_turn else {}
    tools: list[ToolSpec] = []
    for doc in entry.functions:
        tools.append(tool_spec(doc, fn=_json_tool(doc["name"], rec, impls.get(doc["name"]))))
    instructions = "\n\n".join(s for s in [JSON_MULTI if entry.multi_turn else JSON_SINGLE, entry.system_text()] if s)
    # Single-turn BFCL is one-shot: the first reply's calls are scored (the official harness makes one call).
    agent = JsonAgent(
        llm, tools, instructions=instructions, max_steps=max_steps, native=native, stop_after_calls=not entry.multi_turn
    )
    trajs, turns = [], []
    for t in range(len(entry.turns)):
        for doc in entry.holdout(t):  # miss_func: held-out functions arrive with this turn
            spec = tool_spec(doc, fn=_json_tool(doc["name"], rec, impls.get(doc["name"])))
            agent.tools[spec.name] = spec
        rec.steps = [[]]
        result = await agent.arun(entry.turn_text(t), on_step=lambda _s: rec.new_step())
        trajs.append(result.trajectory)
        turns.append(rec.step_calls())
    captured = turns if entry.multi_turn else [c for turn in turns for step in turn for c in step]
    return captured, combine(trajs, entry, "json")


def _json_result(method: Callable[..., Any]) -> Callable[..., Any]:
    """A backend method whose result crosses to the kernel as JSON (what is not JSON becomes its str, as
    bfcl-eval's executor shows results to a JSON agent)."""

    def call(**arguments: Any) -> Any:
        result = method(**arguments)
        try:
            json.dumps(result)
            return result
        except (TypeError, ValueError):
            return json.loads(json.dumps(result, default=str))

    return call


def _json_tool(name: str, rec: Recorder, impl: Callable[..., Any] | None) -> Callable[..., Any]:
    """A JSON tool records the arguments exactly as the model gave them (no binding, no defaults)."""

    def fn(**arguments: Any) -> Any:
        rec.record(name, dict(arguments))
        if impl is None:
            return f"recorded call {name}"
        try:
            return impl(**arguments)
        except Exception as e:  # as bfcl-eval's executor reports it to the model
            return f"Error during execution: {e}"

    fn.__name__ = py_name(name)
    return fn


def combine(trajs: list[Trajectory], entry: Entry, agent: str) -> Trajectory:
    """One trajectory for the whole entry (all turns), steps re-indexed."""
    out = Trajectory(task="\n\n".join(entry.turn_text(t) for t in range(len(entry.turns))))
    for tr in trajs:
        for s in tr.steps:
            s.index = len(out.steps)
            s.run_id = out.run_id
            out.steps.append(s)
    last = trajs[-1] if trajs else None
    out.status = last.status if last else "error"
    errors = [t.error for t in trajs if t.error]
    out.error = errors[0] if errors else None
    out.final_answer = last.final_answer if last else None
    out.finished_at = time.time()
    out.meta.update({"suite": "bfcl", "agent": agent, "bfcl": {"id": entry.id, "category": entry.category}})
    return out


async def arun_entry(
    entry: Entry,
    agent: str,
    llm: LLM,
    *,
    max_steps: int = 4,
    native: bool | None = None,
    runtime: str | None = None,
    agent_options: dict[str, Any] | None = None,
    single_turn_steps: int = 1,
) -> EntryResult:
    """``runtime``: where the code agent's code runs (the JSON agent's tools run here); ``agent_options``: more
    keyword arguments for the code agent."""
    t0 = time.perf_counter()
    if agent == "code":
        captured, traj = await run_code(
            entry,
            llm,
            max_steps=max_steps,
            runtime=runtime,
            agent_options=agent_options,
            single_turn_steps=single_turn_steps,
        )
    elif agent == "json":
        captured, traj = await run_json(entry, llm, max_steps=max_steps, native=native)
    else:
        raise ValueError(f"unknown agent {agent!r}: use 'code' or 'json'")
    traj.meta["bfcl"]["calls"] = captured
    verdict = score(entry, captured)
    valid = bool(verdict.get("valid"))
    traj.reward = 1.0 if valid else 0.0
    return EntryResult(
        id=entry.id,
        category=entry.category,
        agent=agent,
        valid=valid,
        error=error_summary(verdict),
        calls=captured,
        trajectory=traj,
        duration=time.perf_counter() - t0,
        checker=verdict,
    )


def run_entry(entry: Entry, agent: str, llm: LLM, **kwargs: Any) -> EntryResult:
    return asyncio.run(arun_entry(entry, agent, llm, **kwargs))


async def arun_bfcl(
    categories: list[str],
    agent: str,
    llm: LLM | Callable[[Entry], LLM],
    *,
    limit: int | None = None,
    max_steps: int = 4,
    native: bool | None = None,
    runtime: str | None = None,
    agent_options: dict[str, Any] | None = None,
    single_turn_steps: int = 1,
    on_result: Callable[[EntryResult], None] | None = None,
) -> list[EntryResult]:
    """Run ``agent`` on the first ``limit`` entries of each category. ``llm`` may be a function of the entry."""
    from cave.benchmarks.bfcl.data import load_category

    results = []
    for category in categories:
        for entry in load_category(category, limit):
            model = llm(entry) if callable(llm) and not isinstance(llm, LLM) else llm
            r = await arun_entry(
                entry,
                agent,
                model,
                max_steps=max_steps,
                native=native,
                runtime=runtime,
                agent_options=agent_options,
                single_turn_steps=single_turn_steps,
            )
            results.append(r)
            if on_result is not None:
                on_result(r)
    return results


# -- gold replies: a scripted model that answers with the possible answer ---------------------------
def gold_replies(entry: Entry, agent: str) -> list[str]:
    """Replies that make ``agent`` issue exactly the gold calls (for the Scripted backend)."""
    from cave.benchmarks.bfcl.data import gold_calls

    gold = gold_calls(entry)
    replies = replies_for(gold if entry.multi_turn else [gold], agent)
    if agent == "code" and not entry.multi_turn and not gold:  # --agent-option expect_calls=true asks once more
        replies.append("I checked again: none of the functions fits this request.")
    return replies


def replies_for(turns: list[list[dict[str, Any]]], agent: str) -> list[str]:
    """Scripted replies that make ``agent`` issue the given calls, turn by turn.

    code: one ```python block per turn with the calls (keyword arguments), then final_answer;
    json: one prompted-format tool-call message per turn, then a plain-text answer.
    A turn without calls gets a plain-text reply.
    """
    replies = []
    for calls in turns:
        if not calls:
            replies.append("None of the available functions can do this; I need more information or another tool.")
            continue
        if agent == "code":
            lines = [
                f"{py_name(c['name'])}({', '.join(f'{py_name(k)}={v!r}' for k, v in c['arguments'].items())})"
                for c in calls
            ]
            replies.append("I will make the calls.\n```python\n" + "\n".join(lines) + "\nfinal_answer('done')\n```")
        else:
            payload = [{"name": py_name(c["name"]), "arguments": c["arguments"]} for c in calls]
            replies += [json.dumps({"tool_calls": payload}), "Done."]
    return replies
