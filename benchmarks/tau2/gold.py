"""Gold replay of tau2 tasks: scripted agents that perform each task's gold actions, graded by tau2's evaluator.

A harness that gives full reward to a correct agent (and none to a wrong one) on the real domains can be trusted
with a model's numbers. For each task, the gold actions (``evaluation_criteria.actions``) are split into rounds of
the conversation: in each round the user first performs its own gold actions through the user's tools (telecom's
dual control: the user acts on their device), then the agent performs its gold actions and answers. The agent is
scripted as the code agent would act (one ```python block of tool calls per turn, then ``final_answer``) or as the
JSON agent would (one tool-call reply per turn, then a text reply); its closing message carries the task's
``communicate_info``. The user is scripted too (its instructions, then "###STOP###"). ``broken=True`` drops the
task's last gold WRITE action that takes effect (see ``breakage`` for tasks without one): the reward must be 0.

    python -m cave.benchmarks.tau2.gold --domains airline,retail,telecom --agents code,json [--limit N] [--broken]

NL assertions need an LLM judge; they are not in the reward basis of the base splits (reported if one is).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cave.benchmarks.tau2.agents import quiet_logs, require_tau2
from cave.benchmarks.tau2.run import load_tasks, run_task

from cave.llm.base import Scripted

WINDOW = 131_072  # the scripted models' context window: the policy and tool list exceed 8k tokens in retail
STOP = "Thank you, that is all. ###STOP###"
DOMAINS = ("airline", "retail", "telecom")


@dataclass
class Round:
    """One exchange: the user's tool calls, its message, then the agent's tool calls and its reply."""

    user_calls: list[Any] = field(default_factory=list)
    agent_calls: list[Any] = field(default_factory=list)


@dataclass
class GoldResult:
    domain: str
    task_id: str
    agent: str
    broken: str  # "" for the gold replay, else what was broken ("dropped <write>")
    reward: float
    expected: float
    termination: str
    breakdown: dict[str, float]
    reason: str  # why the reward is not the expected one ("" when it is)
    duration: float
    error: str = ""

    @property
    def ok(self) -> bool:
        return abs(self.reward - self.expected) <= 1e-6


# -- the script ----------------------------------------------------------------------------------------------------
def rounds(actions: Sequence[Any]) -> list[Round]:
    """Gold actions in order, grouped into rounds (user calls first, then the agent's); at least one round."""
    out: list[Round] = []
    for a in actions:
        user = a.requestor == "user"
        if not out or (user and out[-1].agent_calls):  # a user action after agent actions opens a new round
            out.append(Round())
        (out[-1].user_calls if user else out[-1].agent_calls).append(a)
    return out or [Round()]


def opening(task: Any) -> str:
    ins = task.user_scenario.instructions
    if isinstance(ins, str):
        return ins
    parts = [getattr(ins, "reason_for_call", ""), getattr(ins, "known_info", "")]
    return "\n".join(p.strip() for p in parts if p) or "Hello, I need help."


def closing(task: Any, *, info: bool = True) -> str:
    info = (task.evaluation_criteria.communicate_info or []) if info else []
    return "Done. " + " ".join(f"{i}." for i in info) if info else "Done, is there anything else?"


def _calls_json(actions: Sequence[Any]) -> str:
    return json.dumps({"tool_calls": [{"name": a.name, "arguments": a.arguments} for a in actions]})


def _py_call(action: Any) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in action.arguments.items())
    return f"try:\n    {action.name}({args})\nexcept ToolError as e:\n    print('refused:', e)\n"


def code_replies(plan: list[Round], last: str) -> list[str]:
    """The code agent's replies: one ```python block per turn (its calls, then final_answer)."""
    out = []
    for i, r in enumerate(plan):
        say = last if i == len(plan) - 1 else "Please go on."
        out.append("```python\n" + "".join(_py_call(a) for a in r.agent_calls) + f"final_answer({say!r})\n```")
    return out


def json_replies(plan: list[Round], last: str) -> list[str]:
    """The JSON agent's replies: one tool-call reply per turn with calls (all of them), then a text reply."""
    out = []
    for i, r in enumerate(plan):
        if r.agent_calls:
            out.append(_calls_json(r.agent_calls))
        out.append(last if i == len(plan) - 1 else "Please go on.")
    return out


