"""Runtime.sibling(): a new, empty runtime made with the same options (where an independent attempt runs)."""

from __future__ import annotations

import pytest
from cave.runtimes import InProcessRuntime, ProcessRuntime
from cave.runtimes.base import Runtime, register_runtime


def test_an_inprocess_sibling_is_empty_and_keeps_the_timeout():
    runtime = InProcessRuntime(timeout=7.5, max_output_chars=500)
    runtime.inject("x", 1)
    sibling = runtime.sibling()
    assert type(sibling) is InProcessRuntime and sibling is not runtime
    assert sibling.timeout == 7.5 and sibling.registered == {}
    with pytest.raises(KeyError):
        sibling.retrieve("x")


def test_a_process_sibling_keeps_limits_and_env_given_by_position_or_name_but_not_the_workdir(tmp_path):
    runtime = ProcessRuntime(12.0, 512, None, str(tmp_path), {"CAVE_SIB": "yes"}, max_open_files=128)
    sibling = runtime.sibling()
    try:
        assert sibling.timeout == 12.0 and sibling.workdir != runtime.workdir
        assert sibling.limits["memory_limit_mb"] == 512
        ex = sibling.execute(
            "import os, resource\nenv = os.environ.get('CAVE_SIB')\n"
            "files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]"
        )
        assert ex.ok, ex.error
        assert sibling.retrieve("env") == "yes" and sibling.retrieve("files") == 128
    finally:
        sibling.close()
        runtime.close()


def test_a_third_party_runtime_gets_a_sibling_from_its_own_constructor():
    @register_runtime("test-sibling-runtime")
    class Notes(InProcessRuntime):
        name = "test-sibling-runtime"

        def __init__(self, label: str, *, timeout: float = 5.0, **options):
            super().__init__(timeout=timeout, **options)
            self.label = label

    sibling = Notes("mine", timeout=3.0).sibling()
    assert isinstance(sibling, Notes) and sibling.label == "mine" and sibling.timeout == 3.0
    assert isinstance(sibling, Runtime)
