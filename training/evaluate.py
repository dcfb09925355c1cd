"""Held-out evaluation of a team: the same team runs as rollouts, scored by the same runtime-verified reward.

    cfg = load_config("training/configs/math_word_smollm2.yaml")
    workers = LocalWorkers(cfg)                                 # the base model (or load a checkpoint into it)
    report = evaluate(cfg, workers.engines, eval_examples(cfg, "test", limit=20), k=4)
    print(report.to_json())

Each problem gets ``k`` sampled team runs at the config's temperature (``avg@k``: mean success over the k
runs, averaged over problems; ``pass@k``: any of the k runs succeeded) and one greedy run at temperature 0
(``greedy``). A run *succeeds* when its reward is the full reward, ``reward >= 1 - 1e-9``: rewards are read
from the runtime (the answer object the solver returned), never parsed from text, so a run whose reward is
partial or whose reward function raised is a failure. The runs go through ``run_rollout`` on the rollout
engines, with the team ``build_team`` makes (sampled) or the same team at temperature 0 (greedy), seeded as
training step 0 (training steps start at 1), so two evaluations of the same weights see the same samples.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "EVAL",
    "SUCCESS_TOL",
    "EvalReport",
    "avg_at_k",
    "bootstrap_ci",
    "eval_examples",
    "evaluate",
    "evaluate_checkpoint",
    "format_failure_counts",
    "format_failure_rates",
    "greedy_team",
    "is_success",
    "mean_tokens",
    "mean_turns",
    "pass_at_k",
    "per_problem",
    "plot_eval",
    "rates",
    "read_parts",
    "report_table",
    "score_episodes",
    "Tally",
]

EVAL = "eval.jsonl"  # RUN_DIR/eval.jsonl: one EvalReport per periodic evaluation
SUCCESS_TOL = 1e-9
CI_RESAMPLES = 2000  # bootstrap resamples of the problems
CI_LEVEL = 0.95  # the percentile interval's coverage
PART_PROBLEMS = 25  # problems per kept share of a resumable evaluation: a stop loses at most this many
# (fewer would leave the engine small batches: a share ends when its longest run does)
LOOP_CALLS = frozenset({"summary", "compaction"})  # the loop's own calls: not the roles' answers (samples.py)


# -- metrics (pure) -------------------------------------------------------------------------------------
def is_success(reward: float | None) -> bool:
    """A run succeeds when it earned the full reward; an unscored run (the reward raised) fails.

    >>> is_success(1.0), is_success(0.999), is_success(None), is_success(float("nan"))
    (True, False, False, False)
    """
    return reward is not None and math.isfinite(reward) and reward >= 1.0 - SUCCESS_TOL


def avg_at_k(successes: Sequence[Sequence[bool]]) -> float:
    """Mean success over each problem's k runs, averaged over problems (nan without problems).

    >>> avg_at_k([[True, False, False, False], [True, True, True, True]])
    0.625
    """
    per_problem = [sum(runs) / len(runs) for runs in successes if runs]
    return sum(per_problem) / len(per_problem) if per_problem else float("nan")


def pass_at_k(successes: Sequence[Sequence[bool]], k: int | None = None) -> float:
    """Share of problems solved by at least one of k runs; with n > k runs per problem, the unbiased estimate
    ``1 - C(n-c, k) / C(n, k)`` (c successes of n). ``k`` defaults to each problem's number of runs.

    >>> pass_at_k([[True, False, False, False], [False, False, False, False]])
    0.5
    >>> pass_at_k([[True, False, False, False]], k=1)      # = avg@1 estimated from 4 runs
    0.25
    """
    values = []
    for runs in successes:
        n, c = len(runs), sum(runs)
        kk = n if k is None else k
        if n == 0:
            continue
        if kk > n:
            raise ValueError(f"pass@{kk} needs at least {kk} runs per problem; a problem has {n}")
        values.append(1.0 if n - c < kk else 1.0 - math.comb(n - c, kk) / math.comb(n, kk))
    return sum(values) / len(values) if values else float("nan")


def per_problem(successes: Sequence[Sequence[bool]], metric: str) -> list[float]:
    """Each problem's value of ``metric`` ("avg": its success rate over its runs; "pass": pass@k with k its number
    of runs); a metric averaged over problems is the mean of these, so the bootstrap resamples them.

    >>> per_problem([[True, False, False, False], [False] * 4], "avg"), per_problem([[True, False], [False] * 2], "pass")
    ([0.25, 0.0], [1.0, 0.0])
    """
    if metric not in ("avg", "pass"):
        raise ValueError(f"metric {metric!r}: use 'avg' (avg@k) or 'pass' (pass@k)")
    runs = [r for r in successes if r]
    return [sum(r) / len(r) for r in runs] if metric == "avg" else [float(any(r)) for r in runs]


def bootstrap_ci(
    values: Sequence[float], *, resamples: int = CI_RESAMPLES, level: float = CI_LEVEL, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of per-problem ``values``, resampling problems with replacement
    (seeded: the same values give the same interval). ``(nan, nan)`` without values.

    Three of ten problems solved: the mean is 0.3, and over 2000 resamples 95% of the means lie in [0.0, 0.6]:

    >>> bootstrap_ci([1, 1, 1, 0, 0, 0, 0, 0, 0, 0])
    (0.0, 0.6)
    >>> bootstrap_ci([0.5] * 7)                  # no spread between problems, no width
    (0.5, 0.5)
    """
    import numpy as np

    if not 0 < level < 1:
        raise ValueError(f"level {level}: a coverage between 0 and 1, e.g. 0.95")
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, v.size, size=(resamples, v.size))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return round(float(low), 12), round(float(high), 12)


