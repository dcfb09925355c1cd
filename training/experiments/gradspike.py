"""Do agent-wise advantages remove gradient spikes? grpo vs drmas vs pooled_calls on toy two-agent teams.

    python -m cave.training.experiments.gradspike                  # 3 seeds x 3 estimators, a few minutes on 2 cores
    python -m cave.training.experiments.gradspike --quick          # < 1 minute (CI)
    python -m cave.training.experiments.gradspike --task search    # the control task

The Dr. MAS claim (REFERENCE.md): with one global baseline, an agent whose score distribution differs from the pooled
one gets inflated, spiky gradient norms (second moment ~ (sigma_k^2 + (mu_k - mu)^2) / sigma^2); normalizing per
(prompt, agent) removes the spikes without slowing learning.

Two toy teams, each agent its own tiny Llama (~100k parameters, briefly warm-started, then trained by RL here). Every
prompt group hides a random answer digit; agents see noisy hints of it (right with some probability, else a random
digit); every call emits one token and must be a valid one (else score = R - c, REFERENCE.md); reward R = 1 when
the team's final answer is right.

- ``repair`` (default; the agents' score distributions differ): the **solver** answers from a hint; a runtime check
  (the reward function) tells whether it is right; only when it is not, the **fixer** gets the wrong answer and a
  second, less reliable hint, and answers again. The solver acts once in every run; the fixer only in runs the
  solver got wrong, which are the hard runs, and it succeeds less often -- its calls' mean score and spread differ
  from the pooled ones, and it becomes rarer as the solver improves.
- ``search`` (control; similar distributions): the **router** says SEARCH (get a hint) or ANSWER, up to 4 times; the
  **answerer** is called when it says ANSWER and answers from the hints. Both act in almost every run.

Two measurements:

- **training runs**: each estimator trains its own team (same seed: same initial weights, same first rollouts);
  per-agent gradient norms before clipping at every optimizer step, and reward curves;
- **paired probe**: at every iteration of every run, the gradient norm each estimator *would* produce on that same
  batch and weights (no step), and each agent's mean squared advantage E[A^2] -- the factor above. Same data for
  all three estimators: the differences are the estimator's alone.

The rollouts become cave ``Trajectory``/``Step`` records and go through the trainer's own code
(``build_samples`` -> ``compute_advantages`` -> ``AgentPolicies.update``); only the environments and the one-token
sampler here are toys. The full trainer runs the same estimators and update on real team rollouts through cave.

Outputs in ``--out``: ``metrics.jsonl`` (one row per estimator, seed and iteration), ``summary.json`` (per-agent
grad-norm max/median, E[A^2] and reward, per estimator, over seeds) and ``gradspike.png``.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from cave.training.advantages import advantage_stats, compute_advantages
from cave.training.diagnostics import agent_diagnostics, grad_norm_tail
from cave.training.loss import FORMAT_PENALTY, LossConfig
from cave.training.policy import AgentPolicies, OptimizerConfig
from cave.training.samples import build_samples, sample_columns

from cave.trajectory import Step, Trajectory

__all__ = [
    "Config",
    "DIGITS",
    "Episode",
    "QUICK",
    "STAT_KEYS",
    "TAIL_KEYS",
    "TIMING_KEYS",
    "TASKS",
    "ToyTask",
    "VOCAB_SIZE",
    "grad_norm_stats",
    "last_logits",
    "environment",
    "main",
    "plot",
    "print_table",
    "repair_rollout",
    "repair_warm_example",
    "replot",
    "run",
    "reproducible_part",
    "run_one",
    "sample_next",
    "search_rollout",
    "search_warm_example",
    "summarize",
    "summarize_probe",
    "tiny_policy",
    "warm_start",
]

# Vocabulary: control tokens, then 8 digits. A call's output is valid when it is one of the tokens its role may say.
PAD, BOS, QMARK, HINT, WRONG, SEARCH, ANSWER, ROUTER, ANSWERER, SOLVER, FIXER = range(11)
DIGIT0, N_DIGITS = 11, 8
VOCAB_SIZE = DIGIT0 + N_DIGITS
DIGITS = list(range(DIGIT0, DIGIT0 + N_DIGITS))


@dataclass
class Config:
    task: str = "repair"  # "repair" | "search"
    estimators: tuple[str, ...] = ("grpo", "drmas", "pooled_calls")
    seeds: tuple[int, ...] = (0, 1, 2)
    iterations: int = 100
    prompts_per_iteration: int = 8
    rollouts_per_prompt: int = 8  # N, the GRPO group size
    hint_accuracy: float | None = None  # None: the task's default (repair: solver 0.75, fixer 0.5; search 0.6)
    format_penalty: float | None = None  # c; None: the task's (repair: 0.1 as on math, search: 0.01)
    entropy_coef: float | None = None  # None: the task's (repair: 0 as on math, search: 0.001)
    lr: float = 1e-3
    steps_per_iteration: int = 2
    grad_clip: float = 1.0
    shared_model: bool = False  # one model for both roles (the role token tells them apart)
    hidden_size: int = 64
    layers: int = 2
    threads: int = 1
    warm_start_steps: int = 150  # supervised warm-up before RL (see warm_start)
    probe: bool = True  # the paired probe (one extra forward and 3 backward passes per agent and iteration)
    out: str = "runs/gradspike"

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"unknown task {self.task!r}; choose one of {sorted(TASKS)}")

    @property
    def toy(self) -> ToyTask:
        return TASKS[self.task]

    @property
    def penalty(self) -> float:
        return self.format_penalty if self.format_penalty is not None else self.toy.format_penalty

    @property
    def entropy(self) -> float:
        return self.entropy_coef if self.entropy_coef is not None else self.toy.entropy_coef


QUICK = {"seeds": (0, 1), "iterations": 12, "warm_start_steps": 80}


# -- policies and sampling -------------------------------------------------------------------------------------------
def tiny_policy(seed: int, cfg: Config) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=cfg.hidden_size,
        intermediate_size=4 * cfg.hidden_size,
        num_hidden_layers=cfg.layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=64,
        pad_token_id=PAD,
        bos_token_id=BOS,
        eos_token_id=None,
    )
    return LlamaForCausalLM(config)


def last_logits(model: torch.nn.Module, prompts: Sequence[list[int]]) -> torch.Tensor:
    """Next-token logits ``[B, V]`` after each prompt (left-padded batch)."""
    L = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), L), PAD, dtype=torch.long)
    attn = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, L - len(p) :] = torch.tensor(p)
        attn[i, L - len(p) :] = 1
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=False, logits_to_keep=1)
    return out.logits[:, -1].float()


@torch.no_grad()
def sample_next(
    model: torch.nn.Module, prompts: Sequence[list[int]], gen: torch.Generator
) -> tuple[list[int], list[float]]:
    """One token per prompt at temperature 1, with its log-prob (the 'old logprob' the update uses)."""
    model.eval()
    logp = torch.log_softmax(last_logits(model, prompts), dim=-1)
    tokens = torch.multinomial(logp.exp(), 1, generator=gen).squeeze(-1)
    return tokens.tolist(), logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1).tolist()


def warm_start(seed: int, cfg: Config) -> dict[str, torch.nn.Module]:
    """The team before RL, after a short supervised warm-up (like starting RL from an instruction-tuned LLM).

    Each agent learns its output format and a weak version of its skill (see the task's ``warm_example``), so RL
    starts from a team that sometimes succeeds. From scratch, reward stays near chance for too long for this budget
    (on ``search`` the router learns to answer at once, before the answerer can use hints).
    """
    rng = np.random.default_rng(10_000 + seed)
    agents = cfg.toy.agents
    if cfg.shared_model:
        shared = tiny_policy(seed * 100, cfg)
        models = dict.fromkeys(agents, shared)
    else:
        models = {a: tiny_policy(seed * 100 + i, cfg) for i, a in enumerate(agents)}
    for model in {id(m): m for m in models.values()}.values():
        roles = [r for r, m in models.items() if m is model]
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        model.train()
        for _ in range(cfg.warm_start_steps):
            prompts, targets = [], []
            for _ in range(64):
                prompt, target = cfg.toy.warm_example(roles[int(rng.integers(len(roles)))], rng, cfg)
                prompts.append(prompt)
                targets.append(target)
            logp = torch.log_softmax(last_logits(model, prompts), dim=-1)
            loss = -(torch.tensor(np.array(targets), dtype=torch.float32) * logp).sum(-1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return models


# -- the toy teams ---------------------------------------------------------------------------------------------------
@dataclass
class Episode:
    answer: int  # hidden; shared by the N runs of a prompt group
    traj: Trajectory
    history: list[int] = field(default_factory=list)
    hints: list[int] = field(default_factory=list)
    answering: bool = False


def _episodes(answers: Sequence[int], cfg: Config, tag: str) -> list[Episode]:
    episodes = []
    for g, a in enumerate(answers):
        for k in range(cfg.rollouts_per_prompt):
            traj = Trajectory(task=f"find {tag}-{g}", team_run_id=f"{tag}-{g}-{k}", meta={"group_id": f"{tag}-{g}"})
            episodes.append(Episode(int(a), traj))
    return episodes


def _hint(answer: int, accuracy: float, rng: np.random.Generator) -> int:
    return answer if rng.random() < accuracy else int(rng.integers(N_DIGITS))


def _digit(tok: int) -> int | None:
    return tok - DIGIT0 if DIGIT0 <= tok < DIGIT0 + N_DIGITS else None


def _step(e: Episode, role: str, prompt: list[int], tok: int, lp: float, *, ok: bool, kind: str = "action") -> Step:
    return Step(
        index=len(e.traj.steps),
        role=role,
        prompt_token_ids=list(prompt),
        token_ids=[tok],
        logprobs=[lp],
        team_run_id=e.traj.team_run_id,
        kind=kind,
        meta={"format_ok": ok},
    )


def _answer(policies, role: str, group: list[Episode], prompts: list[list[int]], gen) -> None:
    """``role``'s turn for each episode of ``group``: the digit it samples is the episode's final answer."""
    tokens, logprobs = sample_next(policies.model(role), prompts, gen)
    for e, prompt, tok, lp in zip(group, prompts, tokens, logprobs, strict=True):
        e.traj.steps.append(_step(e, role, prompt, tok, lp, ok=_digit(tok) is not None))
        e.traj.final_answer = _digit(tok)


def repair_rollout(policies, answers, cfg: Config, rng, gen, tag: str) -> list[Trajectory]:
    """Solver answers from a hint; when the check fails, the fixer sees the wrong answer and a second hint."""
    acc_solver, acc_fixer = (cfg.hint_accuracy, cfg.hint_accuracy) if cfg.hint_accuracy is not None else (0.75, 0.5)
    episodes = _episodes(answers, cfg, tag)
    prompts = []
    for e in episodes:
        e.hints.append(_hint(e.answer, acc_solver, rng))
        prompts.append([BOS, SOLVER, QMARK, HINT, DIGIT0 + e.hints[0]])
    tokens, logprobs = sample_next(policies.model("solver"), prompts, gen)
    wrong = []
    for e, prompt, tok, lp in zip(episodes, prompts, tokens, logprobs, strict=True):
        e.traj.steps.append(_step(e, "solver", prompt, tok, lp, ok=_digit(tok) is not None))
        e.traj.final_answer = _digit(tok)
        if e.traj.final_answer != e.answer:  # the runtime check: the fixer is called only on failure
            e.history = [WRONG, tok]
            wrong.append(e)
    if wrong:
        prompts = []
        for e in wrong:
            e.hints.append(_hint(e.answer, acc_fixer, rng))
            prompts.append([BOS, FIXER, QMARK, *e.history, HINT, DIGIT0 + e.hints[1]])
        _answer(policies, "fixer", wrong, prompts, gen)
    for e in episodes:
        e.traj.reward = 1.0 if e.traj.final_answer == e.answer else 0.0
        e.traj.status = "success"
    return [e.traj for e in episodes]


def repair_warm_example(role: str, rng: np.random.Generator, cfg: Config) -> tuple[list[int], np.ndarray]:
    """Half the time repeat the hint, else any digit, with a 5% format slip (a control token)."""
    hint = int(rng.integers(N_DIGITS))
    target = np.zeros(VOCAB_SIZE)
    target[DIGITS] = 0.45 / N_DIGITS
    target[DIGIT0 + hint] += 0.5
    target[[QMARK, HINT, WRONG]] += 0.05 / 3
    if role == "solver":
        return [BOS, SOLVER, QMARK, HINT, DIGIT0 + hint], target
    wrong = DIGIT0 + int(rng.integers(N_DIGITS)) if rng.random() < 0.9 else int(rng.choice([QMARK, HINT]))
    return [BOS, FIXER, QMARK, WRONG, wrong, HINT, DIGIT0 + hint], target


def search_rollout(policies, answers, cfg: Config, rng, gen, tag: str, max_steps: int = 4) -> list[Trajectory]:
    """Router: SEARCH (a hint) or ANSWER, up to 4 times; answerer answers from the hints when asked."""
    accuracy = cfg.hint_accuracy if cfg.hint_accuracy is not None else 0.6
    episodes = _episodes(answers, cfg, tag)
    active = list(range(len(episodes)))
    for _ in range(max_steps):
        if not active:
            break
        prompts = [[BOS, ROUTER, QMARK, *episodes[i].history] for i in active]
        tokens, logprobs = sample_next(policies.model("router"), prompts, gen)
        still = []
        for i, prompt, tok, lp in zip(active, prompts, tokens, logprobs, strict=True):
            e = episodes[i]
            e.traj.steps.append(_step(e, "router", prompt, tok, lp, ok=tok in (SEARCH, ANSWER), kind="route"))
            if tok == ANSWER:
                e.answering = True
                continue
            if tok == SEARCH:
                e.hints.append(_hint(e.answer, accuracy, rng))
                e.history += [SEARCH, HINT, DIGIT0 + e.hints[-1]]
            else:
                e.history.append(tok)  # an invalid action wastes the step
            still.append(i)
        active = still
    answering = [e for e in episodes if e.answering]
    if answering:
        prompts = [[BOS, ANSWERER, QMARK, *[t for h in e.hints for t in (HINT, DIGIT0 + h)]] for e in answering]
        _answer(policies, "answerer", answering, prompts, gen)
    for e in episodes:
        e.traj.reward = 1.0 if e.traj.final_answer == e.answer else 0.0
        e.traj.status = "success" if e.answering else "max_steps"
    return [e.traj for e in episodes]


def search_warm_example(role: str, rng: np.random.Generator, cfg: Config) -> tuple[list[int], np.ndarray]:
    """Router: SEARCH or ANSWER 50/50 whatever it saw (format, no strategy). Answerer: repeat a random hint."""
    hints = rng.integers(N_DIGITS, size=int(rng.integers(4))).tolist()
    target = np.zeros(VOCAB_SIZE)
    if role == "router":
        target[[SEARCH, ANSWER]] = 0.5
        return [BOS, ROUTER, QMARK, *[t for h in hints for t in (SEARCH, HINT, DIGIT0 + h)]], target
    for h in hints or range(N_DIGITS):
        target[DIGIT0 + h] += 1
    return [BOS, ANSWERER, QMARK, *[t for h in hints for t in (HINT, DIGIT0 + h)]], target / target.sum()


@dataclass(frozen=True)
class ToyTask:
    agents: tuple[str, str]
    rollout: Callable[..., list[Trajectory]]
    warm_example: Callable[[str, np.random.Generator, Config], tuple[list[int], np.ndarray]]
    format_penalty: float
    entropy_coef: float


TASKS = {
    "repair": ToyTask(("solver", "fixer"), repair_rollout, repair_warm_example, FORMAT_PENALTY["math"], 0.0),
    "search": ToyTask(("router", "answerer"), search_rollout, search_warm_example, FORMAT_PENALTY["search"], 0.001),
}


# -- one run ---------------------------------------------------------------------------------------------------------
def run_one(
    estimator: str, seed: int, cfg: Config, log, initial: dict[str, torch.nn.Module] | None = None
) -> list[dict[str, Any]]:
    """Train the team for ``cfg.iterations`` iterations with one estimator; returns one metrics row per iteration.

    ``initial``: the warm-started team to copy (computed once per seed and shared by the estimators).
    """
    torch.set_num_threads(cfg.threads)
    models = _copy_team(initial) if initial is not None else warm_start(seed, cfg)
    optim = OptimizerConfig(lr=cfg.lr, steps_per_iteration=cfg.steps_per_iteration, grad_clip=cfg.grad_clip)
    loss = LossConfig(entropy_coef=cfg.entropy)
    policies = AgentPolicies(models, optim, loss=loss, pad_token_id=PAD, per_role_grad_norm=True, seed=seed)
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for it in range(cfg.iterations):
        t0 = time.perf_counter()
        answers = rng.integers(N_DIGITS, size=cfg.prompts_per_iteration)
        trajs = cfg.toy.rollout(policies, answers, cfg, rng, gen, tag=f"{it}")
        t_roll = time.perf_counter() - t0
        samples = build_samples(trajs, format_penalty=cfg.penalty)
        cols = sample_columns(samples)
        probe = _probe(policies, samples, cols, cfg) if cfg.probe else None
        adv = compute_advantages(estimator, **cols)
        results = policies.update(samples, adv)
        row = _row(estimator, seed, it, trajs, samples, adv, results, cfg, t_roll, time.perf_counter() - t0)
        if probe is not None:
            row["probe"] = probe
        rows.append(row)
        log(row)
    return rows


def _copy_team(models: dict[str, torch.nn.Module]) -> dict[str, torch.nn.Module]:
    copies = {id(m): copy.deepcopy(m) for m in models.values()}  # a shared model stays shared
    return {role: copies[id(m)] for role, m in models.items()}


def _probe(policies: AgentPolicies, samples, cols, cfg: Config) -> dict[str, dict[str, dict[str, float]]]:
    """Per estimator and agent, on this batch and these weights: gradient norm (no step) and mean squared advantage."""
    agents = np.array(cols["agent_ids"])
    out: dict[str, dict[str, dict[str, float]]] = {}
    advs = {est: compute_advantages(est, **cols) for est in cfg.estimators}
    norms = policies.gradient_norms(samples, advs)  # one forward pass shared by the estimators
    for est, adv in advs.items():
        out[est] = {
            a: {"grad_norm": norms[est].get(a, math.nan), "adv_sq_mean": float(np.mean(adv[agents == a] ** 2))}
            for a in cfg.toy.agents
            if (agents == a).any()
        }
    return out


def _row(estimator, seed, it, trajs, samples, adv, results, cfg: Config, t_roll, t_total) -> dict[str, Any]:
    rewards = np.array([t.reward for t in trajs])
    row: dict[str, Any] = {
        "estimator": estimator,
        "seed": seed,
        "iteration": it,
        "reward": float(rewards.mean()),
        "seconds": t_total,
        "rollout_seconds": t_roll,
        "agents": {},
    }
    stats = advantage_stats(adv, [s.agent_id for s in samples])
    cols = sample_columns(samples)
    diag = agent_diagnostics(cols["scores"], cols["group_ids"], cols["agent_ids"], adv)
    role_norms = {r: n for res in results.values() for r, n in res.role_grad_norms.items()}
    model_metrics = {r: res.metrics for res in results.values() for r in res.roles}
    errors = [str(e) for res in results.values() for e in res.errors]
    for agent in cfg.toy.agents:
        scores = np.array([s.score for s in samples if s.agent_id == agent])
        invalid = [s.format_penalty > 0 for s in samples if s.agent_id == agent]
        m = model_metrics.get(agent, {})
        row["agents"][agent] = {
            "calls": int(scores.size),
            "calls_per_run": scores.size / len(trajs),
            "score_mean": float(scores.mean()) if scores.size else None,
            "score_std": float(scores.std()) if scores.size else None,
            "invalid_rate": float(np.mean(invalid)) if invalid else None,
            "adv": stats.get(agent),
            "grad_norms": role_norms.get(agent, []),  # per optimizer step, before clipping
            "clip_frac": m.get("clip_frac"),
            "approx_kl": m.get("approx_kl"),
            "entropy": m.get("entropy"),
            "loss": m.get("loss"),
            # cave.training.diagnostics on this batch: the estimator's E[A^2], Dr. MAS's predicted factor under a
            # prompt-group baseline, and the share of calls in (prompt, agent) groups of one call / equal scores
            "adv_sq": diag.get(f"adv_sq/{agent}"),
            "inflation": diag.get(f"inflation/{agent}"),
            "singleton_share": diag.get(f"agent_group_singleton/{agent}"),
            "all_equal_share": diag.get(f"agent_group_all_equal/{agent}"),
        }
    if errors:
        row["errors"] = errors
    return row


# -- summary and figure ----------------------------------------------------------------------------------------------
def summarize(rows: list[dict[str, Any]], cfg: Config) -> dict[str, Any]:
    """Per estimator and agent: grad-norm max/median (per seed, then mean and range), reward curves' summaries."""
    out: dict[str, Any] = {"config": asdict(cfg), "estimators": {}}
    tail = max(1, cfg.iterations // 5)
    agents = cfg.toy.agents
    for est in cfg.estimators:
        e_rows = [r for r in rows if r["estimator"] == est]
        per_seed = []
        for seed in cfg.seeds:
            s_rows = sorted((r for r in e_rows if r["seed"] == seed), key=lambda r: r["iteration"])
            if not s_rows:
                continue
            rewards = [r["reward"] for r in s_rows]
            entry: dict[str, Any] = {
                "seed": seed,
                "reward_mean": float(np.mean(rewards)),  # area under the reward curve / iterations
                "reward_final": float(np.mean(rewards[-tail:])),
            }
            for agent in agents:
                per_iter = [r["agents"][agent]["grad_norms"] for r in s_rows]
                stats = grad_norm_stats(per_iter)
                if stats:
                    # both views of the tail, over every optimizer step in order (cave.training.diagnostics)
                    both = grad_norm_tail([g for norms in per_iter for g in norms], cfg.grad_clip)
                    entry[agent] = {**stats, **{f"tail_{k}": both[k] for k in TAIL_KEYS}}
            per_seed.append(entry)
        agg: dict[str, Any] = {"per_seed": per_seed}
        for key in ("reward_mean", "reward_final"):
            agg[key] = _mean_range([s[key] for s in per_seed])
        for agent in agents:
            agg[agent] = {
                k: _mean_range([s[agent][k] for s in per_seed if agent in s and s[agent].get(k) is not None])
                for k in (*STAT_KEYS, *(f"tail_{t}" for t in TAIL_KEYS))
            }
        for agent in agents:
            calls = [
                r["agents"][agent]["calls"] / (cfg.prompts_per_iteration * cfg.rollouts_per_prompt) for r in e_rows
            ]
            means = [r["agents"][agent]["score_mean"] for r in e_rows if r["agents"][agent]["score_mean"] is not None]
            agg[agent]["calls_per_run"] = float(np.mean(calls)) if calls else None
            agg[agent]["score_mean"] = float(np.mean(means)) if means else None
            for key in ("adv_sq", "inflation", "singleton_share", "all_equal_share"):  # batch means over the run
                vals = [r["agents"][agent].get(key) for r in e_rows]
                vals = [v for v in vals if v is not None]
                agg[agent][key] = float(np.mean(vals)) if vals else None
        out["estimators"][est] = agg
    if any("probe" in r for r in rows):
        out["probe"] = summarize_probe(rows, cfg)
    if "grpo" in out["estimators"]:
        base = out["estimators"]["grpo"]
        out["vs_grpo"] = {}
        for est, agg in out["estimators"].items():
            if est == "grpo":
                continue
            # Each entry: this estimator's (seed-averaged) statistic divided by grpo's; the target is <= 0.5.
            cmp: dict[str, Any] = {"ratio_to_grpo": {}}
            for agent in agents:
                cmp["ratio_to_grpo"][agent] = {
                    k: _ratio(agg[agent][k]["mean"], base[agent][k]["mean"])
                    for k in (
                        "max_over_median",
                        "max_over_median_after_warmup",
                        "local_spike",
                        "grad_norm_max",
                        "grad_norm_median",
                        "tail_median",
                        "tail_p99",
                        "tail_max",
                        "tail_over_clip_frac",
                        "tail_max_over_median",
                        "tail_spikes_5x_trailing",
                    )
                }
            cmp["reward_mean_diff"] = agg["reward_mean"]["mean"] - base["reward_mean"]["mean"]
            cmp["reward_final_diff"] = agg["reward_final"]["mean"] - base["reward_final"]["mean"]
            cmp["meets_target_max_over_median_le_0.5x"] = all(
                (v := cmp["ratio_to_grpo"][a]["max_over_median"]) is not None and v <= 0.5 for a in agents
            )
            if "probe" in out and est in out["probe"]:
                pb, pe = out["probe"]["grpo"], out["probe"][est]
                cmp["probe_ratio_to_grpo"] = {
                    a: {
                        k: _ratio(pe[a][k]["mean"], pb[a][k]["mean"])
                        for k in ("max_over_median", "grad_norm_max", "grad_norm_median", "adv_sq_mean")
                    }
                    for a in agents
                }
            out["vs_grpo"][est] = cmp
    return out


def summarize_probe(rows: list[dict[str, Any]], cfg: Config) -> dict[str, Any]:
    """The paired probe: per probed estimator and agent, spike statistics over every run's batches.

    For each run (trained estimator x seed) the probe gives, per iteration, the gradient norm each estimator would
    produce on that batch; max/median is taken per run, then mean and range over runs. ``adv_sq_mean``: the agent's
    mean squared advantage (1 when its advantages are normalized over its own calls), mean over all iterations;
    ``paired_norm_ratio_median``: median over iterations of (this estimator's norm / grpo's norm), same batch.
    """
    out: dict[str, Any] = {}
    agents = cfg.toy.agents
    runs = sorted({(r["estimator"], r["seed"]) for r in rows if "probe" in r})
    for est in cfg.estimators:
        out[est] = {}
        for agent in agents:
            per_run, sq, ratios, maxes, medians = [], [], [], [], []
            for run in runs:
                r_rows = sorted((r for r in rows if (r["estimator"], r["seed"]) == run), key=lambda r: r["iteration"])
                series = []
                for r in r_rows:
                    p = r.get("probe", {}).get(est, {}).get(agent)
                    series.append([p["grad_norm"]] if p else [])
                    if p:
                        sq.append(p["adv_sq_mean"])
                        base = r["probe"].get("grpo", {}).get(agent, {}).get("grad_norm")
                        if base and math.isfinite(base) and base > 1e-12 and math.isfinite(p["grad_norm"]):
                            ratios.append(p["grad_norm"] / base)
                stats = grad_norm_stats(series)
                if stats.get("max_over_median") is not None:
                    per_run.append(stats["max_over_median"])
                    maxes.append(stats["grad_norm_max"])
                    medians.append(stats["grad_norm_median"])
            out[est][agent] = {
                "max_over_median": _mean_range(per_run),
                "grad_norm_max": _mean_range(maxes),
                "grad_norm_median": _mean_range(medians),
                "adv_sq_mean": _mean_range(sq),
                "paired_norm_ratio_median": float(np.median(ratios)) if ratios else None,
                "runs": len(per_run),
            }
    return out


# grad_norm_tail's statistics, per agent over every optimizer step of a run (summary keys "tail_<key>"): the absolute
# tail (median .. max, over_clip_frac) and the relative spikes (max_over_median, spikes_5x_trailing)
TAIL_KEYS = (
    "median",
    "p95",
    "p99",
    "max",
    "over_clip_frac",
    "max_over_median",
    "spikes_5x_trailing",
    "zero_signal_frac",
)

STAT_KEYS = (
    "max_over_median",
    "max_over_median_all_steps",
    "max_over_median_after_warmup",
    "local_spike",
    "p99_over_median",
    "spikes_over_3x_median",
    "zero_signal_steps",
    "grad_norm_median",
    "grad_norm_max",
)


def grad_norm_stats(per_iteration: list[list[float]], warmup: float = 0.1, window: int = 10) -> dict[str, Any]:
    """Spike statistics of one agent's gradient norms (before clipping), one list of optimizer steps per iteration.

    - ``max_over_median``: over steps with a learning signal (a norm of exactly 0 means every advantage the agent
      got was 0: nothing to measure, and counting those steps would make the median, not the spikes, decide);
    - ``max_over_median_all_steps``: the same over every step;
    - ``max_over_median_after_warmup``: without the first ``warmup`` fraction of iterations (init transients);
    - ``local_spike``: max over steps of norm / median of the steps within +-``window`` iterations (a spike against
      its neighbourhood, insensitive to the slow trend of the norm over training);
    - ``spikes_over_3x_median``: steps above 3x the median.

    >>> grad_norm_stats([[1.0], [1.0], [0.0], [4.0]], warmup=0.0, window=1)["max_over_median"]
    4.0
    """
    iters = [(i, g) for i, norms in enumerate(per_iteration) for g in norms if math.isfinite(g)]
    if not iters:
        return {}
    all_norms = np.array([g for _, g in iters])
    live = [(i, g) for i, g in iters if g > 1e-12]
    norms = np.array([g for _, g in live])
    if norms.size == 0:
        return {"zero_signal_steps": int(all_norms.size), "steps": int(all_norms.size)}
    med = float(np.median(norms))
    start = int(warmup * len(per_iteration))
    late = np.array([g for i, g in live if i >= start])
    local = []
    for i, g in live:
        near = [h for j, h in live if abs(j - i) <= window]
        local.append(g / float(np.median(near)))
    med_all = float(np.median(all_norms))
    return {
        "grad_norm_max": float(norms.max()),
        "grad_norm_median": med,
        "max_over_median": float(norms.max() / med),
        "max_over_median_all_steps": float(all_norms.max() / med_all) if med_all > 0 else None,
        "max_over_median_after_warmup": float(late.max() / np.median(late)) if late.size else None,
        "local_spike": float(max(local)),
        "p99_over_median": float(np.percentile(norms, 99) / med),
        "spikes_over_3x_median": int((norms > 3 * med).sum()),
        "zero_signal_steps": int(all_norms.size - norms.size),
        "steps": int(all_norms.size),
    }


def _ratio(x: float | None, base: float | None) -> float | None:
    return x / base if x is not None and base else None


def _mean_range(xs: list[float]) -> dict[str, float | None]:
    if not xs:
        return {"mean": None, "min": None, "max": None}
    return {"mean": float(np.mean(xs)), "min": float(np.min(xs)), "max": float(np.max(xs))}


def plot(rows: list[dict[str, Any]], summary: dict[str, Any], cfg: Config, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"grpo": "tab:red", "drmas": "tab:blue", "pooled_calls": "tab:green"}
    has_probe = "probe" in summary
    fig, axes = plt.subplots(3, 3, figsize=(17, 12.5), squeeze=False)
    ax_r, ax_bar, ax_g1, ax_g2 = axes[0, 0], axes[0, 1], axes[1, 0], axes[1, 1]
    agents = cfg.toy.agents
    first = cfg.seeds[0]
    for est in cfg.estimators:
        c = colors.get(est)
        curves = _curves(rows, est, cfg, lambda r: r["reward"])
        if curves.size:
            _band(ax_r, curves, c, est)
        # Raw per-step norms of one seed: averaging over seeds would smooth away the spikes we look for.
        s_rows = sorted((r for r in rows if r["estimator"] == est and r["seed"] == first), key=lambda r: r["iteration"])
        for ax, agent in zip((ax_g1, ax_g2), agents, strict=True):
            norms = [
                (r["iteration"], k, len(r["agents"][agent]["grad_norms"]), g)
                for r in s_rows
                for k, g in enumerate(r["agents"][agent]["grad_norms"])
            ]
            ax.plot([i + k / n for i, k, n, _ in norms], [g for *_, g in norms], color=c, label=est, lw=0.9, alpha=0.85)
    ax_r.set(title="team reward (success rate): mean and range over seeds", xlabel="iteration", ylabel="reward")
    for ax, agent in zip((ax_g1, ax_g2), agents, strict=True):
        ax.set(
            title=f"{agent}: grad norm before clipping, every step (seed {first})",
            xlabel="iteration",
            ylabel="grad norm",
            yscale="log",
        )
    _bars(ax_bar, {e: summary["estimators"][e] for e in cfg.estimators}, "max_over_median", colors, agents)
    ax_bar.set(title="training runs: grad-norm max / median per agent\n(mean, range over seeds)", ylabel="max / median")
    # the two views of the tail, and the predicted factor beside what each estimator gave (cave.training.diagnostics)
    by_est = {e: summary["estimators"][e] for e in cfg.estimators}
    _bars(axes[2, 0], by_est, "tail_p99", colors, agents)
    axes[2, 0].set(title="absolute tail: p99 of pre-clip grad norm per agent\n(mean, range over seeds)",
                   ylabel="grad norm (p99)", yscale="log")  # fmt: skip
    _bars(axes[2, 1], by_est, "tail_spikes_5x_trailing", colors, agents)
    axes[2, 1].set(title="relative spikes: steps above 5x the trailing-20 median\n(mean, range over seeds)",
                   ylabel="optimizer steps")  # fmt: skip
    _bars(axes[2, 2], by_est, "adv_sq", colors, agents)
    predicted = [np.mean([by_est[e][a]["inflation"] or np.nan for e in cfg.estimators]) for a in agents]
    axes[2, 2].scatter(np.arange(len(agents)), predicted, marker="*", s=160, color="k", zorder=3,
                       label="predicted factor, global baseline")  # fmt: skip
    axes[2, 2].axhline(1.0, color="k", lw=0.8, ls="--")
    axes[2, 2].set(title="training runs: E[A^2] per agent (bars) vs Dr. MAS's predicted\n(sigma_k^2 + (mu_k - mu)^2) "
                   "/ sigma^2 (star)", ylabel="E[A^2]")  # fmt: skip
    if not has_probe:
        for ax in axes[:2, 2]:
            ax.set_visible(False)
    if has_probe:
        probe = summary["probe"]
        _bars(axes[0, 2], probe, "max_over_median", colors, agents)
        axes[0, 2].set(
            title="paired probe (same batches and weights):\ngrad-norm max / median (mean, range over runs)",
            ylabel="max / median",
        )
        _bars(axes[1, 2], probe, "adv_sq_mean", colors, agents)
        axes[1, 2].axhline(1.0, color="k", lw=0.8, ls="--")
        axes[1, 2].set(
            title="paired probe: mean squared advantage per agent\n(mean, range over iterations)", ylabel="E[A^2]"
        )
    for ax in axes.flat:
        if ax.get_visible():
            ax.legend(fontsize=8)
            ax.grid(alpha=0.3)
    fig.suptitle(
        f"grpo vs drmas vs pooled_calls: toy '{cfg.task}' team ({' + '.join(agents)}), {len(cfg.seeds)} seeds, "
        f"{cfg.iterations} iterations, N={cfg.rollouts_per_prompt}"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _bars(ax, by_est: dict[str, Any], key: str, colors: dict[str, str], agents: Sequence[str]) -> None:
    width = 0.8 / max(1, len(by_est))
    for j, (est, agg) in enumerate(by_est.items()):
        stats = [agg[a].get(key) for a in agents]
        stats = [st if isinstance(st, dict) else {"mean": st, "min": st, "max": st} for st in stats]  # a plain number
        means = [st["mean"] or 0.0 for st in stats]
        lo = [m - (st["min"] if st["min"] is not None else m) for m, st in zip(means, stats, strict=True)]
        hi = [(st["max"] if st["max"] is not None else m) - m for m, st in zip(means, stats, strict=True)]
        xs = np.arange(len(agents)) + (j - (len(by_est) - 1) / 2) * width
        ax.bar(xs, means, width, yerr=[lo, hi], color=colors.get(est), label=est, capsize=3)
    ax.set_xticks(np.arange(len(agents)), agents)


def _curves(rows, est, cfg, value) -> np.ndarray:
    curves = []
    for seed in cfg.seeds:
        s_rows = sorted((r for r in rows if r["estimator"] == est and r["seed"] == seed), key=lambda r: r["iteration"])
        if s_rows:
            curves.append([value(r) for r in s_rows])
    n = min((len(c) for c in curves), default=0)
    return np.array([c[:n] for c in curves], dtype=float)


def _band(ax, curves: np.ndarray, color, label) -> None:
    x = np.arange(curves.shape[1])
    ax.plot(x, np.nanmean(curves, 0), color=color, label=label)
    ax.fill_between(x, np.nanmin(curves, 0), np.nanmax(curves, 0), color=color, alpha=0.15)


# -- entry point -----------------------------------------------------------------------------------------------------
def run(cfg: Config, verbose: bool = True) -> dict[str, Any]:
    """Run every estimator x seed; write metrics.jsonl, summary.json and gradspike.png into ``cfg.out``."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    with open(out / "metrics.jsonl", "w") as f:

        def log(row: dict[str, Any]) -> None:
            f.write(json.dumps(row) + "\n")
            f.flush()  # a long run can be watched (and survives a crash) row by row

        for seed in cfg.seeds:
            torch.set_num_threads(cfg.threads)
            initial = warm_start(seed, cfg)
            for est in cfg.estimators:
                t = time.perf_counter()
                seed_rows = run_one(est, seed, cfg, log, initial)
                rows += seed_rows
                if verbose:
                    tail = seed_rows[-max(1, cfg.iterations // 5) :]
                    print(
                        f"{est:>12} seed {seed}: final reward {np.mean([r['reward'] for r in tail]):.3f} "
                        f"({time.perf_counter() - t:.1f}s)",
                        flush=True,
                    )
    summary = summarize(rows, cfg)
    summary["seconds"] = time.perf_counter() - t0
    summary["environment"] = environment()
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    plot(rows, summary, cfg, out / "gradspike.png")
    if verbose:
        print_table(summary, cfg)
        print(f"wrote {out / 'metrics.jsonl'}, {out / 'summary.json'}, {out / 'gradspike.png'}")
    return summary


TIMING_KEYS = ("seconds", "rollout_seconds")  # wall-clock fields: the only ones two runs of one seed may differ in


def reproducible_part(row: dict[str, Any]) -> dict[str, Any]:
    """A metrics row without its wall-clock fields: two runs with the same config and seed give equal ones.

    >>> reproducible_part({"reward": 0.5, "seconds": 1.2, "rollout_seconds": 0.3})
    {'reward': 0.5}
    """
    return {k: v for k, v in row.items() if k not in TIMING_KEYS}


def environment() -> dict[str, Any]:
    """What the numbers depend on beyond the config and seed: library versions, the CPU kernels and the commit.

    Results are bit-identical between runs of one environment; another torch, another CPU instruction set, or a
    change to the update's numerics (fused AdamW, the shared-prompt forward) moves gradient norms in the 4th digit,
    and after the first sampled token that flips, the trajectories of a run part ways.
    """
    import platform
    import subprocess

    import transformers

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5,
                                cwd=Path(__file__).parent).stdout.strip() or None  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {
        "torch": torch.__version__,
        "numpy": np.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "commit": commit,
    }


def print_table(summary: dict[str, Any], cfg: Config) -> None:
    def fmt(d: dict[str, Any]) -> str:
        return "n/a" if d["mean"] is None else f"{d['mean']:.2f} [{d['min']:.2f}, {d['max']:.2f}]"

    agents = cfg.toy.agents
    print("\ntraining runs, per agent: grad-norm max/median, mean [min, max] over seeds")
    print(
        f"{'estimator':>12} | {'agent':>8} | {'max/median':>20} | {'after warmup':>20} | {'calls/run':>9} | reward (mean)"
    )
    for est in cfg.estimators:
        a = summary["estimators"][est]
        for agent in agents:
            st = a[agent]
            print(
                f"{est:>12} | {agent:>8} | {fmt(st['max_over_median']):>20} | "
                f"{fmt(st['max_over_median_after_warmup']):>20} | {st['calls_per_run']:>9.2f} | "
                f"{fmt(a['reward_mean'])}; final {fmt(a['reward_final'])}"
            )
    print(
        "\nboth views of each agent's pre-clip grad norms over every optimizer step (mean over seeds): the absolute tail"
        "\n(median, p99, max, share of steps above the clip) and spikes relative to the typical norm (max/median, steps"
        "\nabove 5x the trailing-20 median); E[A^2] of the trained estimator, Dr. MAS's predicted factor under a"
        "\nprompt-group baseline, and the share of calls in singleton / all-equal (prompt, agent) groups"
    )
    print(
        f"{'estimator':>12} | {'agent':>8} | {'median':>7} | {'p99':>7} | {'max':>7} | {'>clip':>5} | {'max/med':>7} | "
        f"{'5x-tr20':>7} | {'E[A^2]':>6} | {'infl.':>6} | {'single':>6} | {'equal':>6}"
    )
    for est in cfg.estimators:
        a = summary["estimators"][est]
        for agent in agents:
            st = a[agent]

            def m(key: str, spec: str = ".3f", st: dict[str, Any] = st) -> str:
                v = st.get(key)
                v = v.get("mean") if isinstance(v, dict) else v
                return "n/a" if v is None else format(v, spec)

            print(
                f"{est:>12} | {agent:>8} | {m('tail_median'):>7} | {m('tail_p99'):>7} | {m('tail_max'):>7} | "
                f"{m('tail_over_clip_frac', '.2f'):>5} | {m('tail_max_over_median', '.1f'):>7} | "
                f"{m('tail_spikes_5x_trailing', '.1f'):>7} | {m('adv_sq', '.2f'):>6} | {m('inflation', '.2f'):>6} | "
                f"{m('singleton_share', '.2f'):>6} | {m('all_equal_share', '.2f'):>6}"
            )
    if "probe" in summary:
        print("\npaired probe (same batches and weights), per agent: max/median over runs; mean squared advantage")
        print(
            f"{'estimator':>12} | {'agent':>8} | {'max/median':>20} | {'max norm':>8} | {'median':>8} | "
            f"{'E[A^2]':>20} | norm / grpo's (median)"
        )
        for est, by_agent in summary["probe"].items():
            for agent, st in by_agent.items():
                ratio = st["paired_norm_ratio_median"]
                mx, md = st.get("grad_norm_max", {}).get("mean"), st.get("grad_norm_median", {}).get("mean")
                print(
                    f"{est:>12} | {agent:>8} | {fmt(st['max_over_median']):>20} | "
                    f"{'n/a' if mx is None else f'{mx:.3f}':>8} | {'n/a' if md is None else f'{md:.3f}':>8} | "
                    f"{fmt(st['adv_sq_mean']):>20} | " + ("n/a" if ratio is None else f"{ratio:.2f}")
                )
    print()
    for est, cmp in summary.get("vs_grpo", {}).items():
        print(f"{est} / grpo, per agent (training runs | paired probe):")
        for agent in agents:
            t, p = cmp["ratio_to_grpo"][agent], cmp.get("probe_ratio_to_grpo", {}).get(agent, {})
            line = " ".join(f"{k}={_x(t.get(k))}" for k in ("max_over_median", "grad_norm_max", "grad_norm_median"))
            if p:
                line += " | " + " ".join(
                    f"{k}={_x(p.get(k))}" for k in ("max_over_median", "grad_norm_max", "adv_sq_mean")
                )
            print(f"  {agent:>8}: {line}")
        print(
            f"  reward diff {cmp['reward_mean_diff']:+.3f} (mean over iterations), {cmp['reward_final_diff']:+.3f} "
            f"(last 20%); target (max/median <= 0.5x grpo's for both agents) met: "
            f"{cmp['meets_target_max_over_median_le_0.5x']}"
        )


def _x(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}x"


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(
        prog="python -m cave.training.experiments.gradspike", description=__doc__.split("\n")[0]
    )
    p.add_argument("--quick", action="store_true", help=f"short run for CI: {QUICK}")
    p.add_argument("--task", choices=sorted(TASKS), default=Config.task)
    p.add_argument("--seeds", type=int, nargs="+")
    p.add_argument("--iterations", type=int)
    p.add_argument("--estimators", nargs="+")
    p.add_argument("--shared-model", action="store_true", help="one model for both roles")
    p.add_argument("--hint-accuracy", type=float)
    p.add_argument("--format-penalty", type=float)
    p.add_argument("--lr", type=float)
    p.add_argument("--prompts", type=int, help=f"prompt groups per iteration (default {Config.prompts_per_iteration})")
    p.add_argument("--entropy-coef", type=float)
    p.add_argument("--no-probe", action="store_true", help="skip the paired probe (faster)")
    p.add_argument("--warm-start-steps", type=int, help=f"supervised warm-up steps (default {Config.warm_start_steps})")
    p.add_argument("--from-metrics", metavar="RUN_DIR", help="re-summarize and re-plot RUN_DIR/metrics.jsonl")
    p.add_argument("--out", default=Config.out)
    args = p.parse_args(argv)
    cfg = Config(task=args.task, out=args.out, shared_model=args.shared_model, probe=not args.no_probe)
    if args.quick:
        cfg = replace(cfg, **QUICK)
    overrides = {
        "seeds": tuple(args.seeds) if args.seeds else None,
        "iterations": args.iterations,
        "estimators": tuple(args.estimators) if args.estimators else None,
        "hint_accuracy": args.hint_accuracy,
        "format_penalty": args.format_penalty,
        "lr": args.lr,
        "entropy_coef": args.entropy_coef,
        "warm_start_steps": args.warm_start_steps,
        "prompts_per_iteration": args.prompts,
    }
    cfg = replace(cfg, **{k: v for k, v in overrides.items() if v is not None})
    if args.from_metrics:
        return replot(Path(args.from_metrics))
    return run(cfg)


def replot(run_dir: Path) -> dict[str, Any]:
    """Summary and figure again from a finished run's metrics.jsonl (its config comes from summary.json)."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    saved = json.loads((run_dir / "summary.json").read_text())["config"] if (run_dir / "summary.json").exists() else {}
    known = {f for f in Config.__dataclass_fields__}
    cfg = Config(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved.items() if k in known})
    task = next(t for t, toy in TASKS.items() if set(toy.agents) == set(rows[0]["agents"]))
    cfg = replace(cfg, task=task, seeds=tuple(sorted({r["seed"] for r in rows})), out=str(run_dir))
    summary = summarize(rows, cfg)
    saved_summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").exists() else {}
    summary["seconds"] = saved_summary.get("seconds")
    summary["environment"] = saved_summary.get("environment") or environment()  # (a run that left no summary: this one)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    plot(rows, summary, cfg, run_dir / "gradspike.png")
    print_table(summary, cfg)
    return summary


if __name__ == "__main__":
    main()
