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

__all__ = ["grad_stats", "main", "plot", "share_start_eval", "summarize", "table"]


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
                "grad": grad_stats(metrics, roles),
            }
        )
    share_start_eval(runs)
    return {"base": base, "runs": runs}


GRAD_KEYS = ("median", "p95", "p99", "max", "max_over_median", "over_clip_frac", "spikes_5x_trailing",
             "zero_signal_frac")  # fmt: skip


def grad_stats(metrics: list[dict[str, Any]], roles: Sequence[str]) -> dict[str, dict[str, float]]:
    """Per agent: the pre-clip grad-norm statistics over the whole run (the last step's running gradspike/*
    values), and the mean E[A^2] and predicted Dr. MAS inflation factor over the steps.

    >>> rows = [{"gradspike/p99/solver": 1.0, "adv_sq/solver": 0.5, "inflation/solver": 2.0},
    ...         {"gradspike/p99/solver": 3.0, "adv_sq/solver": 1.5, "inflation/solver": 1.0}]
    >>> grad_stats(rows, ["solver"])["solver"]
    {'p99': 3.0, 'adv_sq_mean': 1.0, 'inflation_mean': 1.5}
    """
    out: dict[str, dict[str, float]] = {}
    last = metrics[-1] if metrics else {}
    for role in roles:
        stats = {k: last[f"gradspike/{k}/{role}"] for k in GRAD_KEYS if f"gradspike/{k}/{role}" in last}
        for key, name in (("adv_sq", "adv_sq_mean"), ("inflation", "inflation_mean")):
            values = [row[f"{key}/{role}"] for row in metrics if row.get(f"{key}/{role}") is not None]
            if values:
                stats[name] = sum(values) / len(values)
        out[role] = stats
    return out


def share_start_eval(runs: list[dict[str, Any]]) -> None:
    """Runs from one warm start that skipped their own step-0 eval (``eval_at_start: false``) take it from a run
    with the same ``init_from``: the same weights, the same eval. The borrowed row says where it came from."""
    for run in runs:
        if any(r.get("step") == 0 for r in run["eval"]) or not run["init_from"]:
            continue
        donor = next(
            (o for o in runs if o["init_from"] == run["init_from"] and any(r.get("step") == 0 for r in o["eval"])),
            None,
        )
        if donor is not None:
            row = next(r for r in donor["eval"] if r.get("step") == 0)
            run["eval"] = [{**row, "shared_from": donor["run"]}, *run["eval"]]


def table(summary: dict[str, Any]) -> str:
    """The runs side by side as a markdown table: held-out avg@k / pass@k / greedy at the start and the end (the
    last avg@k with its 95% bootstrap interval over problems, where the eval has one), and each agent's grad-norm
    p99, max and max/median."""
    from cave.training.evaluate import format_ci

    lines = []
    for run in summary["runs"]:
        rows = run["eval"]
        if not rows:
            continue
        k = rows[-1]["k"]
        first, last = rows[0], rows[-1]
        grads = "; ".join(
            f"{role} {g.get('p99', float('nan')):.2f} / {g.get('max', float('nan')):.2f} / "
            f"{g.get('max_over_median', float('nan')):.1f}"
            for role, g in run["grad"].items()
        )
        lines.append(
            f"| {run['estimator']} | {run['seed']} | {first[f'avg@{k}']:.3f} | "
            f"**{last[f'avg@{k}']:.3f}**{format_ci(last.get('ci', {}).get(f'avg@{k}'))} | "
            f"{last[f'pass@{k}']:.2f} | {first.get('greedy', float('nan')):.2f} -> {last.get('greedy', float('nan')):.2f}"
            f" | {grads} |"
        )
    head = (
        "| estimator | seed | avg@k, step 0 | avg@k, last [95% CI] | pass@k, last | greedy | grad norm p99 / max / "
        "max÷median |\n"
        "|---|---|---|---|---|---|---|"
    )
    return head + "\n" + "\n".join(lines)


def plot(summary: dict[str, Any], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, tr) = plt.subplots(1, 2, figsize=(12, 4))
    k = None
    for i, run in enumerate(summary["runs"]):
        color = f"C{i}"
        label = f"{run['estimator']} (seed {run['seed']})"
        rows = run["eval"]
        if rows:
            k = rows[-1]["k"]
            pts = [(r["step"], r[f"avg@{k}"]) for r in rows]
            ax.plot(*zip(*pts, strict=True), marker="o", color=color, label=label)
        train = run["train"]
        if train:  # the team's training reward (solid) and each agent's (thin, dotted / dashed)
            tr.plot([t["step"] for t in train], [t["reward_mean"] for t in train], color=color, label=f"{label}: team")
            for role, style in zip(sorted({k_.split("/")[1] for t in train for k_ in t if k_.startswith("reward/")}),
                                   (":", "--", "-."), strict=False):  # fmt: skip
                ys = [t.get(f"reward/{role}") for t in train]
                tr.plot([t["step"] for t in train], ys, linestyle=style, linewidth=0.9, color=color, label=role)
    base = summary.get("base")
    if base and k and f"avg@{k}" in base:
        ax.axhline(base[f"avg@{k}"], linestyle="--", color="grey", label=f"untrained base ({base[f'avg@{k}']:.2f})")
    ax.set_xlabel("RL step (0 = the warm start)")
    ax.set_ylabel(f"held-out avg@{k}")
    ax.set_title("held-out success: base, warm start (step 0), RL")
    tr.set_xlabel("RL step")
    tr.set_ylabel("training reward (16 team runs)")
    tr.set_title("training reward: team and per agent")
    for a in (ax, tr):
        a.set_ylim(-0.05, 1.05)
        a.grid(alpha=0.3)
        a.legend(fontsize=7, loc="lower right")
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
    print(table(summary))
    print(plot(summary, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
