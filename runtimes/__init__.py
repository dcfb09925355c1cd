"""Persistent Python runtimes: inject / execute / retrieve / describe.

The execution layer of cave. It imports nothing from ``cave``. Importing this package
registers the built-in runtimes ("inprocess", "kernel", and the run modes "trusted",
"process", "sandbox" of ``cave.runtimes.sandbox``); the kernel runtime imports jupyter-client
only when one is started, so the core install works without the [kernel] extra.
"""

from cave.runtimes.base import (
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
from cave.runtimes.inprocess import InProcessRuntime
from cave.runtimes.kernel import KernelRuntime  # registers "kernel"; jupyter-client is imported only at start
from cave.runtimes.sandbox import (  # registers "trusted", "process", "sandbox"
    MODES,
    ProcessRuntime,
    SandboxRuntime,
    SandboxUnavailable,
    TrustedRuntime,
    runtime_for_mode,
    sandbox_problems,
)

__all__ = [
    "MODES",
    "RUNTIMES",
    "ExecError",
    "Execution",
    "InProcessRuntime",
    "KernelRuntime",
    "ProcessRuntime",
    "Registration",
    "Runtime",
    "SandboxRuntime",
    "SandboxUnavailable",
    "TransferError",
    "TrustedRuntime",
    "VariableInfo",
    "create_runtime",
    "register_runtime",
    "runtime_for_mode",
    "sandbox_problems",
]
