"""Embedded-model benchmarks: ``python -m cave.benchmarks.perf.llm [--quick] [--models qwen,smollm2] [--out r.jsonl]``.

For each embedded GGUF model on the ``local`` backend (llama.cpp): load time (construct the
backend: sha256 stamp check + llama.cpp load), prefill tokens/s (a ~300-token prompt, one
output token) and decode tokens/s (after the first token, greedy, up to ``--max-tokens``), each
the median of ``--repeat`` runs with a fresh prompt prefix so llama.cpp's prompt cache cannot
help. Next to each, the same numbers from raw ``llama_cpp.Llama.create_chat_completion`` in the
same process: the baseline that shows what cave's thread + queue streaming costs. Then the
transformers backend on SmolLM2 converted to an HF checkpoint (fp32, CPU), with the one-off
conversion time read from the conversion record. Target: decode >= 20 tok/s for the default (qwen).

Then the decode ratio table (``--ratio-models``, default smollm2): one loaded model, decoded in turn
through the ``local`` backend (``LocalLLM.stream``: prompt rendering, the token loop, text deltas
handed to the event loop) and by raw ``Llama.generate`` on the same ``Llama`` object, same prompt
shape, greedy, same threads (``--ratio-threads``, default the free cores), interleaved so load drifts
hit both alike; median tok/s of each and their ratio (target >= 0.9). Both run on cave's llama.cpp
thread (``cave.llm.local.llama_thread``): OpenMP thread pools belong to the calling thread, and two
of them on a small machine slow both down (see cave/llm/local.py), so "raw on the main thread" would
measure that, not cave's per-token cost.

Numbers depend heavily on what else runs: llama.cpp's threads wait for each other, so a busy
machine slows decoding sharply (the ``local`` backend picks its thread count per generation
from the free cores; ``threads`` in the table is what it used; ``busy`` how many other threads
were running when the row started).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

FILLER = (
    "The sales table has columns region, product, units and price. Regions are north, south, east and west. "
    "Products are widgets, gadgets and gizmos. Units are integers and prices are in dollars. "
)
DECODE_TASK = (
    "Write a Python module with three functions: mean(xs), median(xs) and mode(xs), each with a docstring "
    "and input validation, then a short example of using them. Explain each function after the code."
)


@dataclass
class Row:
    backend: str
    model: str
    load_s: float
    prefill_tok_s: float
    decode_tok_s: float
    ttft_s: float
    prompt_tokens: int
    decode_tokens: int
    threads: int | str
    busy: int
    note: str = ""


def _messages(i: int, task: str, filler: int = 0) -> list[dict[str, str]]:
    # a run-specific first line defeats llama.cpp's prompt-prefix cache between repeats
    system = f"Session {i} {time.time_ns()}. You are a careful Python programmer.\n" + FILLER * filler
    return [{"role": "system", "content": system}, {"role": "user", "content": task}]


async def _timed_stream(llm: Any, messages: list[dict[str, str]], max_tokens: int) -> tuple[float, float, Any]:
    """(time to first text, total time, final Completion)."""
    from cave.llm import TextDelta

    start = time.perf_counter()
    first = None
    final = None
    async for item in llm.stream(messages, max_tokens=max_tokens, temperature=0.0):
        if isinstance(item, TextDelta) and first is None:
            first = time.perf_counter() - start
        final = item
    total = time.perf_counter() - start
    return first if first is not None else total, total, final


def bench_backend(name: str, make: Any, repeat: int, max_tokens: int, filler: int) -> Row:
    from cave.llm.local import busy_cpus

    busy = busy_cpus()
    t0 = time.perf_counter()
    llm = make()
    load = time.perf_counter() - t0
    prefill, decode, ttfts = [], [], []
    prompt_tokens = decode_tokens = 0

    async def run() -> None:
        nonlocal prompt_tokens, decode_tokens
        await llm.complete(_messages(-1, "Say hi."), max_tokens=2)  # warm-up: first-call allocations
        for i in range(repeat):
            _, total, c = await _timed_stream(llm, _messages(i, "Summarize the table in one word.", filler), 1)
            prompt_tokens = c.usage.prompt_tokens - c.usage.cached_tokens
            prefill.append(prompt_tokens / total)
            first, total, c = await _timed_stream(llm, _messages(100 + i, DECODE_TASK), max_tokens)
            decode_tokens = c.usage.completion_tokens
            ttfts.append(first)
            decode.append((decode_tokens - 1) / max(total - first, 1e-9))
        await llm.aclose()

    asyncio.run(run())
    threads = getattr(llm, "last_threads", None) or "torch:" + str(_torch_threads())
    return Row(
        name, getattr(llm, "model_name", "?"), load, statistics.median(prefill), statistics.median(decode),
        statistics.median(ttfts), prompt_tokens, decode_tokens, threads, busy,
    )  # fmt: skip


def bench_raw_llama(model: str, repeat: int, max_tokens: int, filler: int, threads: int) -> Row:
    """The baseline: llama-cpp-python's own chat completion on the same file, same prompts, same threads."""
    from llama_cpp import Llama

    from cave.llm.local import busy_cpus
    from cave.llm.models import model_path

    busy = busy_cpus()
    path = model_path(model)
    t0 = time.perf_counter()
    from cave.llm.local import llama_thread

    llm = Llama(str(path), n_ctx=4096, n_threads=threads, n_threads_batch=threads, verbose=False)
    load = time.perf_counter() - t0
    on_thread = llama_thread().run  # the thread cave's own generations use (see the module doc)
    prefill, decode, ttfts = [], [], []
    prompt_tokens = decode_tokens = 0

    def stream(messages: list[dict[str, str]], max_tokens: int) -> tuple[float, float, int]:
        return on_thread(_stream, messages, max_tokens)

    def _stream(messages: list[dict[str, str]], max_tokens: int) -> tuple[float, float, int]:
        start, first, n = time.perf_counter(), None, 0
        for chunk in llm.create_chat_completion(messages, max_tokens=max_tokens, temperature=0.0, stream=True):
            if chunk["choices"][0]["delta"].get("content"):
                first = first if first is not None else time.perf_counter() - start
                n += 1
        total = time.perf_counter() - start
        return (first if first is not None else total), total, n

    on_thread(llm.create_chat_completion, _messages(-1, "Say hi."), max_tokens=2)
    for i in range(repeat):
        msgs = _messages(i, "Summarize the table in one word.", filler)
        _, total, _ = stream(msgs, 1)
        # the chat handler does not report usage when streaming: count the rendered prompt's tokens
        prompt_tokens = on_thread(llm.create_chat_completion, msgs, max_tokens=1)["usage"]["prompt_tokens"]
        prefill.append(prompt_tokens / total)
        first, total, n = stream(_messages(100 + i, DECODE_TASK), max_tokens)
        decode_tokens = n  # streamed chunks: one per token, except held-back stop prefixes
        ttfts.append(first)
        decode.append((n - 1) / max(total - first, 1e-9))
    on_thread(llm.close)
    return Row(
        "llama-cpp (raw)", model, load, statistics.median(prefill), statistics.median(decode),
        statistics.median(ttfts), prompt_tokens, decode_tokens, threads, busy, "baseline",
    )  # fmt: skip


