"""The search team learns: held-out exact match per hop count for the base, the warm start and RL.

    python -m cave.training.experiments.search_team                      # training/configs/search_smollm2.yaml
    python -m cave.training.experiments.search_team --stages base --limit 20 -k 1      # a quick look at the base
    python -m cave.training.experiments.search_team -k 1 --base-limit 25    # the base's floor on 25 questions only

For the config (default ``training/configs/search_smollm2.yaml``: router, search and answer on one SmolLM2), each
stage is evaluated on the same first ``--limit`` questions of the test split (``-k`` sampled team runs and one
greedy run each) and written to ``OUT/{stage}.json`` (``cave train eval``'s report):

- ``base``: the untrained models (``init_from`` ignored);
- ``warm``: the warm start, ``cave train sft`` (the teacher's successful team runs, imitated) into
  ``sft.output_dir``; skipped when that folder has a checkpoint;
- ``rl``: ``cave train run``'s trainer from the warm start (``init_from`` = ``sft.output_dir``) into
  ``output_dir``, resumed or skipped like the Dr. MAS comparison's runs.

``OUT/summary.json`` is a list of rows, one per stage and hop count: ``{"stage", "hops", "problems", "em", ...}``
with ``em`` the greedy run's exact match (the answer object against the reference, normalized), its 95% bootstrap
interval over the questions, and the sampled runs' mean (``avg@k``); ``OUT/summary.md`` is the same as a table.
Each finished stage rewrites both, so a stopped run keeps what it finished. The stage evals name the warm start by
the digest of its weights and the teacher's runs are kept in ``OUT/teacher.jsonl``, so OUT (small enough to commit)
carries the experiment across machines whose run folders are gone (``stage_report``). The warm start is built under
portable kernels (``kernels.py``, a child process; ``--native-kernels`` for this CPU's own), so that another machine
whose fingerprint agrees with ``OUT/kernels.json`` rebuilds the same weights from the kept teacher runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["STAGES", "hop_rows", "main", "run_stages", "stage_labels", "stage_report", "table"]

CONFIG = "training/configs/search_smollm2.yaml"
STAGES = ("base", "warm", "rl")


def hop_rows(
    stage: str, report: Mapping[str, Any], examples: Sequence[Mapping[str, Any]], by: str = "hops"
) -> list[dict[str, Any]]:
    """One row per value of ``example[by]`` among the evaluated problems (in the eval's order): how many, the
    greedy exact match with its 95% bootstrap interval, and the sampled runs' mean success.

    >>> report = {"k": 2, "successes": [[True, True], [False, True], [False, False]],
    ...           "greedy_successes": [True, False, False]}
    >>> [(r["hops"], r["problems"], r["em"], r["avg@2"]) for r in hop_rows("rl", report, [{"hops": 1}, {"hops": 2}, {"hops": 2}])]
    [(1, 1, 1.0, 1.0), (2, 2, 0.0, 0.25)]
    """
    from cave.training.evaluate import bootstrap_ci, per_problem

    k, greedy, sampled = report["k"], report.get("greedy_successes") or [], report["successes"]
    if len(sampled) != len(examples) or (greedy and len(greedy) != len(examples)):
        raise ValueError(f"the {stage} eval covers {len(sampled)} problems, not the {len(examples)} given")
    missing = [i for i, ex in enumerate(examples) if by not in ex]
    if missing:
        raise KeyError(f"problem {missing[0]} has no {by!r} field (fields: {sorted(examples[missing[0]])}); pick --by")
    rows = []
    for value in sorted({ex[by] for ex in examples}):
        idx = [i for i, ex in enumerate(examples) if ex[by] == value]
        em = [float(greedy[i]) for i in idx] if greedy else []
        avg = per_problem([sampled[i] for i in idx], "avg")
        rows.append({
            "stage": stage,
            by: value,
            "problems": len(idx),
            "em": sum(em) / len(em) if em else None,
            "em_ci": list(bootstrap_ci(em)) if em else None,
            f"avg@{k}": sum(avg) / len(avg),
        })  # fmt: skip
    return rows


def table(rows: Sequence[Mapping[str, Any]], by: str = "hops") -> str:
    """The rows as a markdown table.

    >>> print(table([{"stage": "base", "hops": 1, "problems": 3, "em": 0.0, "em_ci": [0.0, 0.0], "avg@4": 0.0}]))
    | stage | hops | problems | exact match, greedy [95% CI] | sampled mean |
    |---|---|---|---|---|
    | base | 1 | 3 | 0.000 [0.000, 0.000] | 0.000 |
    """
    from cave.training.evaluate import format_ci

    lines = [f"| stage | {by} | problems | exact match, greedy [95% CI] | sampled mean |", "|---|---|---|---|---|"]
    for r in rows:
        avg = next(v for key, v in r.items() if key.startswith("avg@"))
        em = "-" if r["em"] is None else f"{r['em']:.3f}{format_ci(r['em_ci'])}"
        lines.append(f"| {r['stage']} | {r[by]} | {r['problems']} | {em} | {avg:.3f} |")
    return "\n".join(lines)


def stage_labels(warm_start: str, steps: int) -> dict[str, str]:
    """The checkpoint label each stage's eval carries: the warm start and RL name the warm start's weights (its
    ``weights_digest``), so evals made on other machines, where the run folders are gone, are known to be of the
    same starting point.

    >>> stage_labels("ab12", 8)["rl"]
    'rl 8 steps from warm start ab12'
    """
    return {"base": "base", "warm": f"warm start {warm_start}", "rl": f"rl {steps} steps from warm start {warm_start}"}


def _cached(where: Path, *, limit: int, k: int, dtype: str) -> dict[str, Any] | None:
    """``where``'s eval when it is one of this size and dtype, else None."""
    if not where.is_file():
        return None
    report = json.loads(where.read_text(encoding="utf-8"))
    same = (report.get("problems"), report.get("k"), report.get("dtype", "float32")) == (limit, k, dtype)
    return report if same else None


def stage_report(
    cfg: Any,
    stage: str,
    out: Path,
    *,
    limit: int,
    k: int,
    quiet: bool = True,
    dtype: str | None = None,
    portable: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Train what ``stage`` needs (nothing, the warm start, RL from it) unless it is there, and its held-out eval
    (cached in ``OUT/{stage}.json``). The warm start's teacher runs are kept in ``OUT/teacher.jsonl`` and rebuild
    it where its folder is gone (``cave train sft --teacher-runs``); a stage whose eval in ``OUT`` names the same
    warm start as the other stage's eval there is not trained or evaluated again. With ``portable`` (this driver's
    command line), a missing warm start is built under portable kernels in a child process (``build_portable``:
    the same weights on any machine whose fingerprint agrees with ``OUT/kernels.json``); without, in this one."""
    from cave.training.checkpoints import weights_digest
    from cave.training.evaluate import model_dtype
    from cave.training.experiments.drmas_claim import build_portable, eval_cached, train_resumable, warm_start
    from cave.training.sft import TEACHER_RUNS
    from cave.training.trainer import latest_checkpoint

    where, dtype_name = out / f"{stage}.json", dtype or model_dtype(cfg)
    if stage == "base":
        return eval_cached(cfg.model_copy(update={"init_from": None}), where, run_dir=None, limit=limit, k=k,
                           label="base", dtype=dtype)  # fmt: skip
    if cfg.sft is None:
        raise ValueError(f"stage {stage} needs the config's sft: section (the warm start's teacher and settings)")
    mine = _cached(where, limit=limit, k=k, dtype=dtype_name)
    other = _cached(out / ("rl.json" if stage == "warm" else "warm.json"), limit=limit, k=k, dtype=dtype_name)
    if mine and other and _warm_of(mine) is not None and _warm_of(mine) == _warm_of(other):
        return mine  # both stages of one warm start are in OUT: nothing to build
    warm = Path(cfg.sft.output_dir)
    if portable is not None and latest_checkpoint(warm) is None:
        build_portable(out, list(portable), module="cave.training.experiments.search_team")
    warm_start(cfg, warm, out / TEACHER_RUNS, quiet=quiet)
    labels = stage_labels(weights_digest(warm) or "none", cfg.steps)
    if stage == "warm":
        return eval_cached(cfg, where, run_dir=warm, limit=limit, k=k, label=labels["warm"], dtype=dtype)
    if mine and mine.get("checkpoint") == labels["rl"]:
        return mine
    rl = cfg.model_copy(update={"init_from": str(warm), "eval_every": None})
    run = train_resumable(rl, quiet=quiet)
    return eval_cached(rl, where, run_dir=run, limit=limit, k=k, label=labels["rl"], dtype=dtype)


def _warm_of(report: Mapping[str, Any]) -> str | None:
    """The warm start digest a stage's eval label names (``stage_labels``), None for another label."""
    label = str(report.get("checkpoint") or "")
    return label.rsplit("warm start ", 1)[1] if "warm start " in label else None


def run_stages(
    cfg: Any,
    stages: Sequence[str],
    out: Path,
    *,
    limit: int,
    k: int,
    by: str = "hops",
    quiet: bool = True,
    dtype: str | None = None,
    portable: Sequence[str] | None = None,
    base_limit: int | None = None,
) -> list[dict[str, Any]]:
    """Every stage in order; after each, ``OUT/summary.json`` and ``OUT/summary.md`` hold the rows so far. The
    base stage is evaluated on the first ``base_limit`` of the ``limit`` questions when given: its runs are the
    longest (an untrained model writes every call out to ``max_tokens`` and the router never stops early), and
    each row says how many problems it covers."""
    from cave.training.evaluate import eval_examples

    if base_limit is not None and not 1 <= base_limit <= limit:
        raise ValueError(f"base_limit {base_limit}: give 1 to --limit ({limit}), the base's first questions")
    examples = eval_examples(cfg, "test", limit)
    rows: list[dict[str, Any]] = []
    for stage in stages:
        n = base_limit if stage == "base" and base_limit is not None else limit
        report = stage_report(cfg, stage, out, limit=n, k=k, quiet=quiet, dtype=dtype, portable=portable)
        rows += hop_rows(stage, report, examples[:n], by)
        (out / "summary.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
        (out / "summary.md").write_text(table(rows, by) + "\n", encoding="utf-8")
        if not quiet:
            print(table([r for r in rows if r["stage"] == stage], by), flush=True)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    from cave.training.cli import config_with_overrides
    from cave.training.experiments.drmas_claim import add_kernel_arguments, warm_start
    from cave.training.sft import TEACHER_RUNS
    from cave.training.trainer import TrainingStopped

    p = argparse.ArgumentParser(prog="python -m cave.training.experiments.search_team",
                                description=__doc__.split("\n")[0])  # fmt: skip
    p.add_argument("config", nargs="?", default=CONFIG, help=f"the train config (default {CONFIG})")
    p.add_argument("--stages", nargs="+", choices=STAGES, default=list(STAGES), help="which stages (default all)")
    p.add_argument("--steps", type=int, help="RL steps (default: the config's)")
    p.add_argument("--limit", type=int, default=100, help="held-out test questions (default 100)")
    p.add_argument("--base-limit", type=int, help="the base stage on only the first N of those questions (its "
                   "runs are the longest; default: all of --limit)")  # fmt: skip
    p.add_argument("-k", type=int, default=4, help="sampled team runs per question (default 4), besides the greedy one")
    p.add_argument("--by", default="hops", help="the example field rows are split by (default hops)")
    p.add_argument("--eval-dtype", choices=["float32", "bfloat16"], help="run the evals in this dtype (default: "
                   "the config's; bfloat16 is ~1.7x faster on CPUs with AVX512-BF16)")  # fmt: skip
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="config overrides")
    p.add_argument("--out", default="training/experiments/results/search_team", help="summary.json, stage evals")
    add_kernel_arguments(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    args = p.parse_args(argv)
    if args.limit < 1 or args.k < 1:
        print("search_team: --limit and -k must be at least 1", file=sys.stderr)
        return 2
    cfg = config_with_overrides(args, "search_team", steps=args.steps)
    if cfg is None:
        return 2
    try:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        if args.build_warm_start:  # in the portable child: build, and nothing else
            if cfg.sft is None:
                raise ValueError("the warm start needs the config's sft: section (the teacher and its settings)")
            warm_start(cfg, Path(cfg.sft.output_dir), out / TEACHER_RUNS, quiet=args.quiet)
            return 0
        portable = None if args.native_kernels else list(sys.argv[1:] if argv is None else argv)
        run_stages(cfg, args.stages, out, limit=args.limit, k=args.k, by=args.by, quiet=args.quiet,
                   dtype=args.eval_dtype, portable=portable, base_limit=args.base_limit)  # fmt: skip
    except TrainingStopped as e:
        print(f"search_team: {e}", file=sys.stderr)
        return 1
    except (FileNotFoundError, KeyError, ValueError) as e:
        print(f"search_team: {e}", file=sys.stderr)
        return 2
    print(out / "summary.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
