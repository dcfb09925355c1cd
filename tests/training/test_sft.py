"""`cave train sft`: a teacher's successful team runs, re-tokenized for the student, imitated; RL starts there."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
import yaml
from cave.training.checkpoints import weights_digest
from cave.training.config import load_config
from cave.training.sft import TEACHER_RUNS, end_of_turn_id, kept_calls, run_sft, student_trajectories
from cave.training.trainer import Trainer, latest_checkpoint

from tests.training.test_evaluate import cave_eval
from tests.training.test_rollout import TEAM, save_tiny

PREFIX = "```python\n"


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return save_tiny(tmp_path_factory.mktemp("tiny") / "model")


def teacher(messages):
    """A scripted teacher: right on every problem whose numbers it can read, wrong (0) on the 'store' ones."""
    text = messages[-1]["content"]
    if "The solver's answer" in text:
        return PREFIX + "verdict(approve=True)\n```"
    if "store" in text:
        return PREFIX + "final_answer(0)\n```"
    numbers = [int(n) for n in re.findall(r"\d+", text)]
    return PREFIX + f"final_answer({numbers[0]} + {numbers[1]})\n```"


def sft_config(tiny_dir: Path, tmp_path: Path):
    roles = [{**r, "sampling": {"response_prefix": PREFIX}} for r in TEAM["roles"]]
    data = {
        "team": {**TEAM, "roles": roles, "default_backend": "transformers"},
        "models": {"base": {"source": str(tiny_dir)}},
        "agents": {"solver": {"lr": 1e-5}, "verifier": {"lr": 1e-5}},
        "data": {
            "prompts": [
                {"question": "Ava has 120 apples and buys 300 more. How many apples does Ava have now?", "answer": 420},
                {"question": "A store had 50 bolts and sold 20 of them. How many bolts are left?", "answer": 30},
                {"question": "Ben has 7 cards and buys 8 more. How many cards does Ben have now?", "answer": 15},
            ]
        },  # fmt: skip
        "reward": "math_sympy",
        "group_size": 2,
        "batch_size": 2,
        "steps": 1,
        "max_tokens": 16,
        "threads": 1,
        "output_dir": "rl",
        "init_from": "sft",
        "sft": {
            "teacher": {"backend": "scripted"},
            "problems": 3,
            "samples": 2,
            "chunk": 2,
            "epochs": 4,
            "lr": 2e-2,
            "batch_size": 4,
            "output_dir": "sft",
        },  # fmt: skip
    }
    path = tmp_path / "sft.yaml"
    path.write_text(yaml.safe_dump(data))
    cfg = load_config(path)
    cfg.sft.teacher = {"backend": "scripted", "replies": teacher}  # a function: not expressible in YAML
    return cfg


def test_sft_keeps_the_successful_calls_and_the_student_learns_them(tiny_dir, tmp_path):
    cfg = sft_config(tiny_dir, tmp_path)
    run = run_sft(cfg, quiet=True)
    rows = [json.loads(line) for line in (run / TEACHER_RUNS).read_text().splitlines()]
    assert len(rows) == 6 and sorted({r["problem"] for r in rows}) == [0, 1, 2]  # 3 problems x 2 samples
    assert [r["reward"] for r in rows] == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0]  # the 'store' problem fails
    kept = kept_calls(rows)
    assert len(kept) == 4 and {s.role for t in kept for s in t.steps} == {"solver", "verifier"}

    # the student's samples: prompt = its chat template + the prefix (never trained); reply + end of turn
    from transformers import AutoTokenizer

    from cave.llm.hf import TransformersLLM

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    enc = TransformersLLM(str(tiny_dir))
    (first,) = student_trajectories(kept[:1], {"solver": enc}, {"solver": PREFIX})
    step = first.steps[0]
    assert tok.decode(step.prompt_token_ids).endswith("<|im_start|>assistant\n" + PREFIX)
    assert tok.decode(step.token_ids) == "final_answer(120 + 300)\n```<|im_end|>"
    assert step.token_ids[-1] == end_of_turn_id(tok)

    # fine-tuning lowered the NLL of the kept replies; the weights are a step-0 checkpoint of the SFT run
    log = [json.loads(line) for line in (run / "sft_metrics.jsonl").read_text().splitlines()]
    first_epoch = [r["nll"] for r in log if r["epoch"] == 0]
    last_epoch = [r["nll"] for r in log if r["epoch"] == 3]
    assert sum(last_epoch) / len(last_epoch) < 0.7 * sum(first_epoch) / len(first_epoch)
    assert latest_checkpoint(run).name == "step_000000.pt" and (run / "config.json").is_file()

    # a second call resumes the collection (nothing re-run) and fine-tunes again
    run_sft(cfg, quiet=True)
    assert len((run / TEACHER_RUNS).read_text().splitlines()) == 6

    # `cave train eval SFT_RUN` evaluates the fine-tuned weights
    r = cave_eval(str(run), "-k", "1", "--limit", "1", "--no-greedy", "-q")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["checkpoint"] == "latest (step 0)"

    # init_from: RL starts from the SFT weights with a fresh optimizer, at step 1 of its own run folder
    trainer = Trainer(cfg, quiet=True)
    trainer.setup()
    try:
        saved = torch.load(latest_checkpoint(run), weights_only=False)["models"]
        (slot,) = saved.values()
        name, weight = next(iter(slot["trainable"].items()))
        assert torch.equal(trainer.policies.model("solver").state_dict()[name], weight)
        assert trainer.start_step == 0 and not trainer.policies.slots[0].stepper.optimizer.state
    finally:
        trainer.close()

    # another machine: the kept teacher runs seed a new folder, nothing is collected, and the same runs fine-tune
    # to the same weights (a comparison's records name their warm start by this digest)
    asked = []
    cfg.sft.teacher = {"backend": "scripted", "replies": lambda m: asked.append(m) or "I do not know."}
    again = run_sft(cfg, tmp_path / "elsewhere", quiet=True, teacher_runs=run / TEACHER_RUNS)
    assert not asked and (again / TEACHER_RUNS).read_text() == (run / TEACHER_RUNS).read_text()
    assert weights_digest(again) == weights_digest(run) is not None
    with pytest.raises(FileNotFoundError, match="--teacher-runs .*no such file"):
        run_sft(cfg, tmp_path / "third", quiet=True, teacher_runs=tmp_path / "missing.jsonl")


def test_sft_errors_say_what_to_do(tiny_dir, tmp_path):
    cfg = sft_config(tiny_dir, tmp_path)
    cfg.sft.teacher = {"backend": "scripted", "replies": lambda m: "I do not know."}
    with pytest.raises(ValueError, match="the teacher succeeded on none of its 6 runs"):
        run_sft(cfg, quiet=True)
    cfg.init_from = str(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="init_from: .*run `cave train sft CONFIG` first"):
        Trainer(cfg, quiet=True).train()
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**yaml.safe_load((tmp_path / "sft.yaml").read_text()), "sft": {"teacher": {}}}))
    from cave.training.config import ConfigError

    with pytest.raises(ConfigError, match="sft.teacher needs a backend"):
        load_config(bad)


def test_the_shipped_config_warm_starts_from_its_own_sft_run():
    cfg = load_config(Path(__file__).resolve().parents[2] / "training" / "configs" / "math_word_smollm2.yaml")
    assert cfg.sft is not None and cfg.sft.teacher["backend"] == "local"
    assert cfg.init_from == cfg.sft.output_dir and Path(cfg.init_from).is_absolute()
    assert all(r.sampling.response_prefix == PREFIX for r in cfg.team.roles)


def test_warmstart_report_reads_the_runs_own_files(tmp_path, capsys):
    from cave.training.experiments.warmstart import main

    for est, steps, curve in (("drmas", (0, 10), [0.3, 0.5]), ("grpo", (10,), [0.4])):  # grpo: eval_at_start false
        run = tmp_path / est
        run.mkdir()
        (run / "config.json").write_text(json.dumps({"estimator": est, "seed": 0, "init_from": "sft"}))
        rows = [
            {
                "step": s,
                "k": 4,
                "avg@4": v,
                "pass@4": v,
                "greedy": v,
                "split": "test",
                "problems": 20,
                "ci": {"avg@4": [v - 0.1, v + 0.1]},
            }
            for s, v in zip(steps, curve, strict=True)
        ]
        (run / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (run / "metrics.jsonl").write_text(
            json.dumps({"step": 1, "reward_mean": 0.4, "reward/solver/mean": 0.4, "gradspike/p99/solver": 2.5,
                        "gradspike/max/solver": 3.0, "gradspike/max_over_median/solver": 1.5}) + "\n"
        )  # fmt: skip
    (tmp_path / "base.json").write_text(json.dumps({"avg@4": 0.0}))
    out = tmp_path / "out"
    assert main([str(tmp_path / "drmas"), str(tmp_path / "grpo"), "--base", str(tmp_path / "base.json"),
                 "--out", str(out)]) == 0  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    assert [r["estimator"] for r in summary["runs"]] == ["drmas", "grpo"]
    assert summary["runs"][0]["eval"][-1]["avg@4"] == 0.5 and summary["runs"][1]["train"][0]["reward/solver"] == 0.4
    # the run without its own step-0 eval shares the one from the same warm start, and says so
    start = summary["runs"][1]["eval"][0]
    assert start["step"] == 0 and start["avg@4"] == 0.3 and start["shared_from"] == str(tmp_path / "drmas")
    assert summary["runs"][0]["grad"]["solver"]["p99"] == 2.5
    assert (
        "| grpo | 0 | 0.300 | **0.400** [0.300, 0.500] | 0.40 | 0.30 -> 0.40 | solver 2.50 / 3.00 / 1.5 |"
        in capsys.readouterr().out
    )
    assert (out / "warmstart.png").stat().st_size > 1000
    assert main([str(tmp_path / "nowhere")]) == 2


def test_run_set_overrides_a_field_and_reports_bad_ones(tmp_path, capsys):
    from cave.training.cli import train_main

    config = Path(__file__).resolve().parents[2] / "training" / "configs" / "math_word_smollm2.yaml"
    assert train_main(["run", str(config), "--set", "estimator"]) == 2
    assert "write FIELD=VALUE" in capsys.readouterr().err
    assert train_main(["run", str(config), "--set", "estimater=grpo"]) == 2
    assert "estimater" in capsys.readouterr().err
    assert train_main(["run", str(config), "--set", "estimator=nope"]) == 2
    assert "estimator" in capsys.readouterr().err
