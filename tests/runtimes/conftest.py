"""Shared fixtures for the runtime tests."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["inprocess", "kernel"])
def bare_rt(request):
    """An empty in-process runtime, then a real kernel: audits and hints must say the same in both."""
    if request.param == "inprocess":
        from cave.runtimes.inprocess import InProcessRuntime

        runtime = InProcessRuntime()
    else:
        from cave.runtimes.kernel import KernelRuntime

        runtime = KernelRuntime()
    yield runtime
    runtime.close()
