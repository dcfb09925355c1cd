"""Dr. MAS's claim tested, not assumed: estimators x seeds from one warm start, the same budget, held-out intervals.

    cave train sft training/configs/math_word_smollm2.yaml          # the warm start (once; init_from of the config)
    python -m cave.training.experiments.drmas_claim                 # math_verify_smollm2.yaml, 3 estimators x 3 seeds
    python -m cave.training.experiments.drmas_claim CONFIG --estimators drmas grpo --seeds 0 --steps 2 --limit 10

For the config (default ``training/configs/math_verify_smollm2.yaml``: role-specific rewards), in order:

1. ``OUT/inspect.json``: one rollout batch from the warm start, each role's reward distribution and predicted
   inflation factor (``cave train inspect``), before any training;
2. ``OUT/warm.json``: the warm start's held-out eval (the shared starting point of every run);
3. per seed and estimator (every estimator on seed 0 first), ``RUNS/{estimator}_seed{seed}``: ``cave train run``'s
   trainer from ``init_from`` with the same steps, group and batch sizes (only ``estimator``, ``seed`` and
   ``output_dir`` differ), then its held-out eval (``heldout.json``: ``--limit`` test problems, ``-k`` sampled runs
   each and one greedy, 95% bootstrap intervals over problems). After each run, ``OUT/summary.json`` and ``OUT/summary.md`` are rewritten.

Resumable: a finished run leaves its record in ``OUT/runs/{estimator}_seed{seed}.json`` (its eval and training
metrics, and the digest of the warm start it began from), small enough to commit, so a comparison spread over
machines whose run folders are gone goes on where it was: a run with a record for this warm start, budget and eval
is not run again; the warm start's teacher runs are kept in ``OUT/teacher.jsonl`` and rebuild it where its folder
is gone, under portable kernels (``kernels.py``: the same weights on any machine whose ``OUT/kernels.json``
fingerprint agrees; ``--native-kernels`` for this CPU's own). A run whose eval exists in its folder is not evaluated
again; a run with a checkpoint short of
``steps`` resumes from it; a run folder without a checkpoint starts over. The warm start is named by the digest of
its weights (``weights_digest``): a rebuilt warm start with other weights invalidates its eval and every record. ``summary.json`` is a list of rows, one per finished run: estimator, seed,
problems, avg@k with ``ci_low`` / ``ci_high``, pass@k, greedy, wall times, and per role: E[A^2], grad-norm spikes
above the clip threshold (absolute) and above 5x the role's own median norm (relative).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_ESTIMATORS",
    "SPIKE_FACTOR",
    "add_kernel_arguments",
    "build_portable",
    "estimator_table",
    "eval_cached",
    "main",
    "paired_difference",
    "plot_summary",
    "read_record",
    "role_gradients",
    "run_table",
    "seeded_difference",
    "spike_counts",
    "summary_row",
    "train_resumable",
    "warm_start",
]

CONFIG = "training/configs/math_verify_smollm2.yaml"
# at_grpo is left out by default: with one call per role per run (math_verify_smollm2.yaml's single round) its
# groups are Dr. MAS's, so its runs would repeat drmas's exactly; compare it where a role acts more than once
# (--set team.pattern.max_rounds=2).
DEFAULT_ESTIMATORS = ("drmas", "grpo", "pooled_calls")
SPIKE_FACTOR = 5.0  # a relative spike: a step's pre-clip norm above this many times the role's median norm
HELDOUT = "heldout.json"
RECORDS = "runs"  # OUT/runs/{estimator}_seed{seed}.json: a finished run's record


# -- statistics (pure) -----------------------------------------------------------------------------------------------
def spike_counts(norms: Sequence[float], clip: float | None, factor: float = SPIKE_FACTOR) -> dict[str, Any]:
    """One role's pre-clip gradient norms over a run: how many optimizer steps had a signal (norm > 0), their
    median and max, and the spikes in both senses: above the clip threshold (``over_clip``; None without clipping)
    and above ``factor`` x the role's own median (``over_5x_median``).

    >>> spike_counts([0.2, 0.25, 0.0, 0.3, 1.6], clip=1.0)
    {'steps': 4, 'median': 0.275, 'max': 1.6, 'over_clip': 1, 'over_5x_median': 1}
    >>> spike_counts([0.0], clip=1.0)["median"] is None
    True
    """
    from cave.training.diagnostics import LIVE, grad_norm_tail

    live = [g for g in norms if math.isfinite(g) and g > LIVE]
    if not live:
        return {"steps": 0, "median": None, "max": None, "over_clip": 0, "over_5x_median": 0}
    tail = grad_norm_tail(live, clip)  # the median and max the trainer's gradspike metrics report
    return {
        "steps": len(live),
        "median": tail["median"],
        "max": tail["max"],
        "over_clip": None if clip is None else sum(g > clip for g in live),
        "over_5x_median": sum(g > factor * tail["median"] for g in live),
    }


def role_gradients(metrics: Sequence[Mapping[str, Any]], clips: Mapping[str, float | None]) -> dict[str, Any]:
    """Per role, over a run's metrics rows: ``spike_counts`` of every logged pre-clip norm (``grad_norms/{role}``),
    and the mean E[A^2] and predicted inflation factor over the steps (``warmstart.grad_stats``).

    >>> rows = [{"grad_norms/solver": [0.5, 0.4], "adv_sq/solver": 0.8}, {"grad_norms/solver": [3.0], "adv_sq/solver": 1.2}]
    >>> g = role_gradients(rows, {"solver": 1.0})["solver"]
    >>> g["adv_sq_mean"], g["over_clip"], g["over_5x_median"], g["median"]
    (1.0, 1, 1, 0.5)
    """
    from cave.training.experiments.warmstart import grad_stats

    roles = list(dict.fromkeys(k.split("/", 1)[1] for row in metrics for k in row if k.startswith("grad_norms/")))
    stats = grad_stats(list(metrics), roles)
    out = {}
    for role in roles:
        norms = [float(g) for row in metrics for g in row.get(f"grad_norms/{role}") or ()]
        adv = {k: v for k, v in stats[role].items() if k in ("adv_sq_mean", "inflation_mean")}
        out[role] = {**adv, **spike_counts(norms, clips.get(role, 1.0))}
    return out


def paired_difference(a: Sequence[Sequence[bool]], b: Sequence[Sequence[bool]]) -> dict[str, float]:
    """avg@k of ``a`` minus that of ``b`` over the same problems, with a 95% bootstrap interval of the paired
    per-problem differences (a difference is resolved when the interval leaves out 0).

    ``a`` solves 30 of 40 problems every time, ``b`` each problem half the time: +0.25, and resolved:

    >>> d = paired_difference([[True, True]] * 30 + [[False, False]] * 10, [[True, False]] * 40)
    >>> d["diff"], d["ci_low"] > 0
    (0.25, True)
    >>> paired_difference([[True, False]] * 20 + [[True, True]], [[False, True]] * 20 + [[True, False]])["ci_low"] > 0
    False
    """
    from cave.training.evaluate import bootstrap_ci, per_problem

    if len(a) != len(b):
        raise ValueError(f"paired runs need the same problems: {len(a)} vs {len(b)}")
    diffs = [x - y for x, y in zip(per_problem(a, "avg"), per_problem(b, "avg"), strict=True)]
    low, high = bootstrap_ci(diffs)
    return {"diff": sum(diffs) / len(diffs) if diffs else float("nan"), "ci_low": low, "ci_high": high}


def seeded_difference(a: Sequence[Sequence[Sequence[bool]]], b: Sequence[Sequence[Sequence[bool]]], *,
                      resamples: int = 2000, seed: int = 0) -> dict[str, Any]:  # fmt: skip
    """avg@k of ``a`` minus ``b`` with the seeds as a source of variance too: ``a[s]`` and ``b[s]`` are seed ``s``'s
    evals (per problem, its sampled runs) of the two estimators on the same problems. Returns each seed's paired
    difference (``per_seed``), their mean, and a 95% interval from a two-level bootstrap (seeds with replacement,
    then problems with replacement, one draw of problems for the whole resample, as the evals share them).
    Pooling the seeds and resampling problems only (``paired_difference``) treats the seeds as fixed, so one lucky
    seed can carry an interval clear of 0; this one is wider by what the seeds disagree.

    Two seeds that agree (+0.5 each) against two that do not (+1.0 and 0.0): the same mean, one interval clear of 0:

    >>> one, zero = [[True, True]] * 20, [[False, False]] * 20
    >>> half = [[True, True]] * 10 + [[False, False]] * 10
    >>> agree = seeded_difference([half, half], [zero, zero])
    >>> split = seeded_difference([one, zero], [zero, zero])
    >>> agree["diff"], split["diff"], agree["per_seed"], split["per_seed"]
    (0.5, 0.5, [0.5, 0.5], [1.0, 0.0])
    >>> agree["ci_low"] > 0, split["ci_low"] > 0
    (True, False)
    """
    import numpy as np
    from cave.training.evaluate import CI_LEVEL, per_problem

    if len(a) != len(b) or not a:
        raise ValueError(f"seeded differences need the same seeds on both sides: {len(a)} vs {len(b)}")
    d = np.asarray([[x - y for x, y in zip(per_problem(sa, "avg"), per_problem(sb, "avg"), strict=True)]
                    for sa, sb in zip(a, b, strict=True)])  # fmt: skip
    rng = np.random.default_rng(seed)
    n_seeds, n_problems = d.shape
    seeds = rng.integers(0, n_seeds, size=(resamples, n_seeds))
    problems = rng.integers(0, n_problems, size=(resamples, n_problems))
    means = np.array([d[s][:, p].mean() for s, p in zip(seeds, problems, strict=True)])
    tail = (1 - CI_LEVEL) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    per_seed = [round(float(x), 12) for x in d.mean(axis=1)]
    return {"diff": round(float(d.mean()), 12), "per_seed": per_seed,
            "ci_low": round(float(low), 12), "ci_high": round(float(high), 12)}  # fmt: skip


def summary_row(estimator: str, seed: int, report: Mapping[str, Any], metrics: Sequence[Mapping[str, Any]],
                clips: Mapping[str, float | None]) -> dict[str, Any]:  # fmt: skip
    """One finished run's row of ``summary.json``: its held-out eval (``report``: the EvalReport's dict) and its
    training (``metrics``: the metrics.jsonl rows)."""
    k = report["k"]
    low, high = report.get("ci", {}).get(f"avg@{k}", [None, None])
    train_s = sum(row.get("step_s") or 0.0 for row in metrics)
    return {
        "estimator": estimator,
        "seed": seed,
        "problems": report["problems"],
        f"avg@{k}": report[f"avg@{k}"],
        "ci_low": low,
        "ci_high": high,
        f"pass@{k}": report[f"pass@{k}"],
        "greedy": report.get("greedy"),
        "greedy_ci": report.get("ci", {}).get("greedy"),
        "steps": len(metrics),
        "train_s": train_s,
        "eval_s": report["seconds"],
        "wall_s": train_s + report["seconds"],
        "roles": role_gradients(metrics, clips),
    }


# -- tables ----------------------------------------------------------------------------------------------------------
def _num(v: Any, fmt: str = ".3f") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)


def run_table(rows: Sequence[Mapping[str, Any]], warm: Mapping[str, Any] | None = None) -> str:
    """The runs as a markdown table: held-out avg@k [95% CI], pass@k, greedy, per role E[A^2] and spikes
    (above the clip / above 5x the role's median, of its optimizer steps), wall time."""
    from cave.training.evaluate import format_ci

    lines = ["| estimator | seed | avg@k [95% CI] | pass@k | greedy | per role: E[A²]; spikes > clip / > 5× median "
             "(of steps) | train + eval s |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    if warm:
        k = warm["k"]
        lines.append(f"| warm start | - | {warm[f'avg@{k}']:.3f}{format_ci(warm['ci'].get(f'avg@{k}'))} | "
                     f"{warm[f'pass@{k}']:.2f} | {_num(warm.get('greedy'), '.2f')} | | eval {warm['seconds']:.0f} |")  # fmt: skip
    for r in rows:
        k = next(key for key in r if key.startswith("avg@")).split("@")[1]
        roles = "; ".join(f"{role} {_num(g.get('adv_sq_mean'), '.2f')}; {_num(g['over_clip'], 'd')} / "
                          f"{g['over_5x_median']} (of {g['steps']})" for role, g in r["roles"].items())  # fmt: skip
        lines.append(f"| {r['estimator']} | {r['seed']} | {r[f'avg@{k}']:.3f}{format_ci([r['ci_low'], r['ci_high']])} | "
                     f"{r[f'pass@{k}']:.2f} | {_num(r['greedy'], '.2f')} | {roles} | "
                     f"{r['train_s']:.0f} + {r['eval_s']:.0f} |")  # fmt: skip
    return "\n".join(lines)


def estimator_table(reports: Mapping[str, Sequence[Mapping[str, Any]]], baseline: str = "grpo") -> str:
    """Per estimator, its seeds pooled: mean avg@k with a 95% bootstrap interval over problems (each problem's
    success averaged over every seed's runs), and the paired difference to ``baseline`` on the same problems."""
    from cave.training.evaluate import bootstrap_ci, format_ci, per_problem

    pooled = {est: _pool_seeds(reps) for est, reps in reports.items() if reps}
    lines = [f"| estimator | seeds | avg@k, seeds pooled [95% CI] | minus {baseline} [95% CI over problems] | "
             f"minus {baseline} per seed | [95% CI over seeds and problems] |", "|---|---|---|---|---|---|"]  # fmt: skip
    for est, runs in pooled.items():
        values = per_problem(runs, "avg")
        mean = sum(values) / len(values)
        diff = per_seed = over_seeds = "-"
        if est != baseline and baseline in pooled and len(pooled[baseline]) == len(runs):
            d = paired_difference(runs, pooled[baseline])
            diff = f"{d['diff']:+.3f}{format_ci([d['ci_low'], d['ci_high']])}"
            pairs = _seed_pairs(reports[est], reports[baseline])
            if len(pairs) >= 2:
                s = seeded_difference([x for x, _ in pairs], [y for _, y in pairs])
                per_seed = ", ".join(f"{x:+.3f}" for x in s["per_seed"])
                over_seeds = format_ci([s["ci_low"], s["ci_high"]]).strip()
        lines.append(f"| {est} | {len(reports[est])} | {mean:.3f}{format_ci(bootstrap_ci(values))} | {diff} | "
                     f"{per_seed} | {over_seeds} |")  # fmt: skip
    return "\n".join(lines)


def _seed_pairs(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> list[tuple[Any, Any]]:
    """The two estimators' evals on the seeds both have (a report without a ``seed`` key pairs by position)."""

    def by_seed(reports: Sequence[Mapping[str, Any]]) -> dict[Any, Any]:
        return {r.get("seed", i): r["successes"] for i, r in enumerate(reports)}

    sa, sb = by_seed(a), by_seed(b)
    return [(sa[s], sb[s]) for s in sa if s in sb]


def _pool_seeds(reports: Sequence[Mapping[str, Any]]) -> list[list[bool]]:
    """Each problem's sampled runs over every seed's eval (the evals share their problems, in order)."""
    sizes = {len(r["successes"]) for r in reports}
    if len(sizes) != 1:
        raise ValueError(
            f"the seeds' evals cover different numbers of problems ({sorted(sizes)}); rerun with one --limit"
        )
    return [[ok for r in reports for ok in r["successes"][i]] for i in range(sizes.pop())]


# -- running (resumable) ---------------------------------------------------------------------------------------------
def train_resumable(cfg: Any, *, quiet: bool = True) -> Path:
    """``cfg``'s run up to ``cfg.steps``: nothing when its latest checkpoint is there, a resume from a checkpoint
    short of it, else a fresh start (a folder without a checkpoint is cleared first)."""
    import torch
    from cave.training.trainer import Trainer, latest_checkpoint

    run = Path(cfg.output_dir)
    last = latest_checkpoint(run)
    if last is not None:
        step = int(torch.load(last, map_location="cpu", weights_only=False)["step"])
        if step > cfg.steps:
            raise ValueError(f"{run} has trained {step} steps, more than this comparison's {cfg.steps}; give the "
                             "same --steps as before or another --runs folder")  # fmt: skip
        if step == cfg.steps:
            return run
        return Trainer(cfg, resume=run, quiet=quiet).train()
    if run.exists():
        shutil.rmtree(run)
    return Trainer(cfg, quiet=quiet).train()


def eval_cached(cfg: Any, out: Path, *, run_dir: Path | None, limit: int, k: int, greedy: bool = True,
                label: str | None = None, dtype: str | None = None) -> dict[str, Any]:  # fmt: skip
    """The held-out eval of ``run_dir``'s latest checkpoint (None: the config's models), read from ``out`` when
    it is an eval of that size and dtype (and, given a ``label``, of that checkpoint), else run (``limit`` test
    problems, k sampled runs + one greedy each; the models in ``dtype``, default the config's) and written to
    ``out``. Finished shares of the problems are kept beside it (``<out>.parts.jsonl``, removed once ``out`` is
    written), so a stopped driver loses at most one share."""
    from cave.training.evaluate import eval_examples, evaluate_checkpoint, model_dtype

    if out.is_file():
        cached = json.loads(out.read_text(encoding="utf-8"))
        wanted = (limit, k, dtype or model_dtype(cfg))
        same = (cached.get("problems"), cached.get("k"), cached.get("dtype", "float32")) == wanted
        if same and label in (None, cached.get("checkpoint")):
            return cached
    examples = eval_examples(cfg, "test", limit)
    if len(examples) < limit:
        raise ValueError(f"the test split has {len(examples)} problems, fewer than --limit {limit}; lower --limit")
    parts = out.with_name(out.stem + ".parts.jsonl")
    report = evaluate_checkpoint(cfg, examples, run_dir=run_dir, k=k, greedy=greedy, label=label, parts=parts,
                                 dtype=dtype)  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report.to_json(indent=2) + "\n", encoding="utf-8")
    parts.unlink(missing_ok=True)
    return report.to_dict()


def run_config(cfg: Any, estimator: str, seed: int, runs: Path) -> Any:
    """The comparison run of (estimator, seed): the base config's budget and warm start, its own folder."""
    return cfg.model_copy(update={"estimator": estimator, "seed": seed, "output_dir": str(runs / f"{estimator}_seed{seed}"),
                                  "eval_every": None, "save_final": False})  # fmt: skip


def write_summary(out: Path, rows: list[dict[str, Any]], reports: Mapping[str, list[dict[str, Any]]],
                  warm: Mapping[str, Any] | None) -> None:  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    text = f"{run_table(rows, warm)}\n\n{estimator_table(reports)}\n"
    (out / "summary.md").write_text(text, encoding="utf-8")
    if rows:
        plot_summary(rows, warm, out / "summary.png")


def plot_summary(rows: Sequence[Mapping[str, Any]], warm: Mapping[str, Any] | None, path: Path) -> Path:
    """Each run's held-out avg@k with its 95% interval, grouped by estimator (seeds side by side), over the warm
    start's avg@k and interval (a band): whether the estimators separate is read off the overlap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    estimators = list(dict.fromkeys(r["estimator"] for r in rows))
    k = next(key for key in rows[0] if key.startswith("avg@")).split("@")[1]
    fig, ax = plt.subplots(figsize=(max(4.8, 1.8 + 1.6 * len(estimators)), 3.6))
    if warm:
        low, high = warm.get("ci", {}).get(f"avg@{k}", [None, None])
        ax.axhline(warm[f"avg@{k}"], color="grey", ls="--", lw=1, label="warm start")
        if low is not None:
            ax.axhspan(low, high, color="grey", alpha=0.15)
    for i, est in enumerate(estimators):
        runs = [r for r in rows if r["estimator"] == est]
        for j, r in enumerate(runs):
            x = i + (j - (len(runs) - 1) / 2) * 0.18
            y = r[f"avg@{k}"]
            err = [[y - r["ci_low"]], [r["ci_high"] - y]] if r["ci_low"] is not None else None
            ax.errorbar(x, y, yerr=err, fmt="o", color=f"C{i}", capsize=3)
            ax.annotate(f"s{r['seed']}", (x, y), textcoords="offset points", xytext=(4, -3), fontsize=7)
    ax.set_xticks(range(len(estimators)), estimators)
    ax.set_xlim(-0.6, len(estimators) - 0.4)
    problems = rows[0].get("problems")
    ax.set_ylabel(f"held-out avg@{k} ({problems} problems), 95% CI")
    ax.set_title("Dr. MAS's claim: one warm start, the same budget", fontsize=10)
    if warm:
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def inspect_cached(cfg: Any, out: Path) -> dict[str, Any]:
    """``cave train inspect``'s report for the warm start, read from ``out`` or made and written there."""
    from cave.training.trainer import inspect_rewards

    if out.is_file():
        return json.loads(out.read_text(encoding="utf-8"))
    report = inspect_rewards(cfg)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def recorded_digest(out: Path) -> str | None:
    """The digest of the warm start ``out``'s records were made from: the one its warm start's eval names
    (``OUT/warm.json``, "warm start <digest>"), else a finished run's record's; None when ``out`` holds neither."""
    warm = out / "warm.json"
    label = json.loads(warm.read_text(encoding="utf-8")).get("checkpoint", "") if warm.is_file() else ""
    if label.startswith("warm start "):
        return label.removeprefix("warm start ")
    for path in sorted((out / RECORDS).glob("*.json")):
        found = json.loads(path.read_text(encoding="utf-8")).get("warm_start")
        if found:
            return str(found)
    return None


def warm_digest(cfg: Any, out: Path) -> str:
    """The digest to summarize ``out``'s records under: the recorded one (``recorded_digest``), else that of the warm
    start's weights where they are here, so that the records can be summarized on any machine."""
    from cave.training.checkpoints import weights_digest
    from cave.training.trainer import latest_checkpoint

    if not cfg.init_from:
        return "base"
    recorded = recorded_digest(out)
    if recorded is not None:
        return recorded
    if latest_checkpoint(cfg.init_from) is not None:
        return weights_digest(cfg.init_from)
    raise FileNotFoundError(f"no warm start at {cfg.init_from} and no record in {out} naming its digest: nothing to "
                            "match the records with")  # fmt: skip


def check_same_start(digest: str, out: Path, init_from: str | None) -> None:
    """Refuse to go on where ``out`` holds records of another warm start than ``digest``: each of them would be
    stale, and the warm start's eval and every run would be redone over them. Fine-tuning is not bitwise
    reproducible across CPUs, so the same teacher runs rebuild other weights on another machine (measured: a warm
    start built on an AMD EPYC and rebuilt on an Intel Xeon differ)."""
    recorded = recorded_digest(out)
    if recorded is not None and recorded != digest:
        raise ValueError(
            f"the warm start at {init_from or 'the base model'} ({digest}) is not the one the records in {out} were "
            f"made from ({recorded}); a warm start rebuilt on another machine has other weights, so none of them "
            "pairs with it. To start the comparison over from this warm start and keep those records, give "
            f"another --out (and --runs); to go on with them, put warm start {recorded}'s folder at init_from"
        )


def read_record(path: Path, *, warm_start: str, steps: int, limit: int, k: int, dtype: str) -> dict[str, Any] | None:
    """A finished run's record (``{"warm_start", "steps", "report", "metrics"}``) when it is one of this comparison
    (the same warm start digest, steps and eval size and dtype), else None (no record, or one of another setup)."""
    if not path.is_file():
        return None
    record = json.loads(path.read_text(encoding="utf-8"))
    report = record.get("report") or {}
    wanted = (warm_start, steps, limit, k, dtype)
    found = (record.get("warm_start"), record.get("steps"), report.get("problems"), report.get("k"),
             report.get("dtype", "float32"))  # fmt: skip
    return record if found == wanted else None


def warm_start(cfg: Any, folder: Path, kept: Path, *, quiet: bool = True) -> None:
    """The warm start in ``folder`` built where it is gone (``cave train sft``), from the teacher runs kept in
    ``kept`` when there are any (the same runs fine-tune to the same weights; a collection stopped part way goes on
    from them), and those runs kept there after each batch of the collection and once the warm start exists, so
    that OUT carries the whole experiment to another machine."""
    from cave.training.sft import TEACHER_RUNS, keep_copy, run_sft
    from cave.training.trainer import latest_checkpoint

    if latest_checkpoint(folder) is None and cfg.sft is not None:
        run_sft(cfg, folder, quiet=quiet, teacher_runs=kept if kept.is_file() else None, mirror=kept)
    if (folder / TEACHER_RUNS).is_file():  # a warm start that was there already, or a collection with nothing left
        keep_copy(kept, folder / TEACHER_RUNS)


def add_kernel_arguments(p: argparse.ArgumentParser) -> None:
    """The warm-start flags a driver that calls ``build_portable`` takes: ``--native-kernels``, and the hidden
    ``--build-warm-start`` its portable child is started with."""
    p.add_argument("--native-kernels", action="store_true", help="build the warm start with this CPU's own kernels "
                   "(faster; its weights then differ from machine to machine) instead of portable ones (kernels.py)")  # fmt: skip
    p.add_argument("--build-warm-start", action="store_true", help=argparse.SUPPRESS)  # the portable child's job


def build_portable(out: Path, argv: list[str], module: str = "cave.training.experiments.drmas_claim") -> None:
    """Build the warm start under portable kernels (``kernels.PORTABLE``, in a child process: they are chosen when
    torch loads), so that another machine rebuilds the same weights from ``OUT/teacher.jsonl``. ``OUT/kernels.json``
    records the fingerprint of the machine that built it; a machine whose fingerprint differs would build other
    weights, so it stops here with that said, before the fine-tuning is spent. The child is ``python -m module argv
    --build-warm-start`` (a driver whose hidden flag builds the warm start and nothing else)."""
    from cave.training.experiments import kernels

    here = kernels.portable_fingerprint()
    path = out / "kernels.json"
    if path.is_file():
        recorded = json.loads(path.read_text(encoding="utf-8"))
        if recorded.get("fingerprint") != here["fingerprint"]:
            raise ValueError(f"this machine ({here['cpu']}) computes fingerprint {here['fingerprint']} under portable "
                             f"kernels; {out}'s warm start was built where it was {recorded.get('fingerprint')} "
                             f"({recorded.get('cpu')}), so the warm start rebuilt here would have other weights than "
                             f"its records' (`python -m cave.training.experiments.kernels` prints a machine's). Run on "
                             "a machine that agrees, or give another --out")  # fmt: skip
    kernels.run_portable(["-m", module, *argv, "--build-warm-start"])
    out.mkdir(parents=True, exist_ok=True)
    if not path.is_file():
        path.write_text(json.dumps({**here, "env": kernels.PORTABLE}, indent=2) + "\n", encoding="utf-8")


def run_claim(cfg: Any, args: argparse.Namespace) -> list[dict[str, Any]]:
    from cave.training.checkpoints import weights_digest
    from cave.training.evaluate import model_dtype
    from cave.training.trainer import read_metrics

    out, runs = Path(args.out), Path(args.runs).resolve()
    digest = warm_digest(cfg, out) if args.summarize else weights_digest(cfg.init_from) if cfg.init_from else "base"
    if not args.summarize:
        check_same_start(digest, out, cfg.init_from)
    dtype = args.eval_dtype or model_dtype(cfg)
    clips = {role: a.grad_clip for role, a in cfg.agents.items()}
    say = (lambda *a: None) if args.quiet else (lambda *a: print(*a, flush=True))
    if not args.no_inspect and not args.summarize:
        from cave.training.cli import inspect_table
        from rich.console import Console

        Console().print(inspect_table(inspect_cached(cfg, out / "inspect.json")))
    warm = None
    if args.summarize:  # nothing is run: the warm start's eval as recorded, where it is there
        warm_file = out / "warm.json"
        warm = json.loads(warm_file.read_text(encoding="utf-8")) if warm_file.is_file() else None
    elif not args.no_warm_eval:
        start = Path(cfg.init_from) if cfg.init_from else None
        warm = eval_cached(cfg, out / "warm.json", run_dir=start, limit=args.limit, k=args.k,
                           label=f"warm start {digest}" if start else "base", dtype=args.eval_dtype)  # fmt: skip
        say(f"warm start: avg@{args.k} {warm[f'avg@{args.k}']:.3f}")
    rows: list[dict[str, Any]] = []
    reports: dict[str, list[dict[str, Any]]] = {}
    # seeds outer: a comparison stopped part way has every estimator on the same seeds (all of seed 0 first)
    for seed in args.seeds:
        for estimator in args.estimators:
            run_cfg = run_config(cfg, estimator, seed, runs)
            path = out / RECORDS / f"{estimator}_seed{seed}.json"
            record = read_record(path, warm_start=digest, steps=run_cfg.steps, limit=args.limit, k=args.k,
                                 dtype=dtype)  # fmt: skip
            if record is None and args.summarize:
                continue  # only the finished runs' records are summarized
            if record is None:
                run = train_resumable(run_cfg, quiet=args.quiet)
                report = eval_cached(run_cfg, run / HELDOUT, run_dir=run, limit=args.limit, k=args.k,
                                     label=f"latest (step {run_cfg.steps})", dtype=args.eval_dtype)  # fmt: skip
                record = {"warm_start": digest, "steps": run_cfg.steps, "report": report,
                          "metrics": read_metrics(run)}  # fmt: skip
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(record) + "\n", encoding="utf-8")
            report = record["report"]
            rows.append({**summary_row(estimator, seed, report, record["metrics"], clips), "warm_start": digest})
            reports.setdefault(estimator, []).append({**report, "seed": seed})
            write_summary(out, rows, reports, warm)
            say(f"{estimator} seed {seed}: avg@{args.k} {report[f'avg@{args.k}']:.3f} ({path})")
    return rows


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m cave.training.experiments.drmas_claim",
                                description=__doc__.split("\n")[0])  # fmt: skip
    p.add_argument("config", nargs="?", default=CONFIG, help=f"the train config (default {CONFIG})")
    p.add_argument("--estimators", nargs="+", default=list(DEFAULT_ESTIMATORS), help="registered estimators to compare")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="seeds per estimator (default 0 1 2)")
    p.add_argument("--steps", type=int, help="RL steps per run, the same for every run (default: the config's)")
    p.add_argument("--limit", type=int, default=100, help="held-out test problems per eval (default 100)")
    p.add_argument("-k", type=int, default=4, help="sampled team runs per eval problem (avg@k, pass@k; default 4)")
    p.add_argument("--eval-dtype", choices=["float32", "bfloat16"], help="run the held-out evals in this dtype "
                   "(default: the config's; bfloat16 is ~1.7x faster on CPUs with AVX512-BF16; evals of another dtype "
                   "are run again)")  # fmt: skip
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="config overrides, as for "
                   "`cave train run` (e.g. --set group_size=2)")  # fmt: skip
    p.add_argument("--runs", default="runs/drmas_claim", help="where the run folders go (default runs/drmas_claim)")
    p.add_argument("--out", default="training/experiments/results/drmas_claim", help="summary.json, summary.md, ...")
    p.add_argument("--no-inspect", action="store_true", help="skip the per-role reward report before training")
    p.add_argument("--no-warm-eval", action="store_true", help="skip the warm start's own held-out eval")
    p.add_argument("--summarize", action="store_true", help="train and evaluate nothing: rewrite summary.json, "
                   "summary.md and summary.png from the finished runs' records in OUT/runs")  # fmt: skip
    add_kernel_arguments(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars or progress lines")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    from cave.training.advantages import ESTIMATORS
    from cave.training.cli import config_with_overrides
    from cave.training.sft import TEACHER_RUNS
    from cave.training.trainer import TrainingStopped, latest_checkpoint

    prog = "drmas_claim"
    args = parse_args(argv)
    unknown = [e for e in args.estimators if e not in ESTIMATORS]
    if unknown or args.limit < 1 or args.k < 1:
        why = f"unknown estimators {unknown}; registered: {', '.join(ESTIMATORS.names())}" if unknown else ""
        print(f"{prog}: {why or '--limit and -k must be at least 1'}", file=sys.stderr)
        return 2
    cfg = config_with_overrides(args, prog, steps=args.steps)
    if cfg is None:
        return 2
    kept = Path(args.out) / TEACHER_RUNS  # the warm start's teacher runs, kept with the results
    if args.summarize:
        try:
            rows = run_claim(cfg, args)
        except (FileNotFoundError, ValueError) as e:
            print(f"{prog}: {e}", file=sys.stderr)
            return 2
        print(f"{len(rows)} finished runs: {Path(args.out) / 'summary.json'}")
        return 0
    if cfg.init_from and latest_checkpoint(cfg.init_from) is None and not (kept.is_file() and cfg.sft):
        print(f"{prog}: init_from {cfg.init_from} has no checkpoint; build the warm start first "
              f"(`cave train sft {args.config}`), or --set init_from=null to start from the base", file=sys.stderr)  # fmt: skip
        return 2
    try:
        if args.build_warm_start:  # in the portable child: build, and nothing else
            warm_start(cfg, Path(cfg.init_from), kept, quiet=args.quiet)
            return 0
        if cfg.init_from:
            if latest_checkpoint(cfg.init_from) is None and cfg.sft is not None and not args.native_kernels:
                build_portable(Path(args.out), list(sys.argv[1:] if argv is None else argv))
            warm_start(cfg, Path(cfg.init_from), kept, quiet=args.quiet)
        run_claim(cfg, args)
    except TrainingStopped as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 1
    except (FileNotFoundError, ValueError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    print(Path(args.out) / "summary.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
