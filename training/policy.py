"""Per-agent policies: each role maps to a model; roles may share one. Each distinct model has its own optimizer.

Dr. MAS (REFERENCE.md): every agent's model has its own optimizer and learning rate and takes a fixed number of
optimizer steps per iteration, however many samples that agent produced. One optimizer step here is: forward, token
log-probs, PPO loss (token-mean over the step's mini-batch, accumulated over micro-batches), backward, gradient norm
*before* clipping (recorded), clip, step. A non-finite loss or gradient skips the step and comes back as a StepError;
the weights stay as they were.

    policies = AgentPolicies({"solver": m1, "verifier": m1}, OptimizerConfig(lr=1e-6, steps_per_iteration=2))
    results = policies.update(samples, advantages)   # {model name: UpdateResult}

A model whose OptimizerConfig has ``deepspeed=DeepSpeedConfig(...)`` steps through a DeepSpeed ZeRO engine
(training/deepspeed_update.py) in the same loop: the loop calls a few verbs (backward, step, discard, grads) of the
slot's ``stepper``, a TorchUpdate or a DeepSpeedUpdate.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from cave.training.deepspeed_update import DeepSpeedConfig
from cave.training.forward import forward_logprobs
from cave.training.loss import LossConfig, ppo_loss, sft_loss
from cave.training.samples import Batch, Sample, collate
from cave.training.torch_update import TorchUpdate, adamw

__all__ = [
    "AgentPolicies",
    "ModelSlot",
    "OptimizerConfig",
    "StepError",
    "TorchUpdate",
    "UpdateResult",
    "adamw",
]


@dataclass(frozen=True)
class OptimizerConfig:
    lr: float = 1e-6
    steps_per_iteration: int = 1  # optimizer steps per update() call, whatever the number of samples
    grad_clip: float | None = 1.0  # max global grad norm; None = no clipping (the norm is still recorded)
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    micro_batch_size: int | None = None  # samples per forward/backward; None = the whole mini-batch at once
    deepspeed: DeepSpeedConfig | None = None  # step through a DeepSpeed ZeRO engine; None = a plain torch AdamW

    def __post_init__(self) -> None:
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0 (the reference uses 1e-6); got {self.lr}")
        if self.steps_per_iteration < 1:
            raise ValueError(f"steps_per_iteration must be >= 1; got {self.steps_per_iteration}")
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise ValueError(f"grad_clip must be > 0 or None (the reference uses 1.0); got {self.grad_clip}")
        if self.micro_batch_size is not None and self.micro_batch_size < 1:
            raise ValueError(f"micro_batch_size must be >= 1 or None; got {self.micro_batch_size}")


@dataclass
class StepError:
    """An optimizer step that was skipped; the weights are unchanged."""

    model: str
    step: int
    kind: str  # "nonfinite_loss" | "nonfinite_grad" | "no_tokens"
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass
class UpdateResult:
    """What one update() did to one distinct model."""

    model: str
    roles: tuple[str, ...]
    steps: int = 0  # optimizer steps taken
    grad_norms: list[float] = field(default_factory=list)  # per attempted step, before clipping
    role_grad_norms: dict[str, list[float]] = field(default_factory=dict)  # per role, before clipping
    errors: list[StepError] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)  # token-weighted means over micro-batches and steps
    n_samples: int = 0
    n_tokens: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["errors"] = [asdict(e) for e in self.errors]
        return d


@dataclass
class ModelSlot:
    """One distinct model, the roles it serves, its optimizer verbs and (when KL is on) its frozen reference."""

    name: str
    model: torch.nn.Module
    roles: tuple[str, ...]
    config: OptimizerConfig
    stepper: Any  # TorchUpdate | DeepSpeedUpdate
    reference: torch.nn.Module | None = None

    @property
    def optimizer(self) -> Any:
        return self.stepper.optimizer

    @property
    def params(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]


class AgentPolicies:
    """A mapping role -> model with one optimizer per distinct model.

    ``optim`` is one OptimizerConfig for every model, or a mapping role -> OptimizerConfig (roles that share a model
    must agree). ``per_role_grad_norm`` also measures each role's own gradient norm on a shared model (one extra
    gradient copy per role); on separate models a role's norm is its model's norm.
    """

    def __init__(
        self,
        models: Mapping[str, torch.nn.Module],
        optim: OptimizerConfig | Mapping[str, OptimizerConfig] | None = None,
        *,
        loss: LossConfig | None = None,
        pad_token_id: int = 0,
        per_role_grad_norm: bool = False,
        recompute_old_logprobs: bool = False,
        seed: int = 0,
    ) -> None:
        if not models:
            raise ValueError("AgentPolicies needs at least one role -> model entry")
        self.loss = loss or LossConfig()
        self.pad_token_id = pad_token_id
        self.per_role_grad_norm = per_role_grad_norm
        self.recompute_old_logprobs = recompute_old_logprobs
        self._rng = np.random.default_rng(seed)
        by_model: dict[int, list[str]] = {}
        for role, model in models.items():
            by_model.setdefault(id(model), []).append(role)
        self.slots: list[ModelSlot] = []
        self._slot_of: dict[str, ModelSlot] = {}
        for roles in by_model.values():
            model = models[roles[0]]
            config = _config_for(roles, optim)
            reference = None
            if self.loss.kl_coef:  # copied before DeepSpeed wraps (and under ZeRO-3 partitions) the model
                reference = copy.deepcopy(model).eval().requires_grad_(False)
            if config.deepspeed is not None:
                from cave.training.deepspeed_update import DeepSpeedUpdate

                # ZeRO-2 keeps a gradient copy for per-role norms only when they are asked for
                stepper = DeepSpeedUpdate(model, config, keep_grads=per_role_grad_norm and len(roles) > 1)
            else:
                stepper = TorchUpdate(model, config)
            slot = ModelSlot("+".join(roles), model, tuple(roles), config, stepper, reference)
            self.slots.append(slot)
            for role in roles:
                self._slot_of[role] = slot

    @property
    def roles(self) -> list[str]:
        return list(self._slot_of)

    def model(self, role: str) -> torch.nn.Module:
        return self.slot(role).model

    def for_generation(self, role: str) -> Any:
        """The block a rollout engine generates in with this role's live model: a context manager (under ZeRO-3 the
        weights are gathered once for the whole block; nothing to do otherwise)."""
        return self.slot(role).stepper.for_generation()

    def slot(self, role: str) -> ModelSlot:
        if role not in self._slot_of:
            raise KeyError(f"no policy for role {role!r}; roles with a model: {', '.join(self._slot_of)}")
        return self._slot_of[role]

    # -- the update ----------------------------------------------------------------------------------------------
    def update(self, samples: Sequence[Sample], advantages: Any) -> dict[str, UpdateResult]:
        """``steps_per_iteration`` optimizer steps on each distinct model, over the samples of its roles.

        The model's samples are shuffled and split into that many mini-batches (fewer samples than steps: the
        mini-batches repeat). Samples of roles without a policy are an error.
        """
        adv = np.asarray(advantages.detach().cpu() if torch.is_tensor(advantages) else advantages, dtype=np.float32)
        if adv.shape != (len(samples),):
            raise ValueError(f"advantages has shape {adv.shape}; expected one per sample ({len(samples)},)")
        unknown = {s.agent_id for s in samples} - set(self._slot_of)
        if unknown:
            raise KeyError(f"samples from roles without a policy: {sorted(unknown)}; known roles: {self.roles}")
        return {slot.name: self._update_slot(slot, samples, adv) for slot in self.slots}

    def _update_slot(self, slot: ModelSlot, samples: Sequence[Sample], adv: np.ndarray) -> UpdateResult:
        t0 = time.perf_counter()
        result = UpdateResult(slot.name, slot.roles, role_grad_norms={r: [] for r in slot.roles})
        idx = [i for i, s in enumerate(samples) if s.agent_id in slot.roles]
        result.n_samples = len(idx)
        result.n_tokens = sum(samples[i].n_tokens for i in idx)
        if not slot.stepper.reduce([len(idx)])[0]:  # (with several ranks: no rank has a sample for it)
            return result
        mine = [samples[i] for i in idx]
        missing = any(s.old_logprobs is None for s in mine)
        needs_old = self.loss.objective == "ppo" and (self.recompute_old_logprobs or missing)
        if mine and needs_old:  # (the SFT objective has no ratio)
            mine = self._with_old_logprobs(slot, mine)
        mine_adv = adv[idx]
        S = slot.config.steps_per_iteration
        chunks = np.array_split(self._rng.permutation(len(mine)), max(1, min(S, len(mine))))
        sums: dict[str, float] = {}
        weight = 0.0
        slot.model.train()
        for step in range(S):
            chunk = chunks[step % len(chunks)]
            metrics, tokens = self._step(slot, [mine[j] for j in chunk], mine_adv[chunk], step, result)
            for k, v in metrics.items():
                sums[k] = max(sums.get(k, v), v) if k.endswith("_max") else sums.get(k, 0.0) + v * tokens
            weight += tokens
        result.metrics = {k: v if k.endswith("_max") else v / weight for k, v in sums.items()} if weight else {}
        finite = [g for g in result.grad_norms if math.isfinite(g)]
        if finite:
            result.metrics["grad_norm_mean"] = float(np.mean(finite))
            result.metrics["grad_norm_max"] = float(np.max(finite))
        result.seconds = time.perf_counter() - t0
        return result

    def _step(
        self, slot: ModelSlot, batch: list[Sample], adv: np.ndarray, step: int, result: UpdateResult
    ) -> tuple[dict[str, float], int]:
        """One optimizer step on ``batch``; returns its metrics and its token count (0 when skipped)."""
        slot.stepper.zero_grad()
        local_tokens = sum(s.n_tokens for s in batch)
        total_tokens = int(slot.stepper.reduce([local_tokens])[0])  # the token-mean is over every rank's tokens
        if total_tokens == 0:
            result.errors.append(
                StepError(slot.name, step, "no_tokens", f"{slot.name}: step {step}: no response tokens")
            )
            return {}, 0
        sums, role_norms, bad = self._accumulate(slot, batch, adv, total_tokens)
        if bad is not None:
            result.grad_norms.append(float("nan"))
            result.errors.append(
                StepError(
                    slot.name,
                    step,
                    "nonfinite_loss",
                    f"{slot.name}: step {step}: loss is {bad.get('loss')} (pg_loss={bad.get('pg_loss')}, "
                    f"ratio_max={bad.get('ratio_max')}); the step was skipped and the weights are unchanged. "
                    "Check the advantages, the old logprobs and the learning rate.",
                )
            )
            return {}, 0
        norm, applied = slot.stepper.step()
        result.grad_norms.append(norm)
        for role in {s.agent_id for s in batch}:
            result.role_grad_norms[role].append(role_norms.get(role, norm))
        if not applied:
            result.errors.append(
                StepError(
                    slot.name,
                    step,
                    "nonfinite_grad",
                    f"{slot.name}: step {step}: gradient norm is {norm}; the step was skipped and the weights are "
                    "unchanged. Lower the learning rate or check the inputs for overflow.",
                )
            )
            return {}, 0
        result.steps += 1
        out = {k: v if k.endswith("_max") else v / local_tokens for k, v in sums.items() if k != "tokens"}
        out["grad_norm"] = norm
        return out, local_tokens  # (metrics: this rank's tokens)

    def _accumulate(
        self, slot: ModelSlot, batch: list[Sample], adv: np.ndarray, total_tokens: int
    ) -> tuple[dict[str, float], dict[str, float], dict | None]:
        """Backward of the token-mean loss over ``batch`` into the gradient, one block of micro-batches per role.

        Returns token-weighted metric sums, each role's own gradient norm (when tracked: a shared model,
        ``per_role_grad_norm`` and gradients the stepper can show), and the metrics of the first non-finite
        micro-batch (None when all were finite; the step's gradient is then discarded). With several ranks every
        rank runs as many micro-batches per role as the rank with the most (empty ones add nothing).
        """
        stepper = slot.stepper
        track_roles = self.per_role_grad_norm and len(slot.roles) > 1 and stepper.has_grads
        blocks = {}
        for role in slot.roles:
            block = [(s, a) for s, a in zip(batch, adv, strict=True) if s.agent_id == role]
            block.sort(key=lambda sa: sa[0].prompt_ids)  # same-prompt samples in one micro-batch share a forward
            blocks[role] = _chunks(block, slot.config.micro_batch_size) if block else []
        counts = stepper.reduce([len(b) for b in blocks.values()], "max")
        sums: dict[str, float] = {}
        role_norms: dict[str, float] = {}
        for (role, micros), count in zip(blocks.items(), counts, strict=True):
            if not count:
                continue
            before = [g.clone() if g is not None else None for g in stepper.grads()] if track_roles else None
            for k in range(int(count)):
                metrics, ok = self._backward(slot, micros[k] if k < len(micros) else [], total_tokens)
                if not ok:
                    return sums, role_norms, metrics
                if metrics["tokens"]:
                    for key, v in metrics.items():
                        w = metrics["tokens"]
                        sums[key] = max(sums.get(key, v), v) if key.endswith("_max") else sums.get(key, 0.0) + v * w
            if before is not None:
                role_norms[role] = _norm([_sub(g, b) for g, b in zip(stepper.grads(), before, strict=True)])
        return sums, role_norms, None

    def gradient_norms(self, samples: Sequence[Sample], advantages: Any) -> dict[str, Any]:
        """Each role's gradient norm of the loss over all its samples, without an optimizer step (a probe).

        A role's norm is that of the gradient of its part of its model's token-mean loss (on a separate model: the
        model's gradient norm). Weights, ``.grad`` and optimizer states are untouched. ``advantages`` is one array
        (returns {role: norm}) or a mapping name -> array (returns {name: {role: norm}}), e.g. one per estimator:
        the forward pass is then shared by all of them.
        """
        named = dict(advantages) if isinstance(advantages, Mapping) else {"": advantages}
        arrays = {
            k: np.asarray(v.detach().cpu() if torch.is_tensor(v) else v, dtype=np.float32) for k, v in named.items()
        }
        out: dict[str, dict[str, float]] = {k: {} for k in arrays}
        for slot in self.slots:
            mine = [i for i, s in enumerate(samples) if s.agent_id in slot.roles]
            batch = [samples[i] for i in mine]
            if self.recompute_old_logprobs or any(s.old_logprobs is None for s in batch):
                batch = self._with_old_logprobs(slot, batch)
            total = sum(s.n_tokens for s in batch)
            if not total:
                continue
            adv = {k: a[mine] for k, a in arrays.items()}
            for role in slot.roles:
                idx = [j for j, s in enumerate(batch) if s.agent_id == role]
                if not idx:
                    continue
                acc: dict[str, list[torch.Tensor | None]] = {k: [None] * len(slot.params) for k in adv}
                for part in _chunks(idx, slot.config.micro_batch_size):
                    for k, grads in self._probe_grads(slot, [batch[j] for j in part], adv, part, total).items():
                        acc[k] = [
                            g if a is None else (a if g is None else a + g) for a, g in zip(acc[k], grads, strict=True)
                        ]
                for k in adv:
                    out[k][role] = _norm(acc[k])
        return out[""] if list(out) == [""] else out

    def _forward(
        self, slot: ModelSlot, batch: Batch, train: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """Token logprobs and entropy under the policy, and logprobs under the frozen reference (if any).

        ``train``: the forward of an optimizer step, through the stepper's module (a DeepSpeed engine drives its
        backward from hooks on that forward); else through the bare model.
        """
        logprobs, entropy = forward_logprobs(
            slot.stepper.module if train else slot.model,
            batch,
            with_entropy=True,
            entropy_grad=bool(self.loss.entropy_coef),
        )
        ref = None
        if slot.reference is not None:
            with torch.no_grad():
                ref, _ = forward_logprobs(slot.reference, batch)
        return logprobs, entropy, ref

    def _ppo(self, batch: Batch, forward: tuple, advantages: Any) -> Any:
        """The configured loss on one batch (PPO; the NLL for ``objective="sft"``, which ignores the advantages),
        given ``_forward``'s outputs and one advantage per sample."""
        logprobs, entropy, ref = forward
        cfg = self.loss
        if cfg.objective == "sft":
            return sft_loss(logprobs, batch.response_mask)
        return ppo_loss(
            logprobs,
            batch.old_logprobs,
            torch.as_tensor(advantages, dtype=torch.float32, device=logprobs.device),
            batch.response_mask,
            ref_logprobs=ref,
            entropy=entropy,
            clip_low=cfg.clip_low,
            clip_high=cfg.clip_high,
            dual_clip=cfg.dual_clip,
            kl_coef=cfg.kl_coef,
            entropy_coef=cfg.entropy_coef,
        )

    def _probe_grads(
        self, slot: ModelSlot, part: list[Sample], adv: dict[str, np.ndarray], idx: list[int], total_tokens: int
    ) -> dict[str, tuple[torch.Tensor | None, ...]]:
        """Gradients of one micro-batch's share of the token-mean loss, one per advantage array (one forward)."""
        batch = collate(part, self.pad_token_id).to(_device(slot.model))
        if batch.n_tokens == 0:
            return {}
        forward = self._forward(slot, batch)
        grads = {}
        for n, (k, a) in enumerate(adv.items()):
            out = self._ppo(batch, forward, a[idx])
            grads[k] = torch.autograd.grad(
                out.loss * (batch.n_tokens / total_tokens),
                slot.params,
                retain_graph=n < len(adv) - 1,
                allow_unused=True,
            )
        return grads

    def _backward(self, slot: ModelSlot, micro: list[tuple[Sample, float]], total_tokens: int) -> tuple[dict, bool]:
        """Loss on one micro-batch, scaled so the step's loss is the token-mean over its whole mini-batch.

        Several ranks: an empty ``micro`` (this rank has fewer micro-batches) still runs a forward/backward that adds
        nothing, the loss is scaled by the world size (DeepSpeed averages the ranks' gradients), and a non-finite
        loss on any rank skips the step on every rank.
        """
        stepper = slot.stepper
        batch = collate([s for s, _ in micro] or [_empty_sample()], self.pad_token_id).to(_device(slot.model))
        if batch.n_tokens == 0 and stepper.world_size == 1:
            return {"tokens": 0.0}, True
        out = self._ppo(batch, self._forward(slot, batch, train=True), [a for _, a in micro] or [0.0])
        if not stepper.reduce([float(torch.isfinite(out.loss))], "min")[0]:
            stepper.discard(out.loss)
            return out.metrics, False
        stepper.backward(out.loss * (batch.n_tokens / total_tokens * stepper.world_size))
        return out.metrics, True

    @torch.no_grad()
    def _with_old_logprobs(self, slot: ModelSlot, samples: list[Sample]) -> list[Sample]:
        """``samples`` with old logprobs from the current weights (before this update's steps), as copies.

        Only the samples that lack them, unless ``recompute_old_logprobs`` (then all: verl's choice, which removes
        any sampler/trainer numeric mismatch from the ratio).
        """
        todo = [i for i, s in enumerate(samples) if self.recompute_old_logprobs or s.old_logprobs is None]
        out = list(samples)
        was_training = slot.model.training
        slot.model.eval()
        for part in _chunks(todo, slot.config.micro_batch_size or len(todo)):
            batch = collate([samples[i] for i in part], self.pad_token_id).to(_device(slot.model))
            lp, _ = forward_logprobs(slot.model, batch)
            for row, i in enumerate(part):
                n = len(samples[i].response_ids)
                out[i] = dataclasses.replace(samples[i], old_logprobs=lp[row, :n].tolist())
        slot.model.train(was_training)
        return out

    # -- checkpoints ---------------------------------------------------------------------------------------------
    def checkpoint_state(self) -> dict[str, Any]:
        """What a checkpoint holds: per model its trainable weights (CPU tensors, by the model's own parameter names),
        its optimizer state and its roles; and the sampling rng. Frozen weights are the base model's: not saved.

        The tensors may be the live ones: serialize (torch.save) before the next update. A DeepSpeed model's
        optimizer state is DeepSpeed's (ZeRO: this rank's partition and its fp32 master weights).
        """
        return {
            "models": {
                s.name: {
                    "trainable": s.stepper.trainable_state(),
                    "optimizer": s.stepper.optimizer_state(),
                    "roles": s.roles,
                }
                for s in self.slots
            },
            "rng": self._rng.bit_generator.state,
        }

    def weights(self, role: str) -> dict[str, torch.Tensor]:
        """The trainable weights of ``role``'s model by HF name, on the CPU (gathered under ZeRO-3): what a rollout
        engine receives after an update and what an export writes over the base model."""
        return self.slot(role).stepper.trainable_state()

    def load_checkpoint_state(self, state: Mapping[str, Any]) -> None:
        """Restore what ``checkpoint_state`` returned (into policies built with the same roles and settings)."""
        for s in self.slots:
            saved = _saved_model(state, s.name)
            s.stepper.load(saved["trainable"], saved["optimizer"])
        self._rng.bit_generator.state = state["rng"]

    def load_weights(self, state: Mapping[str, Any]) -> None:
        """Only the trainable weights of a ``checkpoint_state`` (a warm start): optimizers and rng stay fresh."""
        for s in self.slots:
            s.stepper.load(_saved_model(state, s.name)["trainable"], None)

    def state_dict(self) -> dict[str, Any]:
        return {
            s.name: {"model": s.model.state_dict(), "optimizer": s.optimizer.state_dict(), "roles": s.roles}
            for s in self.slots
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        for s in self.slots:
            if s.name not in state:
                raise KeyError(f"checkpoint has no model {s.name!r} (it has {list(state)}); were the roles changed?")
            s.model.load_state_dict(state[s.name]["model"])
            if isinstance(s.stepper, TorchUpdate):  # its fp32 masters follow the weights
                s.stepper.load(state[s.name]["model"], state[s.name]["optimizer"])
            else:
                s.optimizer.load_state_dict(state[s.name]["optimizer"])


def _saved_model(state: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """Model ``name``'s entry of a ``checkpoint_state``; a clear error when the checkpoint lacks it."""
    if name not in state["models"]:
        raise KeyError(f"checkpoint has no model {name!r} (it has {list(state['models'])}); were the roles changed?")
    return state["models"][name]


def _device(model: torch.nn.Module) -> torch.device:
    """Where the model's weights live (batches are collated on the CPU and moved there)."""
    return next(model.parameters()).device


def _config_for(roles: list[str], optim: OptimizerConfig | Mapping[str, OptimizerConfig] | None) -> OptimizerConfig:
    if optim is None:
        return OptimizerConfig()
    if isinstance(optim, OptimizerConfig):
        return optim
    missing = [r for r in roles if r not in optim]
    if missing:
        raise KeyError(
            f"no optimizer config for role(s) {missing}; add them to the per-role mapping or pass one OptimizerConfig"
        )
    configs = {optim[r] for r in roles}
    if len(configs) > 1:
        raise ValueError(
            f"roles {roles} share one model but have different optimizer configs; a shared model has one optimizer — "
            "give these roles the same settings, or separate models"
        )
    return configs.pop()


def _empty_sample() -> Sample:
    """A one-token sample that trains nothing (mask 0): a rank's stand-in when it has fewer micro-batches."""
    return Sample([0], [0], response_mask=[0], old_logprobs=[0.0])


def _chunks(items: list, size: int | None) -> list[list]:
    if not size:
        return [items]
    return [items[i : i + size] for i in range(0, len(items), size)]


def _sub(grad: torch.Tensor | None, before: torch.Tensor | None) -> torch.Tensor | None:
    if grad is None:
        return None
    return grad if before is None else grad - before


def _norm(tensors: list[torch.Tensor | None]) -> float:
    present = [t.detach().float().norm() for t in tensors if t is not None]
    return float(torch.stack(present).norm()) if present else 0.0
