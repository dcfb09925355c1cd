"""Warm start before RL: supervised fine-tuning on the successful team runs of a teacher (rejection sampling).

A base model that never succeeds gives RL nothing to work with: every group is all-equal, every advantage 0.
``cave train sft CONFIG`` gets it started the way multi-agent RL pipelines do:

1. **collect**: the config's own team (same roles, prompts, runtime, response prefixes) runs the train split with
   every role on the ``sft.teacher`` backend (e.g. the embedded Qwen2.5-Coder-1.5B, or the policy itself for
   best-of-k); rewards come from the runtime's answer object, as in RL. Each scored run is appended to
   ``RUN_DIR/teacher.jsonl`` as it finishes (a stopped collection resumes where it was).
2. **keep**: the action calls of runs that earned the full reward, with a valid format (no loop summaries).
3. **tokenize for the student**: each kept call's prompt messages through the student's chat template, as the
   rollout backend encodes them (``TransformersLLM.encode``, response prefix included as prompt), and its reply
   as response tokens plus the end-of-turn token; then ``build_samples``, the same Sample code RL uses.
4. **fine-tune**: token-mean NLL on the response tokens (``LossConfig(objective="sft")``) with each role's
   optimizer, ``sft.epochs`` passes; the weights go to ``RUN_DIR/checkpoints`` (step 0) and ``config.json``,
   so ``cave train eval RUN_DIR --checkpoint latest`` evaluates them and ``init_from: RUN_DIR`` starts RL there.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cave.training.evaluate import is_success
from cave.training.samples import LOOP_CALLS

from cave.trajectory import Trajectory

__all__ = [
    "TEACHER_RUNS",
    "collect",
    "end_of_turn_id",
    "keep_copy",
    "kept_calls",
    "run_sft",
    "seed_teacher_runs",
    "student_trajectories",
]

TEACHER_RUNS = "teacher.jsonl"


# -- 1. collect ---------------------------------------------------------------------------------------------
def collect(cfg: Any, run_dir: Path, *, quiet: bool = True, mirror: Path | None = None) -> list[dict[str, Any]]:
    """Teacher team runs on the first ``sft.problems`` train examples, ``sft.samples`` each; one JSON row per run.

    Rows already in ``RUN_DIR/teacher.jsonl`` are kept and their problems skipped. ``mirror``: a second copy of
    that file, rewritten after every batch (e.g. a folder that is committed while the run folder is not), so a
    collection stopped part way loses at most one batch wherever it goes on; a mirror that holds other runs than
    the start of this file is left as it is.
    """
    from cave.training.evaluate import score_episodes
    from cave.training.rewards import get_reward
    from cave.training.rollout import arollout, policy_team

    from cave.team.backends import make_backend

    s = cfg.sft
    path = run_dir / TEACHER_RUNS
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []
    done = {r["problem"] for r in rows}
    examples = cfg.data.examples()[: s.problems]
    todo = [(i, ex) for i, ex in enumerate(examples) if i not in done]
    if not todo:
        return rows
    options = {k: v for k, v in s.teacher.items() if k != "backend"}
    teacher = make_backend(s.teacher["backend"], **options)
    role_models = {role: a.model for role, a in cfg.agents.items()}
    team = policy_team(cfg.team, role_models, {name: teacher for name in cfg.models},
                       temperature=s.temperature, max_tokens=cfg.max_tokens)  # fmt: skip
    reward_fn = get_reward(cfg.reward)
    t0 = time.perf_counter()
    for start in range(0, len(todo), s.chunk):
        part = todo[start : start + s.chunk]
        roll = asyncio.run(arollout(team, [ex for _, ex in part], group_size=s.samples, step=0, seed=cfg.seed,
                                    question_field=cfg.data.question_field, offset=part[0][0]))  # fmt: skip
        score_episodes(roll.episodes, reward_fn)
        with path.open("a", encoding="utf-8") as f:
            for n, ep in enumerate(roll.episodes):
                row = {"problem": part[n // s.samples][0], "reward": ep.reward, "error": ep.reward_error,
                       "trajectory": ep.trajectory.to_dict()}  # fmt: skip
                f.write(json.dumps(row, default=str) + "\n")
                rows.append(row)
        if mirror is not None:
            keep_copy(mirror, path)
        if not quiet:
            ok = sum(1 for r in rows if is_success(r["reward"]))
            print(f"teacher: {len(rows)} runs, {ok} successful ({time.perf_counter() - t0:.0f} s)", flush=True)
    return rows


def keep_copy(copy: Path, source: Path) -> None:
    """Copy ``source`` (a ``teacher.jsonl``) to ``copy`` unless ``copy`` holds runs that ``source`` does not start
    with: a kept copy is extended as its collection goes on, never replaced by another collection's runs.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()); src, kept = d / "runs.jsonl", d / "kept" / "runs.jsonl"
    >>> for text in ("a\\n", "a\\nb\\n", "c\\n"):
    ...     _ = src.write_text(text); keep_copy(kept, src)
    >>> kept.read_text()
    'a\\nb\\n'
    """
    data = source.read_bytes()
    if copy.is_file() and not data.startswith(copy.read_bytes()):
        return
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_bytes(data)


# -- 2. keep -------------------------------------------------------------------------------------------------
def kept_calls(rows: Sequence[Mapping[str, Any]]) -> list[Trajectory]:
    """The successful runs' trajectories, each cut to the calls worth imitating.

    A call is kept when it acts for the task (not the loop's own summary or compaction call), its format was valid
    (``meta["format_ok"]`` not False) and whose prompt messages were recorded.

    >>> from cave.trajectory import Step
    >>> t = Trajectory(task="2+2", steps=[Step(0, "solver", messages=[{"role": "user", "content": "2+2"}],
    ...     completion="final_answer(4)", meta={"format_ok": True}), Step(1, "verifier", kind="summary")])
    >>> [len(k.steps) for k in kept_calls([{"reward": 1.0, "trajectory": t.to_dict()},
    ...                                    {"reward": 0.0, "trajectory": t.to_dict()}])]
    [1]
    """
    out = []
    for row in rows:
        if not is_success(row.get("reward")):
            continue
        traj = Trajectory.from_dict(row["trajectory"]) if isinstance(row["trajectory"], dict) else row["trajectory"]
        keep = [
            st
            for st in traj.steps
            if st.kind not in LOOP_CALLS and st.meta.get("format_ok") is not False and st.messages and st.completion
        ]
        if keep:
            out.append(dataclasses.replace(traj, steps=keep, reward=float(row["reward"])))
    return out


# -- 3. tokenize for the student ---------------------------------------------------------------------------------
def student_trajectories(
    trajs: Sequence[Trajectory], encoders: Mapping[str, Any], prefixes: Mapping[str, str]
) -> list[Trajectory]:
    """Each call re-tokenized for the student that will play its role: prompt ids from the student's chat
    template (with the role's response prefix, which is prompt, never trained), response ids for the rest of the
    reply plus the end-of-turn token. ``encoders``: role -> ``TransformersLLM`` of the role's student model."""
    out = []
    for traj in trajs:
        steps = []
        for st in traj.steps:
            enc = encoders.get(st.role)
            if enc is None:
                continue
            prefix = prefixes.get(st.role) or ""
            reply = st.completion[len(prefix) :] if prefix and st.completion.startswith(prefix) else st.completion
            prompt_ids = enc.encode(st.messages, prefix=prefix)
            response_ids = enc.tokenizer(reply, add_special_tokens=False)["input_ids"] + [end_of_turn_id(enc.tokenizer)]
            steps.append(dataclasses.replace(st, prompt_token_ids=prompt_ids, token_ids=response_ids, logprobs=None))
        if steps:
            out.append(dataclasses.replace(traj, steps=steps))
    return out


def end_of_turn_id(tokenizer: Any) -> int:
    """The token that ends an assistant turn (what the rollout backend stops on): ChatML's ``<|im_end|>`` where the
    vocabulary has it, else the tokenizer's end-of-sequence token."""
    vocab = tokenizer.get_vocab()
    if "<|im_end|>" in vocab:
        return int(vocab["<|im_end|>"])
    if tokenizer.eos_token_id is None:
        raise ValueError("the student's tokenizer has no end-of-turn token (<|im_end|>) and no eos token")
    return int(tokenizer.eos_token_id)


# -- 4. the stage ------------------------------------------------------------------------------------------------
def seed_teacher_runs(run_dir: Path, source: str | Path) -> int:
    """Start ``run_dir``'s collection from the runs kept in ``source`` (a ``teacher.jsonl`` of the same config,
    e.g. committed from another machine): its rows are written to ``run_dir/teacher.jsonl``, whose problems
    ``collect`` then skips. A run folder that already holds runs keeps its own. Returns the rows taken."""
    source, path = Path(source), run_dir / TEACHER_RUNS
    if not source.is_file():
        raise FileNotFoundError(f"--teacher-runs {source}: no such file (a teacher.jsonl that `cave train sft` wrote)")
    if path.is_file() and path.read_text(encoding="utf-8").strip():
        return 0
    lines = [line for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    for n, line in enumerate(lines, 1):
        row = json.loads(line)
        if not {"problem", "reward", "trajectory"} <= set(row):
            raise ValueError(
                f"--teacher-runs {source}, line {n}: not a teacher run (needs problem, reward, trajectory)"
            )
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return len(lines)


def run_sft(cfg: Any, run_dir: str | Path | None = None, *, quiet: bool = False,
            teacher_runs: str | Path | None = None, mirror: Path | None = None) -> Path:  # fmt: skip
    """Collect, keep, tokenize and fine-tune; returns the SFT run folder (a checkpoint at step 0). ``teacher_runs``:
    a kept ``teacher.jsonl`` to start the collection from (``seed_teacher_runs``); ``mirror``: where the
    collection's runs are copied after each batch (``collect``)."""
    import numpy as np
    from cave.training.samples import build_samples
    from cave.training.trainer import save_checkpoint
    from cave.training.workers import LocalWorkers

    from cave.llm.hf import TransformersLLM

    s = cfg.sft
    if s is None:
        raise ValueError("the config has no sft: section (teacher, problems, epochs, lr); see training/configs/")
    run = Path(run_dir or s.output_dir).resolve()
    run.mkdir(parents=True, exist_ok=True)
    if teacher_runs is not None:
        seed_teacher_runs(run, teacher_runs)
    rows = collect(cfg, run, quiet=quiet, mirror=mirror)
    kept = kept_calls(rows)
    if not kept:
        raise ValueError(
            f"the teacher succeeded on none of its {len(rows)} runs ({run / TEACHER_RUNS}); use a stronger "
            "sft.teacher, more sft.problems or sft.samples"
        )
    sft_agents = {r: a.model_copy(update={"lr": s.lr, "steps_per_iteration": 1}) for r, a in cfg.agents.items()}
    sft_cfg = cfg.model_copy(update={"agents": sft_agents, "loss": cfg.loss.model_copy(update={"objective": "sft"}),
                                     "eval_every": None})  # fmt: skip
    workers = LocalWorkers(sft_cfg.model_copy(update={"ray": None}))
    try:
        policies = workers.policies
        encoders = {role: TransformersLLM(policies.model(role), workers.models[a.model][1])
                    for role, a in cfg.agents.items()}  # fmt: skip
        prefixes = {r.name: r.sampling.response_prefix or "" for r in cfg.team.roles}
        samples = build_samples(student_trajectories(kept, encoders, prefixes))
        rng = np.random.default_rng(cfg.seed)
        log = []
        for epoch in range(s.epochs):
            order = rng.permutation(len(samples))
            for start in range(0, len(order), s.batch_size):
                batch = [samples[i] for i in order[start : start + s.batch_size]]
                results = policies.update(batch, np.ones(len(batch), dtype=np.float32))
                loss = float(np.mean([r.metrics.get("loss", float("nan")) for r in results.values() if r.metrics]))
                log.append({"epoch": epoch, "batch": start // s.batch_size, "nll": loss, "samples": len(batch)})
            if not quiet:
                last = [r["nll"] for r in log if r["epoch"] == epoch]
                print(
                    f"sft epoch {epoch + 1}/{s.epochs}: {len(samples)} calls, mean NLL {np.mean(last):.3f}", flush=True
                )
        (run / "sft_metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log))
        (run / "config.json").write_text(cfg.model_dump_json(indent=2, fallback=repr))  # (a Python teacher fn)
        save_checkpoint(run, 0, workers)
    finally:
        workers.close()
    return run
