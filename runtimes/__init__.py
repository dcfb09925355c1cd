"""Persistent Python runtimes: inject / execute / retrieve / describe.

The execution layer of cave. It imports nothing from ``cave``. Importing this package
registers the built-in runtimes ("inprocess", "kernel"); the kernel runtime imports
jupyter-client only when one is started, so the core install works without the
[kernel] extra.
"""

from runtimes.base import (
    RUNTIMES,
    ExecError,
    Execution,
    Registration,
    Runtime,
    TransferError,
    VariableInfo,
    create_runtime,
    register_runtime,
)
from runtimes.inprocess import InProcessRuntime
from runtimes.kernel import KernelRuntime  # registers "kernel"; jupyter-client is imported only at start

__all__ = [
    "RUNTIMES",
    "ExecError",
    "Execution",
    "InProcessRuntime",
    "KernelRuntime",
    "Registration",
    "Runtime",
    "TransferError",
    "VariableInfo",
    "create_runtime",
    "register_runtime",
]
