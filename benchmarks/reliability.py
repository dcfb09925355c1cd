"""Containment and reliability report: ``python -m cave.benchmarks.reliability [--quick] [--out results.jsonl]``.

Runs, on real components (run it from the repository root: it uses the suites in tests/):

- every escape/abuse attempt of tests/security/attempts.py in ``sandbox`` and ``process`` mode, counting
  the attempts each mode contains (sandbox must contain all of them);
- the fault scenarios of tests/reliability/scenarios.py: kernel crashes mid-episode (process and sandbox),
  a misbehaving LLM backend on 127.0.0.1 (500s, slow, garbage, dropped connections, down, flaky), and a
  `cave run` killed with SIGKILL then resumed;
- the attacks on the host process itself of tests/security/host_harm.py (hang, crash, memory, disk, a
  bricked runtime), per mode, and the bad task files of tests/reliability/fuzz_tasks.py through ``cave run``;
- the load test: 32 concurrent sessions on process-mode kernels (``--quick``: 8).

and prints: attempts tried / contained per mode, faults injected / survived, sessions under load /
completed, idle kernel memory, kernels leaked, steps lost (must be 0). Exit status 1 if the sandbox let
an attempt through, a fault was not survived, a session failed, a kernel leaked or a step was lost.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _attempts() -> dict[str, Any]:
    from cave.runtimes import ProcessRuntime, SandboxRuntime, sandbox_problems

    from tests.security.attempts import ATTEMPTS, LIMITS, HostContext, machine_facts, run_attempt

    host = HostContext()
    out: dict[str, Any] = {}
    try:
        import cave_canary_helpers

        modes: dict[str, Any] = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            modes["process"] = ProcessRuntime(
                **LIMITS, env={"HOME": str(host.home), "PYTHONPATH": str(host.module_dir)}
            )
            problems = sandbox_problems()
            if problems:
                out["sandbox_unavailable"] = problems
            else:
                modes["sandbox"] = SandboxRuntime(
                    **LIMITS,
                    tmp_size_mb=64,
                    ro_paths=[str(host.module_dir)],
                    env={"PYTHONPATH": str(host.module_dir)},
                )
        facts = machine_facts(modes["process"])
        for mode, runtime in modes.items():
            runtime.inject("ctx", host.values())
            runtime.inject_function(cave_canary_helpers.helper)
            tried, contained, escaped, skipped = 0, 0, [], []
            for attempt in ATTEMPTS:
                if mode == "process" and attempt.expected_in_process(facts) is None:
                    skipped.append(attempt.id)
                    continue
                obs = run_attempt(runtime, host, attempt)
                tried += 1
                if attempt.contained(obs):
                    contained += 1
                else:
                    escaped.append(attempt.id)
            out[mode] = {"tried": tried, "contained": contained, "not_contained": escaped, "not_run": skipped}
            runtime.close()
    finally:
        host.close()
    return out


def _faults(quick: bool) -> dict[str, Any]:
    from cave.runtimes import sandbox_problems

    from tests.reliability import scenarios

    rows: list[dict[str, Any]] = []
    modes = ["process"] + ([] if sandbox_problems() else ["sandbox"])
    for mode in modes:
        r = scenarios.crash_episode(mode)
        for name, _, _ in scenarios.CRASHES:
            survived = name in r["faults_seen_by_agent"] and r["status"] == "success" and r["answer"] == r["expected"]
            rows.append({"fault": f"kernel: {name} ({mode})", "survived": survived})
    with tempfile.TemporaryDirectory() as tmp:
        for fault in scenarios.LLM_FAULTS:
            r = scenarios.llm_fault(fault, db_dir=tmp)
            if fault == "flaky":
                ok = r["status"] == "success" and r["steps_stored"] == 3
            else:  # survived = clear error after bounded retries, the steps so far saved
                ok = r["status"] == "error" and r["steps_stored"] == 2 and r["url"] in (r["error"] or "")
            rows.append({"fault": f"llm backend: {fault}", "survived": ok, "seconds": r["seconds"],
                         "steps_lost": 2 - min(2, r["steps_stored"])})  # fmt: skip
    for mode in modes if not quick else ["process"]:
        with tempfile.TemporaryDirectory() as tmp:
            r = scenarios.kill_and_resume(tmp, runtime=mode)
            ok = r["final_status"] == "success" and r["steps_lost"] == 0 and r["kernels_leaked"] == 0
            rows.append({"fault": f"kill -9 of `cave run` + --resume ({mode})", "survived": ok,
                         "steps_lost": r["steps_lost"], "kernels_leaked": r["kernels_leaked"]})  # fmt: skip
    return {"rows": rows}


def _host_harm() -> dict[str, Any]:
    """The attacks on the host process (tests/security/host_harm.py), per mode: tried / survived, by kind."""
    from cave.runtimes import sandbox_problems

    from tests.security.host_harm import HARMS

    out: dict[str, Any] = {}
    for mode in ["process"] + ([] if sandbox_problems() else ["sandbox"]):
        failed = {}
        for harm in HARMS:
            try:
                problem = harm.run(mode)
            except Exception as e:  # the attack made the host raise: not survived
                problem = f"{type(e).__name__}: {e}"
            if problem:
                failed[harm.id] = problem
        kinds = sorted({h.kind for h in HARMS})
        out[mode] = {
            "tried": len(HARMS),
            "survived": len(HARMS) - len(failed),
            "by_kind": {
                k: f"{sum(1 for h in HARMS if h.kind == k and h.id not in failed)}/"
                f"{sum(1 for h in HARMS if h.kind == k)}"
                for k in kinds
            },  # fmt: skip
            "not_survived": failed,
        }
    return out


def _fuzzed_task_files() -> dict[str, Any]:
    """Bad task files through `cave run` (tests/reliability/fuzz_tasks.py): tried / clean errors."""
    from tests.reliability.fuzz_tasks import run_all

    with tempfile.TemporaryDirectory() as tmp:
        outcomes = run_all(Path(tmp))
    return {
        "tried": len(outcomes),
        "clean": sum(o.clean for o in outcomes),
        "not_clean": {o.case: f"exit {o.code} in {o.seconds:.1f} s" for o in outcomes if not o.clean},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cave.benchmarks.reliability", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8 sessions under load, one kill -9 scenario")
    parser.add_argument("--out", help="append the results as one JSON line to this file")
    args = parser.parse_args(argv)
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from tests.reliability import scenarios

    t0 = time.perf_counter()
    attempts = _attempts()
    harm = _host_harm()
    fuzz = _fuzzed_task_files()
    faults = _faults(args.quick)
    sessions = 8 if args.quick else 32
    load = scenarios.load(sessions)
    rows = faults["rows"]
    steps_lost = sum(r.get("steps_lost", 0) for r in rows) + load["steps_lost"]
    leaked = sum(r.get("kernels_leaked", 0) for r in rows) + load["kernels_leaked"]

    print("\nescape / abuse attempts (tests/security/attempts.py)")
    for mode in ("sandbox", "process"):
        if mode not in attempts:
            print(f"  {mode:8s} not run: {'; '.join(attempts.get('sandbox_unavailable', []))}")
            continue
        a = attempts[mode]
        extra = f", {len(a['not_run'])} not run (would damage the host)" if a["not_run"] else ""
        print(f"  {mode:8s} tried {a['tried']:3d}  contained {a['contained']:3d}{extra}")
        if a["not_contained"]:
            print(f"           not contained: {', '.join(a['not_contained'])}")
    print("\nhost-harm attempts (tests/security/host_harm.py): hang, crash, memory, disk, bricked runtime")
    for mode, h in harm.items():
        kinds = ", ".join(f"{k} {v}" for k, v in h["by_kind"].items())
        print(f"  {mode:8s} tried {h['tried']:3d}  survived {h['survived']:3d}  ({kinds})")
        for hid, why in h["not_survived"].items():
            print(f"           not survived: {hid}: {why}")
    print(f"\nfuzzed task files (tests/reliability/fuzz_tasks.py): tried {fuzz['tried']}  clean errors {fuzz['clean']}")
    for case, why in fuzz["not_clean"].items():
        print(f"  not clean: {case}: {why}")
    survived = sum(1 for r in rows if r["survived"])
    print(f"\nfaults injected {len(rows)}  survived {survived}")
    for r in rows:
        print(f"  {'ok  ' if r['survived'] else 'FAIL'} {r['fault']}")
    print(f"\nload: sessions {load['sessions']}  completed {load['completed']}  in {load['wall_s']} s")
    print(f"  idle kernel memory: USS {load['idle_kernel_uss_mb']} MB, RSS {load['idle_kernel_rss_mb']} MB")
    print(f"\nkernels leaked {leaked}   steps lost {steps_lost}")
    print(f"(total {time.perf_counter() - t0:.0f} s)")
    if args.out:
        with open(args.out, "a") as f:
            row = {"attempts": attempts, "host_harm": harm, "fuzzed_task_files": fuzz, "faults": rows, "load": load}
            f.write(json.dumps({**row, "time": time.time()}) + "\n")
    sandbox_ok = "sandbox" in attempts and not attempts["sandbox"]["not_contained"]
    harm_ok = all(h["survived"] == h["tried"] for h in harm.values()) and fuzz["clean"] == fuzz["tried"]
    ok = sandbox_ok and harm_ok and survived == len(rows) and load["completed"] == sessions and not leaked
    ok = ok and not steps_lost
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
