"""The Dr. MAS training loop: rollout -> rewards -> advantages -> update per agent -> metrics -> checkpoint.

    cfg = load_config("training/configs/math_smollm2.yaml")
    run_dir = Trainer(cfg).train()          # metrics.jsonl, plots/*.png, checkpoints/ in cfg.output_dir
    Trainer(cfg, resume=run_dir).train()    # continues after the last checkpoint, up to cfg.steps

Rollouts are ordinary cave team runs (training.rollout) on the live policy weights; each agent call
is one sample; advantages come from the configured estimator (training.advantages); each distinct
model takes its fixed number of optimizer steps (training.policy). A non-finite loss or gradient, or
a gradient norm above ``max_grad_norm_stop``, stops the run with a message; the last checkpoint
written is the last good one.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from training.config import TrainConfig

METRICS = "metrics.jsonl"
CHECKPOINTS = "checkpoints"


class TrainingStopped(RuntimeError):
    """The run stopped on a bad step (NaN loss, exploding gradients); the last good checkpoint is kept."""


class Trainer:
    def __init__(self, cfg: TrainConfig, *, resume: str | Path | None = None, quiet: bool = False) -> None:
        self.cfg = cfg
        self.run_dir = Path(resume or cfg.output_dir).resolve()
        self.resume = resume is not None
        self.quiet = quiet
        self.examples = cfg.data.examples()
        if not self.examples:
            raise ValueError("data: the data file has no examples; add at least one")
        if self.resume and not latest_checkpoint(self.run_dir):
            raise FileNotFoundError(f"--resume {self.run_dir}: no checkpoint there (expected {CHECKPOINTS}/latest)")

    # -- setup -----------------------------------------------------------------------------------
    def setup(self) -> None:
        import torch

        from cave.llm.hf import TransformersLLM
        from training.loss import LossConfig
        from training.policy import AgentPolicies, OptimizerConfig
        from training.rewards import get_reward
        from training.rollout import BatchedPolicyLLM, policy_team

        cfg = self.cfg
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)
        device = resolve_device(cfg.device)
        self.models = {name: load_model(m.source, m.dtype, m.train_layers, device) for name, m in cfg.models.items()}
        role_models = {role: a.model for role, a in cfg.agents.items()}
        optim = {
            role: OptimizerConfig(
                lr=a.lr,
                steps_per_iteration=a.steps_per_iteration,
                grad_clip=a.grad_clip,
                weight_decay=a.weight_decay,
                micro_batch_size=a.micro_batch_size,
            )
            for role, a in cfg.agents.items()
        }
        first_tok = next(iter(self.models.values()))[1]
        self.policies = AgentPolicies(
            {role: self.models[name][0] for role, name in role_models.items()},
            optim,
            loss=LossConfig(**cfg.loss.model_dump()),
            pad_token_id=first_tok.pad_token_id or 0,
            per_role_grad_norm=cfg.per_role_grad_norm,
            # logprobs sampled at another temperature are not the trained policy's: recompute them
            recompute_old_logprobs=cfg.temperature != 1.0,
            seed=cfg.seed,
        )
        backend = BatchedPolicyLLM if cfg.batch_rollouts else partial(TransformersLLM, seed=cfg.seed)
        backends = {name: backend(model, tok) for name, (model, tok) in self.models.items()}
        self.backends = backends
        self.team = policy_team(cfg.team, role_models, backends, temperature=cfg.temperature, max_tokens=cfg.max_tokens)
        self.reward_fn = get_reward(cfg.reward)
        self.start_step = 0
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.resume:
            self.start_step = load_checkpoint(self.run_dir, self.policies)
            trim_metrics(self.run_dir / METRICS, self.start_step)
        (self.run_dir / "config.json").write_text(cfg.model_dump_json(indent=2))

    # -- the loop --------------------------------------------------------------------------------
    def train(self) -> Path:
        self.setup()
        cfg = self.cfg
        with progress(self.quiet) as bar:
            task = bar.add_task("training", total=cfg.steps, completed=self.start_step)
            for step in range(self.start_step + 1, cfg.steps + 1):
                metrics = self.step(step)
                append_jsonl(self.run_dir / METRICS, metrics)
                if step % cfg.checkpoint_every == 0 or step == cfg.steps:
                    save_checkpoint(self.run_dir, step, self.policies)
                bar.update(task, advance=1, description=status_line(metrics))
        plot_run(self.run_dir)
        return self.run_dir

    def step(self, step: int) -> dict[str, Any]:
        from training.advantages import advantage_stats, compute_advantages
        from training.rollout import arollout, pick_examples, trainable_trajectories
        from training.samples import build_samples, sample_columns

        cfg = self.cfg
        t0 = time.perf_counter()
        roll = asyncio.run(
            arollout(
                self.team,
                pick_examples(self.examples, step, cfg.batch_size),
                group_size=cfg.group_size,
                step=step,
                seed=cfg.seed,
                question_field=cfg.data.question_field,
                max_episodes=cfg.max_episodes,
            )
        )
        self.last_rollout = roll  # for inspection (benchmarks, debugging)
        failed = self.score(roll.episodes)
        samples = build_samples(trainable_trajectories(roll), format_penalty=cfg.format_penalty)
        if not samples:
            raise TrainingStopped(
                f"step {step}: no trainable samples ({len(roll.episodes)} team runs, {len(failed)} rewards failed, "
                f"{roll.dropped_steps} calls without token ids); check the reward and the backends"
            )
        cols = sample_columns(samples)
        adv = compute_advantages(cfg.estimator, **cols, norm_by_std=cfg.norm_by_std)
        t1 = time.perf_counter()
        results = self.policies.update(samples, adv)
        t2 = time.perf_counter()
        self.check(step, results)
        metrics = step_metrics(step, roll, samples, adv, advantage_stats(adv, cols["agent_ids"]), results)
        metrics.update(
            rewards_failed=len(failed),
            reward_errors=failed[:3],
            rollout_s=roll.seconds,
            update_s=t2 - t1,
            step_s=t2 - t0,
        )
        trained = sum(s.n_tokens for s in samples)
        sizes = [n for b in self.backends.values() for n in getattr(b, "batches", [])]
        if sizes:  # calls per batched forward during this rollout
            metrics["rollout_batch_mean"] = float(np.mean(sizes))
            for b in self.backends.values():
                b.batches.clear()
        metrics["rollout_tokens_per_s"] = roll.generated_tokens / max(roll.seconds, 1e-9)
        metrics["update_tokens_per_s"] = trained / max(t2 - t1, 1e-9)
        metrics["tokens_per_s"] = roll.generated_tokens / max(t2 - t0, 1e-9)  # generated tokens per RL iteration s
        return metrics

    def score(self, episodes: Sequence[Any]) -> list[str]:
        """Set each episode's reward; a reward that raises marks the episode failed (returned, logged, dropped)."""
        failed = []
        for ep in episodes:
            try:
                ep.reward = float(self.reward_fn(ep.result, ep.example))
                if not math.isfinite(ep.reward):
                    raise ValueError(f"the reward is {ep.reward}")
            except Exception as e:
                ep.reward, ep.reward_error = None, f"{type(e).__name__}: {e}"
                failed.append(f"{ep.group_id} ({ep.trajectory.run_id}): {ep.reward_error}")
            ep.trajectory.reward = ep.reward
        return failed

    def check(self, step: int, results: Mapping[str, Any]) -> None:
        """Stop on a skipped (non-finite) step or exploding gradients; no checkpoint is written for this step."""
        problems = [str(e) for r in results.values() for e in r.errors if e.kind != "no_tokens"]
        for r in results.values():
            big = [g for g in r.grad_norms if math.isfinite(g) and g > self.cfg.max_grad_norm_stop]
            if big:
                problems.append(
                    f"{r.model}: gradient norm {max(big):.3g} > max_grad_norm_stop {self.cfg.max_grad_norm_stop:g} "
                    "(exploding gradients)"
                )
        if problems:
            last = latest_checkpoint(self.run_dir)
            keep = f"the last good checkpoint is {last}" if last else "no checkpoint was written yet"
            raise TrainingStopped(
                f"step {step} stopped: " + "; ".join(problems) + f". {keep}; resume from it with a lower lr "
                f"(`cave train CONFIG --resume {self.run_dir}`)."
            )