@dataclass
class Ratio:
    model: str
    threads: int
    local_tok_s: float
    raw_tok_s: float
    ratio: float
    decode_tokens: int
    runs: int
    busy: int


def bench_decode_ratio(model: str, repeat: int, max_tokens: int, threads: int | None = None) -> Ratio:
    """Decode tok/s of the local backend vs raw ``Llama.generate`` on the same loaded model (see the module doc)."""
    from cave.llm import LocalLLM, TextDelta
    from cave.llm.local import auto_threads, busy_cpus, llama_thread

    busy = busy_cpus()
    threads = threads or auto_threads()
    llm = LocalLLM(model, n_threads=threads, n_ctx=4096)
    raw = llm._llm
    sampling = dict(llm.sampling)

    def raw_decode(prompt_ids: list[int]) -> tuple[float, int]:
        n, first = 0, 0.0
        for _ in raw.generate(prompt_ids, temp=0.0, reset=True, **sampling):
            n += 1
            if n == 1:
                first = time.perf_counter()
            if n >= max_tokens:
                break
        return (n - 1) / max(time.perf_counter() - first, 1e-9), n

    async def local_decode(messages: list[dict[str, str]]) -> tuple[float, int]:
        first, final = None, None
        async for item in llm.stream(messages, max_tokens=max_tokens, temperature=0.0):
            if isinstance(item, TextDelta) and first is None:
                first = time.perf_counter()
            final = item
        n = final.usage.completion_tokens
        return (n - 1) / max(time.perf_counter() - (first or 0.0), 1e-9), n

    asyncio.run(llm.complete(_messages(-1, "Say hi."), max_tokens=2))
    local, base, tokens = [], [], 0
    for i in range(repeat):  # interleaved: a load change hits both sides
        rate, tokens = asyncio.run(local_decode(_messages(200 + i, DECODE_TASK)))
        local.append(rate)
        base.append(llama_thread().run(raw_decode, llm.encode(_messages(300 + i, DECODE_TASK)))[0])
    asyncio.run(llm.aclose())
    lo, hi = statistics.median(local), statistics.median(base)
    return Ratio(model, threads, lo, hi, lo / hi, tokens, repeat, busy)


