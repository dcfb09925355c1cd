"""Shared runtimes for the escape suite: one sandbox and one process-mode kernel, reused across attempts
(an attempt that breaks its kernel gets it restarted by the runtime itself, with ``ctx`` and ``helper``
injected again)."""

from __future__ import annotations

import pytest
from cave.runtimes import ProcessRuntime, SandboxRuntime

from tests.security.attempts import LIMITS, HostContext, require_sandbox


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
