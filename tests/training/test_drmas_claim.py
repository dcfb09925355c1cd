"""The Dr. MAS comparison driver end to end on a tiny Llama: warm start, inspect, estimators x seeds, held-out
intervals, summary rows; finished work is skipped and a changed budget resumes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cave.training.checkpoints import weights_digest
from cave.training.config import load_config
from cave.training.experiments.drmas_claim import HELDOUT, main, read_record, spike_counts
from cave.training.trainer import Trainer, read_metrics

from tests.training.test_evaluate import tiny_yaml
from tests.training.test_role_rewards import solver_parity  # noqa: F401  (registers test_solver_parity)
from tests.training.test_rollout import TEAM, save_tiny


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return save_tiny(tmp_path_factory.mktemp("tiny") / "model")


def claim_config(tiny_dir: Path, tmp_path: Path) -> Path:
    """test_evaluate's tiny config with a role reward, and a warm start: one training step of the tiny model."""
    from cave.training.config import load_config

    team = {**TEAM, "default_backend": "transformers", "pattern": {**TEAM["pattern"], "on_role_error": "skip"}}
    extra = {"team": team, "reward": "test_solver_parity", "save_final": False, "output_dir": str(tmp_path / "warm")}
    config = tiny_yaml(tiny_dir, tmp_path / "claim.yaml", **extra)
    Trainer(load_config(config), quiet=True).train()
    return tiny_yaml(tiny_dir, config, **extra, init_from=str(tmp_path / "warm"))


