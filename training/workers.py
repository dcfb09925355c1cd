"""Where a training step's work runs: rollout engines that serve the current weights, and each model's update.

The trainer loop drives one object with a few verbs, whatever the scale::

    workers = LocalWorkers(cfg)                      # or ray_workers.RayWorkers(cfg) (trainer.make_workers)
    roll = workers.rollout(examples, step)           # N team runs per prompt -> Rollout
    results = workers.update(samples, advantages)    # each model's fixed optimizer steps -> {model: UpdateResult}
    workers.sync()                                   # the rollout engines now serve the new weights
    state = workers.checkpoint_state()               # -> torch.save; workers.load_checkpoint_state(state)
    workers.export(run_dir / "final")                # save_pretrained, one folder per model
    workers.close()

``LocalWorkers`` runs everything in this process: the models train here and their rollout engines
(``cave.training.engines``) either share the live modules (transformers) or receive the trainable weights
after each update (vLLM in-process or behind its HTTP server). The builders below are what the Ray
actors (``cave.training.ray_workers``) use too, so one config means the same thing on one CPU or a cluster.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cave.training.config import TrainConfig
from cave.training.engines import model_dir

__all__ = [
    "LocalWorkers",
    "build_engines",
    "build_policies",
    "build_team",
    "export_model",
    "export_trained",
    "init_torch",
    "load_model",
    "load_models",
    "model_weights",
    "optimizer_config",
    "resolve_device",
    "run_rollout",
    "server_launch",
]


class LocalWorkers:
    """Rollouts and updates in this process (CPU, or one GPU shared by the engines and the trainer)."""

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        init_torch(cfg)
        self.models = load_models(cfg, resolve_device(cfg.device))
        self.policies = build_policies(cfg, self.models)
        self.engines = build_engines(cfg, self.models, self.policies)
        self.team = build_team(cfg, self.engines)

    def rollout(self, examples: Sequence[Mapping[str, Any]], step: int) -> Any:
        return run_rollout(self.cfg, self.team, self.engines, examples, step)

    def update(self, samples: Sequence[Any], advantages: Any) -> dict[str, Any]:
        return self.policies.update(samples, advantages)

    def sync(self) -> None:
        for name, engine in self.engines.items():
            if getattr(engine, "model", None) is self.models[name][0]:
                continue  # the engine samples from the live module itself
            engine.load_weights(model_weights(self.cfg, self.policies, name))

    def checkpoint_state(self) -> dict[str, Any]:
        return self.policies.checkpoint_state()

    def load_checkpoint_state(self, state: Mapping[str, Any]) -> None:
        self.policies.load_checkpoint_state(state)
        self.sync()

    def export(self, out_dir: str | Path) -> dict[str, Path]:
        return {
            name: export_trained(self.cfg, name, model_weights(self.cfg, self.policies, name), Path(out_dir) / name)
            for name in self.models
        }

    def close(self) -> None:
        for engine in self.engines.values():
            engine.close()


# -- builders (shared with the Ray actors) -----------------------------------------------------------------
def init_torch(cfg: TrainConfig) -> None:
    import torch

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device: cuda, but torch sees no CUDA device; use device: cpu or auto")
    return device


def load_model(source: str, dtype: str, train_layers: int | None, device: str) -> tuple[Any, Any]:
    """(model, tokenizer) from an embedded model name or an HF directory, with all but the last layers frozen."""
    from cave.llm import hf

    model, tok = hf.load(model_dir(source), device=device, dtype=dtype)
    if train_layers:
        layers = getattr(getattr(model, "model", None), "layers", None)
        if layers is None:
            raise ValueError(f"models: train_layers needs a decoder with model.layers; {type(model).__name__} has none")
        model.requires_grad_(False)
        for layer in list(layers)[-train_layers:]:
            layer.requires_grad_(True)
        if getattr(model.model, "norm", None) is not None:
            model.model.norm.requires_grad_(True)
    model.train()
    return model, tok


def load_models(cfg: TrainConfig, device: str, names: Sequence[str] | None = None) -> dict[str, tuple[Any, Any]]:
    """model name -> (model, tokenizer) for ``names`` (default: every model of the config)."""
    return {
        name: load_model(m.source, m.dtype, m.train_layers, device)
        for name, m in cfg.models.items()
        if names is None or name in names
    }


def optimizer_config(cfg: TrainConfig, role: str) -> Any:
    """The OptimizerConfig of one role: its agent settings plus its model's DeepSpeed settings."""
    from cave.training.policy import OptimizerConfig

    a = cfg.agents[role]
    ds = cfg.models[a.model].deepspeed
    deepspeed = None
    if ds is not None:
        from cave.training.deepspeed_update import DeepSpeedConfig

        # a bf16 model trains through DeepSpeed's bf16 optimizer (fp32 master weights); fp32 stays fp32
        deepspeed = DeepSpeedConfig(**ds.model_dump(), bf16=cfg.models[a.model].dtype == "bfloat16")
    return OptimizerConfig(
        lr=a.lr,
        steps_per_iteration=a.steps_per_iteration,
        grad_clip=a.grad_clip,
        weight_decay=a.weight_decay,
        micro_batch_size=a.micro_batch_size,
        deepspeed=deepspeed,
    )


