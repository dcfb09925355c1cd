"""Held-out success of RL runs that start from one warm start, side by side, with the untrained base.

    cave train eval training/configs/math_word_smollm2.yaml --checkpoint base --split test -k 4 --limit 20 \\
        --json base.json
    cave train sft training/configs/math_word_smollm2.yaml
    cave train run training/configs/math_word_smollm2.yaml                          (estimator: drmas)
    cave train run CONFIG_WITH_grpo ...
    python -m cave.training.experiments.warmstart RUN_DIR [RUN_DIR ...] --base base.json --out results/warmstart

Writes ``OUT/summary.json`` (per run: estimator, each held-out eval row, per-role train reward and format-ok
by step) and ``OUT/warmstart.png`` (held-out avg@k by RL step, one line per run; the base as a dashed line).
The rows are the trainer's own ``eval.jsonl`` and ``metrics.jsonl``: nothing is recomputed here.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main", "plot", "summarize"]


def summarize(run_dirs: Sequence[str | Path], base: dict[str, Any] | None = None) -> dict[str, Any]:
    """The runs' held-out curves and per-role training statistics, from their eval.jsonl / metrics.jsonl."""
    from cave.training.evaluate import read_eval
    from cave.training.trainer import read_metrics

    runs = []
    for d in map(Path, run_dirs):
        cfg = json.loads((d / "config.json").read_text())
        metrics = read_metrics(d) if (d / "metrics.jsonl").is_file() else []
        roles = sorted({k.split("/")[1] for row in metrics for k in row if k.startswith("reward/")})
        runs.append(
            {
                "run": str(d),
                "estimator": cfg.get("estimator"),
                "init_from": cfg.get("init_from"),
                "seed": cfg.get("seed"),
                "eval": read_eval(d),
                "train": [
                    {
                        "step": row["step"],
                        "reward_mean": row.get("reward_mean"),
                        "step_s": row.get("step_s"),
                        **{f"reward/{r}": row.get(f"reward/{r}/mean") for r in roles},
                        **{f"format_ok/{r}": row.get(f"format_ok/{r}") for r in roles},
                    }
                    for row in metrics
                ],
            }
        )
    return {"base": base, "runs": runs}


def plot(summary: dict[str, Any], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    k = None
    for run in summary["runs"]:
        rows = run["eval"]
        if not rows:
            continue
        k = rows[-1]["k"]
        pts = [(r["step"], r[f"avg@{k}"]) for r in rows]
        ax.plot(*zip(*pts, strict=True), marker="o", label=f"{run['estimator']} (seed {run['seed']})")
    base = summary.get("base")
    if base and k and f"avg@{k}" in base:
        ax.axhline(base[f"avg@{k}"], linestyle="--", color="grey", label=f"untrained base ({base[f'avg@{k}']:.2f})")
    ax.set_xlabel("RL step (0 = the warm start)")
    ax.set_ylabel(f"held-out avg@{k}")
    ax.set_ylim(-0.05, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("held-out success: base, warm start (step 0), RL")
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    path = out / "warmstart.png"
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m cave.training.experiments.warmstart", description=__doc__.split("\n")[0]
    )
    p.add_argument("runs", nargs="+", help="RL run folders (config.json, eval.jsonl, metrics.jsonl)")
    p.add_argument("--base", help="the base model's `cave train eval --json` report")
    p.add_argument("--out", default="training/experiments/results/warmstart", help="where summary.json and the PNG go")
    args = p.parse_args(argv)
    missing = [r for r in args.runs if not (Path(r) / "config.json").is_file()]
    if missing:
        print(f"not a run folder (no config.json): {', '.join(missing)}", file=sys.stderr)
        return 2
    base = json.loads(Path(args.base).read_text()) if args.base else None
    summary = summarize(args.runs, base)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(plot(summary, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
