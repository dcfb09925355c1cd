"""RayWorkers on a local Ray (2 CPUs, fractional actors): the same steps as LocalWorkers, verb by verb.

With ``batch_rollouts: false`` every call samples with its own derived seed, so a step split among two rollout
actors gives the same episodes as one process, and the learner's update the same gradients and weights.
"""

from __future__ import annotations

import math
import os
import re
import time

import numpy as np
import pytest
import torch

if os.environ.get("CI"):  # CI installs the ray extra: a missing ray is a failure there, not a skip
    import ray
else:
    ray = pytest.importorskip("ray", reason="RayWorkers needs the ray extra (ray[default])")

from cave.training.advantages import advantage_stats, compute_advantages  # noqa: E402
from cave.training.engines import trainable_weights as trainable_state  # noqa: E402
from cave.training.ray_workers import RayWorkerError, RayWorkers, shares  # noqa: E402
from cave.training.rewards import get_reward  # noqa: E402
from cave.training.rollout import pick_examples, trainable_trajectories  # noqa: E402
from cave.training.samples import build_samples, sample_columns  # noqa: E402
from cave.training.trainer import Trainer, read_metrics  # noqa: E402
from cave.training.workers import LocalWorkers  # noqa: E402

from tests.training.test_rollout import save_tiny  # noqa: E402
from tests.training.test_trainer import tiny_config, trainable  # noqa: E402  (registers the test_length_parity reward)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

RAY = {"rollout_workers": 2, "num_cpus": 2, "cpus_per_rollout_worker": 0.5, "cpus_per_learner": 0.5}


@pytest.fixture(scope="module")
def local_ray():
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return save_tiny(tmp_path_factory.mktemp("tiny") / "model")


def all_cpus_free(timeout: float = 30.0) -> bool:
    """Every CPU of the Ray instance is free again (killed actors release theirs a moment later)."""
    deadline = time.time() + timeout
    while ray.available_resources().get("CPU", 0) < ray.cluster_resources()["CPU"] and time.time() < deadline:
        time.sleep(0.2)
    return ray.available_resources().get("CPU", 0) == ray.cluster_resources()["CPU"]


def actor_dies(actor, timeout: float = 30.0) -> bool:
    """The actor's calls fail within ``timeout`` (ray.kill is asynchronous: a call made at once may still run)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            ray.get(actor.ready.remote(), timeout=timeout)
        except ray.exceptions.RayActorError:
            return True
        time.sleep(0.2)
    return False


def run_steps(workers, cfg, steps):
    """The trainer's step, verb by verb: rollout -> rewards -> advantages -> update -> sync."""
    reward_fn, examples, out = get_reward(cfg.reward), cfg.data.examples(), []
    for step in steps:
        roll = workers.rollout(pick_examples(examples, step, cfg.batch_size), step)
        for ep in roll.episodes:
            try:
                ep.reward = float(reward_fn(ep.result, ep.example))
            except Exception:
                ep.reward = None
        samples = build_samples(trainable_trajectories(roll), format_penalty=cfg.format_penalty)
        cols = sample_columns(samples)
        adv = compute_advantages(cfg.estimator, **cols, norm_by_std=cfg.norm_by_std)
        results = workers.update(samples, adv)
        workers.sync()
        out.append((roll, advantage_stats(adv, cols["agent_ids"]), results))
    return out


def episode_view(roll):
    return [
        (ep.group_id, ep.reward, ep.result.status, [(s.role, s.token_ids, s.logprobs) for s in ep.trajectory.steps])
        for ep in roll.episodes
    ]


def assert_same_results(got, want):
    assert list(got) == list(want)
    for key, r in want.items():
        g = got[key]
        assert (g.roles, g.steps, g.n_samples, g.n_tokens) == (r.roles, r.steps, r.n_samples, r.n_tokens)
        np.testing.assert_allclose(g.grad_norms, r.grad_norms, rtol=1e-5)
        for role, norms in r.role_grad_norms.items():
            np.testing.assert_allclose(g.role_grad_norms[role], norms, rtol=1e-5)
        for k, v in r.metrics.items():
            assert math.isclose(g.metrics[k], v, rel_tol=1e-5, abs_tol=1e-7), k


