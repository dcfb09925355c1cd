"""Every bad task file ends in a clear error: exit 2, the file and the line, no traceback, no hang."""

from __future__ import annotations

import pytest

from tests.reliability.fuzz_tasks import CASES, run_case


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_task_file_is_a_clean_error(case, tmp_path):
    outcome = run_case(case, tmp_path)
    assert outcome.code is not None, f"{case.name}: hung"
    assert outcome.clean, f"{case.name}: exit {outcome.code} in {outcome.seconds:.1f} s\n{outcome.stderr[-2000:]}"
