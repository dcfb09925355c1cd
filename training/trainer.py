"""The Dr. MAS training loop: rollout -> rewards -> advantages -> update per agent -> metrics -> checkpoint.

    cfg = load_config("training/configs/math_smollm2.yaml")
    run_dir = Trainer(cfg).train()          # metrics.jsonl, plots/*.png, checkpoints/, final/ in cfg.output_dir
    Trainer(cfg, resume=run_dir).train()    # continues after the last checkpoint, up to cfg.steps

Rollouts are ordinary cave team runs (cave.training.rollout) on engines serving the live policy weights;
each agent call is one sample; advantages come from the configured estimator (cave.training.advantages);
each distinct model takes its fixed number of optimizer steps (cave.training.policy), then the rollout
engines receive the new weights. Where that work runs (this process, or Ray actors with DeepSpeed
updates and vLLM engines) is the workers' business (cave.training.workers): the loop is the same. A
non-finite loss or gradient, or a gradient norm above ``max_grad_norm_stop``, stops the run with a
message; the last checkpoint written is the last good one.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from cave.training.checkpoints import (  # noqa: F401  (re-exported: the trainer's callers resume and prune)
    CHECKPOINTS,
    init_weights,
    latest_checkpoint,
    load_checkpoint,
    prune_checkpoints,
    save_checkpoint,
    stale_checkpoints,
)
from cave.training.config import TrainConfig
from cave.training.diagnostics import GradHistory, agent_diagnostics
from cave.training.evaluate import EVAL, plot_eval, score_episodes
from cave.training.workers import load_model, resolve_device  # noqa: F401  (re-exported: benchmarks, notebooks)

__all__ = [
    "CHECKPOINTS",
    "EVAL",
    "FINAL",
    "METRICS",
    "PLOT_GROUPS",
    "Trainer",
    "TrainingStopped",
    "append_jsonl",
    "export_checkpoint",
    "inspect_rewards",
    "latest_checkpoint",
    "load_checkpoint",
    "plot_run",
    "progress",
    "read_metrics",
    "prune_checkpoints",
    "save_checkpoint",
    "scored_batch",
    "stale_checkpoints",
    "status_line",
    "step_metrics",
    "trim_metrics",
]

log = logging.getLogger(__name__)

METRICS = "metrics.jsonl"
NONFINITE = ("nonfinite_loss", "nonfinite_grad")  # StepError kinds of an optimizer step skipped for NaN/inf
FINAL = "final"  # save_pretrained folders of the trained models, one per model name


class TrainingStopped(RuntimeError):
    """The run stopped on a bad step (NaN loss, exploding gradients); the last good checkpoint is kept."""


class Trainer:
    def __init__(self, cfg: TrainConfig, *, resume: str | Path | None = None, quiet: bool = False) -> None:
        self.cfg = cfg
        self.run_dir = Path(resume or cfg.output_dir).resolve()
        self.resume = resume is not None
        self.quiet = quiet
        self.skipped_in_row = 0  # steps skipped for a non-finite loss or gradient, in a row (see check)
        self.examples = cfg.data.examples()
        if not self.examples:
            raise ValueError("data: the data file has no examples; add at least one")
        if self.resume and not latest_checkpoint(self.run_dir):
            raise FileNotFoundError(f"--resume {self.run_dir}: no checkpoint there (expected {CHECKPOINTS}/latest)")

    # -- setup -----------------------------------------------------------------------------------
    def setup(self) -> None:
        from cave.training.rewards import get_reward
        from cave.training.tracking import Trackers

        cfg = self.cfg
        self.reward_fn = get_reward(cfg.reward)
        self.workers = make_workers(cfg)
        self.start_step = 0
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.grad_history = GradHistory({role: a.grad_clip for role, a in cfg.agents.items()})
        if cfg.init_from and not self.resume:  # e.g. a `cave train sft` run: its weights, a fresh optimizer
            init_weights(Path(cfg.init_from), self.workers)
        if self.resume:
            self.start_step = load_checkpoint(self.run_dir, self.workers)
            trim_metrics(self.run_dir / METRICS, self.start_step)
            trim_metrics(self.run_dir / EVAL, self.start_step)
            for row in read_metrics(self.run_dir) if (self.run_dir / METRICS).is_file() else []:
                self.grad_history.add(_logged_norms(row))  # the run-so-far spike statistics go on where they were
        if cfg.eval_every:
            from cave.training.evaluate import eval_examples

            if not hasattr(self.workers, "engines"):
                raise ValueError("eval_every: the periodic eval runs with in-process workers only, not with ray:")
            self.eval_set = eval_examples(cfg, cfg.eval_split, cfg.eval_limit)
        (self.run_dir / "config.json").write_text(cfg.model_dump_json(indent=2, fallback=repr))
        self.trackers = Trackers(cfg, self.run_dir)

    @property
    def policies(self) -> Any:
        """The in-process AgentPolicies (local workers only)."""
        return self.workers.policies

    # -- the loop --------------------------------------------------------------------------------
    def train(self) -> Path:
        cfg = self.cfg
        try:  # a failed setup (a bad checkpoint) stops the engines and actors it already started, too
            self.setup()
            with progress(self.quiet) as bar:
                task = bar.add_task("training", total=cfg.steps, completed=self.start_step)
                if cfg.eval_every and cfg.eval_at_start and self.start_step == 0:
                    self.evaluate(0)  # the base model: where the held-out curve starts
                for step in range(self.start_step + 1, cfg.steps + 1):
                    metrics = self.step(step)
                    append_jsonl(self.run_dir / METRICS, metrics)
                    self.trackers.log(metrics)
                    if step % cfg.checkpoint_every == 0 or step == cfg.steps:
                        save_checkpoint(self.run_dir, step, self.workers)
                        prune_checkpoints(self.run_dir, cfg.keep_checkpoints)
                    if cfg.eval_every and (step % cfg.eval_every == 0 or step == cfg.steps):
                        self.evaluate(step)
                    bar.update(task, advance=1, description=status_line(metrics))
            if cfg.save_final:
                self.workers.export(self.run_dir / FINAL)
        finally:
            self.close()
        plot_run(self.run_dir)
        return self.run_dir

    def close(self) -> None:
        """Stop the workers (engines, Ray actors) and flush the trackers; safe to call twice."""
        for part in ("trackers", "workers"):
            obj = self.__dict__.pop(part, None)
            if obj is not None:
                obj.close()

    def step(self, step: int) -> dict[str, Any]:
        from cave.training.advantages import advantage_stats, compute_advantages
        from cave.training.samples import sample_columns

        cfg = self.cfg
        t0 = time.perf_counter()
        roll, samples, failed = scored_batch(cfg, self.workers, self.reward_fn, self.examples, step)
        self.last_rollout = roll  # for inspection (benchmarks, debugging)
        if not samples:
            raise TrainingStopped(
                f"step {step}: no trainable samples ({len(roll.episodes)} team runs, {len(failed)} rewards failed, "
                f"{roll.dropped_steps} calls without token ids: {roll.dropped_reasons or 'none'}); check the reward "
                "and the backends"
            )
        cols = sample_columns(samples)
        adv = compute_advantages(cfg.estimator, **cols, norm_by_std=cfg.norm_by_std)
        t1 = time.perf_counter()
        results = self.workers.update(samples, adv)
        t2 = time.perf_counter()
        skipped = self.check(step, results)
        self.workers.sync()  # after the check: a bad step never reaches the rollout engines
        t3 = time.perf_counter()
        metrics = step_metrics(step, roll, samples, adv, advantage_stats(adv, cols["agent_ids"]), results)
        # gradient-spike diagnostics (cave.training.diagnostics): this batch's E[A^2], predicted inflation and
        # agent-wise degenerate groups; the run-so-far tail and spikes of each role's pre-clip gradient norms
        metrics.update(agent_diagnostics(cols["scores"], cols["group_ids"], cols["agent_ids"], adv))
        norms = {role: n for r in results.values() for role, n in r.role_grad_norms.items()}
        metrics.update({f"grad_norms/{role}": list(n) for role, n in norms.items()})
        self.grad_history.add(norms)
        metrics.update(self.grad_history.metrics())
        if skipped:  # a non-finite step that did not stop the run (its weights are unchanged)
            metrics["skipped"] = skipped
        metrics.update(
            rewards_failed=len(failed),
            reward_errors=failed[:3],
            rollout_s=roll.seconds,
            update_s=t2 - t1,
            sync_s=t3 - t2,
            step_s=t3 - t0,
        )
        trained = sum(s.n_tokens for s in samples)
        sizes = roll.meta.get("batch_sizes")
        if sizes:  # rows per decode step during this rollout (the transformers engine's batch)
            metrics["rollout_batch_mean"] = float(np.mean(sizes))
        metrics["rollout_tokens_per_s"] = roll.generated_tokens / max(roll.seconds, 1e-9)
        metrics["update_tokens_per_s"] = trained / max(t2 - t1, 1e-9)
        metrics["tokens_per_s"] = roll.generated_tokens / max(t3 - t0, 1e-9)  # generated tokens per RL iteration s
        return metrics

    def evaluate(self, step: int) -> Any:
        """The held-out eval (``cave train eval``'s code) on the current weights: RUN_DIR/eval.jsonl, trackers."""
        from cave.training.evaluate import evaluate

        cfg = self.cfg
        report = evaluate(cfg, self.workers.engines, self.eval_set, k=cfg.eval_k, greedy=cfg.eval_greedy,
                          split=cfg.eval_split, checkpoint=f"step {step}", step=step)  # fmt: skip
        row = report.to_dict()
        append_jsonl(self.run_dir / EVAL, row)
        self.trackers.log({"step": step, **{f"eval/{k}": v for k, v in row.items() if k != "step"}})
        return report

    def check(self, step: int, results: Mapping[str, Any]) -> list[str]:
        """Stop on exploding gradients, or on steps skipped for a non-finite loss or gradient when more than
        ``skip_nonfinite_steps`` come in a row; no checkpoint is written for a step that stops the run.

        Returns the messages of a skipped step the run goes on after (its weights unchanged; [] when none): one
        non-finite micro-batch (a bf16 overflow, one odd batch) is not a diverging run, but a repeated one is.
        """
        nonfinite = [str(e) for r in results.values() for e in r.errors if e.kind in NONFINITE]
        problems = [str(e) for r in results.values() for e in r.errors if e.kind not in ("no_tokens", *NONFINITE)]
        self.skipped_in_row = self.skipped_in_row + 1 if nonfinite else 0
        if nonfinite and self.skipped_in_row > self.cfg.skip_nonfinite_steps:
            problems += nonfinite
            if self.skipped_in_row > 1:
                problems.append(f"{self.skipped_in_row} steps in a row were skipped")
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
        if nonfinite:
            log.warning("step %d skipped (weights unchanged), the run goes on: %s", step, "; ".join(nonfinite))
        return nonfinite


# -- workers -----------------------------------------------------------------------------------------
def make_workers(cfg: TrainConfig) -> Any:
    """The workers a config asks for: Ray actors when ``cfg.ray`` is set, else this process. Here, above both, so
    that neither ``workers`` nor ``ray_workers`` imports the other back."""
    if cfg.ray is not None:
        from cave.training.ray_workers import RayWorkers

        return RayWorkers(cfg)
    from cave.training.workers import LocalWorkers

    return LocalWorkers(cfg)


def scored_batch(
    cfg: TrainConfig, workers: Any, reward_fn: Any, examples: Sequence[Any], step: int
) -> tuple[Any, list[Any], list[str]]:
    """Step ``step``'s rollout, scored, and its samples: (rollout, samples, reward errors). With role-specific
    rewards (``cave.training.rewards.RoleRewards``) each role's calls are scored with its own reward."""
    from cave.training.rewards import by_role
    from cave.training.rollout import pick_examples, trainable_trajectories
    from cave.training.samples import build_samples

    roll = workers.rollout(pick_examples(examples, step, cfg.batch_size), step)
    failed = score_episodes(roll.episodes, reward_fn)
    samples = build_samples(by_role(trainable_trajectories(roll)), format_penalty=cfg.format_penalty)
    return roll, samples, failed


def inspect_rewards(cfg: TrainConfig, batches: int = 1) -> dict[str, Any]:
    """Before training: the first ``batches`` rollout batches of a run (from ``init_from``'s weights when set,
    the steps' own seeds), each role's reward distribution and predicted inflation factor, and the E[A^2] each
    registered estimator would give it (``cave.training.rewards.reward_distribution``). Writes nothing."""
    from cave.training.rewards import get_reward, reward_distribution
    from cave.training.samples import sample_columns

    examples = cfg.data.examples()
    if not examples:
        raise ValueError("data: the data file has no examples; add at least one")
    reward_fn = get_reward(cfg.reward)
    workers = make_workers(cfg)
    try:
        if cfg.init_from:
            init_weights(Path(cfg.init_from), workers)
        samples, episodes, failed = [], 0, []
        for step in range(1, batches + 1):
            roll, part, errors = scored_batch(cfg, workers, reward_fn, examples, step)
            samples += part
            episodes += len(roll.episodes)
            failed += errors
    finally:
        workers.close()
    if not samples:
        raise ValueError(f"no trainable samples in {episodes} team runs ({len(failed)} rewards failed: {failed[:2]})")
    report = reward_distribution(**sample_columns(samples), rewards=[s.reward for s in samples],
                                 norm_by_std=cfg.norm_by_std)  # fmt: skip
    return {"reward": cfg.reward, "estimator": cfg.estimator, "episodes": episodes, "samples": len(samples),
            "rewards_failed": len(failed), "init_from": cfg.init_from, **report}  # fmt: skip


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
    reasons = getattr(roll, "dropped_reasons", None)
    if reasons:  # why calls were not trained on, counted per reason
        m["dropped_reasons"] = dict(reasons)
    m["continued_calls"] = sum(1 for s in samples if 0 in (s.response_mask or ()))
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


def _logged_norms(row: Mapping[str, Any]) -> dict[str, list[float]]:
    """A metrics row's per-role pre-clip gradient norms (``grad_norms/{role}``: one per optimizer step)."""
    return {k.split("/", 1)[1]: v for k, v in row.items() if k.startswith("grad_norms/") and isinstance(v, list)}


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
    """Drop rows of steps after the checkpoint we resume from (they will be run again): metrics.jsonl, eval.jsonl."""
    if path.is_file():
        lines = path.read_text(encoding="utf-8").splitlines()
        rows = [r for r in map(json.loads, filter(str.strip, lines)) if r["step"] <= last_step]
        path.write_text("".join(json.dumps(r, default=str) + "\n" for r in rows), encoding="utf-8")


# -- plots ---------------------------------------------------------------------------------------------
PLOT_YLABELS = {
    "reward": "reward (mean over samples)",
    "grad_norm": "gradient norm (pre-clip)",
    "advantage": "advantage",
    "loss": "loss",
    "clip_kl_entropy": "fraction / nats",
    "response_len": "tokens per response",
    "throughput": "tokens / s",
    "grad_tail": "pre-clip grad norm, run so far",
    "grad_spikes": "max / median; steps > 5x trailing-20 median",
    "grad_clip": "fraction of optimizer steps",
    "inflation": "E[A^2]; predicted factor",
    "agent_groups": "share of the agent's calls",
}
_STYLES = ("-", "--", ":", "-.")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")

PLOT_GROUPS = {
    "reward": ("reward_mean", "reward/"),
    "grad_norm": ("grad_norm/", "grad_norm_max/"),
    "advantage": ("adv/",),
    "loss": ("loss", "loss/", "pg_loss/"),
    "clip_kl_entropy": ("clip_frac", "approx_kl", "kl", "entropy"),
    "response_len": ("response_len/",),
    "throughput": ("tokens_per_s", "rollout_tokens_per_s", "update_tokens_per_s"),
    # cave.training.diagnostics: the absolute tail and the relative spikes of each role's pre-clip norms (both:
    # agent-wise normalization can lower the first and raise the second), Dr. MAS's predicted inflation factor
    # beside the realized E[A^2], and the calls in (prompt, agent) groups of one call or of all-equal scores
    "grad_tail": ("gradspike/median/", "gradspike/p95/", "gradspike/p99/", "gradspike/max/"),
    "grad_spikes": ("gradspike/max_over_median/", "gradspike/spikes_5x_trailing/"),
    "grad_clip": ("gradspike/over_clip_frac/", "gradspike/zero_signal_frac/"),
    "inflation": ("inflation/", "adv_sq/"),
    "agent_groups": ("agent_group_singleton/", "agent_group_all_equal/"),
}


def plot_run(run_dir: str | Path) -> list[Path]:
    """PNG curves of a run's metrics.jsonl into RUN_DIR/plots/ (one figure per group); returns the files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    rows = read_metrics(run_dir)
    out_dir = Path(run_dir) / "plots"
    out_dir.mkdir(exist_ok=True)
    keys = sorted({k for r in rows for k, v in r.items() if isinstance(v, int | float) and not isinstance(v, bool)})
    files = []
    for group, prefixes in PLOT_GROUPS.items():
        mine = [k for k in keys if any(k == p or (p.endswith("/") and k.startswith(p)) for p in prefixes)]
        if not mine:
            continue
        fig, ax = plt.subplots(figsize=(7.5, 3.8))
        for i, k in enumerate(mine):
            pts = [(r["step"], r[k]) for r in rows if isinstance(r.get(k), int | float)]
            # series that coincide (several agents with the same reward) stay visible: own dash, marker, and a
            # slight transparency, so overlapping lines show as overlapping rather than as one
            ax.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                linestyle=_STYLES[i % len(_STYLES)],
                marker=_MARKERS[i % len(_MARKERS)],
                markersize=4 + 1.5 * (len(mine) - 1 - i),
                alpha=0.8,
                label=k,
            )
        ax.set_xlabel("step")
        ax.set_ylabel(PLOT_YLABELS.get(group, group))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers: no 1.25 ticks
        ax.set_title(group)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)  # beside, never over
        fig.tight_layout()
        path = out_dir / f"{group}.png"
        fig.savefig(path, dpi=80)
        plt.close(fig)
        files.append(path)
    heldout = plot_eval(run_dir, rows)  # held-out avg@k / pass@k beside the training reward (eval_every)
    return files + ([heldout] if heldout else [])


def export_checkpoint(run_dir: str | Path, out_dir: str | Path | None = None) -> dict[str, Path]:
    """save_pretrained folders of a run's models at its latest checkpoint (default: RUN_DIR/final/NAME)."""
    import torch
    from cave.training.config import TrainConfig
    from cave.training.workers import export_trained

    run_dir = Path(run_dir)
    path = latest_checkpoint(run_dir)
    if path is None:
        raise FileNotFoundError(f"{run_dir}: no checkpoint (expected {CHECKPOINTS}/latest); is it a run folder?")
    cfg = TrainConfig.model_validate_json((run_dir / "config.json").read_text())
    state = torch.load(path, map_location="cpu", weights_only=False)
    out = {}
    for slot in state["models"].values():
        name = cfg.agents[slot["roles"][0]].model
        try:
            out[name] = export_trained(cfg, name, slot["trainable"], Path(out_dir or run_dir / FINAL) / name)
        except KeyError as e:
            raise KeyError(f"{path}: {e.args[0]}") from None
    return out


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
