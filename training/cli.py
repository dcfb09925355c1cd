"""``cave train``: multi-agent RL (Dr. MAS) on runtime-verifiable rewards.

    cave train run CONFIG.yaml [--resume RUN_DIR] [--steps N] [--quiet]    # or: cave train CONFIG.yaml ...
    cave train plot RUN_DIR
    cave train export RUN_DIR [--out DIR]     # save_pretrained folders of the latest checkpoint's models

Exit status: 0 trained; 1 the run stopped on a bad step (NaN loss, exploding gradients; the last good
checkpoint is kept); 2 bad input (config, arguments), reported before any model is loaded.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from cave.command import Command

__all__ = ["COMMAND", "cmd_export", "cmd_plot", "cmd_run", "configure", "train_main"]

EXIT_OK, EXIT_STOPPED, EXIT_BAD_INPUT = 0, 1, 2


def configure(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="train_command", metavar="ACTION")
    run = sub.add_parser("run", help="train a team from a config (also: cave train CONFIG)")
    run.add_argument("config", help="a train config YAML (see training/configs/)")
    run.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its latest checkpoint")
    run.add_argument("--steps", type=int, metavar="N", help="override the config's total steps")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress bar; print only the run folder")
    run.add_argument("-v", "--verbose", action="store_true", help="also show third-party logs and progress bars")
    run.set_defaults(func=cmd_run)
    plot = sub.add_parser("plot", help="PNG curves of a run's metrics.jsonl")
    plot.add_argument("run_dir")
    plot.set_defaults(func=cmd_plot)
    export = sub.add_parser("export", help="HF folders (save_pretrained) of a run's latest checkpoint")
    export.add_argument("run_dir")
    export.add_argument("--out", metavar="DIR", help="where to write (default: RUN_DIR/final/MODEL)")
    export.set_defaults(func=cmd_export)
    p.set_defaults(func=lambda a: (p.print_help(sys.stderr), EXIT_BAD_INPUT)[1])


COMMAND = Command(
    "train",
    "multi-agent RL (Dr. MAS): cave train run CONFIG | plot RUN_DIR | export RUN_DIR",
    configure,
    subcommands=("run", "plot", "export"),
    default="run",
)


def quiet_third_party() -> None:
    """Keep `cave train`'s output its own: no HF progress bars, no DeepSpeed/transformers/accelerate chatter
    (warnings and info), unless --verbose. Errors still show."""
    import logging
    import os
    import warnings

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    for name in ("deepspeed", "DeepSpeed", "transformers", "accelerate", "torch.distributed", "ray", "urllib3"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module=r"(deepspeed|transformers|accelerate|torch)(\..*)?")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:
        pass


def cmd_run(args: argparse.Namespace) -> int:
    from cave.training.config import ConfigError, load_config

    if not getattr(args, "verbose", False):
        quiet_third_party()

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


def cmd_plot(args: argparse.Namespace) -> int:
    from cave.training.trainer import plot_run

    try:
        files = plot_run(args.run_dir)
    except FileNotFoundError as e:
        print(f"cave train plot: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for f in files:
        print(f)
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from cave.training.trainer import export_checkpoint

    try:
        folders = export_checkpoint(args.run_dir, args.out)
    except (FileNotFoundError, KeyError) as e:
        print(f"cave train export: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for name, folder in folders.items():
        print(f"{name}\t{folder}")
    return EXIT_OK


def train_main(argv: Sequence[str] | None = None) -> int:
    """``python -m cave.training.cli ARGS`` = ``cave train ARGS``."""
    argv = COMMAND.normalize(list(sys.argv[1:] if argv is None else argv))
    p = argparse.ArgumentParser(prog="cave train", description=COMMAND.help)
    configure(p)
    args = p.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(train_main())