def format_failure_rates(trajectories: Sequence[Any]) -> dict[str, float]:
    """Per role: the share of its calls whose ``step.meta["format_ok"]`` is False (the loop's summaries left out).

    >>> from types import SimpleNamespace as S
    >>> t = S(steps=[S(role="solver", kind="action", meta={"format_ok": False}),
    ...              S(role="solver", kind="action", meta={"format_ok": True}),
    ...              S(role="verifier", kind="verdict", meta={})])
    >>> format_failure_rates([t])
    {'solver': 0.5, 'verifier': 0.0}
    """
    return rates(format_failure_counts(trajectories))


def mean_turns(trajectories: Sequence[Any]) -> float:
    """Model calls per team run (every role's, the loop's summaries left out).

    >>> from types import SimpleNamespace as S
    >>> mean_turns([S(steps=[S(kind="action"), S(kind="verdict")]), S(steps=[S(kind="action")])])
    1.5
    """
    return total_turns(trajectories) / len(trajectories) if trajectories else float("nan")


def total_turns(trajectories: Sequence[Any]) -> int:
    """Model calls over all the team runs (the loop's summaries left out)."""
    return sum(sum(s.kind not in LOOP_CALLS for s in t.steps) for t in trajectories)


def mean_tokens(trajectories: Sequence[Any]) -> float:
    """Generated tokens per team run (calls without token ids count 0).

    >>> from types import SimpleNamespace as S
    >>> mean_tokens([S(steps=[S(token_ids=[1, 2, 3]), S(token_ids=None)]), S(steps=[S(token_ids=[4])])])
    2.0
    """
    return total_tokens(trajectories) / len(trajectories) if trajectories else float("nan")


def total_tokens(trajectories: Sequence[Any]) -> int:
    """Generated tokens over all the team runs."""
    return sum(len(s.token_ids or ()) for t in trajectories for s in t.steps)


