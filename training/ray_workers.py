"""The training step's work in Ray actors: rollout workers, and one learner per distinct model.

``RayWorkers`` has exactly ``LocalWorkers``' verbs (``cave.training.workers``), so the trainer loop is the same on
one machine or a Ray cluster::

    ray: {rollout_workers: 4, cpus_per_rollout_worker: 1, gpus_per_learner: 1, address: auto}

- ``rollout_workers`` rollout actors each load their own copy of every trained model once, with its rollout
  engine and the team (the ``cave.training.workers`` builders; a vLLM engine loads the weights itself, so the actor
  keeps only that model's tokenizer). ``rollout`` splits the step's prompts into contiguous
  shares, runs them concurrently (``run_rollout(..., offset=start)``: group ids and episode seeds are those of the
  single-process run) and merges the results in order. Episodes come back without runtimes
  (``TeamResult.portable``).
- One learner actor per distinct model holds that model and its ``AgentPolicies``; ``update`` sends each learner
  only its roles' samples and advantages and runs the learners concurrently.
- ``sync`` fetches each learner's trainable weights once (one object in the Ray object store) and hands the same
  reference to every rollout actor, whose engines load it (``engine.load_weights``).
- ``checkpoint_state`` has ``AgentPolicies.checkpoint_state``'s structure: ``{"models": {...}, "rng": ...}``. Each
  learner shuffles its mini-batches with its own numpy generator: ``rng`` is the first learner's state (so a
  one-model checkpoint is exactly the local one, and either kind resumes the other) and ``rngs`` keeps every
  learner's, by its checkpoint key; a checkpoint without ``rngs`` gives ``rng`` to every learner.

With several models, the learners' generators are independent (each seeded with ``cfg.seed``), so mini-batch
order can differ from a single-process run, which draws every model's shuffle from one generator; with one model
(or ``steps_per_iteration: 1`` and order-insensitive sums) the results are the same.

Ray is imported only here (the ``ray`` extra). Without ``ray.address`` a local instance is started
(``num_cpus``, no dashboard) unless Ray is already running; ``close()`` kills the actors and shuts down only a
Ray this object started. On a cluster every node needs the same environment (cave installed) and the model
sources at the same paths; ``export`` writes on this (the driver's) machine.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from cave.training.config import TrainConfig
from cave.training.workers import (
    build_engines,
    build_policies,
    build_team,
    export_trained,
    init_torch,
    load_models,
    model_dir,
    model_weights,
    resolve_device,
    run_rollout,
)

__all__ = ["Learner", "RayWorkerError", "RayWorkers", "RolloutWorker", "shares", "used_models"]


class RayWorkerError(RuntimeError):
    """Work inside a Ray actor failed; the message carries the actor's traceback and what to do."""


def _ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise ImportError(
            f"ray: settings need ray: pip install 'cave[ray]' (ray[default]==2.60.0); ({e}). "
            "Or remove `ray:` from the train config to train in this process."
        ) from e
    return ray


def _plain(e: BaseException) -> str:
    """An error's text without the terminal colours Ray puts in remote tracebacks."""
    return re.sub(r"\x1b\[[0-9;]*m", "", str(e))


def used_models(cfg: TrainConfig) -> list[str]:
    """The models some role acts with, in the order of the agents (the order of the local update's results)."""
    return list(dict.fromkeys(a.model for a in cfg.agents.values()))


def shares(n: int, workers: int) -> list[tuple[int, int]]:
    """Contiguous (start, stop) shares of n prompts among workers, as even as possible; empty shares left out.

    >>> shares(5, 2), shares(1, 3)
    ([(0, 3), (3, 5)], [(0, 1)])
    """
    base, extra = divmod(n, workers)
    out, start = [], 0
    for w in range(workers):
        stop = start + base + (w < extra)
        if stop > start:
            out.append((start, stop))
        start = stop
    return out


def _load(cfg: TrainConfig, names: Sequence[str], where: str) -> dict[str, tuple[Any, Any]]:
    """load_models, one model at a time, so a failure names the model, its source and the actor's host."""
    init_torch(cfg)
    device = resolve_device(cfg.device)
    models = {}
    for name in names:
        try:
            models.update(load_models(cfg, device, [name]))
        except Exception as e:
            import socket

            raise RuntimeError(
                f"model {name!r} (source {cfg.models[name].source!r}) failed to load in the {where} on host "
                f"{socket.gethostname()}: {type(e).__name__}: {e}. On a Ray cluster every node needs the source: an "
                "embedded model name installed there, or an HF folder at the same path (a shared filesystem)."
            ) from e
    return models


