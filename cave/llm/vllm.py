"""In-process vLLM (the ``[gpu]`` extra): high-throughput rollouts on a CUDA GPU.

vllm is imported only when a ``VLLMEngine`` is built, so ``import cave.llm`` never pulls it in.
Without vllm or without a CUDA device the constructor raises an LLMError that says what to
install or which backend to use instead (a CPU-only vLLM build is best run as a server and
reached through the ``openai`` backend; see PACKAGES.md).

Prompts are rendered with the checkpoint's own chat template (transformers tokenizer) and sent
as token ids, so ``prompt_token_ids`` are exactly what the model saw; response ``token_ids`` and
per-token ``logprobs`` come from vLLM. vLLM's logprobs are by default computed from the raw
logits (before temperature); pass ``logprobs_mode="processed_logprobs"`` (vLLM >= 0.10.2) to get
them under the sampling distribution, as the transformers backend reports them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

from cave.llm import models
from cave.llm.base import LLM, Completion, LLMError, Message, StreamItem, TextDelta, Usage, register_backend

INSTALL_HINT = (
    "VLLMEngine needs vllm and a CUDA GPU: pip install 'cave[gpu]' on a machine with one. "
    "Without a GPU use backend 'local' (llama.cpp) or 'transformers', or run a vLLM server "
    "(python -m vllm.entrypoints.openai.api_server --model DIR) and use backend 'openai'"
)


def vllm_available() -> tuple[bool, str]:
    """(usable?, why not): vllm importable and a CUDA device present. Cheap enough for pytest skips."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return False, "vllm is not installed"
    try:
        import torch
    except ImportError:
        return False, "torch is not installed"
    if not torch.cuda.is_available():
        return False, "no CUDA device"
    return True, ""


@register_backend("vllm")
class VLLMEngine(LLM):
    """A vLLM ``AsyncLLMEngine`` in this process.

    ``model``: an HF-format directory (or an embedded model name, converted once with
    ``cave.llm.convert``). Extra keyword arguments go to ``vllm.AsyncEngineArgs``.
    """

    name = "vllm"

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.85,
        max_model_len: int | None = None,
        dtype: str = "auto",
        seed: int = 0,
        logprobs: bool = True,
        logprobs_mode: str | None = None,
        require_cuda: bool = True,
        **engine_args: Any,
    ) -> None:
        ok, why = vllm_available()
        if not ok and (require_cuda or why == "vllm is not installed"):
            raise LLMError(f"{INSTALL_HINT} ({why})")
        try:
            import vllm
            from transformers import AutoTokenizer
        except ImportError as e:
            raise LLMError(f"{INSTALL_HINT} ({e})") from e
        path = str(model)
        if isinstance(model, str) and models.resolve_name(model) and not os.path.exists(model):
            from cave.llm.convert import hf_checkpoint

            path = str(hf_checkpoint(model))
        self.model_name = path
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=os.path.isdir(path))
        if logprobs_mode is not None:
            engine_args["logprobs_mode"] = logprobs_mode
        args = vllm.AsyncEngineArgs(
            model=path,
            tensor_parallel_size=tensor_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            dtype=dtype,
            seed=seed,
            **engine_args,
        )
        self._vllm = vllm
        self.engine = vllm.AsyncLLMEngine.from_engine_args(args)
        self.context_window = max_model_len or getattr(self.tokenizer, "model_max_length", None) or 8192
        if self.context_window > 1_000_000:  # tokenizers without a limit report a huge sentinel
            self.context_window = 8192
        self.want_logprobs = logprobs

    def encode(self, messages: list[Message], tools: list[dict[str, Any]] | None = None) -> list[int]:
        from cave.llm.hf import encode_chat

        return encode_chat(self.tokenizer, messages, tools)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    async def stream(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        stop: list[str] | None = None,
        seed: int | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[StreamItem]:
        prompt_ids = self.encode(messages, kwargs.get("tools"))
        params = self._vllm.SamplingParams(
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=kwargs.get("top_p", 1.0),
            top_k=kwargs.get("top_k", 0) or -1,
            stop=list(stop or []) or None,
            seed=seed,
            logprobs=0 if self.want_logprobs else None,  # 0: just the sampled token's
        )
        request_id = uuid.uuid4().hex
        text, final = "", None
        try:
            async for output in self.engine.generate({"prompt_token_ids": prompt_ids}, params, request_id):
                final = output
                piece = output.outputs[0].text  # cumulative by default
                if len(piece) > len(text):
                    yield TextDelta(piece[len(text) :])
                    text = piece
        except Exception as e:
            raise LLMError(f"vLLM generation failed for {self.model_name}: {type(e).__name__}: {e}") from e
        if final is None:
            raise LLMError(f"vLLM returned no output for request {request_id}")
        out = final.outputs[0]
        ids = list(out.token_ids)
        logprobs = None
        if out.logprobs:
            logprobs = [float(step[tok].logprob) for step, tok in zip(out.logprobs, ids, strict=False)]
        yield Completion(
            text=out.text,
            usage=Usage(
                len(prompt_ids), len(ids), len(prompt_ids) + len(ids), int(getattr(final, "num_cached_tokens", 0) or 0)
            ),
            finish_reason=out.finish_reason or "stop",
            token_ids=ids,
            logprobs=logprobs,
            prompt_token_ids=prompt_ids,
            model=self.model_name,
        )

    async def aclose(self) -> None:
        engine = getattr(self, "engine", None)
        if engine is not None and hasattr(engine, "shutdown"):
            engine.shutdown()
        self.engine = None
