"""Running cave agents on tau2 domains with tau2's own ``run_task`` (orchestrator + evaluator).

One ``TaskRun`` per (task, trial): tau2's reward and reward breakdown, the agent's cave
``Trajectory`` (usage per step, tool calls with outputs) and the simulation messages, kept in
``trajectory.meta["tau2"]`` so ``cave.benchmarks.rewards.tau2_reward`` can re-grade it with tau2's
evaluator. ``pass_hat_k`` summarizes trials per task exactly as tau2 defines it.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cave.benchmarks.tau2.agents import AGENT_NAMES, CONTEXTS, USER_NAME, open_context, register, require_tau2

from cave.llm.base import LLM
from cave.trajectory import Trajectory

DOMAINS = ("mock", "airline", "retail", "telecom")


@dataclass
class TaskRun:
    domain: str
    task_id: str
    trial: int
    agent: str
    reward: float
    termination: str
    trajectory: Trajectory
    user_trajectory: Trajectory
    duration: float = 0.0
    error: str = ""

    @property
    def success(self) -> bool:
        return abs(self.reward - 1.0) <= 1e-6  # tau2's is_successful

    def record(self) -> dict[str, Any]:
        u, uu = self.trajectory.usage, self.user_trajectory.usage
        info = self.trajectory.meta.get("tau2", {})
        return {
            "suite": "tau2",
            "domain": self.domain,
            "id": self.task_id,
            "trial": self.trial,
            "agent": self.agent,
            "reward": self.reward,
            "success": self.success,
            "termination": self.termination,
            "reward_breakdown": info.get("reward_breakdown"),
            "steps": len(self.trajectory.steps),
            "tool_calls": sum(len(s.meta.get("tool_calls", [])) for s in self.trajectory.steps),
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            "total_tokens": u.total_tokens,
            "user_total_tokens": uu.total_tokens,
            "error": self.error,
            "duration": round(self.duration, 3),
        }


def load_tasks(domain: str, *, limit: int | None = None, task_ids: list[str] | None = None) -> list[Any]:
    require_tau2()
    from tau2.registry import registry
    from tau2.run import get_tasks

    if domain not in DOMAINS:
        raise ValueError(f"unknown tau2 domain {domain!r}; use one of {', '.join(DOMAINS)}")
    split = "base" if registry.get_task_splits_loader(domain) is not None else None
    return get_tasks(domain, task_split_name=split, task_ids=task_ids, num_tasks=limit)


def run_task(
    domain: str,
    task: Any,
    agent: str,
    llm: LLM,
    user_llm: LLM,
    *,
    trial: int = 0,
    seed: int | None = None,
    max_steps: int | None = None,
    max_errors: int | None = None,
    agent_steps: int = 8,
    native: bool | None = None,
) -> TaskRun:
    """One simulation of ``task`` with a cave agent ("code" | "json") and a cave-backed user."""
    require_tau2()
    register()
    from tau2 import config
    from tau2.evaluator.evaluator import EvaluationType
    from tau2.run import run_task as tau2_run_task

    if agent not in AGENT_NAMES:
        raise ValueError(f"unknown agent {agent!r}: use 'code' or 'json'")
    options = {} if native is None else {"native": native}
    agent_key = open_context(llm, max_steps=agent_steps, options=options if agent == "json" else {})
    user_key = open_context(user_llm, options=options)
    t0 = time.perf_counter()
    error = ""
    try:
        sim = tau2_run_task(
            domain=domain,
            task=task,
            agent=AGENT_NAMES[agent],
            user=USER_NAME,
            llm_agent=agent_key,
            llm_args_agent={},
            llm_user=user_key,
            llm_args_user={},
            max_steps=max_steps or config.DEFAULT_MAX_STEPS,
            max_errors=max_errors or config.DEFAULT_MAX_ERRORS,
            evaluation_type=EvaluationType.ALL,
            seed=seed,
        )
        reward, termination = (
            float(sim.reward_info.reward),
            str(getattr(sim.termination_reason, "value", sim.termination_reason)),
        )
        breakdown = {str(getattr(k, "value", k)): v for k, v in (sim.reward_info.reward_breakdown or {}).items()}
        messages = [m.model_dump(mode="json") for m in sim.messages]
    except Exception as e:  # a crash of one simulation scores 0, like tau2's skip_failed_samples
        reward, termination, breakdown, messages = 0.0, "error", {}, []
        error = f"{type(e).__name__}: {e}"
    traj = CONTEXTS.pop(agent_key).trajectory
    user_traj = CONTEXTS.pop(user_key).trajectory
    traj.task = str(getattr(task, "user_scenario", "") or task.id)
    traj.reward = reward
    traj.status = "success" if abs(reward - 1.0) <= 1e-6 else "failed"
    traj.finished_at = time.time()
    traj.meta["tau2"] = {
        "domain": domain,
        "task_id": task.id,
        "trial": trial,
        "reward": reward,
        "termination": termination,
        "reward_breakdown": breakdown,
        "messages": messages,
    }
    return TaskRun(
        domain,
        task.id,
        trial,
        agent,
        reward,
        termination,
        traj,
        user_traj,
        time.perf_counter() - t0,
        error or (traj.error or ""),
    )


def run_domain(
    domain: str,
    agent: str,
    llm: LLM | Callable[[Any, int], LLM],
    user_llm: LLM | Callable[[Any, int], LLM],
    *,
    limit: int | None = None,
    task_ids: list[str] | None = None,
    trials: int = 1,
    seed: int = 300,
    on_result: Callable[[TaskRun], None] | None = None,
    **kwargs: Any,
) -> list[TaskRun]:
    """Every task x trial. ``llm``/``user_llm`` may be functions of (task, trial) (scripted tests)."""
    import random

    rng = random.Random(seed)  # per-trial seeds as tau2's run_tasks derives them
    seeds = [rng.randint(0, 1_000_000) for _ in range(trials)]
    runs = []
    for trial in range(trials):
        for task in load_tasks(domain, limit=limit, task_ids=task_ids):
            a = llm(task, trial) if callable(llm) and not isinstance(llm, LLM) else llm
            u = user_llm(task, trial) if callable(user_llm) and not isinstance(user_llm, LLM) else user_llm
            r = run_task(domain, task, agent, a, u, trial=trial, seed=seeds[trial], **kwargs)
            runs.append(r)
            if on_result is not None:
                on_result(r)
    return runs


def pass_hat_k(runs: list[TaskRun], k: int) -> float:
    """tau2's pass^k: the mean over tasks of C(successes, k) / C(trials, k)."""
    require_tau2()
    from tau2.metrics.agent_metrics import pass_hat_k as one_task

    by_task: dict[str, list[bool]] = defaultdict(list)
    for r in runs:
        by_task[r.task_id].append(r.success)
    if not by_task:
        return 0.0
    return sum(one_task(len(v), sum(v), k) for v in by_task.values()) / len(by_task)
