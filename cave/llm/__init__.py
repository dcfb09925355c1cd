"""LLM backends behind one protocol, registered by name."""

from cave.llm.base import (
    BACKENDS,
    LLM,
    Completion,
    LLMError,
    Message,
    Scripted,
    TextDelta,
    Usage,
    create_backend,
    register_backend,
)

__all__ = [
    "BACKENDS",
    "LLM",
    "Completion",
    "LLMError",
    "Message",
    "Scripted",
    "TextDelta",
    "Usage",
    "create_backend",
    "register_backend",
]