def test_shares_are_contiguous_and_even():
    assert shares(3, 2) == [(0, 2), (2, 3)]
    assert shares(4, 4) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert shares(2, 3) == [(0, 1), (1, 2)]


def comparable(row):
    """A metrics row without what differs between any two runs (times, throughputs, run ids in error texts)."""
    skip = ("time", "reward_errors")
    return {k: v for k, v in row.items() if k not in skip and not k.endswith("_s") and not k.endswith("tokens_per_s")}


def test_trainer_on_ray_matches_the_local_run_and_resumes(local_ray, tiny_dir, tmp_path):
    """`cave train` with `ray:` logs the same steps as without it; a resumed Ray run continues exactly."""
    t0 = time.perf_counter()
    local_run = Trainer(tiny_config(tiny_dir, tmp_path / "local", batch_rollouts=False, steps=3), quiet=True).train()
    t1 = time.perf_counter()
    cfg = tiny_config(tiny_dir, tmp_path / "ray", batch_rollouts=False, ray=RAY)
    ray_run = Trainer(cfg, quiet=True).train()
    t2 = time.perf_counter()
    assert all_cpus_free()  # the trainer closed its workers: no actor left
    Trainer(cfg.model_copy(update={"steps": 3}), resume=ray_run, quiet=True).train()
    t3 = time.perf_counter()
    print(
        f"\nlocal 3 steps {t1 - t0:.1f}s; ray 2 steps {t2 - t1:.1f}s, resumed to 3 {t3 - t2:.1f}s (with actor starts)"
    )

    want, got = read_metrics(local_run), read_metrics(ray_run)
    for name, rows in (("local", want), ("ray", got)):
        print(name, [{k: round(r[k], 2) for k in ("rollout_s", "update_s", "sync_s")} for r in rows])
    assert [r["step"] for r in got] == [1, 2, 3]
    for g, w in zip(got, want, strict=True):
        g, w = comparable(g), comparable(w)
        assert g.keys() == w.keys()
        for k, v in w.items():
            if isinstance(v, float):
                assert math.isclose(g[k], v, rel_tol=1e-5, abs_tol=1e-6), (g["step"], k, g[k], v)
            else:
                assert g[k] == v, (g["step"], k)
    assert any(v > 0 for r in got for k, v in r.items() if k.startswith("grad_norm/"))
    for step in (2, 3):
        name = f"checkpoints/step_{step:06d}.pt"
        mine, theirs = trainable(ray_run / name), trainable(local_run / name)
        assert mine.keys() == theirs.keys()
        for n, t in theirs.items():
            torch.testing.assert_close(mine[n], t, rtol=1e-5, atol=1e-5)
    assert (ray_run / "final" / "base" / "model.safetensors").is_file()
    assert all_cpus_free()


