"""In-process vLLM (the ``[gpu]`` extra): high-throughput rollouts on a CUDA GPU.

vllm is imported only when a ``VLLMEngine`` is built, so ``import cave.llm`` never pulls it in.
Without vllm or without a CUDA device the constructor raises an LLMError that says what to
install or which backend to use instead (a CPU-only vLLM build is best run as a server and
reached through the ``openai`` backend; see PACKAGES.md).

Prompts are rendered with the checkpoint's own chat template (transformers tokenizer) and sent
as token ids, so ``prompt_token_ids`` are exactly what the model saw; response ``token_ids`` and
per-token ``logprobs`` come from vLLM. vLLM's logprobs are by default computed from the raw
logits (before temperature); pass ``logprobs_mode="processed_logprobs"`` (vLLM >= 0.10.2) to get
them under the sampling distribution, as the transformers backend reports them. A response ``prefix``
is appended to the rendered prompt (``cave.llm.hf.encode_chat``): prompt ids include it, ``text`` starts
with it, response ``token_ids`` do not.

For RL rollouts the engine can take new policy weights while it runs (``weight_sync=True``, then
``load_weights``: written to a safetensors file that every worker loads through the
``cave.llm.vllm_worker.WeightSync`` extension, then the prefix cache is reset) and give its GPU
memory back between rollouts (``enable_sleep_mode=True``, ``sleep()`` / ``wake_up()``).

vLLM's ``AsyncLLM`` belongs to the event loop it was made on; callers (the trainer, sync wrappers)
run ``asyncio.run`` once per step. So the engine lives on its own event-loop thread and every
call is handed to it: ``stream`` works from any loop, and the sync verbs work from any thread.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Coroutine, Mapping
from pathlib import Path
from typing import Any

from cave.llm import models
from cave.llm.base import LLM, Completion, LLMError, Message, Request, StreamItem, TextDelta, Usage, register_backend

__all__ = [
    "INSTALL_HINT",
    "VLLMEngine",
    "WEIGHT_SYNC_EXTENSION",
    "WEIGHT_SYNC_METHOD",
    "save_weights",
    "vllm_available",
    "weights_folder",
]

INSTALL_HINT = (
    "VLLMEngine needs vllm and a CUDA GPU: pip install 'cave[gpu]' on a machine with one. "
    "Without a GPU use backend 'local' (llama.cpp) or 'transformers', or run a vLLM server "
    "(python -m vllm.entrypoints.openai.api_server --model DIR) and use backend 'openai'"
)
WEIGHT_SYNC_EXTENSION = "cave.llm.vllm_worker.WeightSync"  # the worker extension that loads weight files
WEIGHT_SYNC_METHOD = "cave_load_weights"  # its collective_rpc method


def weights_folder() -> Path:
    """Where weight files for a local engine go: RAM-backed ``/dev/shm`` when there is one, else the temp folder."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())


def save_weights(named_tensors: Mapping[str, Any], folder: str | os.PathLike[str], *, dtype: Any = None) -> Path:
    """Write tensors (HF parameter names) as one safetensors file in ``folder``; returns its path.

    Written under a temporary name and renamed, so a reader never sees half a file. Tensors that share
    storage (tied embeddings) are copied apart, as safetensors requires; ``dtype`` casts floating tensors.
    """
    from safetensors.torch import save_file

    if not named_tensors:
        raise ValueError("no tensors to save: pass a non-empty {name: tensor} mapping")
    out, seen = {}, set()
    for name, t in named_tensors.items():
        t = t.detach().to("cpu")
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        t = t.contiguous()
        if t.untyped_storage().data_ptr() in seen:
            t = t.clone()
        seen.add(t.untyped_storage().data_ptr())
        out[name] = t
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"cave-weights-{os.getpid()}-{uuid.uuid4().hex[:8]}.safetensors"
    tmp = path.with_suffix(".tmp")
    save_file(out, str(tmp))
    os.replace(tmp, path)
    return path


