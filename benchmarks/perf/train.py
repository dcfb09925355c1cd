"""One RL iteration (rollout + update), cave's trainer vs TRL's GRPOTrainer, side by side in one run.

    python -m cave.benchmarks.perf.train [--prompts 2] [--n 4] [--max-tokens 32] [--threads 2] [--out r.json]
    python -m cave.benchmarks.perf.train --device cuda --dtype bfloat16 --source DIR --prompts 8 --n 8

Same model (SmolLM2-135M-Instruct converted from its shipped GGUF, fp32, every parameter trained,
AdamW lr 1e-6, one optimizer step), same prompts, same group size, same reward, single agent:

- cave: a one-role team (solver) run through cave (``Trainer.step``): N team runs per prompt on the
  transformers backend holding the live model, sympy-checked ``final_answer`` reward, GRPO
  advantages, one PPO step;
- TRL: ``GRPOTrainer`` for one step (``max_steps=1``) on the *same prompt messages* the cave solver
  saw (its system prompt included, so both prefill the same tokens), with a reward that applies
  the same sympy check to the last number of the completion text (TRL has no runtime to read an
  answer object from).

Reported: wall seconds of the iteration (model loading excluded for both), generated tokens, and
tokens/s = generated tokens / iteration seconds; plus prompt+completion tokens/s. One run each; the
machine is shared, so numbers are noisy. On CUDA also each system's peak GPU memory, and cave's update alone
(prompt+completion tokens trained per second) against the bf16 matmul roofline for the model's size: a training
token costs ~8 x parameters FLOPs here (forward 2N for the old log-probs, forward+backward 6N for the loss).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from typing import Any

PROBLEMS = [
    {"question": "What is 17 * 23?", "answer": 391},
    {"question": "What is 12 + 30?", "answer": 42},
    {"question": "A book costs 7.5 dollars. How much do 4 books cost?", "answer": 30},
    {"question": "What is 144 / 12?", "answer": 12},
]


def problems(n: int) -> list[dict[str, Any]]:
    """The first ``n`` problems, cycling through PROBLEMS (an 8-prompt batch repeats the 4).

    >>> [p["answer"] for p in problems(6)]
    [391, 42, 30, 12, 391, 42]
    """
    return [PROBLEMS[i % len(PROBLEMS)] for i in range(n)]


def cave_config(args: argparse.Namespace, out: str) -> Any:
    from cave.training.config import parse_config

    return parse_config(
        {
            "team": {
                "roles": [
                    {
                        "name": "solver",
                        "system": "Reply with one ```python block that computes the answer and calls final_answer.",
                        "max_steps": 1,
                    }
                ],
                "pattern": "sequential",
                "runtime": {"kind": "inprocess", "timeout": 10},
            },
            "models": {"base": {"source": args.source, "dtype": args.dtype}},
            "agents": {"solver": {"lr": 1e-6, "micro_batch_size": args.micro_batch or None}},
            "data": {"prompts": problems(args.prompts)},
            "reward": "math_sympy",
            "estimator": "grpo",
            "group_size": args.n,
            "batch_size": args.prompts,
            "steps": 1,
            "max_tokens": args.max_tokens,
            "format_penalty": 0.0,
            "output_dir": out,
            "threads": args.threads,
            "device": args.device,
        }
    )


def run_cave(args: argparse.Namespace, out: str) -> tuple[dict[str, Any], list[list[dict[str, str]]]]:
    from cave.training.trainer import Trainer

    trainer = Trainer(cave_config(args, out), quiet=True)
    trainer.setup()
    _reset_peak(args)
    t0 = time.perf_counter()
    m = trainer.step(1)
    seconds = time.perf_counter() - t0
    peak = _peak_gib(args)
    steps = [s for ep in trainer.last_rollout.episodes for s in ep.trajectory.steps]
    prompt_tokens = sum(len(s.prompt_token_ids or ()) for s in steps)
    # the first call of each prompt's group: the messages TRL gets, so both prefill the same tokens
    messages = []
    for i in range(args.prompts):
        ep = trainer.last_rollout.episodes[i * args.n]
        messages.append([{"role": x["role"], "content": x["content"]} for x in ep.trajectory.steps[0].messages])
    # the update alone, warm (the first one pays CUDA/optimizer warm-up): a second iteration's update
    warm = trainer.step(2)["update_tokens_per_s"]
    row = {
        "system": "cave",
        "seconds": seconds,
        "rollout_s": m["rollout_s"],
        "update_s": m["update_s"],
        # scoring, samples and advantages (+ the weight sync): the iteration's rest
        "score_s": m["step_s"] - m["rollout_s"] - m["update_s"],
        "rollout_batch_mean": m.get("rollout_batch_mean"),  # rows per decode step of the generation engine
        "generated_tokens": m["generated_tokens"],
        "prompt_tokens": prompt_tokens,
        "reward_mean": m["reward_mean"],
        "update_tokens_per_s": m["update_tokens_per_s"],
        "warm_update_tokens_per_s": warm,
        "peak_gpu_gib": peak,
        "n_params": _n_params(trainer),
    }
    del trainer
    _free(args)
    return row, messages


def _n_params(trainer: Any) -> int:
    """Trained parameters of the trainer's models (LocalWorkers.models: name -> (model, tokenizer))."""
    return sum(
        p.numel() for model, _tok in trainer.workers.models.values() for p in model.parameters() if p.requires_grad
    )


