"""The search-team driver's stages (base, warm start, RL) and its per-hop rows, end to end on a tiny Llama (the math
team and its `steps` field standing in for the search team and `hops`), with a scripted teacher."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cave.training.checkpoints import weights_digest
from cave.training.config import load_config
from cave.training.datasets import generate
from cave.training.experiments.search_team import hop_rows, main, run_stages, stage_labels

from tests.training.test_evaluate import tiny_yaml
from tests.training.test_rollout import TEAM, save_tiny

ANSWERS = {ex["question"]: ex["answer"] for ex in generate("math_word", "train", 4)}


def teacher(messages):
    """Right on every train problem (it knows the answers); the verifier approves."""
    text = " ".join(str(m["content"]) for m in messages)
    if "answer:" in text:
        return "```python\nverdict(approve=True)\n```"
    answer = next(a for q, a in ANSWERS.items() if q in text)
    return f"```python\nfinal_answer({answer})\n```"


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return save_tiny(tmp_path_factory.mktemp("tiny") / "model")


def test_stages_write_rows_per_hop_count_and_skip_what_is_done(tiny_dir, tmp_path):
    team = {**TEAM, "default_backend": "transformers", "pattern": {**TEAM["pattern"], "on_role_error": "skip"}}
    sft = {"teacher": {"backend": "scripted"}, "problems": 4, "epochs": 1, "batch_size": 4, "output_dir": "sft"}
    config = tiny_yaml(tiny_dir, tmp_path / "search.yaml", team=team, sft=sft, save_final=False, output_dir="rl")
    cfg = load_config(config)
    cfg.sft.teacher = {"backend": "scripted", "replies": teacher}  # a function: not expressible in YAML
    out = tmp_path / "out"
    out.mkdir()
    rows = run_stages(cfg, ["base", "warm", "rl"], out, limit=3, k=2, by="steps")

    held_out = generate("math_word", "test", 4)[:3]
    counts = {s: sum(ex["steps"] == s for ex in held_out) for s in {ex["steps"] for ex in held_out}}
    assert [(r["stage"], r["steps"], r["problems"]) for r in rows] == [
        (stage, s, counts[s]) for stage in ("base", "warm", "rl") for s in sorted(counts)
    ]
    assert all(0 <= r["em"] <= 1 and r["em_ci"][0] <= r["em"] <= r["em_ci"][1] and "avg@2" in r for r in rows)
    assert json.loads((out / "summary.json").read_text()) == rows
    assert "| warm |" in (out / "summary.md").read_text()
    # the stages' evals: the base models, the warm start's step-0 checkpoint, RL's last one (from the warm start)
    reports = {s: json.loads((out / f"{s}.json").read_text()) for s in ("base", "warm", "rl")}
    digest = weights_digest(tmp_path / "sft")
    assert [reports[s]["checkpoint"] for s in ("base", "warm", "rl")] == list(stage_labels(digest, 1).values())
    rl_config = json.loads((tmp_path / "rl" / "config.json").read_text())
    assert rl_config["init_from"] == str(tmp_path / "sft") and (tmp_path / "sft" / "teacher.jsonl").is_file()

    # done is done: a second pass reads everything back
    stamps = {p: p.stat().st_mtime_ns for p in [*out.glob("*.json"), *tmp_path.glob("*/checkpoints/*")]}
    assert run_stages(cfg, ["base", "warm", "rl"], out, limit=3, k=2, by="steps") == rows
    assert {p: p.stat().st_mtime_ns for p in stamps if p.name != "summary.json"} == {
        p: t for p, t in stamps.items() if p.name != "summary.json"
    }

    # another machine, the run folders gone: the evals in OUT name one warm start, so nothing is built again
    shutil.rmtree(tmp_path / "sft"), shutil.rmtree(tmp_path / "rl")
    assert run_stages(cfg, ["base", "warm", "rl"], out, limit=3, k=2, by="steps") == rows
    assert not (tmp_path / "sft").exists() and (out / "teacher.jsonl").is_file()
    # the warm start's eval lost too: rebuilt from the kept teacher runs (the teacher is not asked), the same
    # weights, so RL's eval in OUT still stands and RL is not trained again
    (out / "warm.json").unlink()
    cfg.sft.teacher = {"backend": "scripted", "replies": lambda m: pytest.fail("the teacher was asked again")}
    assert run_stages(cfg, ["base", "warm", "rl"], out, limit=3, k=2, by="steps") == rows
    assert weights_digest(tmp_path / "sft") == digest and not (tmp_path / "rl").exists()


def test_the_base_stage_can_cover_fewer_questions(tiny_dir, tmp_path):
    """--base-limit: the base's rows cover the first N questions (its runs are the longest), the others all."""
    config = tiny_yaml(tiny_dir, tmp_path / "search.yaml", save_final=False, output_dir="rl")
    cfg = load_config(config)
    out = tmp_path / "out"
    out.mkdir()
    rows = run_stages(cfg, ["base"], out, limit=3, k=1, by="steps", base_limit=2)
    held_out = generate("math_word", "test", 4)[:2]
    assert sum(r["problems"] for r in rows) == 2 == json.loads((out / "base.json").read_text())["problems"]
    assert {r["steps"] for r in rows} == {ex["steps"] for ex in held_out}
    with pytest.raises(ValueError, match="base_limit 4: give 1 to --limit"):
        run_stages(cfg, ["base"], out, limit=3, k=1, by="steps", base_limit=4)


