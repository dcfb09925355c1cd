"""Persistent Python runtimes: inject / execute / retrieve / describe.

The execution layer of cave. It imports nothing from ``cave``.
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

__all__ = [
    "RUNTIMES",
    "ExecError",
    "Execution",
    "Registration",
    "Runtime",
    "TransferError",
    "VariableInfo",
    "create_runtime",
    "register_runtime",
]
