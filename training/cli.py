"""``cave train``: multi-agent RL (Dr. MAS) on runtime-verifiable rewards.

    cave train CONFIG.yaml [--resume RUN_DIR] [--steps N] [--quiet]
    cave train plot RUN_DIR
    cave train export RUN_DIR [--out DIR]     # save_pretrained folders of the latest checkpoint's models

Exit status: 0 trained; 1 the run stopped on a bad step (NaN loss, exploding gradients; the last good
checkpoint is kept); 2 bad input (config, arguments), reported before any model is loaded.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

EXIT_OK, EXIT_STOPPED, EXIT_BAD_INPUT = 0, 1, 2


def train_main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["plot"]:
        return plot_main(argv[1:])
    if argv[:1] == ["export"]:
        return export_main(argv[1:])
    p = argparse.ArgumentParser(prog="cave train", description="Train a team with agent-wise normalized RL (Dr. MAS).")
    p.add_argument("config", help="a train config YAML (see training/configs/); or `plot RUN_DIR`, `export RUN_DIR`")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its latest checkpoint")
    p.add_argument("--steps", type=int, metavar="N", help="override the config's total steps")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar; print only the run folder")
    args = p.parse_args(argv)

    from cave.training.config import ConfigError, load_config

    try:
        cfg = load_config(args.config, steps=args.steps)
    except ConfigError as e:
        print(f"cave train: bad config:\n{e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    from cave.training.trainer import Trainer, TrainingStopped

    try:
        trainer = Trainer(cfg, resume=args.resume, quiet=args.quiet)
    except (FileNotFoundError, ValueError) as e:
        print(f"cave train: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        run_dir = trainer.train()
    except TrainingStopped as e:
        print(f"cave train: {e}", file=sys.stderr)
        return EXIT_STOPPED
    print(run_dir)
    return EXIT_OK


def plot_main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="cave train plot", description="PNG curves of a run's metrics.jsonl")
    p.add_argument("run_dir")
    args = p.parse_args(list(argv))
    from cave.training.trainer import plot_run

    try:
        files = plot_run(args.run_dir)
    except FileNotFoundError as e:
        print(f"cave train plot: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for f in files:
        print(f)
    return EXIT_OK


def export_main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="cave train export", description="HF folders of a run's trained models")
    p.add_argument("run_dir")
    p.add_argument("--out", metavar="DIR", help="where to write (default: RUN_DIR/final/MODEL)")
    args = p.parse_args(list(argv))
    from cave.training.trainer import export_checkpoint

    try:
        folders = export_checkpoint(args.run_dir, args.out)
    except (FileNotFoundError, KeyError) as e:
        print(f"cave train export: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for name, folder in folders.items():
        print(f"{name}\t{folder}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(train_main())