def test_ray_workers_match_local_workers_step_by_step(local_ray, tiny_dir, tmp_path):
    cfg = tiny_config(tiny_dir, tmp_path / "local", batch_rollouts=False)
    t0 = time.perf_counter()
    local = LocalWorkers(cfg)
    try:
        want = run_steps(local, cfg, [1, 2])
        local_weights = {n: t.clone() for n, t in trainable_state(local.models["base"][0]).items()}
        local_ckpt = local.checkpoint_state()
    finally:
        local.close()
    t1 = time.perf_counter()

    rcfg = tiny_config(tiny_dir, tmp_path / "ray", batch_rollouts=False, ray=RAY)
    workers = RayWorkers(rcfg)
    actors = [*workers.rollout_actors, *workers.learners.values()]
    try:
        assert len(workers.rollout_actors) == 2 and list(workers.learners) == ["base"]
        pids = ray.get([a.ready.remote() for a in workers.rollout_actors])
        assert len(set(pids)) == 2 and os.getpid() not in pids
        got = run_steps(workers, rcfg, [1, 2])
        for (g_roll, g_stats, g_res), (w_roll, w_stats, w_res) in zip(got, want, strict=True):
            # the step's 12 team runs came from both actors, merged in order: same groups, tokens, rewards
            assert len(g_roll.episodes) == 12 and all(ep.result.runtimes is None for ep in g_roll.episodes)
            assert episode_view(g_roll) == episode_view(w_roll)
            assert len(g_roll.meta["worker_seconds"]) == 2 and g_roll.seconds > 0
            assert g_stats.keys() == w_stats.keys()
            for agent in w_stats:
                for k, v in w_stats[agent].items():
                    assert math.isclose(g_stats[agent][k], v, rel_tol=1e-6, abs_tol=1e-7)
            assert_same_results(g_res, w_res)
            assert any(g > 0 for r in g_res.values() for g in r.grad_norms)

        # after sync, both rollout actors serve exactly the learner's weights, which equal the local run's
        learned = ray.get(workers.learners["base"].trainable_state.remote())
        assert learned.keys() == local_weights.keys()
        for n, t in local_weights.items():
            torch.testing.assert_close(learned[n], t, rtol=1e-5, atol=1e-5)
        for actor in workers.rollout_actors:
            served = ray.get(actor.trainable_state.remote("base"))
            assert all(torch.equal(served[n], learned[n]) for n in learned)

        # the checkpoint has the local structure (one model: the same rng), plus every learner's rng
        ckpt = workers.checkpoint_state()
        assert ckpt["models"].keys() == local_ckpt["models"].keys()
        assert ckpt["rng"] == local_ckpt["rng"] and list(ckpt["rngs"].values()) == [ckpt["rng"]]
        for key, entry in local_ckpt["models"].items():
            for n, t in entry["trainable"].items():
                torch.testing.assert_close(ckpt["models"][key]["trainable"][n], t, rtol=1e-5, atol=1e-5)

        exported = workers.export(tmp_path / "final")
        assert list(exported) == ["base"] and (exported["base"] / "config.json").is_file()
        # a learner on another node than the driver sends the saved files back instead
        files = ray.get(workers.learners["base"].export.remote(str(tmp_path / "unused"), "another-node"))
        assert {"config.json", "model.safetensors"} <= set(files) and not (tmp_path / "unused").exists()
        assert files["model.safetensors"] == (exported["base"] / "model.safetensors").read_bytes()
    finally:
        workers.close()
    t2 = time.perf_counter()
    print(f"\nlocal 2 steps {t1 - t0:.1f}s, ray 2 steps (incl. start) {t2 - t1:.1f}s")

    # close() killed every actor and left the Ray it did not start running
    assert ray.is_initialized() and workers.rollout_actors == [] and workers.learners == {}
    for actor in actors:
        assert actor_dies(actor)
    assert all_cpus_free()


def test_two_models_get_their_own_learners_and_resume_from_a_checkpoint(local_ray, tiny_dir, tmp_path):
    two = {"base": {"source": str(tiny_dir)}, "critic": {"source": str(tiny_dir)}}
    agents = {"solver": {"model": "base", "lr": 1e-2}, "verifier": {"model": "critic", "lr": 1e-2}}
    ray_settings = {**RAY, "rollout_workers": 1}
    cfg = tiny_config(tiny_dir, tmp_path / "run", batch_rollouts=False, models=two, agents=agents, ray=ray_settings)
    with RayWorkers(cfg) as workers:
        assert list(workers.learners) == ["base", "critic"]
        ((roll, _, results),) = run_steps(workers, cfg, [1])
        assert {s.role for ep in roll.episodes for s in ep.trajectory.steps} == {"solver", "verifier"}
        # each model's learner trained only its role's samples
        assert {r.roles for r in results.values()} == {("solver",), ("verifier",)}
        assert all(r.steps == 1 and r.n_samples == 8 for r in results.values())
        state = workers.checkpoint_state()
        assert set(state["models"]) == set(results) and set(state["rngs"]) == set(results)
        trained = {name: ray.get(learner.trainable_state.remote()) for name, learner in workers.learners.items()}
        exported = workers.export(tmp_path / "final")
        assert sorted(exported) == ["base", "critic"]
        assert all((p / "model.safetensors").is_file() for p in exported.values())

        # resume: step 2 moves the weights; loading the step-1 checkpoint puts them back in the learners AND the
        # rollout engines, and step 2 then runs again exactly (weights, Adam moments and shuffling rngs restored)
        ((_, _, step2),) = run_steps(workers, cfg, [2])
        workers.load_checkpoint_state(state)
        for name, learner in workers.learners.items():
            now = ray.get(learner.trainable_state.remote())
            served = ray.get(workers.rollout_actors[0].trainable_state.remote(name))
            for n, t in trained[name].items():
                assert torch.equal(now[n], t) and torch.equal(served[n], t)
        ((_, _, again),) = run_steps(workers, cfg, [2])
        assert_same_results(again, step2)

        bad = {**state, "models": {k: v for k, v in state["models"].items() if k != "verifier"}}
        with pytest.raises(KeyError, match="checkpoint has no model 'verifier'"):
            workers.load_checkpoint_state(bad)

    # the same checkpoint resumes a run without Ray (it has the local structure)
    local = LocalWorkers(cfg.model_copy(update={"ray": None}))
    try:
        local.load_checkpoint_state(state)
        for name, (model, _) in local.models.items():
            mine = trainable_state(model)
            assert all(torch.equal(mine[n], t) for n, t in trained[name].items())
    finally:
        local.close()