def _print_rows(columns: list[tuple[str, str, str]], rows: list[Any], note: str | None = None) -> None:
    """A fixed-width table: ``(title, attribute, format spec)`` per column (``"<10"``, ``">7.2f"``), and a last
    free-width column ``note`` when given."""
    widths = [re.match(r"[<>]\d+", spec).group() for _, _, spec in columns]  # type: ignore[union-attr]
    head = " ".join(f"{title:{w}}" for (title, _, _), w in zip(columns, widths, strict=True))
    head += f"  {note}" if note else ""
    print(head)
    print("-" * len(head))
    for r in rows:
        cells = [(str(v) if (v := getattr(r, attr)) is None else v) for _, attr, _ in columns]
        line = " ".join(format(v, spec) for v, (_, _, spec) in zip(cells, columns, strict=True))
        print(line + (f"  {getattr(r, note)}" if note else ""))


def print_ratios(ratios: list[Ratio]) -> None:
    _print_rows(
        [("model", "model", "<10"), ("threads", "threads", ">7"), ("local tok/s", "local_tok_s", ">12.1f"),
         ("raw generate tok/s", "raw_tok_s", ">19.1f"), ("ratio", "ratio", ">6.2f"), ("tokens", "decode_tokens", ">7"),
         ("runs", "runs", ">5"), ("busy", "busy", ">5")],
        ratios,
    )  # fmt: skip


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def print_table(rows: list[Row]) -> None:
    _print_rows(
        [("backend", "backend", "<16"), ("model", "model", "<10"), ("load s", "load_s", ">7.2f"),
         ("prefill tok/s", "prefill_tok_s", ">14.1f"), ("decode tok/s", "decode_tok_s", ">13.1f"),
         ("ttft s", "ttft_s", ">7.2f"), ("prompt", "prompt_tokens", ">7"), ("decoded", "decode_tokens", ">8"),
         ("threads", "threads", ">8"), ("busy", "busy", ">5")],
        rows,
        note="note",
    )  # fmt: skip


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 repeat, 48 decode tokens")
    parser.add_argument("--models", default="qwen,smollm2", help="embedded models for the local backend")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--no-raw", action="store_true", help="skip the raw llama-cpp baseline rows")
    parser.add_argument("--no-transformers", action="store_true", help="skip the transformers backend row")
    parser.add_argument("--torch-threads", type=int, default=0, help="torch threads (default: the free cores)")
    parser.add_argument("--ratio-models", default="smollm2", help="models of the local-vs-raw decode ratio table")
    parser.add_argument("--ratio-threads", type=int, default=0, help="threads for it (default: the free cores)")
    parser.add_argument("--ratio-only", action="store_true", help="only the decode ratio table")
    parser.add_argument("--out", help="append the rows as JSON lines to this file")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    repeat, max_tokens = (1, 48) if args.quick else (args.repeat, args.max_tokens)
    filler = 6  # ~300 prompt tokens

    from cave.llm import LocalLLM

    rows: list[Row] = []
    ratios = [
        bench_decode_ratio(m.strip(), max(repeat, 3), max_tokens, args.ratio_threads or None)
        for m in args.ratio_models.split(",")
        if m.strip()
    ]
    if args.ratio_only:
        args.models, args.no_transformers = "", True
    for model in [m.strip() for m in args.models.split(",") if m.strip()]:
        row = bench_backend("local", lambda m=model: LocalLLM(m), repeat, max_tokens, filler)
        rows.append(row)
        print(f"local {model}: decode {row.decode_tok_s:.1f} tok/s", flush=True)
        if not args.no_raw:
            rows.append(bench_raw_llama(model, repeat, max_tokens, filler, int(row.threads)))
    if not args.no_transformers:
        from cave.llm import TransformersLLM
        from cave.llm.convert import conversion_report, hf_checkpoint

        t0 = time.perf_counter()
        path = hf_checkpoint("smollm2")
        waited = time.perf_counter() - t0
        report = conversion_report(path)
        note = f"converted once in {report['seconds_total']:.0f} s (GGUF read {report['seconds_read_gguf']:.0f} s)"
        if waited > 5:
            note += " - this run"
        import torch

        from cave.llm.local import auto_threads

        # torch's OpenMP threads suffer from a busy machine as llama.cpp's do: use the free cores
        torch.set_num_threads(args.torch_threads or auto_threads())
        rows.append(bench_backend("transformers", lambda: TransformersLLM(path), repeat, max_tokens, filler))
        rows[-1].model, rows[-1].note = "smollm2", note + f", fp32, torch threads {torch.get_num_threads()}"
    print()
    print(f"# {platform.node()} {platform.processor() or platform.machine()} cores={os.cpu_count()}")
    if rows:
        print_table(rows)
    if ratios:
        print("\n# decode: local backend vs raw Llama.generate, same process, same model object")
        print_ratios(ratios)
    if args.out:
        with open(args.out, "a") as f:
            for r in rows:
                f.write(json.dumps({"bench": "llm", **asdict(r), "time": time.time()}) + "\n")
            for q in ratios:
                f.write(json.dumps({"bench": "llm-decode-ratio", **asdict(q), "time": time.time()}) + "\n")
    return rows


if __name__ == "__main__":
    main()