def test_the_comparison_runs_each_estimator_and_seed_and_resumes(tiny_dir, tmp_path, capsys):
    config = claim_config(tiny_dir, tmp_path)
    runs, out = tmp_path / "runs", tmp_path / "out"
    args = [str(config), "--estimators", "drmas", "grpo", "--seeds", "0", "1", "--steps", "1", "--limit", "2",
            "-k", "2", "--runs", str(runs), "--out", str(out), "-q"]  # fmt: skip
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "inflation" in printed and str(out / "summary.json") in printed  # the inspect table, before training

    rows = json.loads((out / "summary.json").read_text())
    assert [(r["estimator"], r["seed"]) for r in rows] == [("drmas", 0), ("grpo", 0), ("drmas", 1), ("grpo", 1)]
    for r in rows:
        assert r["problems"] == 2 and r["ci_low"] <= r["avg@2"] <= r["ci_high"] and r["steps"] == 1
        assert r["train_s"] > 0 and r["wall_s"] == pytest.approx(r["train_s"] + r["eval_s"])
        assert set(r["roles"]) == {"solver", "verifier"}
        for g in r["roles"].values():
            assert {"adv_sq_mean", "over_clip", "over_5x_median", "median", "max", "steps"} <= set(g)
    # the per-role gradient statistics are the run's own logged norms
    metrics = read_metrics(runs / "drmas_seed0")
    norms = [g for row in metrics for g in row["grad_norms/solver"]]
    assert rows[0]["roles"]["solver"]["over_clip"] == spike_counts(norms, 1.0)["over_clip"]
    # every run started from the warm start with the same budget; only estimator and seed differ
    cfgs = [json.loads((runs / f"{e}_seed{s}" / "config.json").read_text()) for e, s in (("drmas", 0), ("grpo", 1))]
    assert cfgs[0]["init_from"] == cfgs[1]["init_from"] == str(tmp_path / "warm")
    assert {k for k in cfgs[0] if cfgs[0][k] != cfgs[1][k]} == {"estimator", "seed", "output_dir"}

    warm = json.loads((out / "warm.json").read_text())
    assert warm["checkpoint"] == f"warm start {weights_digest(tmp_path / 'warm')}" and warm["problems"] == 2
    inspect = json.loads((out / "inspect.json").read_text())
    assert inspect["roles"]["verifier"]["mean"] <= 1.0 and "inflation" in inspect["roles"]["solver"]
    table = (out / "summary.md").read_text()
    assert "| warm start |" in table and "| drmas | 1 |" in table and "minus grpo" in table

    # finished work is skipped: nothing is trained or evaluated again
    stamps = {p: p.stat().st_mtime_ns for p in runs.glob("*/*.json*")}
    assert main(args) == 0
    assert {p: p.stat().st_mtime_ns for p in runs.glob("*/*.json*")} == stamps
    assert json.loads((out / "summary.json").read_text()) == rows

    # the run folders gone (another machine): the records in OUT carry the comparison on, nothing is run again
    records = sorted(p.name for p in (out / "runs").glob("*.json"))
    assert records == ["drmas_seed0.json", "drmas_seed1.json", "grpo_seed0.json", "grpo_seed1.json"]
    shutil.rmtree(runs)
    assert main(args) == 0
    assert not runs.exists() and json.loads((out / "summary.json").read_text()) == rows
    assert {r["warm_start"] for r in rows} == {weights_digest(tmp_path / "warm")}

    # a lost record is made again from its run folder: the eval kept there is not redone, only read
    base, out1 = args[:-5], ["--runs", str(runs), "--out", str(tmp_path / "out1"), "-q"]
    assert main([*base, *out1]) == 0
    stamps = {p: p.stat().st_mtime_ns for p in runs.glob("*/*.json*")}
    (tmp_path / "out1" / "runs" / "grpo_seed1.json").unlink()
    assert main([*base, *out1]) == 0
    assert {p: p.stat().st_mtime_ns for p in runs.glob("*/*.json*")} == stamps
    assert (tmp_path / "out1" / "runs" / "grpo_seed1.json").is_file()

    # evals in another dtype are run again (a bf16 eval of fp32 weights samples a little apart), training is not
    assert main([*base, *out1, "--eval-dtype", "bfloat16"]) == 0
    again = {p for p in runs.glob("*/*.json*") if stamps.get(p) != p.stat().st_mtime_ns}
    assert again == {runs / f"{e}_seed{s}" / HELDOUT for e in ("drmas", "grpo") for s in (0, 1)}
    assert json.loads((tmp_path / "out1" / "warm.json").read_text())["dtype"] == "bfloat16"
    assert all(json.loads(p.read_text())["dtype"] == "bfloat16" for p in again)

    # another warm start (other weights) invalidates the warm eval and every record: the runs are made again
    other = tmp_path / "warm_other"
    Trainer(load_config(config).model_copy(update={"init_from": None, "seed": 7, "output_dir": str(other)}),
            quiet=True).train()  # fmt: skip
    assert weights_digest(other) != rows[0]["warm_start"]
    kept = {"steps": 1, "limit": 2, "k": 2, "dtype": "float32"}
    assert read_record(out / "runs" / "drmas_seed0.json", warm_start=rows[0]["warm_start"], **kept) is not None
    assert read_record(out / "runs" / "drmas_seed0.json", warm_start=weights_digest(other), **kept) is None

    # a larger budget resumes the run from its checkpoint, then evaluates the new one
    tail = ["--limit", "2", "-k", "2", "--runs", str(runs), "--out", str(tmp_path / "out2"), "-q"]
    assert main([str(config), "--estimators", "drmas", "--seeds", "0", "--steps", "2", *tail]) == 0
    assert [r["step"] for r in read_metrics(runs / "drmas_seed0")] == [1, 2]
    assert json.loads((runs / "drmas_seed0" / HELDOUT).read_text())["checkpoint"] == "latest (step 2)"
    fresh = [*base, "--runs", str(runs), "--out", str(tmp_path / "out3"), "-q"]
    assert main(fresh) == 2  # a run trained past this comparison's budget is refused, not mixed in
    assert "more than this comparison's 1" in capsys.readouterr().err

    # --summarize: the records alone (no run folders, no warm start on this machine) make the summary and its plot
    # again, for the runs that finished; nothing is trained or evaluated
    assert (out / "summary.png").is_file()
    shutil.rmtree(runs)
    shutil.move(tmp_path / "warm", tmp_path / "warm_gone")
    (out / "runs" / "grpo_seed1.json").unlink()
    (out / "summary.png").unlink()
    assert main([*args, "--summarize"]) == 0
    assert json.loads((out / "summary.json").read_text()) == rows[:3]
    assert (out / "summary.png").stat().st_size > 0 and not runs.exists()
    assert "3 finished runs" in capsys.readouterr().out


