"""One end-to-end team run on the embedded model: examples/math_team, recorded in a real SQLite store."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cave.team import arun_team_task, load_team_task, make_backend

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def local_llm():
    try:
        llm = make_backend("local", model="qwen", seed=0)  # the fast 0.5B
    except Exception as e:  # llama-cpp-python or the model packages are missing
        pytest.skip(f"the local backend cannot be created: {type(e).__name__}: {e}")
    yield llm
    asyncio.run(llm.aclose())


def test_math_team_on_the_embedded_model(local_llm, tmp_path):
    from cave.store import Store

    tt = load_team_task(ROOT / "examples" / "math_team" / "team_task.yaml", backends={"default": local_llm})
    events = []
    with Store(tmp_path / "cave.db") as store:
        outcome = asyncio.run(arun_team_task(tt, store=store, on_event=events.append))
        result = outcome.result
        traj = result.trajectory
        # Both roles acted on one shared model instance, and every step is in the one tagged record.
        roles = [s.role for s in traj.steps]
        assert roles[0] == "solver" and "verifier" in roles, (roles, traj.error)
        assert result.status in ("success", "max_rounds"), traj.error
        assert {s.team_run_id for s in traj.steps} == {result.team_run_id}
        assert [s.index for s in traj.steps] == list(range(len(traj.steps)))
        # the embedded backend returns token ids: the trainer can build per-agent samples from this record
        assert all(s.token_ids and s.prompt_token_ids for s in traj.steps)
        assert all("format_ok" in s.meta for s in traj.steps if s == traj.by_role(s.role)[-1])
        assert traj.meta["calls"][0]["role"] == "solver" and traj.meta["verdicts"]
        assert isinstance(result.answer, (int, float, str))
        stored = store.load(traj.run_id)
        assert [s.role for s in stored.steps] == roles
        assert stored.status == result.status