# -- the report ----------------------------------------------------------------------------------------
@dataclass
class EvalReport:
    """What ``evaluate`` measured; ``to_dict`` / ``to_json`` for machines, ``report_table`` for people."""

    split: str
    k: int
    problems: int
    avg_at_k: float
    pass_at_k: float
    greedy: float | None  # greedy accuracy (temperature 0), None when not run
    format_failure: dict[str, float]  # role -> share of its calls with an invalid format (sampled runs)
    mean_turns: float  # model calls per sampled team run
    mean_tokens: float  # generated tokens per sampled team run
    reward_mean: float  # mean reward of the sampled runs (unscored runs left out)
    reward_errors: int  # runs whose reward raised (counted as failures)
    seconds: float
    temperature: float
    checkpoint: str = "base"
    step: int | None = None
    greedy_format_failure: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # the first few reward errors
    # 95% bootstrap intervals over problems: {"avg@k": [low, high], "pass@k": [...], "greedy": [...]}
    ci: dict[str, list[float]] = field(default_factory=dict)
    successes: list[list[bool]] = field(default_factory=list)  # per problem, its k sampled runs (for paired CIs)
    greedy_successes: list[bool] = field(default_factory=list)  # per problem, its greedy run
    role_reward_mean: dict[str, float] = field(default_factory=dict)  # role -> mean reward (role-specific rewards)
    dtype: str = "float32"  # the models' dtype during the eval (a bf16 eval of fp32 weights samples a little apart)
    # what the weights computed in, where it differs from dtype: "float32" for bf16 weights on a CPU without bf16
    # arithmetic (cave.llm.cpu_attention.cpu_compute_dtype)
    compute_dtype: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {f"avg@{self.k}" if k == "avg_at_k" else f"pass@{self.k}" if k == "pass_at_k" else k: v
                for k, v in asdict(self).items()}  # fmt: skip

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), default=str, **kwargs)

    def interval(self, metric: str) -> str:
        """``" [low, high]"`` of ``metric``'s bootstrap interval ("avg@k", "pass@k", "greedy"); "" without one."""
        return format_ci(self.ci.get(metric))


def format_ci(ci: Sequence[float] | None) -> str:
    """A metric's interval as printed beside it.

    >>> format_ci([0.25, 0.5]), format_ci(None)
    (' [0.250, 0.500]', '')
    """
    return f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""


def intervals(successes: Sequence[Sequence[bool]], greedy: Sequence[bool] | None, k: int) -> dict[str, list[float]]:
    """The bootstrap intervals of avg@k, pass@k and (with greedy runs) greedy accuracy, over the same problems.

    >>> intervals([[True, True], [False, False]] * 5, [True, False] * 5, 2)["greedy"]
    [0.2, 0.8]
    """
    out = {f"avg@{k}": per_problem(successes, "avg"), f"pass@{k}": per_problem(successes, "pass")}
    if greedy:
        out["greedy"] = [float(g) for g in greedy]
    return {name: list(bootstrap_ci(values)) for name, values in out.items()}


def report_table(report: EvalReport, title: str | None = None) -> Any:
    """A rich table of a report (one metric a row)."""
    from rich.table import Table

    table = Table(
        title=title or f"eval: {report.split} split, {report.problems} problems, checkpoint {report.checkpoint}"
    )
    table.add_column("metric")
    table.add_column("value", justify="right")
    k = report.k
    table.add_row(f"avg@{k} (T={report.temperature:g}) [95% CI]", f"{report.avg_at_k:.3f}{report.interval(f'avg@{k}')}")
    table.add_row(f"pass@{k}", f"{report.pass_at_k:.3f}{report.interval(f'pass@{k}')}")
    greedy = "-" if report.greedy is None else f"{report.greedy:.3f}{report.interval('greedy')}"
    table.add_row("greedy accuracy (T=0)", greedy)
    for role, mean in report.role_reward_mean.items():
        table.add_row(f"reward: {role}", f"{mean:.3f}")
    for role, rate in report.format_failure.items():
        table.add_row(f"format failures: {role}", f"{rate:.1%}")
    table.add_row("mean turns (calls / run)", f"{report.mean_turns:.2f}")
    table.add_row("mean tokens / run", f"{report.mean_tokens:.1f}")
    table.add_row("reward mean (sampled)", f"{report.reward_mean:.3f}")
    if report.reward_errors:
        table.add_row("reward errors", str(report.reward_errors))
    table.add_row("wall time", f"{report.seconds:.1f} s")
    return table


# -- running ---------------------------------------------------------------------------------------------
def score_episodes(episodes: Sequence[Any], reward_fn: Any) -> list[str]:
    """Set each episode's reward (the team's); role-specific rewards (``cave.training.rewards.RoleRewards``) go to
    ``trajectory.meta["role_rewards"]``. A reward that raises (or is not finite) leaves it None: returned as errors.
    """
    from cave.training.rewards import ROLE_REWARDS, split_reward

    failed = []
    for ep in episodes:
        try:
            ep.reward, roles = split_reward(reward_fn(ep.result, ep.example))
            if roles:
                ep.trajectory.meta[ROLE_REWARDS] = roles
        except Exception as e:
            ep.reward, ep.reward_error = None, f"{type(e).__name__}: {e}"
            failed.append(f"{ep.group_id} ({ep.trajectory.run_id}): {ep.reward_error}")
        ep.trajectory.reward = ep.reward
    return failed