def _tokenizer(cfg: TrainConfig, name: str) -> Any:
    from transformers import AutoTokenizer

    source = cfg.models[name].source
    try:
        return AutoTokenizer.from_pretrained(model_dir(source), local_files_only=True)
    except Exception as e:
        raise RuntimeError(
            f"the tokenizer of model {name!r} (source {source!r}) failed to load in a Ray rollout worker: "
            f"{type(e).__name__}: {e}. On a Ray cluster every node needs the source at the same path."
        ) from e


class RolloutWorker:
    """The rollout actor: its own copy of every trained model, their rollout engines and the team, built once."""

    def __init__(self, cfg: TrainConfig, names: Sequence[str]) -> None:
        self.cfg = cfg
        live = [n for n in names if cfg.models[n].rollout.resolved() == "transformers"]
        self.models = _load(cfg, live, "Ray rollout worker")
        for name in names:  # a vLLM engine loads its own weights: only the tokenizer is needed here
            if name not in live:
                self.models[name] = (None, _tokenizer(cfg, name))
        self.models = {name: self.models[name] for name in names}
        self.engines = build_engines(cfg, self.models)
        self.team = build_team(cfg, self.engines)

    def ready(self) -> int:
        return os.getpid()

    def rollout(self, examples: Sequence[Mapping[str, Any]], step: int, offset: int) -> Any:
        roll = run_rollout(self.cfg, self.team, self.engines, examples, step, offset=offset)
        for ep in roll.episodes:  # runtimes stay (closed) here; the rest crosses the process boundary
            ep.result = ep.result.portable()
        return roll

    def load_weights(self, names: Sequence[str], *states: Mapping[str, Any]) -> None:
        for name, state in zip(names, states, strict=True):
            self.engines[name].load_weights(state)

    def trainable_state(self, name: str) -> dict[str, Any]:
        """The weights this worker's live rollout model holds (transformers engines; for tests and debugging)."""
        from cave.training.engines import trainable_weights

        return {n: t.cpu() for n, t in trainable_weights(self.models[name][0]).items()}

    def close(self) -> None:
        for engine in self.engines.values():
            engine.close()


class Learner:
    """The learner actor of one distinct model: the model and the AgentPolicies of the roles that act with it."""

    def __init__(self, cfg: TrainConfig, name: str) -> None:
        self.cfg, self.name = cfg, name
        self.models = _load(cfg, [name], f"Ray learner of model {name!r}")
        self.policies = build_policies(cfg, self.models)

    def ready(self) -> list[str]:
        """The keys of this learner's entries in a checkpoint's ``models``."""
        return [s.name for s in self.policies.slots]

    def update(self, samples: Sequence[Any], advantages: np.ndarray) -> dict[str, Any]:
        return self.policies.update(samples, advantages)

    def trainable_state(self) -> dict[str, Any]:
        """On the CPU, gathered under ZeRO-3: what the rollout workers load."""
        return model_weights(self.cfg, self.policies, self.name)

    def checkpoint_state(self) -> dict[str, Any]:
        return self.policies.checkpoint_state()

    def load_checkpoint_state(self, state: Mapping[str, Any]) -> None:
        self.policies.load_checkpoint_state(state)

    def export(self, out_dir: str, driver_node: str) -> str | dict[str, bytes]:
        """Save on this node when it is the driver's; else send the saved files back (folder path -> bytes)."""
        import ray

        weights = self.trainable_state()
        if ray.get_runtime_context().get_node_id() == driver_node:
            return str(export_trained(self.cfg, self.name, weights, Path(out_dir) / self.name))
        with tempfile.TemporaryDirectory() as tmp:
            out = export_trained(self.cfg, self.name, weights, Path(tmp))
            return {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}


