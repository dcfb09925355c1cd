"""The running batch's KV written in place vs reallocated per token: ``python -m cave.benchmarks.perf.batch_cache``.

An eval or a rollout keeps ~100 rows decoding for minutes, rows leaving and joining all the time. This benchmark
decodes the same calls on SmolLM2-135M (CPU, ``--dtype``) through ``GenerationEngine`` with ``kv_slack=0`` (the
baseline: every layer's keys and values reallocated at every token, as transformers' ``DynamicLayer`` does) and with
the default slack (``cave.llm.batch_cache``), and with the KV and attention left in the model's dtype or in float32
(``cave.llm.cpu_attention``, the engine's default for a half-precision model on a CPU), rounds interleaved in one
process:

- ``--calls`` calls with distinct short prompts, submitted in ``--waves`` waves a few decode steps apart (later
  waves join the running batch), or with ``--clients N`` as an eval sends them: N clients, each sending its next call
  when its last one finished (rows leave and join nearly every step); each call with its own ``max_new_tokens``
  between ``--min-tokens`` and ``--max-tokens`` (rows leave at different steps), sampled with fixed seeds and no stop
  token;
- per variant: the median wall seconds, decoded tokens per second, the highest resident memory seen during the
  round above the process's before the first round and the most heap glibc held free (``mallinfo2``; ``-`` off
  glibc), both sampled every 50 ms, and whether every call sampled the same tokens as in the baseline (in-place writes change no
  arithmetic; float32 attention changes rounding, so its tokens may differ).

First, one decode step at an eval's shape (``--rows`` rows over ``--width`` cached positions, random KV) with each
cache; then the engine rounds. Prints tables with each variant's seconds and peak memory as ratios to the baseline's.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import functools
import json
import os
import statistics
import threading
import time
from typing import Any

from cave.benchmarks.perf.engine import QUESTIONS
from cave.benchmarks.perf.llm import FILLER


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                "fsmblks", "uordblks", "fordblks", "keepcost")]  # fmt: skip


@functools.cache
def _mallinfo2() -> Any:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
        return libc.mallinfo2
    except (OSError, AttributeError):
        return None


def heap_free_bytes() -> int | None:
    """Bytes glibc's heap holds free (freed by the program, kept by the process); None off glibc."""
    mallinfo2 = _mallinfo2()
    return None if mallinfo2 is None else int(mallinfo2().fordblks)


def rss_bytes() -> int:
    with open(f"/proc/{os.getpid()}/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class _Peak:
    """The highest RSS and free-heap size seen while in the block (a sampling thread, every ``every`` s)."""

    def __init__(self, every: float = 0.05) -> None:
        self.every, self.peak, self.free, self._stop = every, 0, None, threading.Event()

    def __enter__(self) -> _Peak:
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(self.every):
            self.peak = max(self.peak, rss_bytes())
            free = heap_free_bytes()
            self.free = free if self.free is None else max(self.free, free or 0)

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())


def calls(tokenizer: Any, n: int, lo: int, hi: int, system: int) -> tuple[list[list[int]], list[int]]:
    from cave.llm.hf import encode_chat

    head = "You solve word problems by writing Python code that calls final_answer(number).\n" + FILLER * system
    ids = [encode_chat(tokenizer, [{"role": "system", "content": head},
                                   {"role": "user", "content": QUESTIONS[i % 4].format(a=10 + i, b=2 + i % 7)}])
           for i in range(n)]  # fmt: skip
    lengths = [lo + (i * 37) % (hi - lo + 1) for i in range(n)]  # spread, deterministic
    return ids, lengths