def eval_examples(cfg: Any, split: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """The examples of ``split`` (default: the config's own data, as training reads it), the first ``limit``."""
    data = cfg.data if split is None else cfg.data.for_split(split)
    examples = data.examples()
    return examples[:limit] if limit else examples


def greedy_team(cfg: Any, engines: Mapping[str, Any]) -> Any:
    """The team ``build_team`` makes, at temperature 0 (greedy decoding)."""
    from cave.training.rollout import policy_team

    role_models = {role: a.model for role, a in cfg.agents.items()}
    backends = {name: engine.llm for name, engine in engines.items()}
    return policy_team(cfg.team, role_models, backends, temperature=0.0, max_tokens=cfg.max_tokens)


def evaluate(
    cfg: Any,
    engines: Mapping[str, Any],
    examples: Sequence[Mapping[str, Any]],
    *,
    k: int = 4,
    greedy: bool = True,
    split: str = "test",
    checkpoint: str = "base",
    step: int | None = None,
    parts: str | Path | None = None,
    chunk: int = PART_PROBLEMS,
    compute_dtype: str | None = None,
) -> EvalReport:
    """Run the team on ``examples`` exactly as rollouts do (k sampled runs each, plus one greedy) and score it.

    ``engines``: model name -> rollout engine (``LocalWorkers.engines``), serving the weights to evaluate.
    ``parts``: a JSONL file that keeps each finished share of ``chunk`` problems, so an evaluation that was stopped
    goes on where it stopped (a share counts when its problems, k, greedy and ``checkpoint`` are the same); the
    shares are seeded as the whole batch would be, so the report is the one a single run gives. Without ``parts``
    the problems run as one batch.
    """
    from cave.training.rewards import get_reward

    if not examples:
        raise ValueError(f"no {split} examples to evaluate")
    reward_fn = get_reward(cfg.reward)
    t0 = time.perf_counter()
    dtype = model_dtype(cfg)
    compute = compute_dtype if compute_dtype not in (None, dtype) else None
    kept = read_parts(parts, k=k, greedy=greedy, checkpoint=checkpoint, dtype=dtype, compute=compute) if parts else {}
    size = max(1, chunk) if parts else len(examples)
    tallies, seconds = [], 0.0
    for start in range(0, len(examples), size):
        share = examples[start : start + size]
        tally = kept.get((start, examples_digest(share)))
        if tally is None:
            tally = run_part(cfg, engines, share, k=k, greedy=greedy, offset=start, reward_fn=reward_fn)
            if parts:
                write_part(parts, tally, k=k, greedy=greedy, checkpoint=checkpoint, dtype=dtype, compute=compute)
        else:
            seconds += tally.seconds  # its time was spent before the stop
        tallies.append(tally)
    whole = Tally.join(tallies)
    greedy_runs = whole.greedy_successes if greedy else None
    return EvalReport(
        split=split,
        k=k,
        problems=len(examples),
        avg_at_k=avg_at_k(whole.successes),
        pass_at_k=pass_at_k(whole.successes),
        greedy=sum(greedy_runs) / len(greedy_runs) if greedy_runs else None,
        format_failure=rates(whole.calls),
        mean_turns=whole.turns / whole.runs if whole.runs else float("nan"),
        mean_tokens=whole.tokens / whole.runs if whole.runs else float("nan"),
        reward_mean=sum(whole.rewards) / len(whole.rewards) if whole.rewards else float("nan"),
        reward_errors=len(whole.errors),
        seconds=seconds + time.perf_counter() - t0,
        temperature=cfg.temperature,
        checkpoint=checkpoint,
        step=step,
        greedy_format_failure=rates(whole.greedy_calls),
        errors=whole.errors[:3],
        ci=intervals(whole.successes, greedy_runs, k),
        successes=whole.successes,
        greedy_successes=greedy_runs or [],
        role_reward_mean={role: total / n for role, (total, n) in whole.role_rewards.items()},
        dtype=dtype,
        compute_dtype=compute,
    )


# -- a share of the problems, kept so a stopped evaluation goes on -----------------------------------------


@dataclass
class Tally:
    """What one share of the problems contributes to the report: sums and counts, so shares add up."""

    start: int  # the index of the share's first problem
    digest: str  # examples_digest of the share's problems
    successes: list[list[bool]]
    greedy_successes: list[bool]
    rewards: list[float]  # the sampled runs' rewards (unscored runs left out)
    errors: list[str]
    calls: dict[str, list[int]]  # role -> [calls with an invalid format, calls] (sampled runs)
    greedy_calls: dict[str, list[int]]
    turns: int  # model calls over the sampled runs
    tokens: int
    runs: int
    role_rewards: dict[str, list[float]]  # role -> [sum, count]
    seconds: float = 0.0

    @staticmethod
    def join(tallies: Sequence[Tally]) -> Tally:
        """The tally of all the shares, in order.

        >>> a = Tally(0, "", [[True]], [True], [1.0], [], {"s": [0, 2]}, {}, 2, 5, 1, {"s": [1.0, 1]})
        >>> b = Tally(1, "", [[False]], [False], [0.0], ["x"], {"s": [1, 2]}, {}, 3, 7, 1, {"s": [0.0, 1]})
        >>> j = Tally.join([a, b]); j.successes, j.calls, j.turns, j.role_rewards
        ([[True], [False]], {'s': [1, 4]}, 5, {'s': [1.0, 2]})
        """
        out = Tally(0, "", [], [], [], [], {}, {}, 0, 0, 0, {})
        for t in tallies:
            out.successes += t.successes
            out.greedy_successes += t.greedy_successes
            out.rewards += t.rewards
            out.errors += t.errors
            for mine, theirs in ((out.calls, t.calls), (out.greedy_calls, t.greedy_calls),
                                 (out.role_rewards, t.role_rewards)):  # fmt: skip
                for role, (a, b) in theirs.items():
                    mine[role] = [x + y for x, y in zip(mine.get(role, [0, 0]), (a, b), strict=True)]
            out.turns, out.tokens, out.runs = out.turns + t.turns, out.tokens + t.tokens, out.runs + t.runs
            out.seconds += t.seconds
        return out


def rates(calls: Mapping[str, Sequence[int]]) -> dict[str, float]:
    """Per role, invalid calls over calls.

    >>> rates({"solver": [1, 4], "verifier": [0, 0]})
    {'solver': 0.25}
    """
    return {role: bad / n for role, (bad, n) in calls.items() if n}


def format_failure_counts(trajectories: Sequence[Any]) -> dict[str, list[int]]:
    """Per role: [its calls whose ``step.meta["format_ok"]`` is False, its calls] (the loop's summaries left out)."""
    calls: dict[str, list[int]] = {}
    for traj in trajectories:
        for step in traj.steps:
            if step.kind not in LOOP_CALLS:
                count = calls.setdefault(step.role, [0, 0])
                count[0] += step.meta.get("format_ok") is False
                count[1] += 1
    return calls


def examples_digest(examples: Sequence[Mapping[str, Any]]) -> str:
    """A short hash of the problems, so a kept share is used only for the same problems.

    >>> examples_digest([{"q": "1+1"}]) == examples_digest([{"q": "1+1"}]) != examples_digest([{"q": "2+2"}])
    True
    """
    import hashlib

    text = json.dumps(list(examples), sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def run_part(cfg: Any, engines: Mapping[str, Any], examples: Sequence[Mapping[str, Any]], *, k: int, greedy: bool,
             offset: int, reward_fn: Any) -> Tally:  # fmt: skip
    """The k sampled runs and the greedy run of a share of the problems, seeded as its place in the whole batch."""
    from cave.training.workers import build_team, run_rollout

    t0 = time.perf_counter()
    sampled = cfg.model_copy(update={"group_size": k})
    roll = run_rollout(sampled, build_team(cfg, engines), engines, examples, step=0, offset=offset)
    errors = score_episodes(roll.episodes, reward_fn)
    trajs = [ep.trajectory for ep in roll.episodes]
    greedy_runs, greedy_calls = [], {}
    if greedy:
        one = cfg.model_copy(update={"group_size": 1})
        groll = run_rollout(one, greedy_team(cfg, engines), engines, examples, 0, offset=offset)
        errors += score_episodes(groll.episodes, reward_fn)
        greedy_runs = [is_success(ep.reward) for ep in groll.episodes]
        greedy_calls = format_failure_counts([ep.trajectory for ep in groll.episodes])
    return Tally(
        start=offset,
        digest=examples_digest(examples),
        successes=[[is_success(ep.reward) for ep in roll.episodes[i * k : (i + 1) * k]] for i in range(len(examples))],
        greedy_successes=greedy_runs,
        rewards=[ep.reward for ep in roll.episodes if ep.reward is not None],
        errors=errors,
        calls=format_failure_counts(trajs),
        greedy_calls=greedy_calls,
        turns=total_turns(trajs),
        tokens=total_tokens(trajs),
        runs=len(trajs),
        role_rewards=role_reward_sums(trajs),
        seconds=time.perf_counter() - t0,
    )


def write_part(
    path: str | Path,
    tally: Tally,
    *,
    k: int,
    greedy: bool,
    checkpoint: str,
    dtype: str = "float32",
    compute: str | None = None,
) -> None:
    """Append a finished share to ``path`` (one JSON line), with what it was run for."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    row = {"k": k, "greedy": greedy, "checkpoint": checkpoint, "dtype": dtype, **asdict(tally)}
    if compute is not None:
        row["compute"] = compute
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")


def read_parts(
    path: str | Path, *, k: int, greedy: bool, checkpoint: str, dtype: str = "float32", compute: str | None = None
) -> dict[tuple[int, str], Tally]:
    """The shares kept in ``path`` for this k, greedy, checkpoint and dtype (and ``compute``, the dtype computed in
    where it differs), by (start, digest); a torn last line (a stop while it was written) and shares of another
    evaluation are left out (a share without a dtype was fp32, one without a compute computed in its dtype)."""
    path = Path(path)
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        what = (row.pop("k", None), row.pop("greedy", None), row.pop("checkpoint", None), row.pop("dtype", "float32"),
                row.pop("compute", None))  # fmt: skip
        if what != (k, greedy, checkpoint, dtype, compute):
            continue
        try:
            tally = Tally(**row)
        except TypeError:
            continue
        out[(tally.start, tally.digest)] = tally
    return out


def role_reward_means(trajectories: Sequence[Any]) -> dict[str, float]:
    """Each role's mean reward over the scored runs that carry role rewards (``meta["role_rewards"]``).

    >>> from types import SimpleNamespace as S
    >>> role_reward_means([S(meta={"role_rewards": {"verifier": 1.0}}), S(meta={"role_rewards": {"verifier": 0.0}})])
    {'verifier': 0.5}
    """
    return {role: total / n for role, (total, n) in role_reward_sums(trajectories).items()}


def role_reward_sums(trajectories: Sequence[Any]) -> dict[str, list[float]]:
    """Each role's [sum of rewards, count] over the scored runs that carry role rewards (shares of an evaluation add
    these up)."""
    from cave.training.rewards import ROLE_REWARDS

    sums: dict[str, list[float]] = {}
    for traj in trajectories:
        for role, r in (traj.meta.get(ROLE_REWARDS) or {}).items():
            total = sums.setdefault(role, [0.0, 0])
            total[0], total[1] = total[0] + r, total[1] + 1
    return sums


def evaluate_checkpoint(
    cfg: Any,
    examples: Sequence[Mapping[str, Any]],
    *,
    run_dir: str | Path | None = None,
    k: int = 4,
    greedy: bool = True,
    split: str = "test",
    label: str | None = None,
    parts: str | Path | None = None,
    dtype: str | None = None,
) -> EvalReport:
    """``evaluate`` on fresh in-process workers: the config's models as they are (the base, or exported folders),
    or with ``run_dir``'s latest checkpoint loaded (a `cave train run` or `cave train sft` folder). ``parts``: keep
    finished shares there, so a stopped evaluation goes on (``evaluate``). ``dtype``: run the models in this dtype
    instead of the config's ("bfloat16": fp32 weights cast, about 1.7x faster on a CPU with AVX512-BF16; on a CPU
    without bf16 arithmetic the bf16-rounded weights compute in float32, ~5x faster there than bf16 kernels:
    ``compute_dtype``); the report says which."""
    from cave.training.checkpoints import init_weights, latest_checkpoint, load_checkpoint
    from cave.training.workers import LocalWorkers

    if run_dir is not None and latest_checkpoint(run_dir) is None:
        raise ValueError(f"{run_dir}: no checkpoint (checkpoints/latest); train it first")
    if dtype is not None:
        cfg = with_dtype(cfg, dtype)
    workers = LocalWorkers(cfg.model_copy(update={"ray": None}))
    try:
        if run_dir is not None:
            # loaded first: a label given by the caller names the checkpoint, it does not replace it; in another
            # dtype only the weights (cast), as an eval steps no optimizer
            step = load_checkpoint(Path(run_dir), workers) if dtype is None else init_weights(Path(run_dir), workers)
            label = label or f"latest (step {step})"
        compute = _compute_in_float32(workers) if dtype == "bfloat16" else None
        return evaluate(cfg, workers.engines, examples, k=k, greedy=greedy, split=split, checkpoint=label or "base",
                        parts=parts, compute_dtype=compute)  # fmt: skip
    finally:
        workers.close()


def _compute_in_float32(workers: Any) -> str | None:
    """On a CPU without bf16 arithmetic, the bf16 models that the engines sample from themselves, cast to float32
    (their weights are bf16-rounded already: the same weights, computed ~5x faster); "float32" when every bf16
    model was, else None (computed as they are)."""
    import torch

    from cave.llm.cpu_attention import cpu_compute_dtype

    half = {name: model for name, (model, _) in workers.models.items() if model.dtype == torch.bfloat16}
    castable = all(cpu_compute_dtype("bfloat16", model.device.type) == "float32"
                   and getattr(workers.engines.get(name), "model", None) is model for name, model in half.items())  # fmt: skip
    if not half or not castable:
        return None
    for model in half.values():
        model.to(torch.float32)
    return "float32"


def model_dtype(cfg: Any) -> str:
    """The dtype the config's models run in ("float32", "bfloat16"; several joined by "+")."""
    return "+".join(sorted({m.dtype for m in cfg.models.values()})) or "float32"


