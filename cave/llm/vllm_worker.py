"""A vLLM worker extension that loads new policy weights from a safetensors file (runs INSIDE vLLM).

In-process engines (``cave.llm.vllm``) name it ``cave.llm.vllm_worker.WeightSync``. A server runs in vLLM's own
venv, which need not have cave: ``cave.training.engines.start_vllm_server`` copies this file into a folder of its
own as ``cave_vllm_worker.py`` and puts that folder (and nothing else of cave's) on the server's PYTHONPATH::

    VLLM_SERVER_DEV_MODE=1 PYTHONPATH=$(python -c "from cave.training.vllm_server import worker_extension_dir as d; print(d())") \\
        python -m vllm.entrypoints.openai.api_server --model DIR --worker-extension-cls cave_vllm_worker.WeightSync

and call it through the dev-mode endpoint (what ``cave.training.vllm_server.VLLMServerEngine`` does)::

    POST /collective_rpc {"method": "cave_load_weights", "args": ["/shared/weights.safetensors"]}
    POST /reset_prefix_cache      # cached KV blocks were computed with the old weights

vLLM mixes this class into every worker it starts, so each worker (one per tensor-parallel rank) reads
the same file and vLLM's in-place ``reload_weights`` (the model's own ``load_weights`` on older vLLM)
shards and fuses the tensors (q/k/v -> qkv_proj, gate/up -> gate_up_proj) and re-packs them for the
platform's kernels. The file holds HF parameter names: the full state dict or any part of it, where a
fused group (a layer's q/k/v, its gate/up) comes whole; layers left out keep their weights.

This module runs in vLLM's environment: it imports nothing from cave, and only torch and safetensors
(both vLLM dependencies) inside the methods.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["METHOD", "QUIET_LOGGERS", "WeightSync"]

METHOD = "cave_load_weights"
# vLLM's layerwise reload warns about every layer a partial update leaves out ("Failed to load weights")
QUIET_LOGGERS = ("vllm.model_executor.model_loader.reload.layerwise", "vllm.model_executor.model_loader.reload.inplace")


@contextlib.contextmanager
def _quiet(names: tuple[str, ...]) -> Iterator[None]:
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)  # the collective_rpc method name (prefixed: vLLM rejects clashes with its own)


class WeightSync:
    """Mixed into vLLM's worker class by ``--worker-extension-cls cave.llm.vllm_worker.WeightSync``."""

    def cave_load_weights(self, path: str, names: list[str] | str | None = None) -> dict[str, Any]:
        """Load the tensors of the safetensors file ``path`` into this worker's model, in place.

        ``names`` (a list, or a comma-separated string: dev-mode RPC arguments are strings) restricts the
        load to those tensors. Returns ``{"loaded": n, "seconds": s, "updated": [...]}`` (the vLLM-side
        parameter names the model reports as loaded, when it does).
        """
        import torch
        from safetensors import safe_open

        t0 = time.perf_counter()
        if isinstance(names, str):
            names = [n for n in names.split(",") if n]
        model = self._cave_model()
        with safe_open(path, framework="pt", device="cpu") as f:
            keys = [k for k in f.keys() if names is None or k in names]  # noqa: SIM118 - safe_open has no __iter__
            weights = [(k, f.get_tensor(k)) for k in keys]
        updated = None
        with torch.no_grad():
            if callable(getattr(self, "reload_weights", None)):
                # vLLM >= 0.1x: layerwise reload. Platforms that repack weights after loading (the CPU backend
                # packs every linear layer; quantized layers) need it: a plain load_weights would write into
                # the emptied checkpoint-format parameters. Layers absent from the file keep their weights.
                with _quiet(QUIET_LOGGERS):  # a partial update is normal: no warning per layer left out
                    self.reload_weights(weights_iterator=iter(weights))  # type: ignore[attr-defined]
            else:
                updated = model.load_weights(weights=iter(weights))
        return {
            "loaded": len(weights),
            "seconds": round(time.perf_counter() - t0, 4),
            "updated": sorted(updated) if isinstance(updated, set | list | tuple) else None,
        }

    def cave_weight_checksum(self, names: list[str] | str | None = None) -> dict[str, float]:
        """Sum of each (or each named) non-empty vLLM-side parameter or buffer, for tests and debugging."""
        if isinstance(names, str):
            names = [n for n in names.split(",") if n]
        out = {}
        model = self._cave_model()
        for name, t in [*model.named_parameters(), *model.named_buffers()]:
            if (names is None or name in names) and t.numel() and t.is_floating_point():
                out[name] = float(t.detach().float().sum())
        return out

    def _cave_model(self) -> Any:
        runner = self.model_runner  # type: ignore[attr-defined] - set by vLLM's worker
        model = runner.get_model() if hasattr(runner, "get_model") else runner.model
        # compiled/graph wrappers keep the module underneath
        for attr in ("module", "runnable", "model"):
            inner = getattr(model, attr, None)
            if not hasattr(model, "load_weights") and inner is not None:
                model = inner
        if not hasattr(model, "load_weights"):
            raise RuntimeError(f"the vLLM model {type(model).__name__} has no load_weights method")
        return model