def test_a_model_that_fails_to_load_names_the_model_and_source(local_ray, tiny_dir, tmp_path):
    missing = tmp_path / "no-such-model"
    cfg = tiny_config(tiny_dir, tmp_path / "run", models={"base": {"source": str(missing)}}, ray=RAY)
    assert all_cpus_free()
    with pytest.raises(RayWorkerError, match=re.escape(f"model 'base' (source '{missing}') failed to load")) as err:
        RayWorkers(cfg)
    text = str(err.value)  # the actor's traceback, then what to do
    assert 'File "' in text and "LLMError" in text and "same config without `ray:`" in text and "\x1b[" not in text
    assert all_cpus_free()  # the half-started actors were killed


def test_too_many_actors_for_the_local_ray_is_an_error_not_a_hang(local_ray, tiny_dir, tmp_path):
    cfg = tiny_config(tiny_dir, tmp_path / "run", ray={**RAY, "rollout_workers": 8, "cpus_per_rollout_worker": 1})
    with pytest.raises(RayWorkerError, match=r"8 rollout workers x 1 CPU .* = 8.5 CPU, but the Ray cluster has 2"):
        RayWorkers(cfg)


def test_learners_update_through_deepspeed_inside_their_actors(local_ray, tiny_dir, tmp_path):
    """Ray learners with `deepspeed: {zero_stage: 2}` (a one-process gloo group in each actor) train like the
    in-process torch run, and export the trained model."""
    if not os.environ.get("CI"):
        pytest.importorskip("deepspeed", reason="the scale extra (DS_BUILD_OPS=0 pip install deepspeed==0.19.8)")
    from transformers import AutoModelForCausalLM

    common = {"batch_rollouts": False}  # (per-role norms on: ZeRO-2 keeps a hooked gradient copy for them)
    models = {"base": {"source": str(tiny_dir), "deepspeed": {"zero_stage": 2}}}
    Trainer(tiny_config(tiny_dir, tmp_path / "ray", ray=RAY, models=models, **common), quiet=True).train()
    Trainer(tiny_config(tiny_dir, tmp_path / "local", **common), quiet=True).train()
    for got, want in zip(read_metrics(tmp_path / "ray"), read_metrics(tmp_path / "local"), strict=True):
        assert got["reward_mean"] == want["reward_mean"] and got["samples"] == want["samples"]
        for role in ("solver", "verifier"):
            assert got[f"grad_norm/{role}"] == pytest.approx(want[f"grad_norm/{role}"], rel=1e-4)
    key = "model.layers.1.mlp.down_proj.weight"
    trained = trainable(tmp_path / "ray" / "checkpoints" / "step_000002.pt")
    assert trained[key] == pytest.approx(
        trainable(tmp_path / "local" / "checkpoints" / "step_000002.pt")[key], abs=1e-5
    )
    final = dict(AutoModelForCausalLM.from_pretrained(tmp_path / "ray" / "final" / "base").named_parameters())
    assert torch.equal(final[key].detach(), trained[key])
    assert all_cpus_free()