def _reset_peak(args: argparse.Namespace) -> None:
    if args.device == "cuda":
        import torch

        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def _peak_gib(args: argparse.Namespace) -> float | None:
    if args.device != "cuda":
        return None
    import torch

    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() / 2**30


def _free(args: argparse.Namespace) -> None:
    import gc

    gc.collect()
    if args.device == "cuda":
        import torch

        torch.cuda.empty_cache()


def last_number(text: str) -> str | None:
    found = re.findall(r"-?\d+(?:\.\d+)?", text)
    return found[-1] if found else None


def run_trl(args: argparse.Namespace, prompts: list[list[dict[str, str]]], out: str) -> dict[str, Any]:
    import torch
    from cave.training.rewards import sympy_equal
    from cave.training.trainer import load_model
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from cave.llm.hf import load

    if args.threads:
        torch.set_num_threads(args.threads)
    model, tok = load_model(args.source, args.dtype, None, args.device)
    del load
    answers = [p["answer"] for p in problems(args.prompts)]
    counts = {"completion": 0, "prompt": 0}

    def reward(completions: list[Any], answer: list[Any], **kwargs: Any) -> list[float]:
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        counts["completion"] += sum(len(tok(t, add_special_tokens=False)["input_ids"]) + 1 for t in texts)
        return [float(sympy_equal(last_number(t), a)) for t, a in zip(texts, answer, strict=True)]

    class Clock(TrainerCallback):
        def on_step_begin(self, *a: Any, **k: Any) -> None:
            self.t0 = time.perf_counter()

        def on_step_end(self, *a: Any, **k: Any) -> None:
            self.seconds = time.perf_counter() - self.t0

    config = GRPOConfig(
        output_dir=out,
        per_device_train_batch_size=args.prompts * args.n,
        num_generations=args.n,
        max_completion_length=args.max_tokens,
        max_steps=1,
        learning_rate=1e-6,
        beta=0.0,
        temperature=1.0,
        use_cpu=args.device == "cpu",
        bf16=args.dtype == "bfloat16",
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        seed=0,
    )
    data = Dataset.from_list([{"prompt": p, "answer": a} for p, a in zip(prompts, answers, strict=True)])
    clock = Clock()
    trainer = GRPOTrainer(
        model=model, reward_funcs=reward, args=config, train_dataset=data, processing_class=tok, callbacks=[clock]
    )
    _reset_peak(args)
    t0 = time.perf_counter()
    trainer.train()
    total = time.perf_counter() - t0
    peak = _peak_gib(args)
    logs = [h for h in trainer.state.log_history if "reward" in h]
    # TRL counts prompt + completion tokens of the step in num_tokens
    prompt_tokens = int(float(logs[-1]["num_tokens"])) - counts["completion"] if logs else 0
    return {
        "system": "trl",
        "seconds": getattr(clock, "seconds", total),
        "train_call_s": total,
        "generated_tokens": counts["completion"],
        "prompt_tokens": prompt_tokens,
        "reward_mean": logs[-1]["reward"] if logs else None,
        "peak_gpu_gib": peak,
    }


