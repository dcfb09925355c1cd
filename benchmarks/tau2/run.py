"""Running cave agents on tau2 domains with tau2's own ``run_task`` (orchestrator + evaluator).

One ``TaskRun`` per (task, trial): tau2's reward and reward breakdown, the agent's cave
``Trajectory`` (usage per step, tool calls with outputs) and the simulation messages, kept in
``trajectory.meta["tau2"]`` so ``cave.benchmarks.rewards.tau2_reward`` can re-grade it with tau2's
evaluator. ``pass_hat_k`` summarizes trials per task exactly as tau2 defines it.

Defaults are sized for a small local model (``DEFAULT_SIM_STEPS``, ``DEFAULT_AGENT_STEPS``); a task
past ``timeout`` seconds is stopped (see ``deadline``) and recorded as an error, never as a wrong answer.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cave.benchmarks.tau2.agents import AGENT_NAMES, CONTEXTS, USER_NAME, open_context, register, require_tau2
from cave.benchmarks.tau2.deadline import DeadlineLLM, TaskTimeout

from cave.llm.base import LLM
from cave.trajectory import Trajectory

DOMAINS = ("mock", "airline", "retail", "telecom")
DEFAULT_SIM_STEPS = 20  # orchestrator steps per simulation (tau2's own default is 200)
DEFAULT_AGENT_STEPS = 3  # the code agent's LLM calls per user turn
DEFAULT_TASK_TIMEOUT = 600.0  # seconds of wall clock per task (0 or None: no limit)
STOP_GRACE = 30.0  # seconds a stopped task gets to unwind before its thread is abandoned
DRAIN_LIMIT = 900.0  # seconds to wait for a stopped generation's prompt evaluation to end (see drain_generations)
GENERATION_THREAD = "cave-llm-generate"  # the worker thread of an in-process backend's generation (cave.llm.base)


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

    @property
    def status(self) -> str:
        """ "error" when the run failed (crash, backend error, time limit): counted as an error, not scored."""
        return "error" if self.error else "success" if self.success else "failed"

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
            "status": self.status,
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
    agent_steps: int = DEFAULT_AGENT_STEPS,
    native: bool | None = None,
    timeout: float | None = None,
    runtime: str | None = None,
) -> TaskRun:
    """One simulation of ``task`` with a cave agent ("code" | "json") and a cave-backed user.

    ``timeout``: seconds of wall clock; past it the simulation is stopped (its backend calls are cancelled)
    and the run is recorded with termination "timeout" and an error. None or 0: no limit.
    ``runtime``: where the code agent's code runs (sandbox, process, kernel, inprocess; None: the default).
    """
    require_tau2()
    register()
    from tau2 import config
    from tau2.evaluator.evaluator import EvaluationType
    from tau2.run import run_task as tau2_run_task

    if agent not in AGENT_NAMES:
        raise ValueError(f"unknown agent {agent!r}: use 'code' or 'json'")
    t0 = time.perf_counter()
    limit = timeout if timeout and timeout > 0 else None
    if limit is not None:
        deadline = time.monotonic() + limit
        llm, user_llm = DeadlineLLM(llm, deadline, limit), DeadlineLLM(user_llm, deadline, limit)
    options = {} if native is None else {"native": native}
    agent_key = open_context(llm, max_steps=agent_steps, options=options if agent == "json" else {}, runtime=runtime)
    user_key = open_context(user_llm, options=options)
    outcome: dict[str, Any] = {}

    def simulate() -> None:
        try:
            outcome["sim"] = tau2_run_task(
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
        except Exception as e:  # a crash of one simulation scores 0, like tau2's skip_failed_samples
            outcome["error"] = e

    if limit is None:
        simulate()
        timed_out = False
    else:
        timed_out = not _finished(simulate, f"tau2-{domain}-{task.id}", limit)
    run = _task_run(domain, task, agent, trial, agent_key, user_key, outcome, timed_out, limit, t0)
    drain_generations(llm, user_llm)
    return run


def drain_generations(*llms: Any, limit: float = DRAIN_LIMIT) -> list[str]:
    """Wait until no in-process generation is still running (a stopped task's); what is still busy after ``limit``.

    Stopping a task cancels its generation, but an in-process model (llama.cpp) only sees the cancel at its next
    token: a prompt evaluation under way runs to its end on a daemon worker thread (minutes for a long prompt on a
    busy CPU). Left alone it holds the model into the next task's time limit, and if the process ends first the
    model is freed at exit (``LocalLLM``'s finalizer, from ``atexit``) while that thread is still inside
    ``llama_decode``: a segmentation fault after the run's results were written. Waited for: the generation
    worker threads (``GENERATION_THREAD``) and each of ``llms`` that has a generation lock (``LocalLLM._lock``,
    held for the whole of a generation, prompt evaluation included).
    """
    deadline = time.monotonic() + limit
    busy = []
    for thread in threading.enumerate():
        if thread.name == GENERATION_THREAD and thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                busy.append(thread.name)
    for llm in llms:
        lock = getattr(llm, "_lock", None)  # through DeadlineLLM too (it forwards what it lacks)
        if not hasattr(lock, "acquire"):
            continue
        if lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            lock.release()
        else:
            busy.append(getattr(llm, "name", type(llm).__name__))
    return busy


def _finished(work: Callable[[], None], name: str, limit: float) -> bool:
    """Run ``work`` in a thread for at most ``limit`` seconds; False if it ran past (then it gets STOP_GRACE
    seconds to unwind, its backend calls failing, before the thread is left behind)."""
    thread = threading.Thread(target=work, name=name, daemon=True)
    thread.start()
    thread.join(limit)
    if not thread.is_alive():
        return True
    thread.join(STOP_GRACE)
    return False


def _task_run(
    domain: str,
    task: Any,
    agent: str,
    trial: int,
    agent_key: str,
    user_key: str,
    outcome: dict[str, Any],
    timed_out: bool,
    limit: float | None,
    t0: float,
) -> TaskRun:
    """The TaskRun of a finished, crashed or stopped simulation (the trajectories recorded so far)."""
    sim, exc = outcome.get("sim"), outcome.get("error")
    error = ""
    if timed_out or isinstance(exc, TaskTimeout):
        reward, termination, breakdown, messages = 0.0, "timeout", {}, []
        error = f"TaskTimeout: the task ran past its {limit:g} s limit (--task-timeout): stopped"
    elif sim is None:
        reward, termination, breakdown, messages = 0.0, "error", {}, []
        error = f"{type(exc).__name__}: {exc}"
    else:
        reward = float(sim.reward_info.reward)
        termination = str(getattr(sim.termination_reason, "value", sim.termination_reason))
        breakdown = {str(getattr(k, "value", k)): v for k, v in (sim.reward_info.reward_breakdown or {}).items()}
        messages = [m.model_dump(mode="json") for m in sim.messages]
    agent_ctx, user_ctx = CONTEXTS.pop(agent_key), CONTEXTS.pop(user_key)
    agent_ctx.close()  # the code agent's kernel, also when the simulation crashed or ran past its limit
    traj, user_traj = agent_ctx.trajectory, user_ctx.trajectory
    traj.task = str(getattr(task, "user_scenario", "") or task.id)
    traj.reward = reward
    traj.error = error or traj.error
    traj.status = "error" if traj.error else "success" if abs(reward - 1.0) <= 1e-6 else "failed"
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
    duration = time.perf_counter() - t0
    return TaskRun(domain, task.id, trial, agent, reward, termination, traj, user_traj, duration, traj.error or "")


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
    on_start: Callable[[str, int, int, int], None] | None = None,
    on_result: Callable[[TaskRun], None] | None = None,
    **kwargs: Any,
) -> list[TaskRun]:
    """Every task x trial. ``llm``/``user_llm`` may be functions of (task, trial) (scripted tests).

    ``on_start(task_id, trial, index, total)`` before each simulation (index from 1), ``on_result(run)`` after.
    """
    import random

    rng = random.Random(seed)  # per-trial seeds as tau2's run_tasks derives them
    seeds = [rng.randint(0, 1_000_000) for _ in range(trials)]
    tasks = load_tasks(domain, limit=limit, task_ids=task_ids)
    runs = []
    for trial in range(trials):
        for task in tasks:
            if on_start is not None:
                on_start(task.id, trial, len(runs) + 1, trials * len(tasks))
            a = llm(task, trial) if callable(llm) and not isinstance(llm, LLM) else llm
            u = user_llm(task, trial) if callable(user_llm) and not isinstance(user_llm, LLM) else user_llm
            r = run_task(domain, task, agent, a, u, trial=trial, seed=seeds[trial], **kwargs)
            runs.append(r)
            if on_result is not None:
                on_result(r)
    return runs


def log_to_file(path: str | Path, level: str = "DEBUG") -> Path:
    """Send tau2's logging (loguru: every orchestrator step at DEBUG) to ``path`` instead of the console.

    Call it before tau2 is first imported: tau2 logs while it imports (its registry, a missing .env).
    """
    try:
        from loguru import logger
    except ImportError:  # loguru comes with tau2
        require_tau2()
        raise

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    logger.remove()
    logger.add(path, level=level)
    return path


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