# -- models ----------------------------------------------------------------------------------------
def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device: cuda, but torch sees no CUDA device; use device: cpu or auto")
    return device


def load_model(source: str, dtype: str, train_layers: int | None, device: str) -> tuple[Any, Any]:
    """(model, tokenizer) from an embedded model name or an HF directory, with all but the last layers frozen."""
    from cave.llm import hf, models

    path: Any = source
    if models.resolve_name(source) and not Path(source).exists():
        from cave.llm.convert import hf_checkpoint

        path = hf_checkpoint(source)
    model, tok = hf.load(path, device=device, dtype=dtype)
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


# -- metrics -----------------------------------------------------------------------------------------
def step_metrics(
    step: int, roll: Any, samples: Sequence[Any], adv: Any, adv_stats: Mapping[str, Any], results: Mapping[str, Any]
) -> dict[str, Any]:
    """One JSON-able row: per-agent reward/advantage/grad-norm/length, per-model loss terms, episode outcomes."""
    m: dict[str, Any] = {"step": step, "time": time.time()}
    rewards = [ep.reward for ep in roll.episodes if ep.reward is not None]
    m["reward_mean"] = float(np.mean(rewards)) if rewards else float("nan")
    m["success_rate"] = float(np.mean([ep.result.status == "success" for ep in roll.episodes]))
    m["episodes"], m["samples"], m["dropped_steps"] = len(roll.episodes), len(samples), roll.dropped_steps
    m["generated_tokens"] = roll.generated_tokens
    for agent in dict.fromkeys(s.agent_id for s in samples):
        mine = [s for s in samples if s.agent_id == agent]
        scores = np.array([s.score for s in mine])
        m[f"reward/{agent}/mean"], m[f"reward/{agent}/std"] = float(scores.mean()), float(scores.std())
        m[f"format_ok/{agent}"] = float(np.mean([s.format_penalty == 0 for s in mine]))
        m[f"response_len/{agent}"] = float(np.mean([len(s.response_ids) for s in mine]))
        m[f"calls/{agent}"] = len(mine)
        for k, v in adv_stats[agent].items():
            if k != "count":
                m[f"adv/{agent}/{k}"] = v
    for r in results.values():
        for role, norms in r.role_grad_norms.items():
            finite = [g for g in norms if math.isfinite(g)]
            if finite:
                m[f"grad_norm/{role}"] = float(np.mean(finite))
                m[f"grad_norm_max/{role}"] = float(np.max(finite))
        for k in ("loss", "pg_loss", "clip_frac", "dual_clip_frac", "approx_kl", "kl", "entropy"):
            if k in r.metrics:
                m[f"{k}/{r.model}"] = r.metrics[k]
        m[f"optimizer_steps/{r.model}"] = r.steps
    for k in ("loss", "clip_frac", "approx_kl", "kl", "entropy"):
        vals = [r.metrics[k] for r in results.values() if k in r.metrics]
        if vals:
            m[k] = float(np.mean(vals))
    return m