def test_bad_input_is_refused_before_any_model_loads(tmp_path, capsys):
    assert main(["nowhere.yaml", "--estimators", "nope"]) == 2
    assert "unknown estimators ['nope']" in capsys.readouterr().err
    config = Path(__file__).resolve().parents[2] / "training" / "configs" / "math_verify_smollm2.yaml"
    assert main([str(config), "--set", f"init_from={tmp_path / 'none'}", "--out", str(tmp_path / "o")]) == 2
    assert "has no checkpoint; build the warm start first" in capsys.readouterr().err


def test_the_warm_start_travels_as_its_teacher_runs(tiny_dir, tmp_path):
    # the comparison's OUT keeps the warm start's teacher runs; where its folder is gone they rebuild the same weights
    from cave.training.experiments.drmas_claim import warm_start
    from cave.training.sft import TEACHER_RUNS, run_sft

    from tests.training.test_sft import sft_config

    cfg = sft_config(tiny_dir, tmp_path)
    folder = run_sft(cfg, quiet=True)
    kept = tmp_path / "out" / TEACHER_RUNS
    warm_start(cfg, folder, kept)
    assert kept.read_text() == (folder / TEACHER_RUNS).read_text()
    digest = weights_digest(folder)
    shutil.rmtree(folder)
    asked = []
    cfg.sft.teacher = {"backend": "scripted", "replies": lambda m: asked.append(m) or "I do not know."}
    warm_start(cfg, folder, kept)
    assert weights_digest(folder) == digest and not asked


def test_the_teacher_runs_are_kept_batch_by_batch_while_they_are_collected(tiny_dir, tmp_path):
    # a collection stopped part way (a session's end) leaves its finished batches in OUT, and goes on from them
    from cave.training.experiments.drmas_claim import warm_start
    from cave.training.sft import TEACHER_RUNS

    from tests.training.test_sft import sft_config, teacher

    cfg = sft_config(tiny_dir, tmp_path)  # 3 problems x 2 samples, 2 problems a batch
    kept, folder = tmp_path / "out" / TEACHER_RUNS, Path(cfg.sft.output_dir)
    seen = []

    def watching(messages):  # what OUT holds when the second batch's problem is asked
        text = messages[-1]["content"]
        if "Ben has" in text and "The solver's answer" not in text:
            seen.append(len(kept.read_text().splitlines()) if kept.is_file() else 0)
        return teacher(messages)

    cfg.sft.teacher = {"backend": "scripted", "replies": watching}
    warm_start(cfg, folder, kept)
    assert seen == [4, 4]  # 2 samples of problem 2, each with the first batch's 4 runs in OUT already
    full = kept.read_text()
    assert full == (folder / TEACHER_RUNS).read_text() and len(full.splitlines()) == 6

    # stopped after the first batch on another machine: only problem 2 is asked again, and OUT is extended
    first = "".join(line + "\n" for line in full.splitlines()[:4])
    kept.write_text(first)
    shutil.rmtree(folder)
    seen.clear()
    warm_start(cfg, folder, kept)
    assert seen == [4, 4] and kept.read_text().startswith(first) and len(kept.read_text().splitlines()) == 6


