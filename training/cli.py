"""``cave train``: multi-agent RL (Dr. MAS) on runtime-verifiable rewards.

    cave train run CONFIG.yaml [--resume RUN_DIR] [--steps N] [--quiet]    # or: cave train CONFIG.yaml ...
    cave train inspect CONFIG.yaml [--batches 1] [--json OUT]    # before training: per-role reward distributions,
                                                                   # predicted inflation factors, E[A^2] per estimator
    cave train plot RUN_DIR
    cave train export RUN_DIR [--out DIR]     # save_pretrained folders of the latest checkpoint's models
    cave train eval CONFIG_OR_RUN_DIR [--checkpoint latest|final|base] [--split test] [-k 4] [--limit N]
                    [--json OUT] [-q]         # held-out avg@k, pass@k, greedy accuracy, format failures

Exit status: 0 trained; 1 the run stopped on a bad step (NaN loss, exploding gradients; the last good
checkpoint is kept); 2 bad input (config, arguments), reported before any model is loaded.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from cave.command import Command

__all__ = [
    "COMMAND",
    "cmd_eval",
    "cmd_export",
    "cmd_inspect",
    "cmd_plot",
    "cmd_run",
    "cmd_sft",
    "configure",
    "inspect_table",
    "train_main",
]

EXIT_OK, EXIT_STOPPED, EXIT_BAD_INPUT = 0, 1, 2


def configure(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="train_command", metavar="ACTION")
    run = sub.add_parser("run", help="train a team from a config (also: cave train CONFIG)")
    run.add_argument("config", help="a train config YAML (see training/configs/)")
    run.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its latest checkpoint")
    run.add_argument("--steps", type=int, metavar="N", help="override the config's total steps")
    run.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a config field, the value read as YAML (e.g. --set estimator=grpo --set output_dir=runs/grpo; "
        "a dotted name reaches into a mapping: --set team.pattern.max_rounds=2; null unsets: --set init_from=null); "
        "repeatable",
    )
    run.add_argument("-q", "--quiet", action="store_true", help="no progress bar; print only the run folder")
    run.add_argument("-v", "--verbose", action="store_true", help="also show third-party logs and progress bars")
    run.set_defaults(func=cmd_run)
    sft = sub.add_parser("sft", help="warm start: fine-tune on a teacher's successful team runs (the config's sft:)")
    sft.add_argument("config", help="a train config YAML with an sft: section")
    sft.add_argument("--problems", type=int, metavar="N", help="override sft.problems (train problems to attempt)")
    sft.add_argument("--out", metavar="DIR", help="the SFT run folder (default: sft.output_dir)")
    sft.add_argument("--teacher-runs", metavar="FILE", help="a teacher.jsonl kept from an earlier collection (e.g. "
                     "another machine's): its runs are taken, only the problems it lacks are collected")  # fmt: skip
    sft.add_argument("-q", "--quiet", action="store_true", help="no progress lines; print only the run folder")
    sft.add_argument("-v", "--verbose", action="store_true", help="also show third-party logs and progress bars")
    sft.set_defaults(func=cmd_sft)
    ins = sub.add_parser("inspect", help="before training: one rollout batch's per-role rewards and inflation factors")
    ins.add_argument("config", help="a train config YAML (init_from's weights are used when it is set)")
    ins.add_argument("--batches", type=int, default=1, metavar="N", help="rollout batches (steps 1..N; default 1)")
    ins.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="as for `cave train run`")
    ins.add_argument("--json", metavar="OUT", help="also write the report as JSON to OUT")
    ins.add_argument("-v", "--verbose", action="store_true", help="also show third-party logs and progress bars")
    ins.set_defaults(func=cmd_inspect)
    plot = sub.add_parser("plot", help="PNG curves of a run's metrics.jsonl")
    plot.add_argument("run_dir")
    plot.set_defaults(func=cmd_plot)
    export = sub.add_parser("export", help="HF folders (save_pretrained) of a run's latest checkpoint")
    export.add_argument("run_dir")
    export.add_argument("--out", metavar="DIR", help="where to write (default: RUN_DIR/final/MODEL)")
    export.set_defaults(func=cmd_export)
    ev = sub.add_parser("eval", help="evaluate a team (base model or a run's checkpoint) on a held-out split")
    ev.add_argument("target", metavar="CONFIG_OR_RUN_DIR", help="a train config YAML, or a run folder (config.json)")
    ev.add_argument(
        "--checkpoint",
        choices=("latest", "final", "base"),
        help="latest: the run's latest checkpoint (default for a RUN_DIR); final: RUN_DIR/final/MODEL; "
        "base: the untrained models (default, and the only choice, for a CONFIG)",
    )
    ev.add_argument("--split", help="the split to evaluate on (default: test; data without splits: its own examples)")
    ev.add_argument("-k", type=int, default=4, help="sampled team runs per problem (avg@k, pass@k; default 4)")
    ev.add_argument("--limit", type=int, metavar="N", help="only the split's first N problems")
    ev.add_argument("--no-greedy", action="store_true", help="skip the greedy (temperature 0) run per problem")
    ev.add_argument("--dtype", choices=["float32", "bfloat16"], help="run the models in this dtype (default: the "
                    "config's; bfloat16 is ~1.7x faster on CPUs with AVX512-BF16, and samples a little apart; "
                    "on CPUs without bf16 arithmetic its bf16-rounded weights compute in float32)")  # fmt: skip
    ev.add_argument("--json", metavar="OUT", help="also write the report as JSON to OUT")
    ev.add_argument("-q", "--quiet", action="store_true", help="no table; print the report as one JSON line")
    ev.add_argument("-v", "--verbose", action="store_true", help="also show third-party logs and progress bars")
    ev.set_defaults(func=cmd_eval)
    p.set_defaults(func=lambda a: (p.print_help(sys.stderr), EXIT_BAD_INPUT)[1])


COMMAND = Command(
    "train",
    "multi-agent RL (Dr. MAS): cave train run CONFIG | sft CONFIG | inspect CONFIG | plot RUN_DIR | "
    "export RUN_DIR | eval CONFIG_OR_RUN_DIR",
    configure,
    subcommands=("run", "sft", "inspect", "plot", "export", "eval"),
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


def read_config(path: str, prog: str, **overrides: Any) -> Any:
    """The validated train config, or None after printing ``PROG: bad config:`` and what to fix."""
    from cave.training.config import ConfigError, load_config

    try:
        return load_config(path, **overrides)
    except ConfigError as e:
        print(f"{prog}: bad config:\n{e}", file=sys.stderr)
        return None


def config_with_overrides(args: argparse.Namespace, prog: str, **fields: Any) -> Any:
    """The config of ``args.config`` with its ``--set`` overrides (a YAML null sets a field to null) and the
    ``fields`` that are not None (options left unset); None after printing why not."""
    if not getattr(args, "verbose", False):
        quiet_third_party()
    try:
        overrides = field_overrides(args.set)
    except ValueError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return None
    return read_config(args.config, prog, **{k: v for k, v in fields.items() if v is not None}, **overrides)


def cmd_run(args: argparse.Namespace) -> int:
    cfg = config_with_overrides(args, "cave train", steps=args.steps)
    if cfg is None:
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


def cmd_inspect(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    cfg = config_with_overrides(args, "cave train inspect")
    if cfg is None:
        return EXIT_BAD_INPUT
    if args.batches < 1:
        print("cave train inspect: --batches must be at least 1", file=sys.stderr)
        return EXIT_BAD_INPUT
    from cave.training.trainer import inspect_rewards

    try:
        report = inspect_rewards(cfg, args.batches)
    except (FileNotFoundError, ValueError) as e:
        print(f"cave train inspect: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    from rich.console import Console

    Console().print(inspect_table(report))
    return EXIT_OK


def inspect_table(report: dict[str, Any]) -> Any:
    """``cave train inspect``'s report as a rich table: one column per role, one row per statistic."""
    from rich.table import Table

    pooled, roles = report["pooled"], report["roles"]
    table = Table(title=f"reward {report['reward']}: {report['episodes']} team runs, {report['samples']} calls; "
                        f"pooled call score mean {pooled['mean']:.3f}, std {pooled['std']:.3f}")  # fmt: skip
    table.add_column("per role (score = reward - format penalty)")
    for role in roles:
        table.add_column(role, justify="right")
    num = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    rows = [
        ("calls", lambda r: str(r["calls"])),
        ("mean", lambda r: num(r["mean"])),
        ("std", lambda r: num(r["std"])),
        ("rewards (reward: calls)", lambda r: ", ".join(f"{v}: {n}" for v, n in r.get("rewards", {}).items())),
        ("scores (score: calls)", lambda r: ", ".join(f"{v}: {n}" for v, n in r["values"].items())),
        ("predicted inflation, per prompt", lambda r: num(r["inflation"])),
        ("predicted inflation, whole batch", lambda r: num(r["inflation_batch"])),
    ]
    rows += [
        (f"E[A^2] with {name}", lambda r, n=name: num(r["adv_sq"][n])) for name in next(iter(roles.values()))["adv_sq"]
    ]
    for label, cell in rows:
        table.add_row(label, *(cell(r) for r in roles.values()))
    return table


