"""The Ray rollout-worker pool on a local Ray instance (2 CPUs): same API and same results as the local pool."""

from __future__ import annotations

import os
import sys
import threading

import pytest

ray = pytest.importorskip("ray", reason="the Ray pool needs the [scale] extra (ray[default])")

from cave.llm.base import Scripted  # noqa: E402
from cave.team import LocalPool, Team  # noqa: E402
from cave.team.ray_pool import RayTeamPool  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def local_ray():
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    # The workers cannot import this test module: send its functions (the Scripted replies) by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    if started:
        ray.shutdown()


def solver(messages):
    task = [m for m in messages if m["role"] == "user"][0]["content"]
    n = int(task.split()[-1])
    return f"```python\nimport os\nfinal_answer(({n} * {n}, os.getpid()))\n```"


def verifier(messages):
    return "```python\nverdict(approve=True)\n```"


def make_team() -> Team:
    return Team.build(
        [{"use": "solver", "backend": "s"}, {"use": "verifier", "backend": "v"}],
        "loop",
        backends={"s": Scripted(solver), "v": Scripted(verifier)},
    )


def test_ray_pool_runs_episodes_in_worker_processes_like_the_local_pool(local_ray):
    tasks = [f"square {n}" for n in range(12)]
    seeds = list(range(12))
    with RayTeamPool(make_team(), num_workers=2) as pool:
        results = pool.run_many(tasks, seeds=seeds)
        info = pool.info()
    local = LocalPool(make_team()).run_many(tasks, seeds=seeds)

    assert [r.status for r in results] == ["success"] * 12
    assert [r.answer[0] for r in results] == [n * n for n in range(12)]
    pids = {r.answer[1] for r in results}
    assert os.getpid() not in pids and pids == {w["pid"] for w in info}  # ran inside the two actors
    assert sorted(w["episodes"] for w in info) == [6, 6]
    for remote, here in zip(results, local, strict=True):
        assert [s.role for s in remote.trajectory.steps] == [s.role for s in here.trajectory.steps]
        assert {s.team_run_id for s in remote.trajectory.steps} == {remote.team_run_id}
        assert remote.trajectory.meta["verdicts"] == here.trajectory.meta["verdicts"]
        assert remote.runtimes is None  # runtimes stay (and are closed) in the worker


async def test_ray_pool_async_api_and_factory(local_ray):
    pool = RayTeamPool(make_team, num_workers=1, max_episodes_per_worker=8)
    try:
        one = await pool.arun("square 7", seed=0)
        many = await pool.arun_many(["square 2", "square 3"])
        assert one.answer[0] == 49 and [r.answer[0] for r in many] == [4, 9]
    finally:
        pool.close()


class Unpicklable(Scripted):
    def __init__(self):
        super().__init__(["x"])
        self.lock = threading.Lock()


def test_a_team_that_cannot_travel_asks_for_a_factory(local_ray):
    team = Team.build([{"name": "a", "backend": "x"}], "sequential", backends={"x": Unpicklable()})
    with pytest.raises(TypeError, match="pass a factory"):
        RayTeamPool(team, num_workers=1)
