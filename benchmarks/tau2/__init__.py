"""Tau²-bench through tau2's own orchestrator and evaluator, with cave agents and a cave-backed user.

runs = run_domain("mock", "code", llm, user_llm, trials=2)
pass_hat_k(runs, 2)
"""

from cave.benchmarks.tau2.agents import AGENT_NAMES, USER_NAME, quiet_logs, register, require_tau2
from cave.benchmarks.tau2.run import DOMAINS, TaskRun, load_tasks, pass_hat_k, run_domain, run_task

__all__ = [
    "AGENT_NAMES",
    "DOMAINS",
    "USER_NAME",
    "TaskRun",
    "load_tasks",
    "pass_hat_k",
    "quiet_logs",
    "register",
    "require_tau2",
    "run_domain",
    "run_task",
]