def field_overrides(pairs: Sequence[str]) -> dict[str, Any]:
    """``--set FIELD=VALUE`` pairs as config overrides (FIELD may be dotted: ``team.pattern.max_rounds``), each value
    parsed as YAML.

    >>> field_overrides(["estimator=grpo", "steps=3", "loss={entropy_coef: 0.01}"])
    {'estimator': 'grpo', 'steps': 3, 'loss': {'entropy_coef': 0.01}}
    """
    import yaml

    out: dict[str, Any] = {}
    for pair in pairs:
        field, eq, value = pair.partition("=")
        if not eq or not field.strip():
            raise ValueError(f"--set {pair!r}: write FIELD=VALUE, e.g. --set estimator=grpo")
        out[field.strip()] = yaml.safe_load(value)
    return out


def cmd_sft(args: argparse.Namespace) -> int:
    if not args.verbose:
        quiet_third_party()
    cfg = read_config(args.config, "cave train sft")
    if cfg is None:
        return EXIT_BAD_INPUT
    if cfg.sft is None:
        print(f"cave train sft: {args.config}: no sft: section; add e.g. `sft: {{teacher: {{backend: local, model: "
              "qwen-1.5b}, problems: 200}}` (see training/configs/math_word_smollm2.yaml)", file=sys.stderr)  # fmt: skip
        return EXIT_BAD_INPUT
    if args.problems:
        cfg.sft.problems = args.problems
    from cave.training.sft import run_sft

    try:
        run_dir = run_sft(cfg, args.out, quiet=args.quiet, teacher_runs=args.teacher_runs)
    except (FileNotFoundError, ValueError) as e:
        print(f"cave train sft: {e}", file=sys.stderr)
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


