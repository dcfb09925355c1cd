"""Team episodes in Ray actors: a pool of rollout workers with the same API as ``cave.team.LocalPool``.

Each worker is a Ray actor that builds its own Team once (so it owns its backends: a model
loaded per worker, or a client of a shared server) and runs many episodes at once on its own
event loop; every episode creates and closes its own runtimes (kernels included) inside that
worker. Results come back as ``TeamResult`` objects without runtimes (``TeamResult.portable``).

    pool = RayTeamPool(lambda: load_team("team.yaml"), num_workers=4)   # or RayTeamPool(team)
    results = await pool.arun_many(tasks * 8, seeds=range(len(tasks) * 8))
    pool.close()

Ray is imported only when a pool is created (the ``scale`` extra). A pool started without a
running Ray connects to one with ``ray.init(**init)`` (default: a local instance with 2 CPUs and no
dashboard); set ``RAY_AUTH_MODE=disabled`` for local tests.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable, Mapping
from typing import Any

from cave.team.pools import EpisodePool
from cave.team.results import TeamResult
from cave.team.team import Team

__all__ = ["DEFAULT_INIT", "RayTeamPool", "TeamWorker", "team_factory"]

DEFAULT_INIT = {"num_cpus": 2, "include_dashboard": False, "log_to_driver": False}


def _ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise ImportError(
            f"the Ray pool needs ray: pip install 'cave[scale]' (or ray[default]==2.60.0); ({e}). "
            "Without Ray, cave.team.LocalPool runs the same episodes on one event loop."
        ) from e
    return ray


def _rebuild(spec: Any, base_dir: str, backends: Mapping[str, Any]) -> Team:
    return Team(spec, base_dir=base_dir, backends=backends)


def team_factory(team: Team) -> Callable[[], Team]:
    """A picklable recipe that rebuilds ``team`` in a worker: its validated spec plus the backends it was given.

    Backends the team creates itself (e.g. ``backend: local``) are created again in each worker.
    Given instances are pickled; one that cannot be (a loaded llama.cpp model) needs a factory instead.
    """
    return functools.partial(_rebuild, team.spec, str(team.base_dir), dict(team._given))  # noqa: SLF001


class TeamWorker:
    """The actor: one Team, many concurrent episodes on the actor's event loop."""

    def __init__(self, factory: Callable[[], Team]) -> None:
        self.team = factory()
        self.episodes = 0

    async def run(self, task: str, seed: int | None, inputs: Mapping[str, Any] | None) -> TeamResult:
        self.episodes += 1
        result = await self.team.arun(task, seed=seed, inputs=inputs)
        return result.portable()

    def info(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "episodes": self.episodes}

    async def close(self) -> None:
        await self.team.aclose()


class RayTeamPool(EpisodePool):
    """``num_workers`` Ray actors running team episodes; ``arun`` / ``arun_many`` / ``run_many`` like LocalPool.

    ``team``: a Team (rebuilt in each worker from its spec) or a zero-argument factory returning one.
    ``max_episodes_per_worker``: concurrent episodes in one actor. ``init``: ``ray.init`` arguments when
    Ray is not running yet. Episodes are handed to workers round-robin.
    """

    def __init__(
        self,
        team: Team | Callable[[], Team],
        *,
        num_workers: int = 2,
        max_episodes_per_worker: int = 64,
        num_cpus_per_worker: float | None = None,
        init: Mapping[str, Any] | None = None,
    ) -> None:
        ray = _ray()
        if num_workers < 1:
            raise ValueError(f"num_workers must be at least 1, got {num_workers}")
        factory = team_factory(team) if isinstance(team, Team) else team
        try:
            ray.cloudpickle.dumps(factory)
        except Exception as e:
            raise TypeError(
                f"the team cannot be sent to Ray workers ({type(e).__name__}: {e}); pass a factory that builds it "
                "in the worker instead, e.g. RayTeamPool(lambda: load_team('team.yaml'))"
            ) from e
        self._started_ray = False
        if not ray.is_initialized():
            ray.init(**{**DEFAULT_INIT, **(init or {})})
            self._started_ray = True
        if num_cpus_per_worker is None:  # never ask for more than the cluster has: pending actors would hang
            num_cpus_per_worker = min(1.0, float(ray.cluster_resources().get("CPU", 1.0)) / num_workers)
        actor = ray.remote(num_cpus=num_cpus_per_worker, max_concurrency=max_episodes_per_worker)(TeamWorker)
        self.workers = [actor.remote(factory) for _ in range(num_workers)]
        self._turn = itertools.cycle(range(num_workers))
        self._ray = ray

    async def arun(self, task: str, *, seed: int | None = None, inputs: Mapping[str, Any] | None = None) -> TeamResult:
        worker = self.workers[next(self._turn)]
        return await worker.run.remote(task, seed, inputs)

    def info(self) -> list[dict[str, Any]]:
        """Each worker's process id and episode count."""
        return self._ray.get([w.info.remote() for w in self.workers])

    def close(self, *, shutdown: bool | None = None) -> None:
        """Stop the workers (closing their backends); shut Ray down if this pool started it (or if told to)."""
        ray = self._ray
        try:
            ray.get([w.close.remote() for w in self.workers], timeout=30)
        except Exception:  # a dead worker has nothing left to close
            pass
        for w in self.workers:
            ray.kill(w)
        self.workers = []
        if shutdown or (shutdown is None and self._started_ray):
            ray.shutdown()

    def __enter__(self) -> RayTeamPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
