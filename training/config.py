"""The `cave train` config (pydantic): team, per-agent models and optimizers, estimator, sizes, output.

Every mistake is reported as ``FILE:LINE: FIELD: what is wrong`` + the fix, before any model loads::

    team: team.yaml                    # or an inline TeamSpec (roles, pattern, ...)
    models:
      base: {source: smollm2, train_layers: 2}     # an embedded model name or an HF directory
    agents:                            # role -> its model and optimizer (roles may share a model)
      solver: {model: base, lr: 1.0e-5}
      verifier: {model: base, lr: 1.0e-5}
    data: {path: problems.jsonl}       # or prompts: [{question: ..., answer: ...}]
    reward: math_sympy
    estimator: drmas                   # grpo | drmas | pooled_calls | at_grpo
    group_size: 2                      # N team runs per prompt
    batch_size: 2                      # prompts per step
    steps: 2

Scale-out, all optional (the ``scale`` / ``gpu`` extras)::

    models:
      base:
        source: /models/qwen-1.5b
        deepspeed: {zero_stage: 2}                 # the update through DeepSpeed ZeRO (stage 0-3)
        rollout: {engine: vllm, gpu_memory_utilization: 0.3}   # transformers | vllm | vllm_server
    ray: {rollout_workers: 4, address: auto}       # rollout workers and one learner per model as Ray actors
    tracking: [tensorboard, wandb]                 # besides metrics.jsonl (wandb offline unless wandb_mode)
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from cave import config as config_files
from cave.config import ConfigFile, ConfigModel
from cave.team import TeamError, TeamSpec

__all__ = [
    "AgentConfig",
    "ConfigError",
    "DataConfig",
    "DeepSpeedSettings",
    "LossSettings",
    "ModelConfig",
    "RaySettings",
    "RolloutSettings",
    "TrainConfig",
    "load_config",
    "need",
    "parse_config",
    "set_field",
]


def installed(field: str, install: str) -> Any:
    """A field validator: the setting ``field``, when given, needs the package of the same name (``install`` says
    how to get it), checked before any model loads."""

    def check(cls: type, v: Any) -> Any:
        if v is not None:
            need(field, install)
        return v

    return field_validator(field)(classmethod(check))


class ConfigError(config_files.ConfigError, ValueError):
    """A bad train config: ``str()`` lists each problem as FILE:LINE: FIELD: message, then the fix."""


# Where these come from, for the error that names a missing package (plugin trackers bring their own).
_TRACKER_PACKAGES = {"tensorboard": "pip install tensorboard", "wandb": "pip install wandb"}


class DeepSpeedSettings(ConfigModel):
    """Update this model through DeepSpeed (``deepspeed.initialize``) instead of a plain torch AdamW."""

    model_config = ConfigDict(extra="forbid")

    zero_stage: Literal[0, 1, 2, 3] = Field(
        2, description="ZeRO stage: 0 off, 1 optimizer states, 2 +gradients, 3 +weights"
    )
    offload_optimizer: bool = Field(False, description="keep optimizer states in CPU memory (ZeRO >= 1)")


class RolloutSettings(ConfigModel):
    """How this model samples during rollouts; the engine always serves the current policy weights."""

    model_config = ConfigDict(extra="forbid")

    engine: str = Field(
        "auto",
        description="auto: vllm where vLLM and a CUDA GPU are at hand, else transformers; transformers: the live "
        "model in-process (CPU or GPU); vllm: an in-process vLLM engine (GPU); vllm_server: a vLLM "
        "OpenAI-compatible server, reached at `url` or started with `python`; or any registered engine",
    )
    url: str | None = Field(None, description="vllm_server: the server's base URL (http://127.0.0.1:8000)")
    python: str | None = Field(None, description="vllm_server: start a server with this Python (a vLLM venv)")
    sleep: bool = Field(True, description="vllm: sleep the engine during updates so engines and trainers share GPUs")
    gpu_memory_utilization: float = Field(0.4, gt=0, le=1, description="vllm: this engine's share of the GPU")
    engine_args: dict[str, Any] = Field(default_factory=dict, description="vllm: extra engine/server arguments")

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, v: str) -> str:
        from cave.training.engines import ENGINES

        return v if v == "auto" else ENGINES.check(v)

    @model_validator(mode="after")
    def _where(self) -> RolloutSettings:
        if self.engine == "vllm_server" and not (self.url or self.python):
            raise ValueError(
                "engine vllm_server needs `url` (a running server) or `python` (a vLLM venv's python to start one)"
            )
        if self.engine != "vllm_server" and (self.url or self.python):
            raise ValueError(f"url/python are for engine vllm_server, not {self.engine}; remove them or change engine")
        if self.engine == "vllm":
            need("vllm", "pip install 'cave[gpu]' on a CUDA machine, or use engine: auto / transformers / vllm_server")
        return self

    def resolved(self) -> str:
        """The engine ``auto`` stands for on this machine (the others stand for themselves)."""
        if self.engine != "auto":
            return self.engine
        from cave.llm.vllm import vllm_available

        return "vllm" if vllm_available()[0] else "transformers"


class ModelConfig(ConfigModel):
    model_config = ConfigDict(extra="forbid")

    source: str = Field("smollm2", description="an embedded model name (smollm2, qwen) or an HF-format directory")
    dtype: Literal["float32", "bfloat16"] = Field("float32", description="training dtype (fp32 on CPU)")
    train_layers: int | None = Field(
        None, ge=1, description="train only the last N decoder layers and the final norm (None: every parameter)"
    )
    deepspeed: DeepSpeedSettings | None = Field(None, description="update through DeepSpeed ZeRO (None: torch AdamW)")
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)

    _deepspeed_installed = installed("deepspeed", "DS_BUILD_OPS=0 pip install deepspeed==0.19.8 (or the `scale` extra)")

    @model_validator(mode="after")
    def _bf16_needs_zero(self) -> ModelConfig:
        if self.deepspeed is not None and self.deepspeed.zero_stage == 0 and self.dtype == "bfloat16":
            raise ValueError(
                "dtype bfloat16 with deepspeed zero_stage 0: DeepSpeed's bf16 optimizer needs ZeRO (without it, "
                "bf16 gradients accumulate in its fp16 optimizer); set deepspeed.zero_stage to 1, 2 or 3, or dtype: "
                "float32"
            )
        return self


class AgentConfig(ConfigModel):
    """One role's policy: which model it acts with and how that model's optimizer steps."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field("base", description="a key of `models`; roles naming the same key share one model")
    lr: float = Field(1e-6, gt=0, description="AdamW learning rate (the Dr. MAS reference uses 1e-6)")
    steps_per_iteration: int = Field(1, ge=1, description="optimizer steps per training step, whatever the samples")
    grad_clip: float | None = Field(1.0, gt=0, description="max gradient norm (None: no clipping)")
    weight_decay: float = Field(0.0, ge=0)
    micro_batch_size: int | None = Field(None, ge=1, description="samples per forward/backward")

    def optimizer_key(self) -> tuple:
        return (self.lr, self.steps_per_iteration, self.grad_clip, self.weight_decay, self.micro_batch_size)


