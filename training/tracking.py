"""Experiment trackers besides metrics.jsonl: TensorBoard event files and Weights & Biases (offline by default).

    trackers = Trackers(cfg, run_dir)     # cfg.tracking: [] | [tensorboard] | [wandb] | both
    trackers.log(metrics_row)             # every numeric field, at metrics_row["step"]
    trackers.close()

Each tracker is imported only when the config names it (the ``track`` extra); the config check already
told the user what to install. wandb stays offline (files under RUN_DIR/wandb) unless ``wandb_mode: online``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cave.registry import Registry

__all__ = ["TRACKERS", "TensorBoard", "Trackers", "WandB", "scalars"]

TRACKERS: Registry[Callable[[Any, Path], Any]] = Registry("tracker")
register_tracker = TRACKERS.register  # @register_tracker("name") on a factory (cfg, run_dir) -> tracker


def scalars(row: Mapping[str, Any]) -> dict[str, float]:
    """The finite numeric fields of a metrics row (not the step or the wall-clock time).

    >>> scalars({"step": 3, "time": 1.0, "loss": 0.5, "note": "x", "ok": True, "kl": float("nan")})
    {'loss': 0.5}
    """
    out = {}
    for k, v in row.items():
        if k in ("step", "time") or isinstance(v, bool) or not isinstance(v, int | float):
            continue
        if math.isfinite(v):
            out[k] = float(v)
    return out


class Trackers:
    def __init__(self, cfg: Any, run_dir: Path) -> None:
        self.active = [TRACKERS.get(name)(cfg, Path(run_dir)) for name in cfg.tracking]

    def log(self, row: Mapping[str, Any]) -> None:
        values = scalars(row)
        for t in self.active:
            t.log(values, int(row["step"]))

    def close(self) -> None:
        for t in self.active:
            t.close()


@register_tracker("tensorboard")
class TensorBoard:
    def __init__(self, cfg: Any, run_dir: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"))

    def log(self, values: Mapping[str, float], step: int) -> None:
        for k, v in values.items():
            self.writer.add_scalar(k, v, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


@register_tracker("wandb")
class WandB:
    def __init__(self, cfg: Any, run_dir: Path) -> None:
        import wandb

        self.run = wandb.init(
            project=cfg.wandb_project,
            dir=str(run_dir),
            mode=cfg.wandb_mode,
            config=cfg.model_dump(mode="json"),
            name=run_dir.name,
            id=_run_id(run_dir),
            resume="allow",
        )

    def log(self, values: Mapping[str, float], step: int) -> None:
        self.run.log(dict(values), step=step)

    def close(self) -> None:
        self.run.finish()


def _run_id(run_dir: Path) -> str:
    """One wandb run id per run folder, kept in the folder, so ``--resume`` continues the same wandb run."""
    path = run_dir / "wandb_run_id"
    if not path.is_file():
        import uuid

        path.write_text(uuid.uuid4().hex[:12])
    return path.read_text().strip()
