"""Load: 32 concurrent sessions, each with a process-mode kernel and a 3-step scripted episode, on this
machine's 2 cores. All complete, nothing is lost, no kernel process is left behind."""

from __future__ import annotations

import pytest

from tests.reliability import scenarios


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_32_concurrent_sessions_complete_without_leaks(tmp_path):
    r = scenarios.load(32, db_dir=str(tmp_path))
    print(
        f"\n32 sessions: {r['completed']} completed in {r['wall_s']} s; idle kernel "
        f"USS {r['idle_kernel_uss_mb']} MB (RSS {r['idle_kernel_rss_mb']} MB); leaked {r['kernels_leaked']}"
    )
    assert r["errors"] == []
    assert r["completed"] == 32
    assert r["kernels_seen"] == 32 and r["kernels_leaked"] == 0
    assert r["steps_stored"] == r["steps_expected"] == 96 and r["steps_lost"] == 0
    assert r["idle_kernel_uss_mb"] is not None and r["idle_kernel_uss_mb"] < 500
