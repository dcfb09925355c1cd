"""The data-intensive suite: seeded data at 100 / 1k / 10k / 100k rows, questions with exact answers.

The headline case of the code-as-action design: the ``code`` agent gets the data injected and
its prompt describes it; the ``json`` agent gets it through tool results in its context.
"""

from cave.benchmarks.data.generate import SIZES, customers, logs, make_db, orders, sales
from cave.benchmarks.data.run import DataResult, arun_task, run_task, scripted_policy, token_table
from cave.benchmarks.data.tasks import TASKS, DataTask, check

__all__ = [
    "SIZES",
    "TASKS",
    "DataResult",
    "DataTask",
    "arun_task",
    "check",
    "customers",
    "logs",
    "make_db",
    "orders",
    "run_task",
    "sales",
    "scripted_policy",
    "token_table",
]