def test_hop_rows_checks_the_eval_matches_the_problems():
    report = {"k": 1, "successes": [[True]], "greedy_successes": [True]}
    with pytest.raises(ValueError, match="covers 1 problems, not the 2 given"):
        hop_rows("rl", report, [{"hops": 1}, {"hops": 2}])
    with pytest.raises(KeyError, match="no 'hops' field"):
        hop_rows("rl", report, [{"steps": 1}])


def test_bad_input_is_refused(tmp_path, capsys):
    config = Path(__file__).resolve().parents[2] / "training" / "configs" / "search_smollm2.yaml"
    assert main([str(config), "--limit", "0"]) == 2
    assert main([str(config), "--set", "sft=null", "--stages", "warm", "--out", str(tmp_path)]) == 2
    assert "needs the config's sft: section" in capsys.readouterr().err


def test_a_missing_warm_start_is_built_in_a_portable_child(tmp_path, monkeypatch):
    """The driver hands the build to ``python -m ...search_team ARGS --build-warm-start`` under portable kernels
    (recorded in OUT/kernels.json), and that child builds the warm start and runs no stage."""
    from cave.training.experiments import drmas_claim, kernels

    config = Path(__file__).resolve().parents[2] / "training" / "configs" / "search_smollm2.yaml"
    out, sft = tmp_path / "out", tmp_path / "sft"
    args = [str(config), "--stages", "warm", "--limit", "2", "-k", "1", "--out", str(out), "-q",
            "--set", f"sft.output_dir={sft}"]  # fmt: skip
    built, spawned = [], []
    monkeypatch.setattr(drmas_claim, "warm_start", lambda cfg, folder, kept, quiet: built.append((folder, kept)))
    monkeypatch.setattr(kernels, "portable_fingerprint", lambda: {"fingerprint": "aaaa", "cpu": "here"})
    monkeypatch.setattr(kernels, "run_portable", lambda argv, **kw: spawned.append(argv) or 0)
    report = {"k": 1, "successes": [[True], [False]], "greedy_successes": [True, False], "checkpoint": "x"}
    monkeypatch.setattr(drmas_claim, "eval_cached", lambda *a, **kw: report)

    assert main(args) == 0
    assert spawned == [["-m", "cave.training.experiments.search_team", *args, "--build-warm-start"]]
    assert json.loads((out / "kernels.json").read_text())["fingerprint"] == "aaaa"
    assert [r["stage"] for r in json.loads((out / "summary.json").read_text())] == ["warm"] * len(
        {r["hops"] for r in json.loads((out / "summary.json").read_text())}
    )
    # the child: the warm start, into sft.output_dir with the teacher runs kept in OUT, and nothing else
    built.clear(), (out / "summary.json").unlink()
    assert main([*args, "--build-warm-start"]) == 0
    assert built == [(sft, out / "teacher.jsonl")] and not (out / "summary.json").exists()
    # --native-kernels: built here, no child
    spawned.clear()
    assert main([*args, "--native-kernels"]) == 0 and spawned == []