def test_records_of_another_warm_start_stop_the_driver_before_anything_is_redone(tiny_dir, tmp_path, capsys):
    # a warm start rebuilt on another CPU fine-tunes to other weights: the records made from the first would all be
    # stale, and the driver would redo the warm eval and every run over them; it says so and runs nothing instead
    config = claim_config(tiny_dir, tmp_path)
    out = tmp_path / "out"
    (out / "runs").mkdir(parents=True)
    record = {"warm_start": "05f0ab372bbc8a50", "steps": 1, "report": {}, "metrics": []}
    (out / "runs" / "drmas_seed0.json").write_text(json.dumps(record) + "\n")
    args = [str(config), "--seeds", "0", "--steps", "1", "--limit", "2", "-k", "2", "--runs", str(tmp_path / "r"),
            "--out", str(out), "-q", "--no-inspect"]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "the records in" in err and "(05f0ab372bbc8a50)" in err and "another --out" in err
    assert json.loads((out / "runs" / "drmas_seed0.json").read_text()) == record and not (out / "warm.json").exists()
    assert not (tmp_path / "r").exists()


def test_the_warm_start_is_built_under_portable_kernels_and_a_machine_that_disagrees_stops_first(tmp_path, monkeypatch):
    from cave.training.experiments import kernels
    from cave.training.experiments.drmas_claim import build_portable

    spawned: list[list[str]] = []
    monkeypatch.setattr(kernels, "portable_fingerprint", lambda: {"fingerprint": "aaaa", "cpu": "here"})
    monkeypatch.setattr(kernels, "run_portable", lambda argv, **kw: spawned.append(argv) or 0)
    out = tmp_path / "out"
    build_portable(out, ["claim.yaml", "--seeds", "0"])
    assert spawned == [["-m", "cave.training.experiments.drmas_claim", "claim.yaml", "--seeds", "0",
                        "--build-warm-start"]]  # fmt: skip
    recorded = json.loads((out / "kernels.json").read_text())
    assert recorded["fingerprint"] == "aaaa" and recorded["env"] == kernels.PORTABLE
    monkeypatch.setattr(kernels, "portable_fingerprint", lambda: {"fingerprint": "bbbb", "cpu": "elsewhere"})
    with pytest.raises(ValueError, match="other weights") as e:
        build_portable(out, ["claim.yaml"])
    assert "bbbb" in str(e.value) and "aaaa" in str(e.value) and len(spawned) == 1  # nothing built


def test_portable_kernels_reach_the_child_and_the_fingerprint_is_repeatable(tiny_dir):
    from cave.training.experiments import kernels
    from transformers import AutoModelForCausalLM

    code = "import os, platform, torch; assert os.environ['MKL_CBWR'] == 'AVX2'; assert platform.machine() != " \
           "'x86_64' or torch.backends.cpu.get_cpu_capability() in ('AVX2', 'DEFAULT'), 'kernels'"  # fmt: skip
    assert kernels.run_portable(["-c", code]) == 0
    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    assert kernels.fingerprint(model) == kernels.fingerprint(model)


def test_the_estimator_table_pairs_seeds_by_number_and_widens_the_interval_by_their_disagreement():
    from cave.training.experiments.drmas_claim import estimator_table, seeded_difference

    right, wrong = [[True] * 4] * 40, [[False] * 4] * 40
    mixed = [[True] * 4] * 20 + [[False] * 4] * 20
    # drmas wins by 0.5 on seed 0 and loses nothing on seed 1; grpo has seed 2 as well, which has no pair
    reports = {
        "drmas": [{"seed": 0, "successes": right}, {"seed": 1, "successes": mixed}],
        "grpo": [{"seed": 0, "successes": mixed}, {"seed": 1, "successes": mixed}, {"seed": 2, "successes": wrong}],
    }
    s = seeded_difference([right, mixed], [mixed, mixed])
    assert s["per_seed"] == [0.5, 0.0] and s["diff"] == 0.25
    assert s["ci_low"] <= 0.0 < 0.25 < s["ci_high"]  # two seeds that disagree: the interval keeps 0
    table = estimator_table(reports)
    drmas = next(line for line in table.splitlines() if line.startswith("| drmas |"))
    assert "+0.500, +0.000" in drmas  # paired on seeds 0 and 1, not on positions against grpo's three
    with pytest.raises(ValueError, match="same seeds"):
        seeded_difference([right], [])