def eval_target(target: str, checkpoint: str | None) -> tuple:
    """(config, run folder or None, checkpoint) of ``cave train eval``'s argument; ValueError/ConfigError when bad."""
    from pathlib import Path

    from cave.training.config import TrainConfig, load_config

    path = Path(target)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ValueError(f"{path}: not a run folder (no config.json); give a run folder or a train config YAML")
        cfg = TrainConfig.model_validate_json((path / "config.json").read_text(encoding="utf-8"))
        return cfg, path, checkpoint or "latest"
    if not path.is_file():
        raise ValueError(f"{path}: no such config file or run folder")
    cfg = load_config(path)
    if checkpoint not in (None, "base"):
        run = Path(cfg.output_dir)
        hint = f" (this config's run folder: {run})" if (run / "config.json").is_file() else ""
        raise ValueError(
            f"--checkpoint {checkpoint}: a config has no trained weights; give a RUN_DIR{hint}, "
            "or --checkpoint base to evaluate the untrained models"
        )
    return cfg, None, "base"


def cmd_eval(args: argparse.Namespace) -> int:
    from pathlib import Path

    from cave.training.config import ConfigError

    if not args.verbose:
        quiet_third_party()
    if args.k < 1 or (args.limit is not None and args.limit < 1):
        print("cave train eval: -k and --limit must be at least 1", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        cfg, run_dir, checkpoint = eval_target(args.target, args.checkpoint)
        from cave.training.evaluate import eval_examples

        split = args.split or ("test" if cfg.data.has_splits else None)
        examples = eval_examples(cfg, split, args.limit)
        if not examples:
            raise ValueError(f"no examples in split {split!r}")
        if checkpoint == "final":  # the exported HF folders stand in for the base models
            final = {name: run_dir / "final" / name for name in cfg.models}
            missing = [str(p) for p in final.values() if not (p / "config.json").is_file()]
            if missing:
                raise ValueError(f"--checkpoint final: {', '.join(missing)} missing; `cave train export {run_dir}`")
            models = {n: m.model_copy(update={"source": str(final[n])}) for n, m in cfg.models.items()}
            cfg = cfg.model_copy(update={"models": models})
    except ConfigError as e:
        print(f"cave train eval: bad config:\n{e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ValueError as e:
        print(f"cave train eval: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    from cave.training.evaluate import evaluate_checkpoint, report_table

    try:
        report = evaluate_checkpoint(cfg, examples, run_dir=run_dir if checkpoint == "latest" else None, k=args.k,
                                     greedy=not args.no_greedy, split=split or "(config data)",
                                     label=None if checkpoint == "latest" else checkpoint, dtype=args.dtype)  # fmt: skip
    except ValueError as e:
        print(f"cave train eval: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        Path(args.json).write_text(report.to_json(indent=2) + "\n", encoding="utf-8")
    if args.quiet:
        print(report.to_json())
    else:
        from rich.console import Console

        Console().print(report_table(report))
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