class RayWorkers:
    """``LocalWorkers``' verbs on Ray actors: ``cfg.ray.rollout_workers`` rollout workers, one learner per model."""

    def __init__(self, cfg: TrainConfig) -> None:
        if cfg.ray is None:
            raise ValueError("RayWorkers needs `ray:` settings in the train config (or use LocalWorkers)")
        ray = self._ray = _ray()
        self.cfg, rc = cfg, cfg.ray
        self._started = False
        self.rollout_actors: list[Any] = []
        self.learners: dict[str, Any] = {}
        if rc.address:
            if not ray.is_initialized():
                ray.init(address=rc.address)
                self._started = True
        elif not ray.is_initialized():
            ray.init(num_cpus=rc.num_cpus, include_dashboard=False, log_to_driver=False)
            self._started = True
        try:
            names = used_models(cfg)
            if not rc.address:  # a cluster may autoscale: only a local Ray's size is known
                self._check_fits(len(names))
            rollout = ray.remote(num_cpus=rc.cpus_per_rollout_worker, num_gpus=rc.gpus_per_rollout_worker)
            learner = ray.remote(num_cpus=rc.cpus_per_learner, num_gpus=rc.gpus_per_learner)
            self.rollout_actors = [rollout(RolloutWorker).remote(cfg, names) for _ in range(rc.rollout_workers)]
            self.learners = {name: learner(Learner).remote(cfg, name) for name in names}
            keys = self._get([a.ready.remote() for a in self.learners.values()], "starting a learner")
            self.keys: dict[str, list[str]] = dict(zip(names, keys, strict=True))  # model -> its checkpoint keys
            self._get([a.ready.remote() for a in self.rollout_actors], "starting a rollout worker")
        except BaseException:
            self.close()
            raise

    # -- the verbs -------------------------------------------------------------------------------------------
    def rollout(self, examples: Sequence[Mapping[str, Any]], step: int) -> Any:
        from cave.training.rollout import Rollout

        examples = list(examples)
        t0 = time.perf_counter()
        parts = shares(len(examples), len(self.rollout_actors))
        refs = [
            actor.rollout.remote(examples[start:stop], step, start)
            for actor, (start, stop) in zip(self.rollout_actors, parts, strict=False)
        ]
        rolls = self._get(refs, f"step {step}: rollout")
        return Rollout(
            [ep for r in rolls for ep in r.episodes],
            seconds=time.perf_counter() - t0,
            dropped_steps=sum(r.dropped_steps for r in rolls),
            meta={
                "batch_sizes": [n for r in rolls for n in r.meta.get("batch_sizes", [])],
                "worker_seconds": [r.seconds for r in rolls],
            },
        )

    def update(self, samples: Sequence[Any], advantages: Any) -> dict[str, Any]:
        if hasattr(advantages, "detach"):
            advantages = advantages.detach().cpu().numpy()
        adv = np.asarray(advantages, dtype=np.float32)
        if adv.shape != (len(samples),):
            raise ValueError(f"advantages has shape {adv.shape}; expected one per sample ({len(samples)},)")
        role_model = {role: a.model for role, a in self.cfg.agents.items()}
        unknown = {s.agent_id for s in samples} - set(role_model)
        if unknown:
            raise KeyError(f"samples from roles without a policy: {sorted(unknown)}; known roles: {list(role_model)}")
        refs = []
        for name, learner in self.learners.items():
            idx = [i for i, s in enumerate(samples) if role_model[s.agent_id] == name]
            refs.append(learner.update.remote([samples[i] for i in idx], adv[idx]))
        return {key: result for part in self._get(refs, "update") for key, result in part.items()}

    def sync(self) -> None:
        """Every rollout engine now serves the learners' weights (one object-store copy per model)."""
        names = list(self.learners)
        states = [learner.trainable_state.remote() for learner in self.learners.values()]
        self._get([a.load_weights.remote(names, *states) for a in self.rollout_actors], "sync weights")

    def checkpoint_state(self) -> dict[str, Any]:
        states = self._get([a.checkpoint_state.remote() for a in self.learners.values()], "checkpoint")
        merged: dict[str, Any] = {"models": {}, "rng": states[0]["rng"], "rngs": {}}
        for state in states:
            merged["models"].update(state["models"])
            for key in state["models"]:
                merged["rngs"][key] = state["rng"]
        return merged

    def load_checkpoint_state(self, state: Mapping[str, Any]) -> None:
        saved = state["models"]
        refs = []
        for name, learner in self.learners.items():
            missing = [k for k in self.keys[name] if k not in saved]
            if missing:
                raise KeyError(
                    f"checkpoint has no model {missing[0]!r} (it has {list(saved)}); were the roles changed?"
                )
            rngs = state.get("rngs") or {}
            part = {"models": {k: saved[k] for k in self.keys[name]}, "rng": rngs.get(self.keys[name][0], state["rng"])}
            refs.append(learner.load_checkpoint_state.remote(part))
        self._get(refs, "load checkpoint")
        self.sync()

    def export(self, out_dir: str | Path) -> dict[str, Path]:
        out_dir = Path(out_dir).resolve()
        node = self._ray.get_runtime_context().get_node_id()
        names = list(self.learners)
        done = self._get([self.learners[n].export.remote(str(out_dir), node) for n in names], "export")
        paths = {}
        for name, result in zip(names, done, strict=True):
            if isinstance(result, str):
                paths[name] = Path(result)
                continue
            folder = out_dir / name
            for rel, data in result.items():
                (folder / rel).parent.mkdir(parents=True, exist_ok=True)
                (folder / rel).write_bytes(data)
            paths[name] = folder
        return paths

    def close(self) -> None:
        """Close the engines, kill the actors; shut Ray down only if this object started it. Safe to call twice."""
        ray = self._ray
        actors = [*self.rollout_actors, *self.learners.values()]
        if actors:
            try:
                ray.get([a.close.remote() for a in self.rollout_actors], timeout=30)
            except Exception:  # a dead or never-started worker has nothing left to close
                pass
            for a in actors:
                ray.kill(a)
        self.rollout_actors, self.learners = [], {}
        if self._started:
            ray.shutdown()
            self._started = False

    def __enter__(self) -> RayWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers ---------------------------------------------------------------------------------------------
    def _check_fits(self, learners: int) -> None:
        """Actors that ask for more than the cluster has would wait forever: say so instead."""
        rc, total = self.cfg.ray, self._ray.cluster_resources()
        for kind, per_rollout, per_learner in (
            ("CPU", rc.cpus_per_rollout_worker, rc.cpus_per_learner),
            ("GPU", rc.gpus_per_rollout_worker, rc.gpus_per_learner),
        ):
            need = per_rollout * rc.rollout_workers + per_learner * learners
            have = float(total.get(kind, 0.0))
            if need > have + 1e-9:
                field = kind.lower() + "s"
                raise RayWorkerError(
                    f"ray: {rc.rollout_workers} rollout workers x {per_rollout:g} {kind} + {learners} "
                    f"learners x {per_learner:g} {kind} = {need:g} {kind}, but the Ray cluster has {have:g}; lower "
                    f"ray.{field}_per_rollout_worker / ray.{field}_per_learner (fractions are fine) or "
                    "ray.rollout_workers, or add resources (ray.num_cpus for a local Ray)"
                )

    def _get(self, refs: list[Any], what: str) -> list[Any]:
        """ray.get, with an actor's failure turned into one error: the actor's traceback and what to do."""
        ray = self._ray
        try:
            return ray.get(refs)
        except ray.exceptions.RayTaskError as e:
            raise RayWorkerError(
                f"{what} failed in a Ray actor; the actor's traceback:\n{_plain(e)}\n"
                "fix the cause above (the same config without `ray:` reproduces it in this process)"
            ) from None
        except ray.exceptions.RayActorError as e:
            if "creation task" in str(e):  # its __init__ raised: the traceback is in the message
                raise RayWorkerError(
                    f"{what} failed; the actor's traceback:\n{_plain(e)}\n"
                    "fix the cause above (the same config without `ray:` reproduces it in this process)"
                ) from None
            raise RayWorkerError(
                f"{what}: a Ray actor died ({type(e).__name__}): {_plain(e)}\n"
                "if it was killed for memory, lower ray.rollout_workers or give each actor more memory; "
                "the actors' logs are in /tmp/ray/session_latest/logs (or `ray logs`)"
            ) from None
        except ray.exceptions.RayError as e:  # out of memory, a lost node or object, ...
            raise RayWorkerError(
                f"{what} failed in Ray ({type(e).__name__}): {_plain(e)}\n"
                "the actors' logs are in /tmp/ray/session_latest/logs (or `ray logs`)"
            ) from None