def user_replies(task: Any, plan: list[Round]) -> list[str]:
    """The user's replies: per round its tool calls (telecom's device actions), then a message; then stop."""
    out = []
    for i, r in enumerate(plan):
        if r.user_calls:
            out.append(_calls_json(r.user_calls))
        out.append(opening(task) if i == 0 else "I did what you asked.")
    return [*out, STOP]


def write_tools(domain: str) -> set[str]:
    """Names of the domain's WRITE tools (the agent's and the user's)."""
    from tau2.environment.toolkit import ToolType
    from tau2.registry import registry

    env = registry.get_env_constructor(domain)()
    names = set()
    for kit in (env.tools, env.user_tools):
        if kit is not None:
            names |= {n for n in kit.get_tools() if kit.tool_type(n) == ToolType.WRITE}
    return names


def refused(domain: str, task: Any) -> set[int]:
    """Indexes of the gold actions that tau2's environment refuses when they are replayed as the grader does
    (e.g. a refund to a payment method the policy forbids): dropping one of those changes nothing."""
    from tau2.data_model.message import ToolCall
    from tau2.registry import registry

    env = registry.get_env_constructor(domain)()
    init = task.initial_state
    env.set_state(
        initialization_data=getattr(init, "initialization_data", None),
        initialization_actions=getattr(init, "initialization_actions", None),
        message_history=list(getattr(init, "message_history", None) or []),
    )
    out = set()
    for i, a in enumerate(task.evaluation_criteria.actions or []):
        reply = env.get_response(ToolCall(id=f"gold_{i}", name=a.name, arguments=a.arguments, requestor=a.requestor))
        if reply.error:
            out.add(i)
    return out


def break_actions(actions: list[Any], writes: set[str], skip: set[int] = frozenset()) -> tuple[list[Any], str]:
    """The gold actions without the last WRITE action (not one of ``skip``: refused ones), and what was dropped
    ("" if the task has no such write)."""
    for i in range(len(actions) - 1, -1, -1):
        if actions[i].name in writes and i not in skip:
            return actions[:i] + actions[i + 1 :], f"dropped {actions[i].requestor}:{actions[i].name}"
    return actions, ""


# -- one replay ----------------------------------------------------------------------------------------------------
def replay(domain: str, task: Any, agent: str, *, broken: bool = False, runtime: str | None = None) -> GoldResult:
    """Run ``task`` with the scripted gold (or broken) agent and user through tau2; the reward and why."""
    actions, what, say = list(task.evaluation_criteria.actions or []), "", closing(task)
    if broken:
        actions, what, say = breakage(domain, task)
        if not what:
            return _result(domain, task, agent, "n/a: nothing graded to break", None, 0.0)
    plan = rounds(actions)
    replies = code_replies(plan, say) if agent == "code" else json_replies(plan, say)
    t0 = time.perf_counter()
    agent_llm = Scripted(replies, context_window=WINDOW)
    user_llm = Scripted(user_replies(task, plan), context_window=WINDOW)
    run = run_task(domain, task, agent, agent_llm, user_llm, runtime=runtime)
    return _result(domain, task, agent, what, run, time.perf_counter() - t0)


def breakage(domain: str, task: Any) -> tuple[list[Any], str, str]:
    """The broken script (actions, what was broken, closing message): the last gold write that takes effect is
    dropped; failing that, the last gold action where actions are graded (ACTION basis); failing that, the
    communicate_info is left out of the closing message. ``what`` is "" when the task has none of these."""
    ec = task.evaluation_criteria
    actions = list(ec.actions or [])
    kept, what = break_actions(actions, write_tools(domain), refused(domain, task))
    if what:
        return kept, what, closing(task)
    basis = {str(getattr(b, "value", b)) for b in ec.reward_basis}
    if "ACTION" in basis and actions:
        return actions[:-1], f"dropped {actions[-1].requestor}:{actions[-1].name} (ACTION basis)", closing(task)
    if ec.communicate_info and "COMMUNICATE" in basis:
        return actions, "communicate_info left out", closing(task, info=False)
    return actions, "", closing(task)


def _result(domain: str, task: Any, agent: str, what: str, run: Any, duration: float) -> GoldResult:
    expected = 0.0 if what and not what.startswith("n/a") else 1.0
    if run is None:  # nothing to break: not run
        return GoldResult(domain, task.id, agent, what, 0.0, 0.0, "", {}, "", 0.0)
    breakdown = run.trajectory.meta["tau2"]["reward_breakdown"]
    res = GoldResult(
        domain, task.id, agent, what, run.reward, expected, run.termination, breakdown, "", duration, run.error
    )
    if not res.ok:
        res.reason = classify(task, run)
    return res