class _LoopThread:
    """An event loop on a daemon thread: coroutines from any thread or loop run there."""

    def __init__(self, name: str = "cave-vllm-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float | None = None) -> Any:
        """Run ``coro`` there and wait for it (blocking: call from sync code, never from this loop)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)
        if not self.loop.is_running():
            self.loop.close()


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
    """A vLLM ``AsyncLLMEngine`` in this process (on its own event-loop thread).

    ``model``: an HF-format directory (or an embedded model name, converted once with
    ``cave.llm.convert``). Extra keyword arguments go to ``vllm.AsyncEngineArgs``.
    ``weight_sync``: load the ``cave.llm.vllm_worker.WeightSync`` worker extension, so that
    ``load_weights`` can push new policy weights into the running engine.
    ``enable_sleep_mode``: allow ``sleep()`` / ``wake_up()`` (CUDA only; vLLM refuses it on CPU).
    ``weights_dir``: where ``load_weights`` writes its files (default ``/dev/shm`` or the temp folder).
    """

    name = "vllm"
    supports_prefix = True

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
        enable_sleep_mode: bool = False,
        weight_sync: bool = False,
        weights_dir: str | os.PathLike[str] | None = None,
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
        if enable_sleep_mode:
            engine_args["enable_sleep_mode"] = True
        if weight_sync:
            engine_args.setdefault("worker_extension_cls", WEIGHT_SYNC_EXTENSION)
        self.sleep_mode, self.weight_sync = enable_sleep_mode, weight_sync
        self.weights_dir = Path(weights_dir) if weights_dir is not None else weights_folder()
        self.sleeping: int = 0  # the sleep level now, 0 when awake
        self.weight_version = 0
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
        self._loop = _LoopThread()
        self.engine = None

        async def make() -> Any:  # made on the engine's loop: its output handler lives there
            return vllm.AsyncLLMEngine.from_engine_args(args)

        try:
            self.engine = self._loop.run(make())
        except Exception as e:
            self._loop.close()
            raise LLMError(f"vLLM could not start {path}: {type(e).__name__}: {e}") from e
        self.context_window = max_model_len or getattr(self.tokenizer, "model_max_length", None) or 8192
        if self.context_window > 1_000_000:  # tokenizers without a limit report a huge sentinel
            self.context_window = 8192
        self.want_logprobs = logprobs

    def encode(self, messages: list[Message], tools: list[dict[str, Any]] | None = None, prefix: str = "") -> list[int]:
        from cave.llm.hf import encode_chat

        return encode_chat(self.tokenizer, messages, tools, prefix)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    async def _stream(self, messages: list[Message], request: Request) -> AsyncIterator[StreamItem]:
        if self.engine is None:
            raise LLMError("this VLLMEngine was closed")
        prompt_ids = self.encode(messages, request.tools, request.prefix)
        params = self._vllm.SamplingParams(
            max_tokens=request.max_tokens,
            temperature=request.temperature,
            top_p=request.options.get("top_p", 1.0),
            top_k=request.options.get("top_k", 0) or -1,
            stop=request.stop or None,
            seed=request.seed,
            logprobs=0 if self.want_logprobs else None,  # 0: just the sampled token's
        )
        request_id = uuid.uuid4().hex
        text, final = "", None
        if request.prefix:
            yield TextDelta(request.prefix)
        try:
            async for output in self._generate(prompt_ids, params, request_id):
                final = output
                piece = output.outputs[0].text  # cumulative by default
                if len(piece) > len(text):
                    yield TextDelta(piece[len(text) :])
                    text = piece
        except LLMError:
            raise
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
            text=request.prefix + out.text,
            usage=Usage(
                len(prompt_ids), len(ids), len(prompt_ids) + len(ids), int(getattr(final, "num_cached_tokens", 0) or 0)
            ),
            finish_reason=out.finish_reason or "stop",
            token_ids=ids,
            logprobs=logprobs,
            prompt_token_ids=prompt_ids,
            model=self.model_name,
        )

    async def _generate(self, prompt_ids: list[int], params: Any, request_id: str) -> AsyncIterator[Any]:
        """``engine.generate`` run on the engine's loop, its outputs handed to the caller's loop."""
        here = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        end = object()

        def hand(item: Any) -> None:
            try:
                here.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the caller's loop is gone: nobody is listening any more
                pass

        async def produce() -> None:
            try:
                async for output in self.engine.generate({"prompt_token_ids": prompt_ids}, params, request_id):
                    hand(output)
            except BaseException as e:  # handed over, raised by the consumer (cancellation included)
                hand(e)
                if not isinstance(e, Exception):
                    raise
            finally:
                hand(end)

        future = asyncio.run_coroutine_threadsafe(produce(), self._loop.loop)
        try:
            while (item := await queue.get()) is not end:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            if not future.done():
                future.cancel()  # cancels generate() on the engine loop, which aborts the request

    # -- RL verbs: weights, sleep ----------------------------------------------------------------------
    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self.engine is None:
            raise LLMError("this VLLMEngine was closed")
        return self._loop.run(getattr(self.engine, name)(*args, **kwargs))

    def collective_rpc(self, method: str, args: tuple = (), kwargs: dict[str, Any] | None = None) -> list[Any]:
        """Call ``method`` on every worker (a worker method or one of the worker extension's); their results."""
        return self._call("collective_rpc", method, args=tuple(args), kwargs=kwargs or {})

    def reset_prefix_cache(self) -> bool:
        """Forget cached KV blocks (they were computed with the old weights)."""
        return bool(self._call("reset_prefix_cache"))

    def load_weights(
        self, named_tensors: Mapping[str, Any] | str | os.PathLike[str], *, keep_file: bool = False
    ) -> dict:
        """Load new weights (HF names, full or partial state dict; or a safetensors file) into the running model.

        The tensors are written to a safetensors file in ``weights_dir``, every worker loads it in place
        (``cave.llm.vllm_worker.WeightSync``), then the prefix cache is reset. A sleeping engine's weights
        are woken first (its KV cache stays asleep until ``wake_up``). Returns the first worker's report.
        """
        if not self.weight_sync:
            raise LLMError(
                "load_weights needs the weight-sync worker extension: build VLLMEngine(..., weight_sync=True)"
            )
        t0 = time.perf_counter()
        if self.sleeping:
            self._call("wake_up", ["weights"])
        if isinstance(named_tensors, str | os.PathLike):
            path, written = Path(named_tensors), False
        else:
            path, written = save_weights(named_tensors, self.weights_dir), True
        try:
            results = self.collective_rpc(WEIGHT_SYNC_METHOD, args=(str(path),))
        finally:
            if written and not keep_file:
                path.unlink(missing_ok=True)
        self.reset_prefix_cache()
        self.weight_version += 1
        report = dict(results[0]) if results and isinstance(results[0], dict) else {}
        report["total_seconds"] = time.perf_counter() - t0
        return report

    def sleep(self, level: int = 1) -> None:
        """Free the GPU memory between rollouts: level 1 offloads the weights to CPU and drops the KV cache."""
        if not self.sleep_mode:
            raise LLMError("sleep needs VLLMEngine(..., enable_sleep_mode=True) (and a CUDA GPU)")
        if not self.sleeping:
            self._call("sleep", level)
            self.sleeping = level

    def wake_up(self, tags: list[str] | None = None) -> None:
        """Back from ``sleep``: all memory, or only ``tags`` (``["weights"]``, ``["kv_cache"]``)."""
        if self.sleeping:
            self._call("wake_up", tags)
            if tags is None or "kv_cache" in tags:
                self.sleeping = 0

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        engine, self.engine = getattr(self, "engine", None), None
        loop = getattr(self, "_loop", None)
        if engine is not None and hasattr(engine, "shutdown"):

            async def shutdown() -> None:  # on the engine's loop: it cancels the output handler task there
                engine.shutdown()

            if loop is not None and loop.loop.is_running():
                loop.run(shutdown(), timeout=120)
            else:
                engine.shutdown()
        if loop is not None:
            loop.close()