def run(
    model: Any,
    tokenizer: Any,
    ids: list[list[int]],
    lengths: list[int],
    waves: int,
    variant: tuple[int, bool, bool],
    clients: int = 0,
) -> dict[str, Any]:
    from cave.llm.engine import GenerationEngine

    slack, fp32, spare = variant
    engine = GenerationEngine(model, tokenizer, stop_ids=set(), kv_slack=slack, kv_spare_rows=spare,
                              max_batch=max(len(ids), clients))  # fmt: skip
    if not fp32:  # the KV and attention in the model's dtype, as before cave.llm.cpu_attention
        engine.kv_dtype = None

    def send(i: int) -> Any:
        return engine.submit_many([ids[i]], max_new_tokens=lengths[i], temperature=1.0, seed=i)[0]

    with _Peak() as peak:
        t0 = time.perf_counter()
        if clients:  # closed loop: each client's next call as soon as its last one is done
            futures = {send(i): i for i in range(min(clients, len(ids)))}
            done: dict[int, Any] = {}
            following = iter(range(len(futures), len(ids)))
            while futures:
                finished, _ = concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_COMPLETED)
                for f in finished:
                    done[futures.pop(f)] = f.result()
                    if (i := next(following, None)) is not None:
                        futures[send(i)] = i
            gens = [done[i] for i in range(len(ids))]
        else:
            waiting = []
            per = -(-len(ids) // waves)
            for w in range(waves):
                waiting += [send(i) for i in range(w * per, min(len(ids), (w + 1) * per))]
                time.sleep(0.5)  # the next wave joins a batch already decoding
            gens = [f.result() for f in waiting]
        seconds = time.perf_counter() - t0
    for t in threading.enumerate():  # the engine's worker gives its heap back before it ends
        if t.name == "cave-generation-engine":
            t.join()
    return {"seconds": seconds, "tokens": [g.token_ids for g in gens], "peak_rss": peak.peak,
            "heap_free": peak.free}  # fmt: skip


def decode_steps(model: Any, rows: int, width: int, steps: int, variant: str) -> float:
    """Median seconds of one decode step of ``rows`` rows over ``width`` cached positions (random KV), the cache kept
    as ``variant``: "dynamic" (transformers' DynamicCache), "slack" (model dtype) or "slack32" (float32 KV, float32
    attention: the engine's default for a half-precision model on a CPU)."""
    import contextlib

    import torch
    from transformers import DynamicCache

    from cave.llm.batch_cache import slack_cache
    from cave.llm.cpu_attention import float32_attention
    from cave.llm.hf import cache_kwarg

    cfg, dtype = model.config, next(model.parameters()).dtype
    shape = (rows, cfg.num_key_value_heads, width, cfg.hidden_size // cfg.num_attention_heads)
    g = torch.Generator().manual_seed(0)
    kv = [(torch.randn(shape, generator=g).to(dtype), torch.randn(shape, generator=g).to(dtype))
          for _ in range(cfg.num_hidden_layers)]  # fmt: skip
    if variant == "dynamic":
        cache = DynamicCache(ddp_cache_data=kv)
    else:
        kv_dtype = torch.float32 if variant == "slack32" else None
        cache = slack_cache([[k] for k, _ in kv], [[v] for _, v in kv], width, dtype=kv_dtype)
    mask = torch.ones(rows, width, dtype=torch.long)
    tokens = torch.zeros(rows, 1, dtype=torch.long)
    times = []
    block = float32_attention() if variant == "slack32" else contextlib.nullcontext()
    with torch.no_grad(), block:
        for i in range(steps):
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            t0 = time.perf_counter()
            out = model(input_ids=tokens, attention_mask=mask, position_ids=torch.full((rows, 1), width + i),
                        use_cache=True, **{cache_kwarg(model): cache})  # fmt: skip
            cache = out.past_key_values
            times.append(time.perf_counter() - t0)
    return statistics.median(times[1:] or times)


def step_table(model: Any, rows: int, width: int, steps: int, dtype: str) -> dict[str, Any]:
    from rich.console import Console
    from rich.table import Table

    names = {"dynamic": "before: DynamicCache (realloc per token)", "slack": "in place, model-dtype KV + attention",
             "slack32": "in place, float32 KV + attention (default)"}  # fmt: skip
    seconds = {v: [] for v in names}
    for _ in range(2):  # interleaved
        for v in names:
            seconds[v].append(decode_steps(model, rows, width, steps, v))
    best = {v: min(s) for v, s in seconds.items()}
    table = Table(title=f"one decode step: {rows} rows over {width} positions, SmolLM2-135M {dtype}")
    for col in ("cache", "ms / step", "x baseline"):
        table.add_column(col)
    for v, name in names.items():
        table.add_row(name, f"{best[v] * 1000:.0f}", f"{best[v] / best['dynamic']:.2f}")
    Console(width=150).print(table)
    return {names[v]: {"ms_per_step": best[v] * 1000, "ratio": best[v] / best["dynamic"]} for v in names}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m cave.benchmarks.perf.batch_cache", description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=96, help="calls in all (default 96)")
    p.add_argument("--waves", type=int, default=4, help="waves the calls arrive in (default 4)")
    p.add_argument("--clients", type=int, default=0, help="instead of waves: this many clients, each sending its "
                   "next call when its last one is done (an eval's traffic; default 0: waves)")  # fmt: skip
    p.add_argument(
        "--system",
        type=int,
        default=6,
        help="filler sentences in the system prompt (default 6: ~300-token prompts, as a team's)",
    )
    p.add_argument("--min-tokens", type=int, default=32, help="shortest reply (default 32)")
    p.add_argument("--max-tokens", type=int, default=192, help="longest reply (default 192)")
    p.add_argument(
        "--dtype", default="bfloat16", choices=["float32", "bfloat16"], help="model dtype (default bfloat16)"
    )
    p.add_argument("--rounds", type=int, default=2, help="interleaved rounds per variant (default 2)")
    p.add_argument("--rows", type=int, default=100, help="rows of the decode-step table (default 100, an eval's)")
    p.add_argument("--width", type=int, default=400, help="cached positions of the decode-step table (default 400)")
    p.add_argument("--no-engine", action="store_true", help="only the decode-step table")
    p.add_argument("--out", help="write the results as JSON here")
    args = p.parse_args(argv)

    import torch
    from rich.console import Console
    from rich.table import Table
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cave.llm import hf_checkpoint
    from cave.llm.batch_cache import SLACK

    path = hf_checkpoint("smollm2")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, args.dtype)).eval()
    steps = step_table(model, args.rows, args.width, 8, args.dtype)
    if args.no_engine:
        return {"decode_step": steps}
    ids, lengths = calls(tokenizer, args.calls, args.min_tokens, args.max_tokens, args.system)
    base_rss = rss_bytes()
    variants = {  # (kv_slack, float32 KV + attention, spare rows)
        "before: realloc per token, model-dtype KV + attention": (0, False, False),
        f"in place (kv_slack={SLACK}), model-dtype KV + attention": (SLACK, False, False),
        f"in place (kv_slack={SLACK}), float32 KV + attention": (SLACK, True, False),
        "  + spare rows: join into one, leave by one row's copy (default)": (SLACK, True, True),
    }
    run(model, tokenizer, ids[:4], lengths[:4], 1, (SLACK, True, True))  # warm-up: first-call allocations
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, variant in variants.items():
            results[name].append(run(model, tokenizer, ids, lengths, args.waves, variant, args.clients))
    base_name = next(iter(variants))
    base_tokens = results[base_name][0]["tokens"]
    base_s = statistics.median(r["seconds"] for r in results[base_name])
    for rows in results.values():  # above the process's resident size before the first round (model loaded)
        for r in rows:
            r["peak_rss"] -= base_rss
    base_peak = max(r["peak_rss"] for r in results[base_name])
    arrival = f"from {args.clients} clients" if args.clients else f"in {args.waves} waves"
    table = Table(title=f"{args.calls} calls {arrival}, {sum(lengths)} tokens, SmolLM2-135M {args.dtype}")
    for col in ("variant", "median s", "tokens/s", "x baseline s", "peak RSS +MB", "x baseline peak", "free heap MB",
                "same tokens"):  # fmt: skip
        table.add_column(col)
    summary = {}
    for name, rows in results.items():
        s = statistics.median(r["seconds"] for r in rows)
        peak = max(r["peak_rss"] for r in rows)
        free = [r["heap_free"] for r in rows if r["heap_free"] is not None]
        same = all(r["tokens"] == base_tokens for r in rows)
        summary[name] = {"seconds": s, "tokens_per_s": sum(lengths) / s, "ratio": s / base_s, "peak_rss_mb": peak / 1e6,
                         "peak_ratio": peak / base_peak if base_peak else None,
                         "heap_free_mb": max(free) / 1e6 if free else None, "same_tokens": same}  # fmt: skip
        table.add_row(name, f"{s:.1f}", f"{sum(lengths) / s:.0f}", f"{s / base_s:.2f}", f"{peak / 1e6:.0f}",
                      f"{peak / base_peak:.2f}" if base_peak else "-", f"{max(free) / 1e6:.0f}" if free else "-",
                      "yes" if same else "no")  # fmt: skip
    Console(width=150).print(table)
    out = {"calls": args.calls, "waves": args.waves, "clients": args.clients, "tokens": sum(lengths), "dtype": args.dtype, "variants": summary,
           "decode_step": {"rows": args.rows, "width": args.width, **steps}}  # fmt: skip
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2)
    return out


if __name__ == "__main__":
    main()
