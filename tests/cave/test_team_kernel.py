"""State hand-off between two real IPython kernels: a DataFrame published by one role arrives equal in the other."""

from __future__ import annotations

import pandas as pd
import pytest

from cave.llm.base import Scripted
from cave.team import Team

try:
    import ipykernel  # noqa: F401
    import jupyter_client  # noqa: F401
    from cave.runtimes.kernel import KernelRuntime  # noqa: F401
except ImportError as e:  # the [kernel] extra is not installed
    pytest.skip(f"the kernel runtime cannot be imported: {e}", allow_module_level=True)

MAKE_FRAME = """\
import numpy as np
import pandas as pd
rng = np.random.default_rng(0)
n = 50_000
orders = pd.DataFrame({
    "region": pd.Categorical(rng.choice(["north", "south", "east"], n)),
    "product": pd.Series([f"p{i % 97}" for i in range(n)]),
    "units": rng.integers(1, 9, n),
    "price": np.round(rng.random(n) * 100, 2),
    "when": pd.date_range("2024-01-01", periods=n, freq="min"),
})
orders.loc[3, "price"] = np.nan
publish("orders", orders, "50k orders, made in the analyst's kernel")
final_answer(len(orders))
"""

CHECK_FRAME = """\
import pandas as pd
h = int(pd.util.hash_pandas_object(orders, index=True).sum())
verdict(approve=bool(len(orders) == 50_000), feedback=str(h))
"""


def expected_frame() -> pd.DataFrame:
    import numpy as np

    rng = np.random.default_rng(0)
    n = 50_000
    df = pd.DataFrame(
        {
            "region": pd.Categorical(rng.choice(["north", "south", "east"], n)),
            "product": pd.Series([f"p{i % 97}" for i in range(n)]),
            "units": rng.integers(1, 9, n),
            "price": np.round(rng.random(n) * 100, 2),
            "when": pd.date_range("2024-01-01", periods=n, freq="min"),
        }
    )
    df.loc[3, "price"] = np.nan
    return df


@pytest.mark.timeout(180)
def test_dataframe_moves_between_two_kernel_runtimes_and_stays_equal():
    team = Team.build(
        [
            {"use": "analyst", "backend": "a", "runtime": {"kind": "kernel"}},
            {"use": "reviewer", "backend": "r", "runtime": {"kind": "kernel"}},
        ],
        {"name": "loop", "worker": "analyst", "critic": "reviewer", "max_rounds": 1},
        backends={
            "a": Scripted([f"```python\n{MAKE_FRAME}```"]),
            "r": Scripted([f"```python\n{CHECK_FRAME}```"]),
        },
        runtime={"kind": "kernel", "timeout": 60},
    )
    result = team.run("Make the orders table and check it.", keep_runtimes=True)
    try:
        assert result.status == "success", result.trajectory.error
        analyst, reviewer = result.runtimes["analyst"], result.runtimes["reviewer"]
        assert analyst is not reviewer and analyst.pid != reviewer.pid  # two kernel processes
        made = analyst.retrieve("orders")
        received = reviewer.retrieve("orders")
        pd.testing.assert_frame_equal(received, made)
        pd.testing.assert_frame_equal(received, expected_frame())
        assert isinstance(received["region"].dtype, pd.CategoricalDtype)
        # the verdict crossed back from the reviewer's kernel as a structured value, carrying the kernel-side hash
        verdict = result.trajectory.meta["verdicts"][0]
        assert verdict["approve"] is True
        assert int(verdict["feedback"]) == int(pd.util.hash_pandas_object(expected_frame(), index=True).sum())
        assert result.slots["orders"].shape == (50_000, 5)
        assert [s.role for s in result.trajectory.steps] == ["analyst", "reviewer"]
        assert result.trajectory.steps[1].kind == "verdict"
    finally:
        result.close()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", ["process", "sandbox"])
def test_decisions_cross_back_from_untrusted_kernels(kind):
    """verdict() and route() end a turn with plain data: an untrusted kernel (sandbox: trust=False) hands back no
    pickles, so a Verdict or Route object would be refused and every decision would read as missing."""
    if kind == "sandbox":
        from tests.security.attempts import require_sandbox

        require_sandbox()
    runtime = {"kind": kind, "timeout": 60}
    loop = Team.build(
        [{"use": "solver", "backend": "s"}, {"use": "verifier", "backend": "v"}],
        {"name": "loop", "max_rounds": 1, "on_missing_verdict": "fail"},
        backends={
            "s": Scripted(["```python\nfinal_answer(4)\n```"]),
            "v": Scripted(["```python\nverdict(approve=False, feedback='off by one')\n```"]),
        },
        runtime=runtime,
    )
    result = loop.run("What is 2 + 2?")
    verdict = result.trajectory.meta["verdicts"][0]
    assert (verdict["approve"], verdict["feedback"]) == (False, "off by one"), result.trajectory.meta
    assert result.trajectory.by_role("verifier")[-1].meta["format_ok"] is True
    router = Team.build(
        [
            {"name": "router", "backend": "r", "output": "route"},
            {"name": "worker", "backend": "w", "description": "does the work"},
        ],
        {"name": "router", "router": "router", "finish": ["worker"]},
        backends={
            "r": Scripted(["```python\nroute('worker', 'compute 6 * 7')\n```"]),
            "w": Scripted(["```python\nfinal_answer(6 * 7)\n```"]),
        },
        runtime=runtime,
    )
    result = router.run("What is 6 * 7?")
    assert (result.status, result.answer) == ("success", 42), result.trajectory.error
    assert result.trajectory.steps[0].kind == "route"
