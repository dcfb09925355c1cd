"""runtimes.freeze: an idle kernel is stopped after FREEZE_AFTER_S, calls in a row pay no signal."""

from __future__ import annotations

import signal
import threading
import time

from cave.runtimes.freeze import IdleFreezer


def test_calls_in_a_row_send_nothing_and_an_idle_kernel_is_stopped_once():
    sent: list[int] = []
    f = IdleFreezer(sent.append, after_s=0.05)
    for _ in range(100):  # a burst of calls, each well within after_s of the last
        f.enter()
        f.leave()
    assert sent == []
    time.sleep(0.3)
    assert sent == [signal.SIGSTOP]  # once, however long it stays idle
    f.enter()
    assert sent == [signal.SIGSTOP, signal.SIGCONT]
    time.sleep(0.2)
    assert sent[-1] == signal.SIGCONT  # never stopped while a call is in flight
    f.leave()
    f.close()
    time.sleep(0.2)
    assert sent[-1] == signal.SIGCONT  # closed: no more signals


def test_enter_and_leave_from_many_threads_end_frozen_exactly_when_idle():
    sent: list[int] = []
    lock = threading.Lock()
    f = IdleFreezer(sent.append, after_s=0.002)

    def calls() -> None:
        for _ in range(200):
            with lock:  # the runtime's request lock: one call at a time
                f.enter()
                time.sleep(0.0005)
                f.leave()
            time.sleep(0.001)

    threads = [threading.Thread(target=calls) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(0.1)
    # stops and continues alternate, starting with a stop and ending stopped
    assert sent and sent[0] == signal.SIGSTOP and sent[-1] == signal.SIGSTOP
    assert all(a != b for a, b in zip(sent, sent[1:], strict=False))
    f.close()


def test_the_perf_benchmark_measures_the_freeze_against_a_sandbox_without_it():
    from cave.benchmarks.perf.runtime import freeze_rows, mixed_frame
    from cave.runtimes.sandbox import sandbox_problems

    if sandbox_problems():
        import pytest

        pytest.skip("the sandbox cannot run here: " + "; ".join(sandbox_problems()))
    rows = freeze_rows({"trivial": 10, "frame": 1}, mixed_frame(1000))
    assert [r.baseline for r in rows] == ["sandbox, freeze_idle off"] * 2
    assert all(r.cave_s > 0 and r.baseline_s and r.baseline_s > 0 for r in rows)


def test_freeze_idle_must_be_a_bool_not_text_that_reads_as_one():
    import pytest
    from cave.runtimes.kernel import KernelRuntime

    with pytest.raises(ValueError, match="freeze_idle must be true or false, got 'no'"):
        KernelRuntime(freeze_idle="no")
