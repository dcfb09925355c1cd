"""The generation engine's prompt-prefix sharing: ``python -m cave.benchmarks.perf.engine [--calls 16] [--out r.json]``.

A team's calls share long prompt starts: every call of a role begins with the role's system prompt (cave's agent
prompt is ~300 tokens), and a group's samples and later turns share their problem. The engine runs such a start
once and each prompt only past it (``GenerationEngine(prefix_cache_tokens=...)``). This benchmark decodes the same
calls on SmolLM2-135M (the embedded model as an HF checkpoint, fp32, CPU) with prefix sharing off (the baseline:
``prefix_cache_tokens=0``) and on, in one process, rounds interleaved so load drifts hit both alike:

- ``--calls`` distinct prompts, one system prompt of ``--system`` filler sentences and a different short question
  each, all submitted together (as a rollout's first turn is), ``--max-tokens`` each, sampled with fixed seeds;
- per variant: the median wall seconds over ``--rounds``, the prompt tokens run through the model, and whether every
  call sampled the same tokens as in the baseline (sharing changes only float summation order).

Prints a table with the ratio of each variant's seconds to the baseline's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from cave.benchmarks.perf.llm import FILLER

QUESTIONS = [
    "A shop sells {a} pens a day for {b} days. How many pens is that?",
    "Tom has {a} apples and gives away {b}. How many are left?",
    "A train goes {a} km an hour for {b} hours. How far does it go?",
    "There are {a} rows of {b} chairs. How many chairs are there?",
]


def prompts(tokenizer: Any, calls: int, system: int) -> list[list[int]]:
    from cave.llm.hf import encode_chat

    head = "You solve word problems by writing Python code that calls final_answer(number).\n" + FILLER * system
    return [encode_chat(tokenizer, [{"role": "system", "content": head},
                                    {"role": "user", "content": QUESTIONS[i % 4].format(a=12 + i, b=3 + i % 5)}])
            for i in range(calls)]  # fmt: skip


def run(model: Any, tokenizer: Any, ids: list[list[int]], prefix_tokens: int, max_tokens: int) -> dict[str, Any]:
    from cave.llm.engine import GenerationEngine

    engine = GenerationEngine(model, tokenizer, prefix_cache_tokens=prefix_tokens, stop_ids=set())
    t0 = time.perf_counter()
    gens = engine.generate_many(ids, max_new_tokens=max_tokens, temperature=1.0, seed=list(range(len(ids))))
    return {"seconds": time.perf_counter() - t0, "prefill_tokens": engine.stats.prefill_tokens,
            "tokens": [g.token_ids for g in gens]}  # fmt: skip


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m cave.benchmarks.perf.engine", description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=16, help="distinct prompts submitted together (default 16)")
    p.add_argument("--system", type=int, default=10, help="filler sentences in the shared system prompt (default 10)")
    p.add_argument("--max-tokens", type=int, default=32, help="tokens sampled per call (default 32)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds per variant (default 3)")
    p.add_argument("--out", help="write the results as JSON here")
    args = p.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cave.llm import hf_checkpoint

    path = hf_checkpoint("smollm2")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    ids = prompts(tokenizer, args.calls, args.system)
    variants = {"prefix sharing off (baseline)": 0, "prefix sharing on": 8192}
    run(model, tokenizer, ids[:2], 0, 2)  # warm-up: first-call allocations
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, budget in variants.items():
            results[name].append(run(model, tokenizer, ids, budget, args.max_tokens))
    base = statistics.median(r["seconds"] for r in results["prefix sharing off (baseline)"])
    reference = results["prefix sharing off (baseline)"][0]["tokens"]
    rows = []
    for name, runs in results.items():
        seconds = statistics.median(r["seconds"] for r in runs)
        same = sum(a == b for a, b in zip(runs[0]["tokens"], reference, strict=True))
        rows.append({"variant": name, "seconds": seconds, "prefill_tokens": runs[0]["prefill_tokens"],
                     "same_tokens": f"{same}/{len(reference)}", "ratio": seconds / base})  # fmt: skip
    report = {"calls": args.calls, "prompt_tokens": sum(map(len, ids)), "max_tokens": args.max_tokens,
              "threads": torch.get_num_threads(), "rows": rows}  # fmt: skip
    print(f"{args.calls} calls, {report['prompt_tokens']} prompt tokens, {args.max_tokens} sampled tokens each, "
          f"SmolLM2-135M fp32, {report['threads']} threads, median of {args.rounds} interleaved rounds")  # fmt: skip
    print(f"| {'variant':<30} | seconds | prompt tokens run | same tokens as baseline | ratio |")
    print(f"|{'-' * 32}|---------|-------------------|-------------------------|-------|")
    for r in rows:
        print(f"| {r['variant']:<30} | {r['seconds']:7.2f} | {r['prefill_tokens']:17d} | {r['same_tokens']:>23} | "
              f"{r['ratio']:5.2f} |")  # fmt: skip
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
    return report


if __name__ == "__main__":
    main()
