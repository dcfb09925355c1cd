"""The optimizer verbs of the update loop on a plain torch AdamW: what ``AgentPolicies`` calls for a model without
DeepSpeed (``training/deepspeed_update.py`` has the same verbs on a ZeRO engine): zero_grad, backward, step, discard,
grads, reduce, for_generation, and the state a checkpoint keeps.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from cave.training.policy import OptimizerConfig

__all__ = ["TorchUpdate", "adamw"]


class TorchUpdate:
    """The optimizer verbs of the update loop on a plain torch AdamW (DeepSpeedUpdate has the same ones).

    Weights in bf16/fp16 are stepped through an fp32 master copy (what DeepSpeed's bf16 optimizer does): an AdamW
    step at lr 1e-6 is far below bf16's resolution near a weight of 0.02 (~1e-4), so stepping the bf16 weights
    themselves would round most updates away. The model keeps its dtype (rollouts stay fast); each step writes the
    rounded master values back.
    """

    world_size = 1
    has_grads = True  # grads() shows the gradient accumulated so far

    def __init__(self, model: torch.nn.Module, config: OptimizerConfig) -> None:
        self.module = model  # what the training forward calls
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.max_norm = config.grad_clip if config.grad_clip is not None else math.inf
        self.masters = [torch.nn.Parameter(p.detach().float().clone()) if _low(p) else p for p in self.params]
        self.optimizer = adamw(self.masters, config)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None
        self.optimizer.zero_grad(set_to_none=True)

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def for_generation(self) -> contextlib.AbstractContextManager:
        """Where a rollout engine generates with the live model: nothing to do (ZeRO-3 gathers its weights there)."""
        return contextlib.nullcontext()

    def step(self) -> tuple[float, bool]:
        """Clip and step; returns the norm before clipping and whether the step was taken (not when non-finite)."""
        for p, m in zip(self.params, self.masters, strict=True):
            if m is not p:
                m.grad = None if p.grad is None else p.grad.float()
        norm = float(torch.nn.utils.clip_grad_norm_(self.masters, self.max_norm, error_if_nonfinite=False))
        if not math.isfinite(norm):
            self.zero_grad()
            return norm, False
        self.optimizer.step()
        with torch.no_grad():
            for p, m in zip(self.params, self.masters, strict=True):
                if m is not p:
                    p.copy_(m)
                    p.grad = None
        return norm, True

    def discard(self, loss: torch.Tensor) -> None:
        self.zero_grad()

    def grads(self) -> list[torch.Tensor | None]:
        return [p.grad for p in self.params]

    def reduce(self, values: list[float], op: str = "sum") -> list[float]:
        return list(values)  # one process

    def trainable_state(self) -> dict[str, torch.Tensor]:
        """The trained weights at full precision (the fp32 masters of bf16/fp16 weights)."""
        master = {id(p): m for p, m in zip(self.params, self.masters, strict=True)}
        return {n: master[id(p)].detach().cpu() for n, p in self.module.named_parameters() if p.requires_grad}

    def optimizer_state(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def load(self, trainable: Mapping[str, torch.Tensor], optimizer: Mapping[str, Any] | None) -> None:
        """Weights, then the optimizer state (None: the optimizer stays as it is, e.g. fresh for a warm start)."""
        result = self.module.load_state_dict(trainable, strict=False)
        if result.unexpected_keys:
            raise KeyError(f"weights {result.unexpected_keys[:3]} do not fit this model")
        names = {id(p): n for n, p in self.module.named_parameters()}
        with torch.no_grad():
            for p, m in zip(self.params, self.masters, strict=True):
                if m is not p:
                    m.copy_(trainable.get(names[id(p)], p))
        if optimizer is not None:
            self.optimizer.load_state_dict(optimizer)


def _low(p: torch.Tensor) -> bool:
    """A weight whose own dtype is too coarse for an optimizer step (bf16, fp16)."""
    return p.dtype in (torch.bfloat16, torch.float16)


def adamw(params: list[torch.nn.Parameter], config: OptimizerConfig) -> torch.optim.AdamW:
    """torch's fused AdamW where the parameters allow it (5-7x faster per step on a CPU than the for-loop one)."""
    kwargs = dict(lr=config.lr, betas=config.betas, weight_decay=config.weight_decay)
    try:
        return torch.optim.AdamW(params, fused=True, **kwargs)
    except (RuntimeError, ValueError):  # a device/dtype without the fused kernel
        return torch.optim.AdamW(params, **kwargs)
