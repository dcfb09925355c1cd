"""The DeepSpeed ZeRO update of one policy model: its config, a one-process torch.distributed, and the engine's verbs.

A model whose ``OptimizerConfig.deepspeed`` is set trains through a DeepSpeed engine instead of a plain torch AdamW;
AgentPolicies runs one loop over both, calling the verbs of ``DeepSpeedUpdate`` (or of the torch ``TorchUpdate``):
backward, step (clip + pre-clip norm + skip when non-finite), discard, grads.

    OptimizerConfig(lr=1e-6, deepspeed=DeepSpeedConfig(zero_stage=2))

``deepspeed`` is imported only when such a model is built. What this relies on (DeepSpeed 0.19.8, checked by
tests/training/test_deepspeed.py on CPU with gloo, stages 0-3):

- ``managed_gradient_accumulation: false``: ``backward()`` only accumulates, ``step()`` is the boundary, so a step
  may have any number of micro-batches (their losses are scaled to the step's token-mean, as on the torch path);
- ZeRO 1-3 (and the bf16 optimizer) compute the global gradient norm *before* clipping in ``step()`` and skip the
  update when it is not finite (``was_step_applied()`` is then False). Stage 0 in fp32 clips without keeping the
  norm and steps whatever it is, so there the client optimizer (``_ClippingAdamW``) clips, records and skips;
- with several ranks DeepSpeed *averages* the gradients: each rank scales its loss by the world size, over the
  token count of all ranks, so the step equals one rank's step on all the samples;
- ZeRO-2 keeps no per-parameter gradient between two backward passes of a step (``safe_get_full_grad`` raises): for
  per-role gradient norms on a shared model (``keep_grads``) a hook on each weight adds every backward's gradient,
  before DeepSpeed reduces and partitions it, into an fp32 copy (one more gradient in memory, as stage 3's
  ``safe_get_full_grad`` gathers one); ``grads()`` averages it over the ranks as DeepSpeed does. Stages 0, 1 and 3
  show DeepSpeed's own gradient;
- ZeRO-3 partitions the weights, and its forward hooks all-gather each layer's weights for every forward and
  release them after: a generation would gather the whole model once per decoded token. ``for_generation()`` gathers
  the weights once and takes the hooks off for the block (TRL's ``unwrap_model_for_generation`` does the same),
  putting them back after; the rollout engine on the live model generates inside it, once per batch.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import threading
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "BUCKET",
    "DeepSpeedConfig",
    "DeepSpeedUpdate",
    "INSTALL_HINT",
    "deepspeed_config",
    "import_deepspeed",
    "init_distributed",
]

INSTALL_HINT = "DS_BUILD_OPS=0 pip install deepspeed==0.19.8 (or the `scale` extra: pip install -e '.[scale]')"


@dataclass(frozen=True)
class DeepSpeedConfig:
    """Train this model through DeepSpeed ZeRO (hashable: OptimizerConfigs are compared in sets)."""

    zero_stage: int = 2  # 0: plain data parallel, 1: + partitioned optimizer states, 2: + gradients, 3: + weights
    offload_optimizer: bool = False  # optimizer states (and their update) in CPU memory; ZeRO >= 1
    bf16: bool = False  # bf16 weights and activations, fp32 master weights in the optimizer

    def __post_init__(self) -> None:
        if self.zero_stage not in (0, 1, 2, 3):
            raise ValueError(f"zero_stage must be 0, 1, 2 or 3; got {self.zero_stage}")
        if self.offload_optimizer and self.zero_stage == 0:
            raise ValueError("offload_optimizer needs ZeRO stage 1, 2 or 3 (DeepSpeed offloads partitioned states)")
        if self.bf16 and self.zero_stage == 0:
            raise ValueError(
                "bf16 needs ZeRO stage 1, 2 or 3: without ZeRO, DeepSpeed accumulates bf16 gradients in its fp16 "
                "optimizer (its steps came out ~25% smaller than ZeRO's on the same gradient)"
            )


BUCKET = 500_000_000  # DeepSpeed's default reduce/allgather bucket, in elements (2 GB of fp32 each)


def deepspeed_config(ds: DeepSpeedConfig, optim: Any, n_params: int | None = None) -> dict[str, Any]:
    """The ``deepspeed.initialize`` config for one model, from its DeepSpeedConfig and OptimizerConfig.

    ``n_params`` (the trainable parameter count) caps the ZeRO communication buckets: DeepSpeed allocates them at
    their full default size (2 GB of fp32 each), which for a small model is most of the memory it uses.

    >>> from cave.training.policy import OptimizerConfig
    >>> cfg = deepspeed_config(DeepSpeedConfig(zero_stage=2), OptimizerConfig(lr=1e-6, grad_clip=1.0))
    >>> cfg["zero_optimization"], cfg["gradient_clipping"], cfg["managed_gradient_accumulation"]
    ({'stage': 2}, 1.0, False)
    >>> deepspeed_config(DeepSpeedConfig(zero_stage=2), OptimizerConfig(), n_params=135_000_000)["zero_optimization"]
    {'stage': 2, 'reduce_bucket_size': 135000000, 'allgather_bucket_size': 135000000}
    >>> deepspeed_config(DeepSpeedConfig(zero_stage=0), OptimizerConfig(grad_clip=1.0))["gradient_clipping"]
    0.0
    """
    zero: dict[str, Any] = {"stage": ds.zero_stage}
    if n_params and ds.zero_stage:
        bucket = max(min(BUCKET, n_params), 1)
        zero.update(reduce_bucket_size=bucket, allgather_bucket_size=bucket)
        if ds.zero_stage == 3:
            zero["stage3_prefetch_bucket_size"] = min(bucket, 50_000_000)
    if ds.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu"}
    return {
        "train_micro_batch_size_per_gpu": 1,  # required by DeepSpeed; AgentPolicies makes its own micro-batches
        "gradient_accumulation_steps": 1,
        "managed_gradient_accumulation": False,  # backward() accumulates, step() is the boundary
        # stage 0 in fp32 would clip and drop the norm: _ClippingAdamW clips instead (it sees the reduced gradient)
        "gradient_clipping": 0.0 if _client_clips(ds) else float(optim.grad_clip or 0.0),
        "zero_optimization": zero,
        "bf16": {"enabled": ds.bf16, "check_grad_overflow": True},  # a non-finite norm skips the step in bf16 too
        "zero_allow_untested_optimizer": True,  # the client optimizer is a plain torch AdamW
        "zero_force_ds_cpu_optimizer": False,  # ... also when offloaded (DeepSpeedCPUAdam would JIT-compile an op)
        "steps_per_print": 2**62,
    }


def import_deepspeed() -> Any:
    """``deepspeed``, or an ImportError that says how to install it."""
    try:
        import deepspeed
    except ImportError as e:
        raise ImportError(
            f"this model trains through DeepSpeed (OptimizerConfig.deepspeed is set) but deepspeed is not importable "
            f"({e}); install it: {INSTALL_HINT}"
        ) from e
    from deepspeed.accelerator import get_accelerator

    if get_accelerator().device_name() == "cpu":
        # The CPU backend would JIT-compile a shared-memory all-reduce op (~45 s) that only inference uses; it asks
        # deepspeed.ops.__compatible_ops__ first (probed lazily by running the compiler): answer no, without a probe.
        ops = vars(deepspeed.ops)
        ops.setdefault("__compatible_ops__", {})["deepspeed_shm_comm"] = False
    return deepspeed


def init_distributed() -> None:
    """A torch.distributed process group when there is none: one process (rank 0 of 1) unless the env says otherwise.

    gloo on CPU, nccl on CUDA; MASTER_ADDR/MASTER_PORT from the environment, else 127.0.0.1 and a free port.
    """
    import torch.distributed as dist

    if dist.is_initialized():
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if os.environ.get("WORLD_SIZE", "1") == "1" or "MASTER_PORT" not in os.environ:
        # one process has no peer to agree on a port with, and an inherited MASTER_PORT (a Ray actor gets the
        # driver's environment) may be the driver's own, already listening: take a free one
        os.environ["MASTER_PORT"] = str(_free_port())
    for key, default in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0")):
        os.environ.setdefault(key, default)
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl" if cuda else "gloo")


class DeepSpeedUpdate:
    """The optimizer verbs of AgentPolicies' loop on a DeepSpeed engine wrapping ``model``.

    ``module`` is what the training forward calls (the engine: its hooks drive ZeRO's backward); ``optimizer`` is
    DeepSpeed's (ZeRO) optimizer. The model keeps its own parameter names (no ``module.`` prefix).
    """

    def __init__(self, model: torch.nn.Module, optim: Any, *, keep_grads: bool = False) -> None:
        """``keep_grads``: ``grads()`` must show the gradient between backward passes (per-role norms on a shared
        model); under ZeRO-2 that costs an fp32 copy of the gradient, kept by hooks (stages 0, 1 and 3 have it)."""
        ds = optim.deepspeed
        deepspeed = import_deepspeed()
        init_distributed()
        self.params = params = [p for p in model.parameters() if p.requires_grad]
        kwargs = dict(lr=optim.lr, betas=optim.betas, weight_decay=optim.weight_decay)
        if _client_clips(ds):
            client = _ClippingAdamW(params, max_norm=optim.grad_clip or math.inf, **kwargs)
        else:
            client = torch.optim.AdamW(params, **kwargs)
        self.engine, self.optimizer, _, _ = deepspeed.initialize(
            model=model, optimizer=client, config=deepspeed_config(ds, optim, sum(p.numel() for p in params))
        )
        self.model = model
        self.module = self.engine
        self.stage = ds.zero_stage
        self.world_size = int(torch.distributed.get_world_size())
        self._backwards = 0  # since the last step (DeepSpeed has no gradient to show before the first)
        # ZeRO-2: each backward's gradient, added up here before DeepSpeed reduces and partitions it
        self._tap: list[torch.Tensor | None] | None = None
        self._tapping = False  # only backward() adds: a probe's torch.autograd.grad fires the hooks too
        if self.stage == 2 and keep_grads:
            self._tap = [None] * len(params)
            for i, p in enumerate(params):
                p.register_hook(self._tap_hook(i))
        self.has_grads = self.stage != 2 or self._tap is not None
        self._generating = threading.Lock()  # for_generation's count of open blocks, and what the first gathered
        self._generations = 0
        self._gathered_for_generation: tuple[Any, Any] | None = None

    def zero_grad(self) -> None:
        pass  # step() and discard() leave no gradient behind

    def backward(self, loss: torch.Tensor) -> None:
        self._tapping = self._tap is not None
        try:
            self.engine.backward(loss)
        finally:
            self._tapping = False
        self._backwards += 1

    def step(self) -> tuple[float, bool]:
        """Reduce, clip and step; returns the global norm before clipping and whether the update was applied."""
        self.engine.step()
        self._backwards = 0
        if self._tap is not None:
            self._tap = [None] * len(self.params)
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else math.nan, bool(self.engine.was_step_applied())

    def discard(self, loss: torch.Tensor) -> None:
        """Drop this step's gradient: a NaN backward makes DeepSpeed's own overflow path skip the step and clear it."""
        self.backward(loss * math.nan)
        self.step()

    def grads(self) -> list[torch.Tensor | None]:
        """The full gradient accumulated so far, one per trainable parameter (under ZeRO-2 only with ``keep_grads``:
        ``has_grads``)."""
        from deepspeed.utils import safe_get_full_grad

        if not self._backwards:
            return [None] * len(self.params)
        out = list(self._tap) if self._tap is not None else [safe_get_full_grad(p) for p in self.params]
        if self.world_size > 1 and self.stage < 3:  # still this rank's own: average like DeepSpeed's reduction will
            out = [None if g is None else g.detach().clone() for g in out]
            for g in out:
                if g is not None:
                    torch.distributed.all_reduce(g)
                    g /= self.world_size
        return out

    def _tap_hook(self, i: int) -> Any:
        def hook(grad: torch.Tensor) -> None:
            if self._tapping:
                tap = self._tap
                tap[i] = grad.detach().float().clone() if tap[i] is None else tap[i].add_(grad.detach())

        return hook

    @contextlib.contextmanager
    def for_generation(self) -> Any:
        """The block in which the rollout engine generates with the live model: under ZeRO-3 its full weights,
        gathered once (not once per forward), with DeepSpeed's forward hooks off so that no layer is released after
        its forward; they are put back (and the weights partitioned again) on the way out. Nothing on stages 0-2.
        Blocks may overlap (concurrent unbatched calls, each in its thread): the first in gathers, the last out
        releases."""
        if self.stage != 3:
            yield
            return
        import deepspeed

        with self._generating:
            if not self._generations:
                offload = getattr(self.optimizer, "parameter_offload", None) or self.optimizer
                gathered = deepspeed.zero.GatheredParameters(list(self.model.parameters()))
                gathered.__enter__()
                _remove_zero3_hooks(offload)
                self._gathered_for_generation = (gathered, offload)
            self._generations += 1
        try:
            yield
        finally:
            with self._generating:
                self._generations -= 1
                if not self._generations:
                    gathered, offload = self._gathered_for_generation
                    self._gathered_for_generation = None
                    try:
                        _add_zero3_hooks(offload)
                    finally:
                        gathered.__exit__(None, None, None)

    def reduce(self, values: list[float], op: str = "sum") -> list[float]:
        """``values`` summed (or max/min) over all ranks."""
        if self.world_size == 1:
            return list(values)
        t = torch.tensor(values, dtype=torch.float64, device=self.engine.device)
        ops = {"sum": torch.distributed.ReduceOp.SUM, "max": torch.distributed.ReduceOp.MAX}
        torch.distributed.all_reduce(t, op=ops.get(op, torch.distributed.ReduceOp.MIN))
        return t.tolist()

    # -- checkpoints ---------------------------------------------------------------------------------------------
    def trainable_state(self) -> dict[str, torch.Tensor]:
        """Trainable weights by their model names, on the CPU (gathered from every rank under ZeRO-3)."""
        named = [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]
        # copies: DeepSpeed makes the weights views into one flat buffer, and pickling a view (Ray, torch.save)
        # writes its whole buffer: once per parameter
        with self._gathered([p for _, p in named]):
            return {n: p.detach().cpu().clone() for n, p in named}

    def optimizer_state(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def load(self, trainable: dict[str, torch.Tensor], optimizer: dict[str, Any] | None) -> None:
        """Weights, then the optimizer state with its fp32 master weights (this rank's partition under ZeRO);
        ``optimizer`` None (a warm start): the weights only, the optimizer stays as it is."""
        unexpected = set(trainable) - {n for n, _ in self.model.named_parameters()}
        if unexpected:
            raise KeyError(f"weights {sorted(unexpected)[:3]} do not fit this model")
        if optimizer is None and not isinstance(self.optimizer, _ClippingAdamW):
            # ZeRO keeps fp32 master weights in the optimizer: new weights alone would be undone by the next step
            raise ValueError(
                "init_from with DeepSpeed ZeRO: weights alone cannot be loaded into its optimizer's master copy; "
                "export the warm-start run (`cave train export RUN_DIR`) and name that folder as models.NAME.source"
            )
        named = [(n, p) for n, p in self.model.named_parameters() if n in trainable]
        with torch.no_grad(), self._gathered([p for _, p in named], modifier_rank=0):
            for n, p in named:
                p.copy_(trainable[n])
        if optimizer is None:
            return
        if isinstance(self.optimizer, _ClippingAdamW):
            self.optimizer.load_state_dict(optimizer)
        else:
            self.optimizer.load_state_dict(
                [optimizer] * self.world_size, load_optimizer_states=True, load_from_fp32_weights=True
            )

    def _gathered(self, params: list[torch.nn.Parameter], modifier_rank: int | None = None) -> Any:
        """Under ZeRO-3, the full weights for the block (written back to the partitions if modified on that rank)."""
        if self.stage != 3:
            return contextlib.nullcontext()
        import deepspeed

        return deepspeed.zero.GatheredParameters(params, modifier_rank=modifier_rank)


class _ClippingAdamW(torch.optim.AdamW):
    """AdamW that clips the (reduced) gradient itself, keeps the norm before clipping and skips a non-finite step.

    For stage 0 in fp32, where DeepSpeed clips without keeping the norm and steps whatever it is; the engine reads
    ``_global_grad_norm`` and ``overflow`` from its optimizer.
    """

    def __init__(self, params: Any, max_norm: float, **kwargs: Any) -> None:
        super().__init__(params, **kwargs)
        self.max_norm = max_norm
        self._global_grad_norm: float | None = None
        self.overflow = False

    def step(self, closure: Any = None) -> Any:
        params = [p for group in self.param_groups for p in group["params"]]
        self._global_grad_norm = float(torch.nn.utils.clip_grad_norm_(params, self.max_norm, error_if_nonfinite=False))
        self.overflow = not math.isfinite(self._global_grad_norm)
        return None if self.overflow else super().step(closure)


def _remove_zero3_hooks(offload: Any) -> None:
    """Take ZeRO-3's per-module forward/backward hooks off (as TRL's ``remove_hooks``): gathered weights stay."""
    from deepspeed.runtime.zero.partitioned_param_coordinator import iter_params

    for p in iter_params(offload.module, recurse=True):
        p.ds_active_sub_modules.clear()
    for hook in [*offload.forward_hooks, *offload.backward_hooks]:
        hook.remove()
    offload.forward_hooks, offload.backward_hooks = [], []


def _add_zero3_hooks(offload: Any) -> None:
    """Put them back, with the recorded prefetch trace dropped (the generation's forwards were not recorded)."""
    coordinator = offload.get_param_coordinator()
    if not coordinator.is_invalid_trace():
        coordinator._invalidate_trace()
    offload._register_deepspeed_module(offload.module)


def _client_clips(ds: DeepSpeedConfig) -> bool:
    return ds.zero_stage == 0 and not ds.bf16


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
