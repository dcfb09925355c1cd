"""The train config: valid files load; every mistake names the field and the fix, before any model loads."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from cave.training.config import ConfigError, load_config, parse_config

ROOT = Path(__file__).resolve().parents[2]
CI_CONFIG = ROOT / "training" / "configs" / "math_smollm2.yaml"
BASE = {
    "team": {
        "roles": [{"name": "solver", "system": "solve"}, {"name": "verifier", "system": "check"}],
        "pattern": {"name": "loop", "worker": "solver", "critic": "verifier"},
    },
    "data": {"prompts": [{"question": "1+1?", "answer": 2}]},
}


def bad(**changes) -> str:
    data = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        node = data
        *path, last = dotted.split("__")
        for p in path:
            node = node.setdefault(p, {})
        node[last] = value
    with pytest.raises(ConfigError) as e:
        parse_config(data, file="train.yaml")
    return str(e.value)


def test_the_ci_config_loads_without_loading_a_model():
    cfg = load_config(CI_CONFIG)
    assert cfg.team.role_names == ["solver", "verifier"]
    assert cfg.agents["solver"].model == cfg.agents["verifier"].model == "base"
    assert cfg.estimator == "drmas" and cfg.group_size == 2 and cfg.batch_size == 2 and cfg.steps == 2
    assert Path(cfg.output_dir).is_absolute() and Path(cfg.output_dir).parent == CI_CONFIG.parent / "runs"
    assert len(cfg.data.examples()) == 2
    assert load_config(CI_CONFIG, steps=3).steps == 3


def test_overrides_reach_nested_fields_and_null_unsets(tmp_path):
    from cave.training.config import ConfigError

    verify = CI_CONFIG.parent / "math_verify_smollm2.yaml"
    cfg = load_config(verify, **{"team.pattern.max_rounds": 2, "loss.entropy_coef": 0.0, "init_from": None})
    assert cfg.team.pattern.max_rounds == 2 and cfg.loss.entropy_coef == 0.0 and cfg.init_from is None
    assert cfg.reward == "math_verify" and cfg.team.pattern.critic == "verifier"  # the rest stays as written
    with pytest.raises(ConfigError, match="cannot set reward.x: reward is 'math_verify', not a mapping"):
        load_config(verify, **{"reward.x": 1})
    with pytest.raises(ConfigError, match="max_rounds"):  # a nested override is validated like the file
        load_config(verify, **{"team.pattern.max_rounds": 0})


def test_defaults_give_every_role_the_base_model():
    cfg = parse_config(BASE)
    assert set(cfg.agents) == {"solver", "verifier"} and cfg.models["base"].source == "smollm2"


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"estimator": "drmass"},
            "train.yaml:1: estimator: unknown advantage estimator 'drmass'\n  fix: did you mean 'drmas'? known advantage estimators: at_grpo, drmas, grpo, pooled_calls",
        ),
        ({"reward": "judge"}, "train.yaml:1: reward: unknown reward 'judge'\n  fix: known rewards:"),
        ({"group_size": 0}, "train.yaml:1: group_size: Input should be greater than or equal to 1"),
        (
            {"agents": {"critic": {}}},
            "agents.critic: no such role in the team (roles: solver, verifier)\n  fix: rename it",
        ),
        ({"agents": {"solver": {"model": "big"}}}, "agents.solver.model: 'big' is not a key of `models` (base)"),
        (
            {"agents": {"solver": {"lr": 1e-5}, "verifier": {"lr": 1e-6}}},
            "shares model 'base' with solver but has different optimizer settings",
        ),
        (
            {"data": {}},
            "data: no examples\n  fix: give data.generator (math_word or package.module:function), data.path (a JSONL file) or data.prompts (a list)",
        ),
        ({"data": {"path": "nope.jsonl"}}, "data.path: data file not found:"),
        ({"stepz": 3}, "train.yaml:1: stepz: unknown field `stepz`\n  fix: did you mean `steps`?"),
        ({"agents": {"solver": {"lr": 0}}}, "agents.solver.lr: Input should be greater than 0"),
        ({"team__pattern": {"name": "lop"}}, "did you mean 'loop'?"),
        ({"device": "tpu"}, "device: invalid value 'tpu'\n  fix: Input should be 'auto', 'cpu' or 'cuda'"),
    ],
)
def test_errors_name_the_field_and_the_fix(changes, expected):
    assert expected in bad(**changes)


def test_missing_sections_and_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="data: required field is missing\n  fix: add `data: ...`"):
        parse_config({"team": BASE["team"]}, file="t.yaml")
    with pytest.raises(ConfigError, match="no such train config"):
        load_config(tmp_path / "none.yaml")
    (tmp_path / "x.yaml").write_text("team: [unclosed")
    with pytest.raises(ConfigError, match="YAML syntax error"):
        load_config(tmp_path / "x.yaml")
    (tmp_path / "d.jsonl").write_text('{"question": "a", "answer": 1}\nnot json\n')
    data = {**BASE, "data": {"path": "d.jsonl"}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(data))
    cfg = load_config(tmp_path / "c.yaml")
    with pytest.raises(ConfigError, match=r"d.jsonl:2: data: not valid JSON"):
        cfg.data.examples()


def test_errors_in_a_file_carry_its_line_numbers(tmp_path):
    text = yaml.safe_dump(BASE, sort_keys=False) + "steps: 0\nestimator: grpoo\n"
    (tmp_path / "c.yaml").write_text(text)
    lines = text.splitlines()
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path / "c.yaml")
    msg = str(e.value)
    assert f"c.yaml:{lines.index('steps: 0') + 1}: steps: Input should be greater than or equal to 1" in msg
    assert f"c.yaml:{lines.index('estimator: grpoo') + 1}: estimator: unknown advantage estimator 'grpoo'" in msg
    (tmp_path / "dup.yaml").write_text(text.replace("steps: 0", "steps: 2\nsteps: 3"))
    with pytest.raises(ConfigError, match=r"dup.yaml:\d+: steps: duplicate key `steps`"):
        load_config(tmp_path / "dup.yaml")


def test_team_file_path_is_relative_to_the_config(tmp_path):
    (tmp_path / "team.yaml").write_text(yaml.safe_dump(BASE["team"]))
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({**BASE, "team": "team.yaml", "output_dir": "out"}))
    cfg = load_config(tmp_path / "c.yaml")
    assert cfg.team.role_names == ["solver", "verifier"] and cfg.output_dir == str(tmp_path / "out")
    (tmp_path / "c2.yaml").write_text(yaml.safe_dump({**BASE, "team": "missing.yaml"}))
    with pytest.raises(ConfigError, match="team file not found"):
        load_config(tmp_path / "c2.yaml")


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"models": {"base": {"rollout": {"engine": "vllm_server"}}}},
            "models.base.rollout: engine vllm_server needs `url` (a running server) or `python`",
        ),
        (
            {"models": {"base": {"rollout": {"engine": "vllm", "url": "http://127.0.0.1:8000"}}}},
            "url/python are for engine vllm_server, not vllm\n  fix: remove them or change engine",
        ),
        (
            {"models": {"base": {"rollout": {"engine": "sglang"}}}},
            "models.base.rollout.engine: unknown rollout engine 'sglang'\n  fix: known rollout engines: transformers, vllm, vllm_server",
        ),
        ({"models": {"base": {"deepspeed": {"zero_stage": 4}}}}, "models.base.deepspeed.zero_stage: invalid value 4"),
        (
            {"models": {"base": {"dtype": "bfloat16", "deepspeed": {"zero_stage": 0}}}},
            "dtype bfloat16 with deepspeed zero_stage 0",
        ),
        ({"ray": {"rollout_workers": 0}}, "ray.rollout_workers: Input should be greater than or equal to 1"),
        ({"tracking": ["mlflow"]}, "tracking: unknown tracker 'mlflow'\n  fix: known trackers: tensorboard, wandb"),
    ],
)
def test_scale_out_settings_name_the_field_and_the_fix(changes, expected):
    assert expected in bad(**changes)


def test_a_missing_optional_package_is_reported_before_any_model_loads(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    missing = {"deepspeed", "ray", "wandb", "vllm"}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in missing else real(name, *a))
    assert (
        "models.base.deepspeed: deepspeed is not installed\n  fix: DS_BUILD_OPS=0 pip install deepspeed==0.19.8"
        in bad(models={"base": {"deepspeed": {"zero_stage": 2}}})
    )
    assert "ray: ray is not installed\n  fix: pip install 'cave[ray]'" in bad(ray={"rollout_workers": 2})
    assert "tracking: wandb is not installed\n  fix: pip install wandb (or the `track` extra)" in bad(
        tracking=["wandb"]
    )
    assert "models.base.rollout: vllm is not installed\n  fix: pip install 'cave[gpu]' on a CUDA machine" in bad(
        models={"base": {"rollout": {"engine": "vllm"}}}
    )


def test_scale_out_settings_parse():
    cfg = parse_config(
        {
            **BASE,
            "models": {
                "base": {"rollout": {"engine": "vllm_server", "url": "http://127.0.0.1:8000", "sleep": False}},
                "big": {"rollout": {"gpu_memory_utilization": 0.3}},
            },
            "agents": {"solver": {"model": "big"}, "verifier": {"model": "base"}},
        }
    )
    assert cfg.models["base"].rollout.url == "http://127.0.0.1:8000" and cfg.models["base"].deepspeed is None
    assert cfg.models["big"].rollout.gpu_memory_utilization == 0.3 and cfg.ray is None and cfg.tracking == []
    # auto: vLLM where it and a CUDA GPU are at hand, else the transformers engine (the live model)
    from cave.llm.vllm import vllm_available

    assert cfg.models["big"].rollout.resolved() == ("vllm" if vllm_available()[0] else "transformers")


def test_cave_train_silences_third_party_noise_unless_verbose(monkeypatch):
    import logging

    from cave.training.cli import COMMAND, quiet_third_party

    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    quiet_third_party()
    from transformers.utils import logging as hf_logging

    assert hf_logging.get_verbosity() == hf_logging.ERROR and not hf_logging.is_progress_bar_enabled()
    assert logging.getLogger("deepspeed").level == logging.ERROR
    import os

    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"
    import argparse

    p = argparse.ArgumentParser()
    COMMAND.configure(p)
    assert p.parse_args(["run", "c.yaml", "--verbose"]).verbose is True
    hf_logging.enable_progress_bar()
    hf_logging.set_verbosity_warning()


def test_a_bf16_model_trains_through_deepspeeds_bf16_optimizer():
    """The model's dtype reaches DeepSpeed: a bf16 model with bf16 off would be handed to its fp32 path."""
    from cave.training.workers import optimizer_config

    for dtype, want in (("bfloat16", True), ("float32", False)):
        cfg = parse_config({**BASE, "models": {"base": {"dtype": dtype, "deepspeed": {"zero_stage": 2}}}})
        assert optimizer_config(cfg, "solver").deepspeed.bf16 is want