class LossSettings(ConfigModel):
    model_config = ConfigDict(extra="forbid")

    clip_low: float = Field(0.2, ge=0)
    clip_high: float = Field(0.2, ge=0)
    dual_clip: float | None = Field(3.0, gt=1.0, description="cap on -A*ratio for A < 0 (None: off)")
    kl_coef: float = Field(0.0, ge=0, description="k3 KL to a frozen copy of the initial model (0: no copy kept)")
    entropy_coef: float = Field(0.0, ge=0)
    objective: Literal["ppo", "sft"] = Field("ppo", description="ppo: RL; sft: NLL of the replies (cave train sft)")


class SftSettings(ConfigModel):
    """The warm start of ``cave train sft`` (cave.training.sft): a teacher's successful team runs, imitated."""

    model_config = ConfigDict(extra="forbid")

    teacher: dict[str, Any] = Field(
        default_factory=lambda: {"backend": "local", "model": "qwen-1.5b"},
        description="the backend every role uses to collect runs: {backend: local|openai|..., and its options}",
    )
    problems: int = Field(200, ge=1, description="train problems the teacher attempts (the split's first N)")
    samples: int = Field(1, ge=1, description="teacher runs per problem (best-of-k: more successes to keep)")
    temperature: float = Field(0.7, ge=0, le=2.0, description="the teacher's sampling temperature")
    chunk: int = Field(8, ge=1, description="problems per collection batch (each batch is saved as it finishes)")
    epochs: int = Field(3, ge=1, description="passes over the kept calls")
    lr: float = Field(1e-4, gt=0, description="AdamW learning rate of the fine-tuning")
    batch_size: int = Field(8, ge=1, description="calls per optimizer step")
    output_dir: str = Field("runs/sft", description="the SFT run folder (relative to the config file)")

    @field_validator("teacher")
    @classmethod
    def _has_backend(cls, v: dict[str, Any]) -> dict[str, Any]:
        if "backend" not in v:
            raise ValueError("sft.teacher needs a backend, e.g. {backend: local, model: qwen-1.5b}")
        return v


