"""Mode ``process``: a kernel with hard resource limits (rlimits, a pids cgroup where one can be made, a host-side
CPU guard). It contains mistakes and greed, not malice: see docs/threat-model.md. ``trusted`` is the in-process
runtime under its mode name."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
import warnings
import weakref
from typing import Any

from cave.runtimes.base import (
    ExecError,
    Execution,
)
from cave.runtimes.inprocess import InProcessRuntime
from cave.runtimes.kernel import KernelProcess, KernelRuntime

KERNEL_SETUP = "cave.runtimes.confine:kernel_setup"  # run in the kernel before ipykernel (CAVE_KERNEL_SETUP)

__all__ = ["KERNEL_SETUP", "ProcessRuntime", "TrustedRuntime"]


class TrustedRuntime(InProcessRuntime):
    """Mode ``trusted``: the in-process runtime under its mode name. No isolation: your own code only."""

    name = "trusted"


# =====================================================================================================
# process mode
# =====================================================================================================


class ProcessRuntime(KernelRuntime):
    """Mode ``process``: a kernel with hard resource limits (see the module docstring).

    Options beyond ``KernelRuntime``'s: ``max_open_files`` (RLIMIT_NOFILE), ``max_processes`` (processes
    and threads of the kernel: a pids cgroup, else RLIMIT_NPROC), ``max_file_mb`` (largest file the code
    may write), ``idle_cpu_limit_s`` (CPU seconds the kernel may burn outside cells, beyond 5% of a core,
    summed over its life: threads a cell left running; past that it is killed and restarted at the next
    call),
    ``cpu_grace_s`` (how far past ``cpu_time_limit_s`` a cell that ignores SIGXCPU may go before the host
    kills the kernel). Defaults: 2048 MB, 60 CPU-s per cell, 256 files, 256 processes, 1024 MB files.

    ``limits`` says what is in force on this machine, e.g. whether the process count is enforced.
    """

    name = "process"

    def __init__(
        self,
        timeout: float | None = 60.0,
        memory_limit_mb: int | None = 2048,
        cpu_time_limit_s: int | None = 60,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
        *,
        max_open_files: int = 256,
        max_processes: int = 256,
        max_file_mb: int = 1024,
        idle_cpu_limit_s: float | None = 30.0,
        cpu_grace_s: float = 2.0,
        **options: Any,
    ) -> None:
        for label, value in (("max_open_files", max_open_files), ("max_processes", max_processes)):
            if not isinstance(value, int) or value < 32:
                raise ValueError(f"{label} must be an int >= 32 (an idle kernel uses ~20 of each), got {value!r}")
        if not isinstance(max_file_mb, int) or max_file_mb < 1:
            raise ValueError(f"max_file_mb must be a positive int, got {max_file_mb!r}")
        options.setdefault("validate_payloads", True)  # buggy code can write a corrupt Arrow file: check it
        super().__init__(timeout, memory_limit_mb, cpu_time_limit_s, workdir, env, **options)
        self.max_open_files = max_open_files
        self.max_processes = max_processes
        self.max_file_mb = max_file_mb
        self.idle_cpu_limit_s = idle_cpu_limit_s
        self.cpu_grace_s = cpu_grace_s
        self._cgroup = _PidsCgroup.create(max_processes)
        if self._cgroup is not None:
            weakref.finalize(self, self._cgroup.remove)
        elif os.geteuid() == 0:
            warnings.warn(
                "process mode: max_processes is not enforced: this process runs as root (Linux does not apply "
                "RLIMIT_NPROC to root) and cannot create a pids cgroup. Use mode 'sandbox', which refuses new "
                "processes outright, or run as a normal user.",
                stacklevel=2,
            )
        self._kill_reason: str | None = None
        # ("cell" | "busy" | "idle", the kernel's CPU seconds then, monotonic time then)
        self._cpu_mark: tuple[str, float, float] = ("idle", 0.0, time.monotonic())
        self._idle_excess = 0.0  # CPU seconds used outside requests beyond IDLE_CPU_ALLOWANCE, this kernel
        _GUARD.watch(self)

    @property
    def limits(self) -> dict[str, Any]:
        """The limits in force for this runtime's kernel, and how each is enforced."""
        nproc = "pids cgroup" if self._cgroup else ("not enforced (root)" if os.geteuid() == 0 else "RLIMIT_NPROC")
        return {
            "memory_limit_mb": self.memory_limit_mb,
            "cpu_time_limit_s": self.cpu_time_limit_s,
            "idle_cpu_limit_s": self.idle_cpu_limit_s,
            "max_open_files": self.max_open_files,
            "max_processes": (self.max_processes, nproc),
            "max_file_mb": self.max_file_mb,
            "capabilities": "dropped" if os.geteuid() == 0 else "none (not root)",
        }

    def close(self) -> None:
        super().close()
        if self._cgroup is not None:
            self._cgroup.remove()

    # -- what the kernel applies to itself before ipykernel loads (kernel_setup) ------------------------
    def _sandbox_spec(self) -> dict[str, Any]:
        rlimits = {"NOFILE": self.max_open_files, "FSIZE": self.max_file_mb << 20, "CORE": 0}
        if self._cgroup is None and os.geteuid() != 0:
            rlimits["NPROC"] = _user_tasks() + self.max_processes  # RLIMIT_NPROC counts all of the user's tasks
        return {
            "rlimits": rlimits,
            "cgroup": self._cgroup.path if self._cgroup else None,
            "drop_caps": os.geteuid() == 0,
            "seccomp": False,
        }

    def _kernel_env(self, sock_path: str, token: str, log_path: str) -> dict[str, str]:
        env = super()._kernel_env(sock_path, token, log_path)
        env["CAVE_KERNEL_SETUP"] = KERNEL_SETUP
        env["CAVE_SANDBOX"] = json.dumps(self._sandbox_spec())
        return env

    # -- the host-side CPU guard -------------------------------------------------------------------------
    def _spawn(self) -> KernelProcess:
        if self._cgroup is not None:
            self._cgroup.kill_all()  # whatever a previous kernel left behind
        kernel = super()._spawn()
        if self._cgroup is not None:
            kernel.cleanup = self._cgroup.kill_all
        self._idle_excess = 0.0
        self._cpu_mark = ("idle", _cpu_seconds(_kernel_pid(kernel)), time.monotonic())
        return kernel

    async def _aexec_locked(self, code: str, timeout: float | None) -> Execution:
        self._mark("cell")
        try:
            execution = await super()._aexec_locked(code, timeout)
        finally:
            self._mark("idle")
        reason, self._kill_reason = self._kill_reason, None
        if reason and execution.error is not None and execution.error.type == "KernelDied":
            message = f"{reason}; the kernel was killed and restarted: variables created by code are gone"
            execution.error = ExecError("CPUTimeLimitExceeded", message, f"CPUTimeLimitExceeded: {message}\n")
        return execution

    async def _arequest(self, message: dict[str, Any], attachment: bytes = b"", timeout: float | None = None) -> Any:
        self._mark("busy")  # transfers and describe: bounded by their timeouts, not by CPU
        try:
            return await super()._arequest(message, attachment, timeout)
        finally:
            self._mark("idle")

    async def _aensure_kernel(self) -> str | None:
        reason = self._kill_reason
        notice = await super()._aensure_kernel()
        if notice and reason:
            self._kill_reason = None
            notice = f"{reason}; {notice}"
        return notice

    def _mark(self, state: str) -> None:
        kernel = self._kernel
        if kernel is None:
            return
        now = _cpu_seconds(_kernel_pid(kernel))
        previous, since, t0 = self._cpu_mark
        wall = time.monotonic()
        if previous == "idle":
            self._idle_excess = max(0.0, self._idle_excess + _excess(now - since, wall - t0))
        self._cpu_mark = (state, now, wall)

    def _check_cpu(self) -> None:
        """Called by the guard thread: kill the kernel if it is over a CPU budget."""
        kernel = self._kernel
        if kernel is None or not kernel.alive() or self._closed:
            return
        now = _cpu_seconds(_kernel_pid(kernel))
        state, since, t0 = self._cpu_mark
        reason = None
        if state == "cell" and self.cpu_time_limit_s is not None:
            if now - since > self.cpu_time_limit_s + self.cpu_grace_s:
                reason = f"the cell used more than {self.cpu_time_limit_s:g} s of CPU time (cpu_time_limit_s) and did not stop at SIGXCPU"
        elif state == "idle" and self.idle_cpu_limit_s is not None:
            if self._idle_excess + _excess(now - since, time.monotonic() - t0) > self.idle_cpu_limit_s:
                reason = (
                    f"the kernel used more than {self.idle_cpu_limit_s:g} s of CPU time while no cell was running "
                    "(idle_cpu_limit_s): a thread or process a cell left behind"
                )
        if reason and self._kernel is kernel:
            self._kill_reason = reason
            kernel.signal(signal.SIGKILL)


