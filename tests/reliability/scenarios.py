"""Fault scenarios, shared by tests/reliability/ and ``python -m cave.benchmarks.reliability``.

Each scenario injects real faults into real components (a kernel that crashes, a `cave run` killed with
SIGKILL, an HTTP server on 127.0.0.1 that misbehaves on purpose, 32 concurrent sessions) and returns a dict
of what happened, so a test can assert on it and the benchmark can count it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psutil

from cave.agent import Agent
from cave.llm.base import Scripted
from cave.llm.openai import OpenAICompatible
from cave.store import Store

PROJECT = Path(__file__).resolve().parents[2]


def code(*lines: str) -> str:
    """A model reply that is one ```python block."""
    return "```python\n" + "\n".join(lines) + "\n```"


def kernel_pids(root_pid: int | None = None) -> set[int]:
    """Live cave kernel processes (descendants of ``root_pid``, default: this process)."""
    try:
        procs = psutil.Process(root_pid or os.getpid()).children(recursive=True)
    except psutil.NoSuchProcess:
        return set()
    return {p.pid for p in procs if _is_kernel(p)}


def _is_kernel(p: psutil.Process) -> bool:
    try:
        return "kernel_main" in " ".join(p.cmdline()) and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def still_alive(pids: set[int], wait_s: float = 5.0) -> set[int]:
    """The pids among ``pids`` still running after up to ``wait_s`` seconds."""
    deadline = time.time() + wait_s
    alive = set(pids)
    while alive and time.time() < deadline:
        alive = {p for p in alive if psutil.pid_exists(p) and _not_zombie(p)}
        if alive:
            time.sleep(0.05)
    return alive


def _not_zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# =====================================================================================================
# kernel crashes mid-episode
# =====================================================================================================

CRASHES = [
    ("os._exit", code("import os", "os._exit(1)"), "KernelDied"),
    ("SIGSEGV via ctypes", code("import ctypes", "ctypes.string_at(0)"), "KernelDied"),
    ("SIGKILL (what the OOM killer sends)", code("import os, signal", "os.kill(os.getpid(), signal.SIGKILL)"), "KernelDied"),
    ("memory limit", code("hog = bytearray(64 * 2**30)"), "MemoryError"),
]  # fmt: skip


def crash_episode(mode: str = "process") -> dict[str, Any]:
    """One episode whose kernel dies three ways (and hits its memory limit) between normal steps.

    The agent must see each fault as an error observation, the runtime must come back with ``sales``
    injected again, and the episode must finish with the right answer.
    """
    import pandas as pd
    from cave.runtimes import create_runtime

    sales = pd.DataFrame({"region": ["n", "s", "n", "e"], "amount": [10.0, 20.0, 30.5, 4.5]})
    replies = [code("total = float(sales['amount'].sum())", "print(total)")]
    replies += [reply for _, reply, _ in CRASHES]
    replies += [code("final_answer(float(sales['amount'].sum()))")]
    runtime = create_runtime(mode, timeout=30, memory_limit_mb=1024, interrupt_grace_s=0.5)
    try:
        runtime.inject("sales", sales, description="one row per order")
        # faults are the point here, not verification: the caller verifies (verify=None)
        agent = Agent(model=Scripted(replies), runtime=runtime, max_steps=len(replies) + 1, verify=None)
        result = agent.run("Total sales amount?")
        observations = [s.observation for s in result.trajectory.steps]
        seen = [
            name
            for (name, _, marker), obs in zip(CRASHES, observations[1 : 1 + len(CRASHES)], strict=False)
            if marker in obs
        ]
        return {
            "mode": mode,
            "faults_injected": len(CRASHES),
            "faults_seen_by_agent": seen,
            "survived": len(seen) if result.status == "success" else 0,
            "status": result.status,
            "answer": result.answer,
            "expected": float(sales["amount"].sum()),
            "restarts": getattr(runtime, "restarts", None),
            "steps": len(result.trajectory.steps),
            "observations": observations,
        }
    finally:
        runtime.close()


# =====================================================================================================
# a misbehaving LLM backend on 127.0.0.1
# =====================================================================================================


class MisbehavingServer:
    """An OpenAI-compatible chat endpoint that answers ``good`` requests properly, then misbehaves.

    ``fault``: "error500" (HTTP 500), "slow" (answers after ``slow_s``, past the client's timeout),
    "garbage" (HTTP 200 with a body that is not chat-completions JSON), "drop" (closes the connection
    without a response), "down" (stops listening), "flaky" (503 for ``flaky_n`` requests, then good
    again). ``requests`` counts every request that reached the handler.
    """

    def __init__(self, replies: list[str], good: int, fault: str, slow_s: float = 3.0, flaky_n: int = 2) -> None:
        self.replies, self.good, self.fault, self.slow_s, self.flaky_n = replies, good, fault, slow_s, flaky_n
        self.requests = 0
        self.served = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                server.handle(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.requests += 1
            n = self.requests
            misbehave = self.served >= self.good
            if self.fault == "flaky":
                misbehave = self.served >= self.good and n <= self.good + self.flaky_n
        if not misbehave:
            self._send_sse(h)
            return
        if self.fault in ("error500", "flaky"):
            status = 500 if self.fault == "error500" else 503
            body = json.dumps({"error": {"message": "injected failure", "type": "server_error"}}).encode()
            h.send_response(status)
            h.send_header("content-type", "application/json")
            h.send_header("content-length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
        elif self.fault == "slow":
            time.sleep(self.slow_s)
            with contextlib.suppress(OSError):
                self._send_sse(h, count=False)
        elif self.fault == "garbage":
            body = b"<html><body>502 Bad Gateway (not JSON)</body></html>"
            h.send_response(200)
            h.send_header("content-type", "application/json")
            h.send_header("content-length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
        elif self.fault in ("drop", "down"):
            h.close_connection = True
            with contextlib.suppress(OSError):
                h.connection.shutdown(socket.SHUT_RDWR)
            if self.fault == "down":
                threading.Thread(target=self.stop, daemon=True).start()

    def _send_sse(self, h: BaseHTTPRequestHandler, count: bool = True) -> None:
        with self._lock:
            text = self.replies[min(self.served, len(self.replies) - 1)]
            if count:
                self.served += 1
        chunks = [text[i : i + 20] for i in range(0, len(text), 20)]
        events = [{"choices": [{"index": 0, "delta": {"content": c}, "finish_reason": None}]} for c in chunks]
        events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        events.append({"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}})
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        raw = body.encode()
        h.send_response(200)
        h.send_header("content-type", "text/event-stream")
        h.send_header("content-length", str(len(raw)))
        h.end_headers()
        h.wfile.write(raw)

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


LLM_FAULTS = ("error500", "slow", "garbage", "drop", "down", "flaky")


def llm_fault(fault: str, db_dir: str | None = None) -> dict[str, Any]:
    """Two good steps, then the backend misbehaves. Retries with backoff, then a clear error; the steps
    done so far are in the store. "flaky" recovers within the retries and the run succeeds."""
    replies = [code("a = 1", "print(a)"), code("b = a + 1", "print(b)"), code("final_answer(b + 1)")]
    # Only "slow" needs the client's timeout to trip; every other fault gets a timeout no loaded CI machine
    # reaches, so a good request that is merely late is not taken for a fault (CI once failed "flaky" this way).
    timeout = 1.5 if fault == "slow" else 30.0
    server = MisbehavingServer(replies, good=2, fault=fault, slow_s=5.0)
    llm = OpenAICompatible(
        base_url=server.url, model="test", max_attempts=3, backoff_base=0.05, backoff_cap=0.2, timeout=timeout,
        connect_timeout=timeout,
    )  # fmt: skip
    tmp = tempfile.mkdtemp(prefix="cave-llmfault-", dir=db_dir)
    store = Store(os.path.join(tmp, "cave.db"))
    try:
        agent = Agent(model=llm, runtime="inprocess", max_steps=5, verify=None)
        t0 = time.perf_counter()
        result = agent.run("Count to three.", on_event=store.on_event)
        elapsed = time.perf_counter() - t0
        stored = store.load(result.run_id)
        return {
            "fault": fault,
            "status": result.status,
            "error": result.trajectory.error,
            "stored_status": stored.status,
            "steps_done": len(result.trajectory.steps),
            "steps_stored": len(stored.steps),
            "requests": server.requests,
            "fault_requests": server.requests - 2,
            "answer": result.answer,
            "seconds": round(elapsed, 2),
            "url": llm.url,
        }
    finally:
        store.close()
        with contextlib.suppress(Exception):
            server.stop()


# =====================================================================================================
# kill -9 of `cave run`, then --resume
# =====================================================================================================

KILL_REPLIES = [code("import time", "time.sleep(0.8)", f"v{i} = {i}", f"print(v{i})") for i in range(5)]
KILL_REPLIES.append(code("final_answer(sum([v0, v1, v2, v3, v4]))"))


def _task_yaml(path: Path, runtime: str) -> None:
    spec = {
        "task": "Add the numbers 0 to 4, one step at a time.",
        "model": {"backend": "scripted", "replies": KILL_REPLIES},
        "runtime": {"kind": runtime, "timeout": 30},
        "max_steps": 10,
        "checks": {"answer": {"assert": ["value == 10"]}},  # the task's own check verifies the answer
    }
    path.write_text(json.dumps(spec))  # JSON is YAML


def _stored_runs(db: Path) -> list[tuple[str, int, str]]:
    if not db.exists():
        return []
    with contextlib.closing(sqlite3.connect(db, timeout=5)) as conn:
        try:
            return conn.execute("select id, n_steps, status from runs").fetchall()
        except sqlite3.OperationalError:  # the schema is being created
            return []


def _step_indices(db: Path, run_id: str) -> list[int]:
    with contextlib.closing(sqlite3.connect(db, timeout=5)) as conn:
        return [r[0] for r in conn.execute("select idx from steps where run_id = ? order by idx", (run_id,))]


def kill_and_resume(workdir: str, runtime: str = "process", kill_after_steps: int = 2) -> dict[str, Any]:
    """`cave run` killed with SIGKILL after ``kill_after_steps`` steps; every completed step must be in the
    store, no kernel may outlive it, and `cave run --resume` must finish the run."""
    work = Path(workdir)
    task, db = work / "task.yaml", work / "cave.db"
    _task_yaml(task, runtime)
    cmd = [sys.executable, "-m", "cave", "run"]
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    proc = subprocess.Popen([*cmd, str(task), "--db", str(db), "--json"], cwd=work, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    kernels: set[int] = set()
    run_id, steps_at_kill = None, 0
    deadline = time.time() + 60
    try:
        while time.time() < deadline and proc.poll() is None:
            kernels |= kernel_pids(proc.pid)
            runs = _stored_runs(db)
            if runs and runs[0][1] >= kill_after_steps:
                run_id, steps_at_kill = runs[0][0], runs[0][1]
                break
            time.sleep(0.02)
        kernels |= kernel_pids(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(10)
        for pipe in (proc.stdout, proc.stderr):
            if pipe:
                pipe.close()
    if run_id is None:
        raise RuntimeError(f"`cave run` never stored {kill_after_steps} steps (exit {proc.returncode})")
    leaked = still_alive(kernels, wait_s=5.0)
    stored_after_kill = _step_indices(db, run_id)
    status_after_kill = next(s for i, _, s in _stored_runs(db) if i == run_id)
    from cave.store import Store

    with Store(db) as store:  # what `cave runs list` shows: the dead owner is noticed
        status_shown = store.get_run(run_id)["status"]
    resumed = subprocess.run([*cmd, "--resume", run_id, "--db", str(db), "--json"], cwd=work, env=env,
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    summary = json.loads(resumed.stdout.strip().splitlines()[-1]) if resumed.stdout.strip() else {}
    final_steps = _step_indices(db, run_id)
    return {
        "run_id": run_id,
        "steps_at_kill": steps_at_kill,
        "stored_after_kill": stored_after_kill,
        "status_after_kill": status_after_kill,
        "status_shown": status_shown,
        "kernels_seen": len(kernels),
        "kernels_leaked": len(leaked),
        "resume_exit": resumed.returncode,
        "resume_stderr": resumed.stderr[-2000:],
        "final_status": summary.get("status"),
        "answer": summary.get("answer"),
        "final_steps": final_steps,
        # a step stored before the kill that is missing or duplicated afterwards is lost
        "steps_lost": len(set(stored_after_kill) - set(final_steps)) + (len(final_steps) - len(set(final_steps))),
    }


# =====================================================================================================
# load: many concurrent sessions with process runtimes
# =====================================================================================================


async def _session(i: int, store: Store) -> tuple[Any, Any]:
    from cave.runtimes import ProcessRuntime

    runtime = ProcessRuntime(timeout=120, memory_limit_mb=1024, start_timeout_s=120)
    await runtime.astart()
    await runtime.ainject("numbers", list(range(i, i + 10)), description="ten numbers")
    replies = [
        code("s = sum(numbers)", "print(s)"),
        code("sq = [n * n for n in numbers]", "len(sq)"),
        code("final_answer(s + len(sq))"),
    ]
    agent = Agent(model=Scripted(replies), runtime=runtime, max_steps=5, verify=None)
    result = await agent.arun("Sum the numbers, then add how many there are.", on_event=store.on_event)
    return runtime, result


def load(n_sessions: int = 32, db_dir: str | None = None) -> dict[str, Any]:
    """``n_sessions`` concurrent scripted episodes (3 steps each), each on its own process-mode kernel."""
    import warnings

    tmp = tempfile.mkdtemp(prefix="cave-load-", dir=db_dir)
    store = Store(os.path.join(tmp, "cave.db"))
    before = kernel_pids()

    async def main() -> list[Any]:
        return await asyncio.gather(*(_session(i, store) for i in range(n_sessions)), return_exceptions=True)

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcomes = asyncio.run(main())
    wall = time.perf_counter() - t0
    runtimes = [o[0] for o in outcomes if isinstance(o, tuple)]
    results = [o[1] for o in outcomes if isinstance(o, tuple)]
    errors = [repr(o)[:300] for o in outcomes if not isinstance(o, tuple)]
    completed = sum(
        1 for i, r in enumerate(results) if r.status == "success" and r.answer == sum(range(i, i + 10)) + 10
    )
    pids = kernel_pids() - before
    time.sleep(0.5)  # idle
    uss, rss = [], []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            info = psutil.Process(pid).memory_full_info()
            uss.append(info.uss / 2**20)
            rss.append(info.rss / 2**20)
    stored = sum(len(store.load(r.run_id).steps) for r in results)
    for runtime in runtimes:
        runtime.close()
    leaked = still_alive(pids, wait_s=10.0) | (kernel_pids() - before)
    store.close()
    return {
        "sessions": n_sessions,
        "completed": completed,
        "errors": errors,
        "wall_s": round(wall, 1),
        "kernels_seen": len(pids),
        "kernels_leaked": len(leaked),
        "idle_kernel_uss_mb": round(sum(uss) / len(uss), 1) if uss else None,
        "idle_kernel_rss_mb": round(sum(rss) / len(rss), 1) if rss else None,
        "steps_expected": 3 * n_sessions,
        "steps_stored": stored,
        "steps_lost": 3 * len(results) - stored + 3 * (n_sessions - len(results)),
    }