class RaySettings(ConfigModel):
    """Rollout workers and one learner per distinct model as Ray actors (one machine or a cluster)."""

    model_config = ConfigDict(extra="forbid")

    address: str | None = Field(None, description="None: start a local Ray; 'auto' or ray://HOST:PORT: join a cluster")
    num_cpus: int | None = Field(None, ge=1, description="CPUs of a local Ray instance (None: all)")
    rollout_workers: int = Field(2, ge=1, description="rollout actors; the step's team runs are split among them")
    cpus_per_rollout_worker: float = Field(1.0, ge=0)
    gpus_per_rollout_worker: float = Field(0.0, ge=0)
    cpus_per_learner: float = Field(1.0, ge=0)
    gpus_per_learner: float = Field(0.0, ge=0)


class DataConfig(ConfigModel):
    """The prompts: a seeded generator, a JSONL file and/or inline examples; each has the question and the reference.

    Data with splits (a ``generator``, or a ``{split}`` placeholder in ``path``) can be evaluated on a held-out
    split (``cave train eval``, ``eval_every``); ``split`` names the one training uses.
    """

    model_config = ConfigDict(extra="forbid")

    split: str = Field("train", description="the split training uses (train | test; a {split} path: any file's)")
    generator: str | None = Field(
        None, description="a registered data generator (math_word; cave.training.datasets) or package.module:function"
    )
    n: int | None = Field(None, ge=1, description="generator: examples per split (default 1000 train / 200 test)")
    seed: int = Field(0, description="generator: its seed (the split of a problem never depends on it)")
    path: str | None = Field(
        None, description="a JSONL file, one example per line (relative to the config); {split} stands for the split"
    )
    prompts: list[dict[str, Any]] = Field(default_factory=list, description="inline examples")
    question_field: str = Field("question", description="the example field given to the team as its task")
    limit: int | None = Field(None, ge=1, description="use only the first N examples")

    @field_validator("generator")
    @classmethod
    def _known_generator(cls, v: str | None) -> str | None:
        from cave.training.datasets import resolve_generator

        if v is not None:
            resolve_generator(v)  # an unknown name or import path fails here, naming what is known
        return v

    @field_validator("path")
    @classmethod
    def _exists(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is None:
            return v
        path = Path(v) if Path(v).is_absolute() else Path((info.context or {}).get("base_dir", ".")) / v
        split = info.data.get("split", "train")
        if not Path(str(path).replace("{split}", split)).is_file():
            where = f" (split {split!r})" if "{split}" in v else ""
            raise ValueError(
                f"data file not found: {str(path).replace('{split}', split)}{where}; give a JSONL path relative to "
                "the config file"
            )
        return str(path.resolve())

    @model_validator(mode="after")
    def _split_known(self) -> DataConfig:
        from cave.training.datasets import SPLITS

        if self.generator and self.split not in SPLITS:
            raise ValueError(f"split: {self.split!r} is not a split of generator {self.generator}; use one of "
                             f"{', '.join(SPLITS)}")  # fmt: skip
        if self.generator and self.path:
            raise ValueError("data: give a generator or a path, not both; remove one")
        return self

    @property
    def has_splits(self) -> bool:
        """Whether this data names splits (a generator, or a path with ``{split}``), so a held-out one exists."""
        return bool(self.generator) or "{split}" in (self.path or "")

    def for_split(self, split: str) -> DataConfig:
        """The same data on ``split`` (inline prompts left out: they belong to no split); ValueError without splits."""
        if not self.has_splits:
            raise ValueError(
                f"data has no splits (no data.generator, no {{split}} in data.path), so there is no {split!r} split; "
                "use data: {generator: math_word} or a path like problems_{split}.jsonl"
            )
        if self.generator:
            from cave.training.datasets import SPLITS

            if split not in SPLITS:
                raise ValueError(f"unknown split {split!r}; generator {self.generator} has {', '.join(SPLITS)}")
        elif not Path(self.path.replace("{split}", split)).is_file():  # type: ignore[union-attr]
            raise ValueError(f"no {split!r} split: {self.path.replace('{split}', split)} does not exist")  # type: ignore[union-attr]
        return self.model_copy(update={"split": split, "prompts": [], "limit": None})

    def examples(self) -> list[dict[str, Any]]:
        out = list(self.prompts)
        if self.generator:
            from cave.training.datasets import generate

            out.extend(generate(self.generator, self.split, self.n, self.seed))
        if self.path:
            path = self.path.replace("{split}", self.split)
            lines = Path(path).read_text(encoding="utf-8").splitlines()
            for n, line in enumerate(lines, 1):
                if line.strip():
                    try:
                        out.append(json.loads(line))
                    except json.JSONDecodeError as e:
                        raise ConfigError([f"{path}:{n}: data: not valid JSON ({e.msg}); one object a line"]) from None
        return out[: self.limit] if self.limit else out


class TrainConfig(ConfigModel):
    model_config = ConfigDict(extra="forbid")

    team: TeamSpec = Field(description="the team to train: an inline TeamSpec or a team file path")
    models: dict[str, ModelConfig] = Field(default_factory=lambda: {"base": ModelConfig()})
    agents: dict[str, AgentConfig] = Field(
        default_factory=dict, description="role -> policy settings (default: every role on model 'base')"
    )
    data: DataConfig
    reward: str = Field("math_sympy", description="a registered reward (cave.training.rewards)")
    estimator: str = Field("drmas", description="grpo | drmas | pooled_calls | at_grpo (cave.training.advantages)")
    norm_by_std: bool = True
    group_size: int = Field(2, ge=1, description="N team runs per prompt (the GRPO group)")
    batch_size: int = Field(2, ge=1, description="prompts per training step")
    steps: int = Field(1, ge=1, description="training steps in total (a resumed run continues up to this)")
    seed: int = 0
    temperature: float = Field(1.0, gt=0, le=2.0, description="rollout sampling temperature (overrides the team's)")
    max_tokens: int | None = Field(None, ge=16, description="most tokens per reply (overrides the team's)")
    format_penalty: float = Field(0.1, ge=0, description="subtracted from a call's score when its format is invalid")
    loss: LossSettings = Field(default_factory=LossSettings)
    output_dir: str = Field("runs/train", description="run folder (relative to the config file)")
    sft: SftSettings | None = Field(None, description="the warm start (`cave train sft`): teacher runs, imitated")
    init_from: str | None = Field(
        None, description="a run folder (e.g. the sft output_dir) whose latest weights the models start from"
    )
    checkpoint_every: int = Field(1, ge=1, description="write a checkpoint every K steps (and at the last step)")
    keep_checkpoints: int | None = Field(
        None, ge=1, description="keep only the newest K checkpoints, deleting older ones as new ones land (None: all)"
    )
    max_grad_norm_stop: float = Field(1e4, gt=0, description="a gradient norm above this stops the run")
    skip_nonfinite_steps: int = Field(
        1,
        ge=0,
        description="steps in a row that a non-finite loss or gradient may skip (weights unchanged, logged) before "
        "the run stops (0: the first one stops it)",
    )
    per_role_grad_norm: bool = Field(True, description="measure each role's own gradient norm on a shared model")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    threads: int | None = Field(None, ge=1, description="torch CPU threads (default: torch's choice)")
    batch_rollouts: bool = Field(
        True, description="sample concurrent team runs' calls together (one batched forward); False: one by one"
    )
    max_episodes: int | None = Field(None, ge=1, description="team runs at once during rollout (None: all)")
    ray: RaySettings | None = Field(None, description="run rollouts and updates in Ray actors (None: this process)")
    tracking: list[str] = Field(
        default_factory=list, description="trackers besides metrics.jsonl (tensorboard: RUN_DIR/tensorboard)"
    )
    wandb_project: str = Field("cave", description="the wandb project")
    wandb_mode: Literal["offline", "online"] = Field("offline", description="wandb stays offline unless told")
    save_final: bool = Field(True, description="save each trained model with save_pretrained into RUN_DIR/final/")
    eval_every: int | None = Field(
        None, ge=1, description="evaluate on eval_split every N steps (and before step 1, and at the last step)"
    )
    eval_at_start: bool = Field(
        True, description="the periodic eval also runs before step 1 (false: runs from one warm start share its eval)"
    )
    eval_split: str = Field("test", description="the held-out split of the periodic eval")
    eval_k: int = Field(4, ge=1, description="sampled team runs per eval problem (avg@k, pass@k)")
    eval_limit: int | None = Field(50, ge=1, description="eval problems (the split's first N; None: all)")
    eval_greedy: bool = Field(True, description="also one greedy (temperature 0) run per eval problem")

    _ray_installed = installed("ray", "pip install 'cave[ray]' (ray[default]==2.60.0)")

    @field_validator("tracking")
    @classmethod
    def _trackers_installed(cls, v: list[str]) -> list[str]:
        from cave.training.tracking import TRACKERS

        for name in v:
            TRACKERS.check(name)
            if name in _TRACKER_PACKAGES:
                need(name, f"{_TRACKER_PACKAGES[name]} (or the `track` extra), or remove it from tracking")
        return v

    @field_validator("reward")
    @classmethod
    def _known_reward(cls, v: str) -> str:
        from cave.training.rewards import REWARDS

        return REWARDS.check(v)

    @field_validator("estimator")
    @classmethod
    def _known_estimator(cls, v: str) -> str:
        from cave.training.advantages import ESTIMATORS

        return ESTIMATORS.check(v)

    @model_validator(mode="after")
    def _consistent(self) -> TrainConfig:
        roles = self.team.role_names
        for role in self.agents:
            if role not in roles:
                raise ValueError(f"agents.{role}: no such role in the team (roles: {', '.join(roles)}); rename it")
        for role in roles:
            self.agents.setdefault(role, AgentConfig(model=next(iter(self.models), "base")))
        by_model: dict[str, tuple[str, AgentConfig]] = {}
        for role, agent in self.agents.items():
            if agent.model not in self.models:
                raise ValueError(
                    f"agents.{role}.model: {agent.model!r} is not a key of `models` ({', '.join(self.models)}); "
                    "add it under models: or name an existing one"
                )
            if agent.model in by_model and by_model[agent.model][1].optimizer_key() != agent.optimizer_key():
                other = by_model[agent.model][0]
                raise ValueError(
                    f"agents.{role}: shares model {agent.model!r} with {other} but has different optimizer settings; "
                    "a shared model has one optimizer: give both the same lr/steps_per_iteration/grad_clip, or "
                    "give them separate models"
                )
            by_model.setdefault(agent.model, (role, agent))
        if not self.data.path and not self.data.prompts and not self.data.generator:
            raise ValueError(
                "data: no examples; give data.generator (math_word or package.module:function), data.path (a JSONL file) or data.prompts (a list)"
            )
        if self.eval_every and not self.data.has_splits:
            raise ValueError(
                "eval_every: the periodic eval needs held-out data: data.generator (math_word) or a {split} "
                "placeholder in data.path; or remove eval_every"
            )
        if self.eval_every:
            try:
                self.data.for_split(self.eval_split)
            except ValueError as e:
                raise ValueError(f"eval_split: {e}") from None
        return self


def need(module: str, install: str) -> None:
    """A clear error before any model loads when an optional package a setting needs is missing."""
    if importlib.util.find_spec(module) is None:
        raise ValueError(f"{module} is not installed; {install}")


def parse_config(data: Any, *, base_dir: str | Path = ".", file: str = "<config>") -> TrainConfig:
    """Validate a config mapping; paths in it are relative to ``base_dir``."""
    return _validate(ConfigFile(file, data), base_dir)


def _validate(cfg: ConfigFile, base_dir: str | Path) -> TrainConfig:
    if not isinstance(cfg.data, dict):
        raise ConfigError(
            [f"{cfg.name}:1: a train config must be a mapping with team:, data:, ... (got {type(cfg.data).__name__})"]
        )
    try:
        return TrainConfig.model_validate(cfg.data, context={"base_dir": str(Path(base_dir).resolve())})
    except ValidationError as e:
        raise ConfigError([config_files.explain(err, cfg, TrainConfig, nested=_NESTED) for err in e.errors()]) from None
    except TeamError as e:
        raise ConfigError([f"{cfg.where('team')}: team: {p}" for p in e.problems]) from None


def load_config(path: str | Path, **overrides: Any) -> TrainConfig:
    """Read and validate a YAML train config; ``overrides`` replace fields (e.g. ``steps=3``; a dotted name reaches
    into a mapping, ``**{"team.pattern.max_rounds": 2}``; None sets a field to null, e.g. ``init_from=None``)."""
    path = Path(path)
    file = config_files.read_config(path, what="train config", example="see training/configs/", error=ConfigError)
    if isinstance(file.data, dict):
        for name, value in overrides.items():
            try:
                set_field(file.data, name, value)
            except ValueError as e:
                raise ConfigError([f"{file.name}: {e}"]) from None
    cfg = _validate(file, path.resolve().parent)
    here = path.resolve().parent
    if not Path(cfg.output_dir).is_absolute():
        cfg.output_dir = str(here / cfg.output_dir)
    if cfg.sft is not None and not Path(cfg.sft.output_dir).is_absolute():
        cfg.sft.output_dir = str(here / cfg.sft.output_dir)
    if cfg.init_from and not Path(cfg.init_from).is_absolute():
        cfg.init_from = str(here / cfg.init_from)
    return cfg


def set_field(data: dict[str, Any], name: str, value: Any) -> None:
    """Set ``name`` in a config mapping; a dotted name walks into nested mappings (creating missing ones).

    >>> d = {"team": {"pattern": {"name": "loop", "max_rounds": 1}}, "steps": 8}
    >>> set_field(d, "team.pattern.max_rounds", 2); set_field(d, "steps", 3); d
    {'team': {'pattern': {'name': 'loop', 'max_rounds': 2}}, 'steps': 3}
    >>> set_field({"team": "team.yaml"}, "team.pattern.max_rounds", 2)
    Traceback (most recent call last):
    ValueError: cannot set team.pattern.max_rounds: team is 'team.yaml', not a mapping; write the field out in the config
    """
    *parents, last = name.split(".")
    node = data
    for i, key in enumerate(parents):
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            where = ".".join(parents[: i + 1])
            raise ValueError(
                f"cannot set {name}: {where} is {child!r}, not a mapping; write the field out in the config"
            )
        node = child
    node[last] = value


# field name -> the model of its entries, for the known fields listed with an unknown-field error
_NESTED: dict[str, type[ConfigModel]] = {
    "models": ModelConfig,
    "deepspeed": DeepSpeedSettings,
    "rollout": RolloutSettings,
    "agents": AgentConfig,
    "data": DataConfig,
    "loss": LossSettings,
    "ray": RaySettings,
    "sft": SftSettings,
}