def classify(task: Any, run: Any) -> str:
    """Why a gold replay fell short of 1 (or a broken one kept it): tau2's reward breakdown, in words."""
    if run.error:
        return f"error: {run.error[:200]}"
    basis = {str(getattr(b, "value", b)) for b in task.evaluation_criteria.reward_basis}
    if "NL_ASSERTION" in basis:
        return "NL assertions need an LLM judge (not a harness failure)"
    parts = run.trajectory.meta["tau2"]["reward_breakdown"] or {}
    low = [k for k, v in parts.items() if v < 1.0]
    names = {
        "DB": "DB mismatch",
        "COMMUNICATE": "communicate_info missing",
        "ENV_ASSERTION": "env assertion failed",
        "ACTION": "gold action missing",
    }
    if low:
        return ", ".join(names.get(k, k) for k in low)
    if run.termination != "user_stop":
        return f"ended by {run.termination}"
    return "reward 1 although broken: what was dropped changes nothing the grader sees"


# -- the policy text each agent gets -------------------------------------------------------------------------------
class _Recording(Scripted):
    """Scripted replies; records each call's messages and tools (``native``: it claims native tool calling)."""

    def __init__(self, replies: list[str], native: bool) -> None:
        super().__init__(replies, context_window=WINDOW)
        self.supports_tools = native
        self.tools: list[Any] = []

    async def _stream(self, messages: list[Any], request: Any) -> Any:
        self.tools.append(request.tools)
        async for item in super()._stream(messages, request):
            yield item


def first_prompts(domain: str, *, native: bool = False) -> dict[str, tuple[list[dict[str, Any]], list[Any] | None]]:
    """The first prompt (messages, native tools) of the code agent, the JSON agent and tau2's own LLMAgent."""
    from tau2.agent.llm_agent import LLMAgent
    from tau2.data_model.message import SystemMessage
    from tau2.registry import registry

    task = load_tasks(domain, limit=1)[0]
    out = {}
    for agent, reply in (("code", '```python\nfinal_answer("Hello.")\n```'), ("json", "Hello.")):
        llm = _Recording([reply], native)
        run_task(domain, task, agent, llm, Scripted([opening(task), STOP], context_window=WINDOW), runtime="inprocess")
        out[agent] = (llm.calls[0], llm.tools[0])
    env = registry.get_env_constructor(domain)()
    ref = LLMAgent(tools=env.get_tools(), domain_policy=env.get_policy(), llm="none")
    system = ref.get_init_state().system_messages[0]
    assert isinstance(system, SystemMessage)
    out["tau2"] = ([{"role": "system", "content": system.content}], [t.openai_schema for t in env.get_tools()])
    return out


def policy_report(domain: str, count: Any, *, native: bool = False) -> dict[str, dict[str, Any]]:
    """Per agent: whether the domain policy is in its system prompt verbatim, and its first prompt's tokens
    (``count(messages, tools)``: system text, then the tool schemas where they are sent natively)."""
    from tau2.registry import registry

    policy = registry.get_env_constructor(domain)().get_policy()
    rows = {}
    for agent, (messages, tools) in first_prompts(domain, native=native).items():
        system = "\n".join(m["content"] for m in messages if m["role"] == "system")
        rows[agent] = {
            "policy_verbatim": policy in system,
            "policy_tokens": count([{"role": "system", "content": policy}], None),
            "system_tokens": count([m for m in messages if m["role"] == "system"], None),
            "overhead_tokens": count([m for m in messages if m["role"] == "system"], tools),  # every call pays it
        }
    return rows


# -- the sweep -----------------------------------------------------------------------------------------------------
def sweep(
    domains: Sequence[str],
    agents: Sequence[str],
    *,
    limit: int | None = None,
    task_ids: list[str] | None = None,
    broken: bool = False,
    runtime: str | None = None,
    out: Path | None = None,
    progress: bool = True,
) -> list[GoldResult]:
    quiet_logs("ERROR")
    require_tau2()
    results: list[GoldResult] = []
    sink = out.open("w") if out else None
    try:
        for domain in domains:
            tasks = load_tasks(domain, limit=limit, task_ids=task_ids)
            for i, task in enumerate(tasks, 1):
                for agent in agents:
                    r = replay(domain, task, agent, broken=broken, runtime=runtime)
                    results.append(r)
                    if sink:
                        sink.write(json.dumps({**asdict(r), "ok": r.ok}) + "\n")
                        sink.flush()
                    if progress:
                        mark = "ok" if r.ok else f"!! {r.reason}"
                        print(f"{domain} {i}/{len(tasks)} {agent} {task.id}: {r.reward:g} {mark}", file=sys.stderr)
    finally:
        if sink:
            sink.close()
    return results


