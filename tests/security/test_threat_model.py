"""docs/threat-model.md is true line by line: every table row, bold-led bullet and claim paragraph of it names the
tests that check it (below), every test named exists, and every count the document gives is the suite's.

A claim that cannot be tested (a property of Linux, a limit cave does not set) says why, as ``why:...``.
Adding a row to the document without a line here, or a line here for a row that is gone, fails the suite.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest

from tests.security.attempts import ATTEMPTS, Facts
from tests.security.host_harm import HARMS

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "threat-model.md"

# The machine the document's results block was printed on: root, a pids cgroup, user namespaces allowed.
DOCUMENTED_MACHINE = Facts(root=True, process_limit=True, host_interfaces=2, user_namespaces=True)

SEC, RT, REL = "tests/security/", "tests/runtimes/", "tests/reliability/"
BETWEEN = SEC + "test_between_calls.py::"

# claim (the start of the row's first cell, the bullet's bold lead, or the paragraph) -> what checks it
CHECKED_BY: dict[str, list[str]] = {
    # -- the modes
    "`trusted`": [
        SEC + "test_sandbox.py::test_modes_are_registered_runtimes",
        "tests/cave/test_task.py::test_minimal_task_gets_defaults",
    ],
    "`process`": [SEC + "test_sandbox.py::test_modes_are_registered_runtimes"],
    "`sandbox`": [SEC + "test_sandbox.py::test_modes_are_registered_runtimes"],
    # -- task files
    "A task file with a `function:` input is code": [
        "tests/cave/test_task.py::test_code_inputs_are_imported_last_and_never_for_a_file_with_other_problems",
        "tests/cave/test_task.py::test_a_task_file_that_would_fail_late_exits_2_at_validation",
        "tests/cave/test_task.py::test_an_input_the_runtime_cannot_take_is_a_task_error_at_its_line",
        REL + "test_bad_input.py::test_malformed_task_file_exits_2_with_file_line_and_starts_nothing",
        REL + "test_fuzz_tasks.py::test_bad_task_file_is_a_clean_error",
        "tests/cave/test_task.py::test_a_code_input_is_not_imported_for_a_wrong_backend_option_and_its_exit_is_an_error",
    ],
    # -- trusted
    "The code runs inside your Python process": [
        RT + "test_inprocess.py::test_zero_copy_inject_and_retrieve",
        RT + "test_inprocess.py::test_busy_loop_is_stopped_within_timeout_and_runtime_stays_usable",
    ],
    # -- process: the table
    "infinite loop": [
        "attempt:infinite-loop",
        "attempt:sleep-forever",
        RT + "test_kernel.py::test_busy_loop_is_stopped_within_timeout_and_runtime_stays_usable",
    ],
    "SIGINT ignored": [
        "attempt:ignore-sigint",
        "attempt:swallow-keyboardinterrupt",
        RT + "test_kernel.py::test_cell_that_ignores_interrupts_gets_the_kernel_restarted",
    ],
    "CPU burn": ["attempt:ignore-sigxcpu"],
    "threads that outlive the cell and keep burning CPU": ["attempt:thread-outlives-cell"],
    "a kernel that stops itself": [
        BETWEEN + "test_a_kernel_that_stops_itself_costs_no_timeout",
        BETWEEN + "test_a_kernel_that_keeps_stopping_itself_is_bounded",
        BETWEEN + "test_describe_is_bounded_by_the_runtime_timeout_and_restarts_like_a_cell",
    ],
    "memory bomb": ["attempt:memory-bomb", "attempt:memory-bomb-gradual", "harm:shared-mapping", "harm:sysv-segment"],
    "SysV shared memory left behind": ["harm:sysv-segment"],
    "file descriptor exhaustion": ["attempt:fd-exhaustion"],
    "one huge file": ["attempt:big-file"],
    "fork bomb, thread bomb": ["attempt:fork-bomb", "attempt:thread-bomb"],
    "raising its own limits, raw sockets, mounts, a new mount namespace": [
        "attempt:raise-own-limits",
        "attempt:raw-packet-socket",
        "attempt:ctypes-mount",
        "attempt:ctypes-unshare-mount-ns",
        "attempt:userns-child-mounts-tmpfs",
    ],
    "a crash": [
        "attempt:ctypes-segfault",
        RT + "test_kernel.py::test_os_exit_is_recovered_with_registered_objects",
        RT + "test_kernel.py::test_segfault_is_recovered_and_reported",
    ],
    "a kernel left behind when the host dies": [
        REL + "test_faults.py::test_kill_9_of_cave_run_loses_nothing_and_resume_finishes",
        BETWEEN + "test_a_frozen_sandbox_dies_with_its_host",
    ],
    "processes the kernel started": [
        "harm:setsid-daemon",
        RT + "test_kernel.py::test_close_leaves_no_process",
        SEC + "test_sandbox.py::test_nothing_is_left_running_after_close",
    ],
    "tampering with the control channel": [
        "attempt:close-control-socket",
        "attempt:garbage-frame",
        "attempt:malformed-reply",
        "attempt:forged-payload-path",
        "attempt:symlink-payload",
    ],
    # -- process: what it does not stop
    "What `process` mode does **not** stop": [
        "attempt:thread-writes-between-cells",
        "attempt:timer-fires-between-cells",
        "attempt:loop-callback-between-cells",
        "attempt:signal-handler-between-cells",
        "attempt:child-writes-between-cells",
        BETWEEN + "test_process_mode_lets_threads_run_between_cells_unless_frozen",
        BETWEEN + "test_process_mode_freeze_idle_stops_the_group_but_not_a_process_that_left_it",
        "attempt:userns-child-mounts-tmpfs",
        "harm:setsid-daemon",
        "harm:connection-file",
    ],
    "Also not stopped": [
        "attempt:read-etc-shadow",
        "attempt:read-ssh-key",
        "attempt:read-host-canary",
        "attempt:overwrite-canary",
        "attempt:delete-injected-source",
        "attempt:env-secret",
        "attempt:tcp-to-host-loopback",
        "attempt:abstract-unix-socket",
        "attempt:netlink-socket",
        "attempt:subprocess-run",
        "attempt:pty-fork",
        "attempt:posix-spawn",
        "attempt:signal-host-pid",
        "attempt:host-environ-via-proc",
        "attempt:fill-tmp",
        "attempt:pickle-reduce-on-retrieve",
        "attempt:forged-recipe-reply",
    ],
    # -- the host treats the kernel as hostile input
    "Every call has one absolute deadline": [
        "harm:stray-frames",
        BETWEEN + "test_describe_is_bounded_by_the_runtime_timeout_and_restarts_like_a_cell",
        BETWEEN + "test_a_kernel_that_stops_itself_costs_no_timeout",
        BETWEEN + "test_a_request_to_a_kernel_that_reads_nothing_is_bounded",
    ],
    "A kernel cannot make a call raise": ["harm:forged-not-ok", "attempt:malformed-reply"],
    "Bounded input": [
        "harm:flood-log",
        SEC + "test_host_harm.py::test_the_host_bounds_what_it_takes_from_the_jupyter_channels",
    ],
    "Nothing a kernel leaves behind bricks the runtime": ["harm:brick-restarts"],
    "Retrieval: the host opens no path a kernel names": [
        SEC + "test_hostile_arrow.py::test_no_path_a_kernel_names_is_opened",
        SEC + "test_hostile_arrow.py::test_hostile_metadata_is_a_transfer_error_or_a_plain_frame",
        SEC + "test_host_harm.py::test_a_corrupt_arrow_file_is_an_error_not_a_crash",
        "harm:zip-bomb-arrow",
        "harm:tz-path-arrow",
        "harm:fifo-dtype-arrow",
        "attempt:forged-payload-path",
        "attempt:symlink-payload",
        "attempt:forged-recipe-reply",
        SEC + "test_hostile_arrow.py::test_a_forged_payload_of_any_safe_format_is_a_transfer_error",
    ],
    "Host functions run only what the host registered": [
        SEC + "test_host_functions.py::test_forged_host_calls_run_nothing_unregistered",
        SEC + "test_host_functions.py::test_broken_host_call_frames_restart_the_kernel_and_run_nothing",
        SEC + "test_host_functions.py::test_host_calls_outside_a_cell_are_ignored",
    ],
    "Timeouts are finite": [SEC + "test_host_harm.py::test_timeouts_are_validated_at_every_entry"],
    # -- sandbox
    "No network": [
        "attempt:tcp-to-host-loopback",
        "attempt:udp-to-host-loopback",
        "attempt:http-to-host-loopback",
        "attempt:abstract-unix-socket",
        "attempt:unix-socket-on-host",
        "attempt:netlink-socket",
        "attempt:ctypes-inet-socket",
        "attempt:host-interfaces",
    ],
    "A private filesystem": [
        "attempt:list-host-root",
        "attempt:read-project-source",
        "attempt:list-project-tree",
        "attempt:write-etc",
        "attempt:write-venv",
        "attempt:write-jail-root",
        "attempt:write-runtime-source",
        "attempt:write-host-tmp",
        SEC + "test_sandbox.py::test_jail_identity_and_environment",
    ],
    "No host environment": ["attempt:env-secret", SEC + "test_sandbox.py::test_jail_identity_and_environment"],
    "Dropped privileges": [
        "attempt:signal-host-pid",
        "attempt:kill-parent",
        SEC + "test_sandbox.py::test_jail_identity_and_environment",
    ],
    "No new processes": [
        "attempt:subprocess-run",
        "attempt:os-system",
        "attempt:os-popen",
        "attempt:pty-fork",
        "attempt:multiprocessing",
        "attempt:posix-spawn",
        "attempt:fork-bomb",
        "attempt:ctypes-fork",
        "attempt:raw-syscall-process-vm-readv",
        "attempt:ctypes-unshare-mount-ns",
        "attempt:ctypes-mount",
        "attempt:userns-child-mounts-tmpfs",
    ],
    "Safe retrieval": [
        "attempt:pickle-reduce-on-retrieve",
        "attempt:pickle-in-dataframe",
        "attempt:pickle-in-object-array",
        "attempt:forged-pickle-reply",
        "attempt:forged-recipe-reply",
        RT + "test_kernel.py::test_untrusted_retrieve_uses_safe_formats_only",
    ],
    "Nothing runs between calls": [
        "attempt:thread-outlives-cell",
        "attempt:thread-writes-between-cells",
        "attempt:timer-fires-between-cells",
        "attempt:loop-callback-between-cells",
        "attempt:signal-handler-between-cells",
        "attempt:child-writes-between-cells",
        BETWEEN + "test_nothing_of_a_sandbox_runs_between_calls",
        BETWEEN + "test_a_frozen_sandbox_dies_with_its_host",
        BETWEEN + "test_a_sandbox_used_from_several_event_loops_keeps_its_kernel",
        RT + "test_freeze.py::test_each_call_ends_stopped_and_the_next_continues_first",
        RT + "test_freeze.py::test_a_timer_a_cell_left_does_not_fire_while_the_host_holds_the_gil",
    ],
    "Refuses to degrade": [
        SEC + "test_sandbox.py::test_sandbox_refuses_without_bubblewrap",
        SEC + "test_sandbox.py::test_sandbox_refuses_when_user_namespaces_are_disabled",
    ],
    "Injected objects still arrive": [
        SEC + "test_sandbox.py::test_objects_still_arrive_in_the_jail",
        SEC + "test_sandbox.py::test_an_engine_arrives_by_recipe_when_its_file_is_in_the_workdir",
        SEC + "test_sandbox.py::test_an_object_from_a_module_the_jail_cannot_see_says_how_to_show_it",
    ],
    # -- what the sandbox does not stop
    "Kernel bugs": ["why: a property of Linux, not of cave: a kernel exploit through an allowed syscall"],
    "When the host runs as root": [SEC + "test_sandbox.py::test_files_the_code_writes_in_its_workdir_reach_the_host"],
    "Disk use in the working directory": ["why: a limit cave does not set (only max_file_mb per file, 'big-file')"],
    "Host memory through the transfer folder": ["why: a limit cave does not set; the folder is emptied at restart"],
    "CPU between checks": [SEC + "test_threat_model.py::test_the_cpu_guard_looks_as_often_as_documented"],
    "Lies": ["harm:forged-not-ok", "attempt:malformed-reply"],
    "Resource use by the host on its behalf": ["why: retrieve reads what it is asked for; bounded by max_file_mb"],
}

PARAGRAPHS = (  # claim paragraphs (not rows or bullets) that must be in the document and in CHECKED_BY
    "**A task file with a `function:` input is code",
    "The code runs inside your Python process",
    "What `process` mode does **not** stop",
    "Also not stopped",
    "Injected objects still arrive",
)


def _claims(text: str) -> list[str]:
    found = []
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith(("| abuse |", "| mode |", "| ---")):
            found.append(line[2:].split(" | ", 1)[0])
        elif m := re.match(r"- \*\*(.+?)\*\*", line):
            found.append(m.group(1).rstrip(".,"))
        elif line.startswith(PARAGRAPHS):
            found.append(line.lstrip("*"))
    return found


def _key(claim: str) -> str | None:
    return next((k for k in CHECKED_BY if claim.startswith(k)), None)


def test_every_claim_names_its_tests():
    claims = _claims(DOC.read_text())
    assert len(claims) > 40
    unchecked = [c for c in claims if _key(c) is None]
    assert not unchecked, f"claims of docs/threat-model.md with no test in CHECKED_BY: {unchecked}"
    stale = set(CHECKED_BY) - {_key(c) for c in claims}
    assert not stale, f"CHECKED_BY names claims the document no longer makes: {sorted(stale)}"
    for paragraph in PARAGRAPHS:
        assert any(line.startswith(paragraph) for line in DOC.read_text().splitlines()), paragraph


def _functions(path: str) -> set[str]:
    tree = ast.parse((ROOT / path).read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


@pytest.mark.parametrize("claim", sorted(CHECKED_BY))
def test_every_named_test_exists(claim):
    attempts, harms = {a.id for a in ATTEMPTS}, {h.id for h in HARMS}
    for ref in CHECKED_BY[claim]:
        kind, _, name = ref.partition(":")
        if kind == "attempt":
            assert name in attempts, ref
        elif kind == "harm":
            assert name in harms, ref
        elif kind == "why":
            assert len(name.strip()) > 10, ref
        else:
            path, _, function = ref.partition("::")
            assert function in _functions(path), f"{ref}: no such test"


def test_the_counts_in_the_document_are_the_suites():
    text = DOC.read_text()
    assert f"(`tests/security/`, {len(ATTEMPTS)} attempts)" in text
    expected = [a.expected_in_process(DOCUMENTED_MACHINE) for a in ATTEMPTS]
    tried = sum(e is not None for e in expected)
    contained = sum(e is True for e in expected)
    skipped = sum(e is None for e in expected)
    assert f"sandbox  tried  {len(ATTEMPTS)}  contained  {len(ATTEMPTS)}" in text
    assert f"process  tried  {tried}  contained  {contained}, {skipped} not run" in text
    assert f"The {['no', 'one', 'two', 'three', 'four', 'five', 'six'][skipped]} attempts not run" in text
    kinds = Counter(h.kind for h in HARMS)
    per_kind = ", ".join(f"{k} {n}/{n}" for k, n in sorted(kinds.items()))
    for mode in ("process", "sandbox"):
        assert f"{mode}  tried  {len(HARMS)}  survived  {len(HARMS)}  ({per_kind})" in text


def test_the_cpu_guard_looks_as_often_as_documented():
    from cave.runtimes.process import _GUARD

    assert f"The CPU guard looks every {_GUARD.INTERVAL_S:g} s" in DOC.read_text()


def test_the_between_calls_rule_is_the_sandboxs_default():
    import inspect

    from cave.runtimes.sandbox import SandboxRuntime

    assert 'options.setdefault("freeze_idle", True)' in inspect.getsource(SandboxRuntime.__init__)
    assert "--die-with-parent" in inspect.getsource(SandboxRuntime._bwrap_args)