def build_policies(cfg: TrainConfig, models: Mapping[str, tuple[Any, Any]]) -> Any:
    """AgentPolicies over the roles whose model is in ``models`` (all of them locally; one model in a learner)."""
    from cave.training.loss import LossConfig
    from cave.training.policy import AgentPolicies

    roles = {role: a.model for role, a in cfg.agents.items() if a.model in models}
    first_tok = next(iter(models.values()))[1]
    return AgentPolicies(
        {role: models[name][0] for role, name in roles.items()},
        {role: optimizer_config(cfg, role) for role in roles},
        loss=LossConfig(**cfg.loss.model_dump()),
        pad_token_id=first_tok.pad_token_id or 0,
        per_role_grad_norm=cfg.per_role_grad_norm,
        # logprobs sampled at another temperature are not the trained policy's: recompute them
        recompute_old_logprobs=cfg.temperature != 1.0,
        seed=cfg.seed,
    )


def build_engines(cfg: TrainConfig, models: Mapping[str, tuple[Any, Any]], policies: Any = None) -> dict[str, Any]:
    """model name -> the rollout engine that serves its current weights (``cave.training.engines``).

    ``policies``: the AgentPolicies that train these very models (one process): a transformers engine then
    generates inside their ``for_generation`` block (under DeepSpeed ZeRO-3: the weights gathered once a batch).
    """
    from cave.training.engines import build_engine

    engines = {}
    for name, (model, tok) in models.items():
        m = cfg.models[name]
        r, kind = m.rollout, m.rollout.resolved()
        if kind == "transformers":  # the live model itself: nothing to sync on one device
            role = next((role for role, a in cfg.agents.items() if a.model == name), None)
            context = None
            if policies is not None and role in policies.roles and policies.model(role) is model:
                context = functools.partial(policies.for_generation, role)
            engines[name] = build_engine(
                "transformers", model, tok, batched=cfg.batch_rollouts, seed=cfg.seed, generation_context=context
            )
        elif kind == "vllm":  # sleeps during updates, so several engines and the trainers share the GPU
            settings = {"dtype": m.dtype, "logprobs_mode": "processed_logprobs", **r.engine_args}
            engines[name] = build_engine(
                "vllm",
                model_dir(m.source),
                tok,
                enable_sleep_mode=r.sleep,
                gpu_memory_utilization=r.gpu_memory_utilization,
                seed=cfg.seed,
                **settings,
            )
        else:  # vllm_server: a running server (url) or one started here (python); engine_args go to the launch
            engines[name] = build_engine(
                "vllm_server",
                model_dir(m.source),
                tok,
                url=r.url,
                python=r.python,
                launch=None if r.url else server_launch(m),
            )
    return engines


def server_launch(m: Any) -> dict[str, Any]:
    """Launch settings of a vLLM server started by the trainer: the training dtype (so its logprobs are the
    policy's), the engine's GPU share, or on a CPU a fixed KV cache (vLLM's CPU default claims most of RAM)."""
    import torch

    launch: dict[str, Any] = {"dtype": m.dtype}
    if torch.cuda.is_available():
        launch["extra_args"] = ["--gpu-memory-utilization", str(m.rollout.gpu_memory_utilization)]
    else:
        launch["kv_cache_bytes"] = 1 << 30
    return {**launch, **m.rollout.engine_args}


def build_team(cfg: TrainConfig, engines: Mapping[str, Any]) -> Any:
    """The user's team with each role's backend swapped for its model's rollout engine."""
    from cave.training.rollout import policy_team

    role_models = {role: a.model for role, a in cfg.agents.items()}
    backends = {name: engine.llm for name, engine in engines.items()}
    return policy_team(cfg.team, role_models, backends, temperature=cfg.temperature, max_tokens=cfg.max_tokens)


def run_rollout(
    cfg: TrainConfig,
    team: Any,
    engines: Mapping[str, Any],
    examples: Sequence[Mapping[str, Any]],
    step: int,
    *,
    offset: int = 0,
) -> Any:
    """The team runs of ``examples`` with the engines awake; engines that share the GPU sleep afterwards.

    ``offset``: where this share of the step's prompts starts, when a step is split among workers.
    """
    from cave.training.rollout import arollout

    for engine in engines.values():
        engine.wake()
    try:
        roll = asyncio.run(
            arollout(
                team,
                examples,
                group_size=cfg.group_size,
                step=step,
                seed=cfg.seed,
                question_field=cfg.data.question_field,
                max_episodes=cfg.max_episodes,
                offset=offset,
            )
        )
    finally:
        for name, engine in engines.items():
            if cfg.models[name].rollout.sleep:
                engine.sleep()
    sizes = []
    for engine in engines.values():  # rows per decode step, for metrics
        batches = getattr(engine.llm, "batches", None)
        if batches:
            sizes.extend(batches)
            batches.clear()
    roll.meta["batch_sizes"] = sizes
    return roll


def model_weights(cfg: TrainConfig, policies: Any, name: str) -> dict[str, Any]:
    """The trainable weights of model ``name`` (of the config) from the policies that train it."""
    role = next(role for role, a in cfg.agents.items() if a.model == name)
    return policies.weights(role)


def export_trained(cfg: TrainConfig, name: str, weights: Mapping[str, Any], out: Path) -> Path:
    """A plain HF checkpoint of model ``name``: its base weights on the CPU with the trained ``weights`` put in.

    Built from the base model rather than the live one, so a DeepSpeed (ZeRO-3: partitioned) or GPU model
    exports the same way; the folder loads with ``from_pretrained`` and serves with vLLM.
    """
    (model, tok) = load_models(cfg, "cpu", names=[name])[name]
    result = model.load_state_dict(dict(weights), strict=False)
    if result.unexpected_keys:
        raise KeyError(f"weights {result.unexpected_keys[:3]} do not fit model {name!r} ({cfg.models[name].source})")
    return export_model(model, tok, out)


def export_model(model: Any, tokenizer: Any, out: Path) -> Path:
    """A plain HF checkpoint (``from_pretrained``-ready) of a trained model and its tokenizer."""
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