def status_line(m: Mapping[str, Any]) -> str:
    return f"step {m['step']} reward {m['reward_mean']:.2f} loss {m.get('loss', float('nan')):.3f}"


def append_jsonl(path: Path, row: Mapping[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(row, default=str) + "\n")


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / METRICS
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no metrics; is {run_dir} a `cave train` run folder?")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def trim_metrics(path: Path, last_step: int) -> None:
    """Drop rows of steps after the checkpoint we resume from (they will be run again)."""
    if path.is_file():
        rows = [r for r in read_metrics(path.parent) if r["step"] <= last_step]
        path.write_text("".join(json.dumps(r, default=str) + "\n" for r in rows), encoding="utf-8")


# -- plots ---------------------------------------------------------------------------------------------
PLOT_GROUPS = {
    "reward": ("reward_mean", "reward/"),
    "grad_norm": ("grad_norm/", "grad_norm_max/"),
    "advantage": ("adv/",),
    "loss": ("loss", "loss/", "pg_loss/"),
    "clip_kl_entropy": ("clip_frac", "approx_kl", "kl", "entropy"),
    "response_len": ("response_len/",),
    "throughput": ("tokens_per_s", "rollout_tokens_per_s", "update_tokens_per_s"),
}


def plot_run(run_dir: str | Path) -> list[Path]:
    """PNG curves of a run's metrics.jsonl into RUN_DIR/plots/ (one figure per group); returns the files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(run_dir)
    out_dir = Path(run_dir) / "plots"
    out_dir.mkdir(exist_ok=True)
    keys = sorted({k for r in rows for k, v in r.items() if isinstance(v, int | float) and not isinstance(v, bool)})
    files = []
    for group, prefixes in PLOT_GROUPS.items():
        mine = [k for k in keys if any(k == p or (p.endswith("/") and k.startswith(p)) for p in prefixes)]
        if not mine:
            continue
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for k in mine:
            pts = [(r["step"], r[k]) for r in rows if isinstance(r.get(k), int | float)]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=k)
        ax.set_xlabel("step")
        ax.set_title(group)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = out_dir / f"{group}.png"
        fig.savefig(path, dpi=80)
        plt.close(fig)
        files.append(path)
    return files


# -- checkpoints ------------------------------------------------------------------------------------
def save_checkpoint(run_dir: Path, step: int, policies: Any) -> Path:
    """RUN_DIR/checkpoints/step_N.pt: trainable weights and optimizer state per model; ``latest`` names it."""
    import torch

    ckpt_dir = run_dir / CHECKPOINTS
    ckpt_dir.mkdir(exist_ok=True)
    state = {
        "step": step,
        "models": {
            s.name: {
                # frozen weights are the base model's: only what training changes is saved
                "trainable": {n: p.detach().cpu() for n, p in s.model.named_parameters() if p.requires_grad},
                "optimizer": s.optimizer.state_dict(),
                "roles": s.roles,
            }
            for s in policies.slots
        },
        "rng": policies._rng.bit_generator.state,
    }
    path = ckpt_dir / f"step_{step:06d}.pt"
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    (ckpt_dir / "latest.tmp").write_text(path.name)
    os.replace(ckpt_dir / "latest.tmp", ckpt_dir / "latest")
    return path


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    marker = Path(run_dir) / CHECKPOINTS / "latest"
    if not marker.is_file():
        return None
    path = marker.parent / marker.read_text().strip()
    return path if path.is_file() else None


def load_checkpoint(run_dir: Path, policies: Any) -> int:
    """Load the latest checkpoint into ``policies``; returns its step."""
    import torch

    path = latest_checkpoint(run_dir)
    if path is None:
        raise FileNotFoundError(f"{run_dir}: no checkpoint to resume from")
    state = torch.load(path, map_location="cpu", weights_only=False)
    for s in policies.slots:
        if s.name not in state["models"]:
            raise KeyError(f"{path}: no model {s.name!r} (it has {list(state['models'])}); were the agents changed?")
        saved = state["models"][s.name]
        result = s.model.load_state_dict(saved["trainable"], strict=False)
        if result.unexpected_keys:
            raise KeyError(f"{path}: weights {result.unexpected_keys[:3]} do not fit model {s.name!r}")
        s.optimizer.load_state_dict(saved["optimizer"])
    policies._rng.bit_generator.state = state["rng"]
    return int(state["step"])


# -- progress ----------------------------------------------------------------------------------------
class _Quiet:
    def __enter__(self) -> _Quiet:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def add_task(self, *args: Any, **kwargs: Any) -> int:
        return 0

    def update(self, *args: Any, **kwargs: Any) -> None:
        pass


def progress(quiet: bool) -> Any:
    if quiet:
        return _Quiet()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