IDLE_CPU_ALLOWANCE = 0.05  # share of a core an idle kernel may use (an idle ipykernel uses ~0)


def _excess(cpu: float, wall: float) -> float:
    """CPU seconds used beyond the idle allowance over ``wall`` seconds (a burning thread: ~95% of them)."""
    return cpu - IDLE_CPU_ALLOWANCE * max(0.0, wall)


def _kernel_pid(kernel: KernelProcess) -> int:
    return kernel.signal_pid or kernel.pid


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads), from /proc; 0.0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime (fields 14 and 15 of stat)


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _user_tasks() -> int:
    """How many tasks (processes and threads) this user runs now: RLIMIT_NPROC counts them all."""
    uid, n = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    n += len(os.listdir(f"/proc/{entry.name}/task"))
    return n


class _Guard:
    """One daemon thread for all limited runtimes: every 0.25 s, checks each live kernel's CPU budgets."""

    INTERVAL_S = 0.25

    def __init__(self) -> None:
        self._runtimes: weakref.WeakSet[ProcessRuntime] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, runtime: ProcessRuntime) -> None:
        with self._lock:
            self._runtimes.add(runtime)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="cave-cpu-guard", daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        while True:
            time.sleep(self.INTERVAL_S)
            with self._lock:
                runtimes = list(self._runtimes)
            for runtime in runtimes:
                with contextlib.suppress(Exception):  # a runtime closing under us: skip it this round
                    runtime._check_cpu()
            del runtimes