def table(results: list[GoldResult], broken: bool) -> Any:
    from rich.table import Table

    t = Table(title="tau2 " + ("broken replay (expect reward 0)" if broken else "gold replay (expect reward 1)"))
    for col in ("domain", "agent", "tasks", "as expected", "not run (nothing to break)", "reasons"):
        t.add_column(col)
    groups: dict[tuple[str, str], list[GoldResult]] = {}
    for r in results:
        groups.setdefault((r.domain, r.agent), []).append(r)
    for (domain, agent), rs in groups.items():
        skipped = [r for r in rs if r.broken.startswith("n/a")]
        ran = [r for r in rs if not r.broken.startswith("n/a")]
        reasons: dict[str, list[str]] = {}
        for r in ran:
            if not r.ok:
                reasons.setdefault(r.reason, []).append(r.task_id)
        text = "; ".join(f"{k}: {len(v)} ({', '.join(v[:4])}{'...' if len(v) > 4 else ''})" for k, v in reasons.items())
        t.add_row(domain, agent, str(len(ran)), str(sum(r.ok for r in ran)), str(len(skipped)), text or "-")
    return t


def print_prompts(domains: Sequence[str]) -> int:
    """The policy check per domain and agent, in the embedded model's tokens (prompted and native tool formats)."""
    from rich.console import Console
    from rich.table import Table

    from cave.llm.base import create_backend

    quiet_logs("ERROR")
    require_tau2()  # before tau2's first import: litellm would fetch a price list
    llm = create_backend("local", n_ctx=32768)

    def count(messages: list[Any], tools: list[Any] | None) -> int:
        return len(llm.encode(messages, tools))

    t = Table(title="tau2 policy text and prompt tokens (embedded model's tokenizer, chat template applied)")
    for col in ("domain", "tools", "agent", "policy verbatim", "policy", "system prompt", "system + tool schemas"):
        t.add_column(col)
    ok = True
    for domain in domains:
        for native in (False, True):
            for agent, row in policy_report(domain, count, native=native).items():
                if agent == "code" and native:
                    continue  # the code agent has no tool format
                ok &= row["policy_verbatim"]
                fmt = "-" if agent == "code" else "native" if native or agent == "tau2" else "prompted"
                if agent == "tau2" and not native:
                    continue  # tau2's LLMAgent always sends native tool schemas: once
                cells = [row["policy_verbatim"], row["policy_tokens"], row["system_tokens"], row["overhead_tokens"]]
                t.add_row(domain, fmt, agent, *map(str, cells))
    Console(width=200).print(t)
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cave.benchmarks.tau2.gold", description=__doc__.split("\n\n")[0])
    p.add_argument("--domains", default=",".join(DOMAINS), help="comma-separated (default: %(default)s)")
    p.add_argument("--agents", default="code,json", help="comma-separated: code, json (default: %(default)s)")
    p.add_argument("--limit", type=int, default=None, help="first N tasks per domain")
    p.add_argument("--task-ids", default=None, help="comma-separated task ids")
    p.add_argument("--broken", action="store_true", help="drop each task's last gold write: expect reward 0")
    p.add_argument("--runtime", default=None, help="where the code agent's code runs (default: the sandbox default)")
    p.add_argument("--out", type=Path, default=None, help="JSONL of one result per task and agent")
    p.add_argument("-q", "--quiet", action="store_true", help="no per-task progress lines")
    p.add_argument("--prompts", action="store_true", help="instead: the policy check and prompt tokens per agent")
    a = p.parse_args(argv)
    if a.prompts:
        return print_prompts(a.domains.split(","))
    results = sweep(
        a.domains.split(","),
        a.agents.split(","),
        limit=a.limit,
        task_ids=a.task_ids.split(",") if a.task_ids else None,
        broken=a.broken,
        runtime=a.runtime,
        out=a.out,
        progress=not a.quiet,
    )
    from rich.console import Console

    Console(width=200).print(table(results, a.broken))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