def with_dtype(cfg: Any, dtype: str) -> Any:
    """``cfg`` with every model in ``dtype``."""
    models = {name: m.model_copy(update={"dtype": dtype}) for name, m in cfg.models.items()}
    return cfg.model_copy(update={"models": models})


# -- the held-out curve ------------------------------------------------------------------------------------
def read_eval(run_dir: str | Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / EVAL
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def plot_eval(run_dir: str | Path, train_rows: Sequence[Mapping[str, Any]]) -> Path | None:
    """RUN_DIR/plots/heldout.png: held-out avg@k / pass@k / greedy beside the training reward; None without evals."""
    rows = read_eval(run_dir)
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    k, split = rows[-1]["k"], rows[-1]["split"]
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    train = [(r["step"], r["reward_mean"]) for r in train_rows if isinstance(r.get("reward_mean"), int | float)]
    if train:
        ax.plot(
            *zip(*train, strict=True), linestyle="-", marker="o", markersize=3, alpha=0.6, label="train reward_mean"
        )
    # coinciding series stay visible: own dash and marker, larger markers under smaller ones
    for key, style, marker, size in ((f"avg@{k}", "--", "s", 8), (f"pass@{k}", ":", "^", 6), ("greedy", "-.", "D", 4)):
        pts = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), int | float)]
        if pts:
            ax.plot(*zip(*pts, strict=True), linestyle=style, marker=marker, markersize=size, alpha=0.8,
                    label=f"{split} {key}")  # fmt: skip
    ax.set_xlabel("step")
    ax.set_ylabel("success rate / mean reward")
    ax.set_ylim(-0.05, 1.05)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(f"held-out ({split}, {rows[-1]['problems']} problems) vs training reward")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    out = Path(run_dir) / "plots" / "heldout.png"
    out.parent.mkdir(exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out