def update_roofline(n_params: int, tflops: float | None) -> float | None:
    """Training tokens/s at the matmul roofline: ~8N FLOPs a token (2N old log-probs + 6N forward/backward).

    >>> round(update_roofline(135_000_000, 790.0))
    731481
    """
    if not tflops:
        return None
    return tflops * 1e12 / (8 * n_params)


def _measured_tflops(args: argparse.Namespace) -> float | None:
    """The bf16 matmul rate of this GPU (8192^3 products on random data, median of 10 after 3 warm-ups)."""
    if args.device != "cuda":
        return None
    import torch

    a, b = (torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    times = []
    for i in range(13):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        torch.cuda.synchronize()
        if i >= 3:
            times.append(start.elapsed_time(end) / 1e3)
    times.sort()
    return 2 * 8192**3 / times[len(times) // 2] / 1e12


def main(argv: list[str] | None = None) -> int:
    import tempfile

    import trl

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prompts", type=int, default=2)
    p.add_argument("--n", type=int, default=4, help="group size: generations per prompt")
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument(
        "--micro-batch",
        type=int,
        default=None,
        help="cave: samples per forward/backward (default: the group size, so a group's prompt is run once; 0: the "
        "whole step at once, which needs ~20 GiB at 8x8 on a CPU)",
    )
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    p.add_argument("--source", default="smollm2", help="an embedded model name or an HF directory")
    p.add_argument(
        "--roofline-tflops",
        type=float,
        default=None,
        help="the device's measured bf16 matmul TFLOP/s (cuda: measured here when not given)",
    )
    p.add_argument("--out", help="write the rows as JSON here")
    args = p.parse_args(argv)
    if args.micro_batch is None:
        args.micro_batch = args.n
    with tempfile.TemporaryDirectory() as tmp:
        cave_row, prompts = run_cave(args, f"{tmp}/cave")
        trl_row = run_trl(args, prompts, f"{tmp}/trl")
    rows = [cave_row, trl_row]
    for r in rows:
        r["tokens_per_s"] = r["generated_tokens"] / r["seconds"]
        r["all_tokens_per_s"] = (r["generated_tokens"] + r["prompt_tokens"]) / r["seconds"]
    # OMP_WAIT_POLICY=PASSIVE: on a CPU shared with other jobs, libgomp's spinning barriers made both systems 4-7x slower
    setting = {**vars(args), "trl": trl.__version__, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY")}
    where = f"{args.source} {args.dtype} {args.device}"
    print(f"one RL iteration, {where}, {args.prompts} prompts x {args.n}, max {args.max_tokens} tokens")
    print(f"{'system':8} {'seconds':>8} {'gen tok':>8} {'tok/s':>8} {'all tok/s':>10} {'reward':>7} {'peak GiB':>9}")
    for r in rows:
        peak = r["peak_gpu_gib"]
        print(
            f"{r['system']:8} {r['seconds']:8.1f} {r['generated_tokens']:8d} {r['tokens_per_s']:8.2f} "
            f"{r['all_tokens_per_s']:10.1f} {r['reward_mean'] if r['reward_mean'] is not None else float('nan'):7.2f} "
            f"{'-' if peak is None else f'{peak:.2f}':>9}"
        )
    ratio = rows[0]["tokens_per_s"] / rows[1]["tokens_per_s"]
    print(f"cave / TRL tokens/s: {ratio:.2f}x")
    roof = update_roofline(cave_row["n_params"], args.roofline_tflops or _measured_tflops(args))
    if roof:
        cave_row["update_roofline_tokens_per_s"] = roof
        # the update's rate counts trained (response) tokens; its forward/backward also runs over the prompts
        warm = cave_row["warm_update_tokens_per_s"]
        processed = warm * (cave_row["prompt_tokens"] + cave_row["generated_tokens"]) / cave_row["generated_tokens"]
        cave_row["warm_update_processed_tokens_per_s"] = processed
        print(f"cave update alone (second iteration, warm): {warm:,.0f} trained tok/s, ~{processed:,.0f} processed "
              f"tok/s; bf16 matmul roofline for {cave_row['n_params'] / 1e6:.0f}M parameters: {roof:,.0f} tok/s "
              f"({processed / roof:.2%})")  # fmt: skip
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"setting": setting, "rows": rows, "ratio": ratio}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
