"""The escape and abuse suite: every attempt is contained in sandbox mode; process mode's outcome is asserted
as observed (docs/threat-model.md lists it), so a change in what process mode stops is noticed."""

from __future__ import annotations

import pytest

from tests.security.attempts import ATTEMPTS, Attempt, machine_facts, run_attempt

pytestmark = pytest.mark.timeout(120)


def _describe(attempt: Attempt, obs) -> str:
    ex = obs.execution
    return (
        f"{attempt.id}: error={ex.error.type if ex.error else None} timed_out={ex.timed_out} "
        f"recovery={ex.recovery}\nstdout={ex.stdout[-400:]!r}\nstderr={ex.stderr[-400:]!r}\n"
        f"retrieve_error={obs.retrieve_error!r}\nafter={obs.after}"
    )


def test_at_least_forty_attempts_across_the_issue_categories():
    assert len(ATTEMPTS) >= 40
    assert len({a.id for a in ATTEMPTS}) == len(ATTEMPTS)
    categories = {a.category for a in ATTEMPTS}
    assert {"read", "write", "source", "network", "process", "syscall", "resources", "channel", "import",
            "getattr", "pickle"} <= categories  # fmt: skip


@pytest.mark.parametrize("attempt", ATTEMPTS, ids=[a.id for a in ATTEMPTS])
def test_sandbox_contains(attempt: Attempt, sandbox_rt, host):
    obs = run_attempt(sandbox_rt, host, attempt)
    assert attempt.contained(obs), "NOT CONTAINED in sandbox mode: " + _describe(attempt, obs)
    assert obs.recovered, "the sandbox runtime did not work after the attempt: " + _describe(attempt, obs)


@pytest.mark.parametrize("attempt", ATTEMPTS, ids=[a.id for a in ATTEMPTS])
def test_process_mode_outcome_is_as_documented(attempt: Attempt, process_rt, host):
    expected = attempt.expected_in_process(machine_facts(process_rt))
    if expected is None:
        pytest.skip(f"not run in process mode: {attempt.why}")
    obs = run_attempt(process_rt, host, attempt)
    what = "contained" if expected else "not contained"
    assert attempt.contained(obs) == expected, f"process mode was expected to leave this {what}: " + _describe(
        attempt, obs
    )
    assert obs.recovered, "the process runtime did not work after the attempt: " + _describe(attempt, obs)