_GUARD = _Guard()


class _PidsCgroup:
    """A pids cgroup (v1 or v2) holding one runtime's kernel and everything it starts.

    Only where this process may create one (root, or a delegated cgroup v2 subtree); otherwise None.
    """

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def create(cls, max_processes: int) -> _PidsCgroup | None:
        for parent in _pids_cgroup_dirs():
            _remove_stale(parent)
            path = os.path.join(parent, f"cave-{os.getpid()}-{os.urandom(4).hex()}")
            try:
                os.mkdir(path)
            except OSError:
                continue
            try:
                with open(os.path.join(path, "pids.max"), "w") as f:
                    f.write(str(max_processes))
                return cls(path)
            except OSError:
                with contextlib.suppress(OSError):
                    os.rmdir(path)
        return None

    def pids(self) -> list[int]:
        try:
            with open(os.path.join(self.path, "cgroup.procs")) as f:
                return [int(line) for line in f if line.strip()]
        except (OSError, ValueError):
            return []

    def kill_all(self) -> None:
        """SIGKILL every process in the cgroup (also those that left the kernel's process group)."""
        for _ in range(50):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)

    def remove(self) -> None:
        self.kill_all()
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)  # the last processes are still being reaped


def _remove_stale(parent: str) -> None:
    """Remove the empty cgroups of runtimes whose process died without closing them (e.g. kill -9)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            owner = entry.name.split("-")
            if len(owner) == 3 and owner[0] == "cave" and owner[1].isdigit() and not _pid_alive(int(owner[1])):
                with contextlib.suppress(OSError):
                    os.rmdir(entry.path)  # fails, harmlessly, if something still runs in it


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _pids_cgroup_dirs() -> list[str]:
    """Where this process's pids cgroup lives (v1 "pids" hierarchy, or the v2 unified one)."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
        with open("/proc/self/mountinfo") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return []
    own = {}
    for line in lines:
        hid, controllers, path = line.split(":", 2)
        own["v2" if hid == "0" else controllers] = path
    found = []
    for m in mounts:
        sep = m.index("-")
        fstype, options, point = m[sep + 1], m[sep + 3].split(","), m[4]
        if fstype == "cgroup" and "pids" in options and "pids" in own:
            found.append(point + own["pids"].rstrip("/"))
        elif fstype == "cgroup2" and "v2" in own:
            found.append(point + own["v2"].rstrip("/"))
    return [d for d in found if os.path.isdir(d)]


# =====================================================================================================
# sandbox mode
# =====================================================================================================
