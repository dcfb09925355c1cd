"""LLM backends behind one protocol, registered by name.

``openai`` (any /v1 endpoint), ``local`` (the embedded GGUF model on llama.cpp, the default),
``transformers`` (an HF checkpoint or a live model; token ids and logprobs for training),
``vllm`` (in-process, GPU) and ``scripted`` (the test double). Heavy libraries (llama_cpp,
torch, transformers, vllm) are imported only when a backend that needs them is built.
"""

from pathlib import Path
from typing import Any

from cave.llm.base import (
    BACKENDS,
    LLM,
    Completion,
    LLMError,
    Message,
    Request,
    Scripted,
    TextDelta,
    Usage,
    create_backend,
    register_backend,
)
from cave.llm.hf import Generation, TransformersLLM, generate_batch, score_responses
from cave.llm.local import LocalLLM, create_local
from cave.llm.models import DEFAULT_MODEL, MODELS, cave_home, model_path
from cave.llm.openai import OpenAICompatible
from cave.llm.vllm import VLLMEngine


def hf_checkpoint(name: str = "smollm2", **options: Any) -> Path:
    """A plain HF checkpoint of an embedded model, converted once (see ``cave.llm.convert``)."""
    from cave.llm.convert import hf_checkpoint as convert

    return convert(name, **options)


__all__ = [
    "BACKENDS",
    "DEFAULT_MODEL",
    "LLM",
    "MODELS",
    "Completion",
    "Generation",
    "LLMError",
    "LocalLLM",
    "Message",
    "OpenAICompatible",
    "Request",
    "Scripted",
    "TextDelta",
    "TransformersLLM",
    "Usage",
    "VLLMEngine",
    "cave_home",
    "create_backend",
    "create_local",
    "generate_batch",
    "hf_checkpoint",
    "model_path",
    "register_backend",
    "score_responses",
]
