"""Pools of episodes: ``LocalPool`` (this event loop); ``cave.team.ray_pool.RayTeamPool`` has the same API."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cave.team.results import TeamResult

__all__ = ["EpisodePool", "LocalPool", "per_episode"]

if TYPE_CHECKING:
    from cave.team.team import Team


def per_episode(value: Any, n: int) -> list[Any]:
    """One value per episode: a single value (or mapping) repeated, or a sequence of exactly ``n``."""
    if value is None or isinstance(value, Mapping):
        return [value] * n
    value = list(value)
    if len(value) != n:
        raise ValueError(f"got {len(value)} per-episode values for {n} tasks; give one per task")
    return value


class EpisodePool:
    """``arun_many`` and ``run_many`` over a pool's own ``arun``: what LocalPool and RayTeamPool share."""

    max_episodes: int | None = None  # episodes at once in one arun_many (None: no bound)

    async def arun(self, task: str, *, seed: int | None = None, inputs: Mapping[str, Any] | None = None) -> TeamResult:
        raise NotImplementedError

    async def arun_many(
        self,
        tasks: Sequence[str],
        *,
        seeds: Sequence[int | None] | None = None,
        inputs: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None,
    ) -> list[TeamResult]:
        n = len(tasks)
        seed_list, input_list = per_episode(seeds, n), per_episode(inputs, n)
        bound = asyncio.Semaphore(self.max_episodes) if self.max_episodes else contextlib.nullcontext()

        async def one(i: int) -> TeamResult:
            async with bound:
                return await self.arun(tasks[i], seed=seed_list[i], inputs=input_list[i])

        return list(await asyncio.gather(*(one(i) for i in range(n))))

    def run_many(self, tasks: Sequence[str], **kwargs: Any) -> list[TeamResult]:
        return asyncio.run(self.arun_many(tasks, **kwargs))


class LocalPool(EpisodePool):
    """Episodes of one team on this event loop, at most ``max_episodes`` at once (None: no bound).

    The same API as ``cave.team.ray_pool.RayTeamPool``, so rollouts can switch between them.
    """

    def __init__(self, team: Team, *, max_episodes: int | None = None) -> None:
        self.team = team
        self.max_episodes = max_episodes

    async def arun(self, task: str, *, seed: int | None = None, inputs: Mapping[str, Any] | None = None) -> TeamResult:
        return await self.team.arun(task, seed=seed, inputs=inputs)
