"""256 team episodes at once on one event loop: no errors, no cross-talk, own runtimes, bounded backends."""

from __future__ import annotations

import asyncio
import re

from cave.llm.base import Scripted
from cave.team import LocalPool, Team

N = 256


class Slow(Scripted):
    """Scripted replies after a short await, so episodes really interleave on the loop."""

    async def stream(self, messages, **kwargs):
        await asyncio.sleep(0.002)
        async for item in super().stream(messages, **kwargs):
            yield item


def user_texts(messages):
    return [m["content"] for m in messages if m["role"] == "user"]


def solver(messages):
    # Odd numbers get a wrong first answer, so half the episodes take a second round.
    texts = user_texts(messages)
    i = int(re.search(r"double (\d+)", texts[0]).group(1))
    wrong = i % 2 == 1 and not any("rejected" in t for t in texts)
    value = 2 * i + 1 if wrong else 2 * i
    return f"```python\nn_turns = globals().get('n_turns', 0) + 1\nfinal_answer({value})\n```"


def verifier(messages):
    text = user_texts(messages)[-1]
    i = int(re.search(r"double (\d+)", text).group(1))
    given = int(re.search(r"answer:\n(-?\d+)", text).group(1))
    return f"```python\nverdict(approve={given == 2 * i}, feedback='it is {2 * i}')\n```"


async def test_256_concurrent_episodes_on_one_loop():
    team = Team.build(
        [{"use": "solver", "backend": "s"}, {"use": "verifier", "backend": "v"}],
        {"name": "loop", "max_rounds": 2},
        backends={"s": Slow(solver), "v": Slow(verifier)},
        max_in_flight=16,
    )
    tasks = [f"double {i}" for i in range(N)]
    runs = [team.arun(t, seed=i, keep_runtimes=True) for i, t in enumerate(tasks)]
    results = await asyncio.gather(*runs)
    try:
        assert [r.status for r in results] == ["success"] * N
        assert [r.answer for r in results] == [2 * i for i in range(N)]
        assert len({r.team_run_id for r in results}) == N
        for i, r in enumerate(results):
            rounds = 2 if i % 2 else 1
            assert [s.role for s in r.trajectory.steps] == ["solver", "verifier"] * rounds
            assert {s.team_run_id for s in r.trajectory.steps} == {r.team_run_id}
            # each episode had runtimes of its own: the solver's counter saw only this episode's turns
            assert r.runtimes["solver"].retrieve("n_turns") == rounds
        distinct = {id(r.runtimes[role]) for r in results for role in ("solver", "verifier")}
        assert len(distinct) == 2 * N
        for key in ("s", "v"):
            assert team.backend(key).peak == 16 and team.backend(key).in_flight == 0
    finally:
        for r in results:
            r.close()


async def test_local_pool_bounds_episodes_and_keeps_order():
    team = Team.build(
        [{"use": "solver", "backend": "s"}, {"use": "verifier", "backend": "v"}],
        "loop",
        backends={"s": Slow(solver), "v": Slow(verifier)},
    )
    pool = LocalPool(team, max_episodes=8)
    results = await pool.arun_many([f"double {i}" for i in range(40)], seeds=list(range(40)))
    assert [r.answer for r in results] == [2 * i for i in range(40)]
    assert team.backend("s").peak <= 8
