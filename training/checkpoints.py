"""A training run's checkpoints: RUN_DIR/checkpoints/step_N.pt (trainable weights, optimizer states, the sampling
rng) and ``latest`` naming the newest; saved, pruned, resumed from, or used as another run's starting weights
(``init_from``) and by held-out evals."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "CHECKPOINTS",
    "init_weights",
    "latest_checkpoint",
    "load_checkpoint",
    "prune_checkpoints",
    "save_checkpoint",
    "stale_checkpoints",
    "weights_digest",
]

CHECKPOINTS = "checkpoints"


def save_checkpoint(run_dir: Path, step: int, workers: Any) -> Path:
    """RUN_DIR/checkpoints/step_N.pt: trainable weights and optimizer state per model; ``latest`` names it.

    Frozen weights are the base model's, so only what training changes is saved.
    """
    import torch

    ckpt_dir = run_dir / CHECKPOINTS
    ckpt_dir.mkdir(exist_ok=True)
    state = {"step": step, **workers.checkpoint_state()}
    path = ckpt_dir / f"step_{step:06d}.pt"
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    (ckpt_dir / "latest.tmp").write_text(path.name)
    os.replace(ckpt_dir / "latest.tmp", ckpt_dir / "latest")
    return path


def stale_checkpoints(names: list[str], keep: int | None) -> list[str]:
    """The checkpoint files to delete so that only the newest ``keep`` stay (None: keep all).

    >>> stale_checkpoints(["step_000003.pt", "step_000001.pt", "step_000010.pt", "latest"], 2)
    ['step_000001.pt']
    >>> stale_checkpoints(["step_000001.pt"], None)
    []
    """
    steps = sorted(n for n in names if re.fullmatch(r"step_\d+\.pt", n))  # zero-padded: name order is step order
    return [] if keep is None else steps[: max(len(steps) - keep, 0)]


def prune_checkpoints(run_dir: Path, keep: int | None) -> list[Path]:
    """Delete all but the newest ``keep`` checkpoints of ``run_dir`` (after the newest one is written and named
    ``latest``, so a crash here never leaves a run without a checkpoint to resume from)."""
    ckpt_dir = run_dir / CHECKPOINTS
    stale = [ckpt_dir / n for n in stale_checkpoints([p.name for p in ckpt_dir.iterdir()], keep)]
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    marker = Path(run_dir) / CHECKPOINTS / "latest"
    if not marker.is_file():
        return None
    path = marker.parent / marker.read_text().strip()
    return path if path.is_file() else None


def weights_digest(run_dir: str | Path) -> str | None:
    """A short sha256 of the trainable weights in ``run_dir``'s latest checkpoint (per model, by parameter name;
    optimizer state and rng left out), None without a checkpoint. Two runs started from weights with the same
    digest started from the same point, wherever and whenever each checkpoint was written."""
    import hashlib

    import torch

    path = latest_checkpoint(run_dir)
    if path is None:
        return None
    state = torch.load(path, map_location="cpu", weights_only=False)
    h = hashlib.sha256()
    for model, saved in sorted(state["models"].items()):
        for name, tensor in sorted(saved["trainable"].items()):
            t = tensor.detach().contiguous().reshape(-1)
            h.update(f"{model}/{name}:{t.dtype}:{tuple(tensor.shape)}".encode())
            h.update(t.view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def load_checkpoint(run_dir: Path, workers: Any) -> int:
    """Load the latest checkpoint into ``workers`` (weights, optimizer states, sampling rng); returns its step."""
    state = _load_latest(run_dir, workers.load_checkpoint_state, f"{run_dir}: no checkpoint to resume from")
    return int(state["step"])


def init_weights(run_dir: Path, workers: Any) -> int:
    """Start the models from the trainable weights of ``run_dir``'s latest checkpoint (its optimizer state, step
    and rng are not taken: this run starts at step 1); returns the checkpoint's step."""
    if not hasattr(workers, "policies"):
        raise ValueError("init_from: works with in-process workers only, not with ray:")
    missing = (
        f"init_from: {run_dir}: no checkpoint there (expected {CHECKPOINTS}/latest); run `cave train sft CONFIG` "
        "first, or fix the path"
    )
    state = _load_latest(run_dir, workers.policies.load_weights, missing)
    workers.sync()
    return int(state["step"])


def _load_latest(run_dir: Path, load: Callable[[dict[str, Any]], None], missing: str) -> dict[str, Any]:
    """``load`` the contents of ``run_dir``'s latest checkpoint and return them; FileNotFoundError(``missing``)
    when there is none; a KeyError from ``load`` (a model or weights the checkpoint lacks) names the file."""
    import torch

    path = latest_checkpoint(run_dir)
    if path is None:
        raise FileNotFoundError(missing)
    state = torch.load(path, map_location="cpu", weights_only=False)
    try:
        load(state)
    except KeyError as e:
        raise KeyError(f"{path}: {e.args[0]}") from None
    return state
