"""Shared fixtures for the LLM backend tests. Nothing here reaches the network: no hub, no registry."""

from __future__ import annotations

import importlib.util
import os

import pytest

# Set before transformers is first imported anywhere in the session: it reads them at import time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None
HAVE_TORCH = importlib.util.find_spec("torch") is not None and importlib.util.find_spec("transformers") is not None

needs_llama = pytest.mark.skipif(
    not HAVE_LLAMA, reason="llama_cpp is not importable: install the [local] extra (pip install 'cave[local]')"
)
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch/transformers missing: install the [train] extra")


def embedded_or_skip(name: str):  # noqa: ANN201 - returns a Path
    """The verified GGUF of an embedded model, or skip naming the missing packages."""
    from cave.llm import LLMError, model_path

    try:
        return model_path(name)
    except LLMError as e:
        pytest.skip(str(e))


async def collect(llm, messages: list[dict], **kw):  # noqa: ANN001, ANN201 - (text deltas, the final Completion)
    """Stream ``messages`` through ``llm``: the text deltas and the final Completion (which must come)."""
    from cave.llm.base import Completion, TextDelta

    deltas, final = [], None
    async for item in llm.stream(messages, **kw):
        if isinstance(item, TextDelta):
            deltas.append(item.text)
        else:
            final = item
    assert isinstance(final, Completion)
    return deltas, final
