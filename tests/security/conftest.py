"""Shared runtimes for the escape suite: one sandbox and one process-mode kernel, reused across attempts
(an attempt that breaks its kernel gets it restarted by the runtime itself, with ``ctx`` and ``helper``
injected again)."""

from __future__ import annotations

import os

import pytest

from runtimes import ProcessRuntime, SandboxRuntime, sandbox_problems
from tests.security.attempts import HostContext

# Small limits so abuse is cheap to contain on a shared 2-core machine.
LIMITS = dict(
    timeout=5,
    memory_limit_mb=512,
    cpu_time_limit_s=2,
    cpu_grace_s=1.0,
    idle_cpu_limit_s=1.0,
    max_file_mb=64,
    max_processes=64,
    interrupt_grace_s=0.5,
)


def require_sandbox() -> None:
    """Skip where the sandbox cannot run (and say how to get it); in CI that is a failure instead."""
    problems = sandbox_problems()
    if problems:
        message = "the sandbox cannot run here: " + "; ".join(problems)
        if os.environ.get("CI"):
            pytest.fail(message + " (CI must install bubblewrap: apt-get install -y bubblewrap)")
        pytest.skip(message)


@pytest.fixture(scope="session")
def host():
    ctx = HostContext()
    yield ctx
    ctx.close()


def _prepare(runtime, host: HostContext):
    import cave_canary_helpers  # the host-side module of the canary context (on sys.path)

    runtime.inject("ctx", host.values(), description="where the host's things are")
    runtime.inject_function(cave_canary_helpers.helper)
    return runtime


@pytest.fixture(scope="session")
def sandbox_rt(host):
    require_sandbox()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # process-limit warning: the sandbox refuses processes anyway
        runtime = SandboxRuntime(
            **LIMITS, tmp_size_mb=64, ro_paths=[str(host.module_dir)], env={"PYTHONPATH": str(host.module_dir)}
        )
    yield _prepare(runtime, host)
    runtime.close()


@pytest.fixture(scope="session")
def process_rt(host):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # documented by the fork-bomb attempt's expectation instead
        runtime = ProcessRuntime(**LIMITS, env={"HOME": str(host.home), "PYTHONPATH": str(host.module_dir)})
    yield _prepare(runtime, host)
    runtime.close()
