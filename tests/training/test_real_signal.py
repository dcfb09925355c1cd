"""`cave train` on the real SmolLM2-135M learns from a real signal: non-zero advantages and a policy-gradient update.

A weight change alone proves nothing: with an entropy bonus the weights move when every advantage is 0, and Adam
turns even a gradient of float noise into a full-size step. So the setup earns advantages honestly and the loss has
no other term: one text-answer role, 12 runs per prompt at temperature 1 on two sums SmolLM2 gets right some of the
time (about 1 in 4 over seeds 0-5; 12 runs make an all-wrong group of both prompts unlikely on any seed), rewarded when its reply contains the right number; entropy and KL coefficients 0.
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest
import torch
import yaml
from cave.training.cli import train_main
from cave.training.config import load_config
from cave.training.rewards import register_reward
from cave.training.trainer import read_metrics

from tests.training.test_trainer import trainable

CONFIG = {
    "team": {
        "name": "ci-adder",
        "roles": [{"name": "solver", "system": "Answer with the number only.", "max_steps": 1, "output": "text"}],
        "pattern": {"name": "sequential"},
        "runtime": {"kind": "inprocess", "timeout": 10},
        "max_in_flight": 24,  # the 24 runs sample together, one batched forward per token
    },
    "models": {"base": {"source": "smollm2", "dtype": "float32", "train_layers": 1}},
    "agents": {"solver": {"model": "base", "lr": 1.0e-5, "steps_per_iteration": 1}},
    "data": {"prompts": [{"question": "What is 2 + 3?", "answer": 5}, {"question": "What is 10 + 10?", "answer": 20}]},
    "reward": "test_contains_number",
    "estimator": "drmas",
    "group_size": 12,
    "batch_size": 2,
    "steps": 1,
    "seed": 0,
    "temperature": 1.0,
    "max_tokens": 16,
    "format_penalty": 0.1,
    "loss": {"entropy_coef": 0.0, "kl_coef": 0.0},
    "checkpoint_every": 1,
    "save_final": False,
    "threads": 2,
}


@register_reward("test_contains_number")
def contains_number(result, example):
    """1.0 when the reply names the reference number ("2 + 3 is exactly 5." earns it, "two + three = four." not)."""
    return float(str(example["answer"]) in re.findall(r"-?\d+", str(result.answer)))


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(180 * int(os.environ.get("CAVE_TEST_TIMEOUT_SCALE", "1")))  # 3 min on 2 idle cores
def test_cave_train_smollm2_policy_gradient_moves_the_weights(tmp_path):
    from safetensors import safe_open

    from cave.llm import LLMError
    from cave.llm.convert import hf_checkpoint

    try:
        base_dir = hf_checkpoint("smollm2")
    except LLMError as e:
        pytest.skip(str(e))
    run = tmp_path / "run"
    config = tmp_path / "adder.yaml"
    config.write_text(yaml.safe_dump({**CONFIG, "output_dir": str(run)}))
    cfg = load_config(config)
    assert cfg.loss.entropy_coef == 0 and cfg.loss.kl_coef == 0  # the loss is the policy-gradient term alone

    t0 = time.perf_counter()
    assert train_main([str(config), "--quiet"]) == 0
    (row,) = read_metrics(run)
    print(f"cave train, 1 step: {time.perf_counter() - t0:.0f} s; reward {row['reward_mean']:.2f}")

    # non-zero advantages, from reward differences within a prompt group (not the float noise of equal scores)
    assert 0 < row["reward_mean"] < 1 and row["reward/solver/std"] > 0
    assert row["adv/solver/max"] > 0.1 and row["adv/solver/min"] < -0.1
    assert row["agent_group_all_equal/solver"] < 1.0
    # the policy-gradient loss has a real gradient (float-noise advantages gave norms around 1e-11) ...
    assert row["grad_norm/solver"] > 1e-3 and row["gradspike/max/solver"] == pytest.approx(row["grad_norm/solver"])
    # ... and it moved the trained layer
    n_layers = json.loads((base_dir / "config.json").read_text())["num_hidden_layers"]
    key = f"model.layers.{n_layers - 1}.mlp.down_proj.weight"
    with safe_open(base_dir / "model.safetensors", "pt") as f:
        before = f.get_tensor(key).float()
    after = trainable(run / "checkpoints" / "step_000001.pt")[key]
    assert (after - before).abs().max() > 0 and not torch.equal(after, before)
