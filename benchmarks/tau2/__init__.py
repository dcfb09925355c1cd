"""Tau²-bench through tau2's own orchestrator and evaluator, with cave agents and a cave-backed user.

runs = run_domain("mock", "code", llm, user_llm, trials=2, timeout=600)
pass_hat_k(runs, 2)
"""

from cave.benchmarks.tau2.agents import AGENT_NAMES, USER_NAME, quiet_logs, register, require_tau2
from cave.benchmarks.tau2.deadline import DeadlineLLM, TaskTimeout
from cave.benchmarks.tau2.run import (
    DEFAULT_AGENT_STEPS,
    DEFAULT_SIM_STEPS,
    DEFAULT_TASK_TIMEOUT,
    DOMAINS,
    TaskRun,
    load_tasks,
    log_to_file,
    pass_hat_k,
    run_domain,
    run_task,
)

__all__ = [
    "AGENT_NAMES",
    "DEFAULT_AGENT_STEPS",
    "DEFAULT_SIM_STEPS",
    "DEFAULT_TASK_TIMEOUT",
    "DOMAINS",
    "USER_NAME",
    "DeadlineLLM",
    "TaskRun",
    "TaskTimeout",
    "load_tasks",
    "log_to_file",
    "pass_hat_k",
    "quiet_logs",
    "register",
    "require_tau2",
    "run_domain",
    "run_task",
]
