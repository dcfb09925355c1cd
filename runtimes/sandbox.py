"""Run modes for code you do not trust: ``trusted``, ``process``, ``sandbox``.

    runtime = create_runtime("sandbox", timeout=30)      # or runtime_for_mode("sandbox", ...)
    runtime.inject("sales", df)                          # still arrives, by value or by recipe
    runtime.execute("open('/etc/shadow')")               # FileNotFoundError: not in the jail

- ``trusted`` (``TrustedRuntime``, the in-process runtime): zero-copy, no isolation at all. For your own
  code and fast tests. This is what ``runtime: inprocess`` gives, and the SDK's default.
- ``process`` (``ProcessRuntime``): the kernel runtime with resource limits applied to the kernel process
  with soft = hard, so the code cannot raise them: memory (RLIMIT_DATA), CPU time per cell (the kernel's
  SIGXCPU, and a host-side guard that kills a kernel that ignores it), open files (RLIMIT_NOFILE), file
  size (RLIMIT_FSIZE), no core dumps, and a process count (a pids cgroup when this process may create
  one, else RLIMIT_NPROC, which Linux does not enforce for root). CPU burnt by threads left running
  between cells is counted too (``idle_cpu_limit_s``). When the host runs as root, the kernel drops all
  capabilities. A working directory of its own; killable timeouts. It is *not* a security boundary: the
  code reads and writes whatever your user can.
- ``sandbox`` (``SandboxRuntime``): ``process`` inside a bubblewrap jail: new user, pid, network, IPC and
  UTS namespaces (no network at all: only a loopback of its own), a private filesystem view (the system
  directories, the Python environment and the runtime's own packages read-only; the working directory
  and the transfer folder writable; a small private /tmp; nothing else of the host: not /root, /home,
  the project tree or the host's /tmp), an environment built from scratch (no host variables), no
  capabilities, no_new_privs, and a seccomp filter that refuses new processes (threads are fine),
  sockets other than Unix ones, ptrace, mounts, namespaces, keyrings, BPF, io_uring and kernel
  modules. Retrieval is safe-format only (``trust=False``: Arrow, npy, JSON, never a pickle). If a
  mechanism is missing, construction fails with ``SandboxUnavailable`` saying what and how to get it.

docs/threat-model.md says what each mode stops and what it does not.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.util
import json
import os
import platform
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import warnings
import weakref
from typing import Any

from cave.runtimes.base import (
    ExecError,
    Execution,
    Runtime,
    RuntimeError_,
    TransferError,
    create_runtime,
    register_runtime,
)
from cave.runtimes.inprocess import InProcessRuntime
from cave.runtimes.kernel import KernelRuntime, _installed, _Kernel

MODES = ("trusted", "process", "sandbox")
BWRAP_INSTALL_HINT = (
    "install bubblewrap: apt-get install -y bubblewrap (Debian/Ubuntu), dnf install bubblewrap (Fedora), "
    "apk add bubblewrap (Alpine)"
)
SANDBOX_UID = 1000  # the uid (and gid) the code runs as inside the jail's user namespace
_SETUP = "cave.runtimes.sandbox:kernel_setup"


class SandboxUnavailable(RuntimeError_):
    """This machine lacks a mechanism the sandbox needs; the message says which and how to get it."""


def runtime_for_mode(mode: str, **options: Any) -> Runtime:
    """The runtime for a run mode: "trusted" (in-process), "process" (limits) or "sandbox" (limits + jail)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; use one of: {', '.join(MODES)} (see docs/threat-model.md)")
    return create_runtime(mode, **options)


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
        env["CAVE_KERNEL_SETUP"] = _SETUP
        env["CAVE_SANDBOX"] = json.dumps(self._sandbox_spec())
        return env

    # -- the host-side CPU guard -------------------------------------------------------------------------
    def _spawn(self) -> _Kernel:
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


def _kernel_pid(kernel: _Kernel) -> int:
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


class SandboxRuntime(ProcessRuntime):
    """Mode ``sandbox``: ``process`` plus a bubblewrap jail and a seccomp filter (see the module docstring).

    Options beyond ``ProcessRuntime``'s: ``ro_paths`` (more host paths to show read-only, e.g. the folder
    of a module whose functions you inject by reference), ``packages`` (import packages whose folders are
    shown read-only; default: runtimes and cave), ``tmp_size_mb`` (the private /tmp and /dev/shm),
    ``seccomp`` (the syscall filter; True by default). ``env`` is the whole environment the code sees
    besides what the kernel needs (PATH, HOME, LANG, ...); nothing is inherited from the host.
    ``trust`` defaults to False: ``retrieve`` accepts DataFrames (Arrow), arrays (npy) and JSON-able
    values only.
    """

    name = "sandbox"

    def __init__(
        self,
        timeout: float | None = 60.0,
        memory_limit_mb: int | None = 2048,
        cpu_time_limit_s: int | None = 60,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
        *,
        ro_paths: list[str] | tuple[str, ...] = (),
        packages: tuple[str, ...] = ("cave",),
        tmp_size_mb: int = 256,
        seccomp: bool = True,
        trust: bool = False,
        **options: Any,
    ) -> None:
        for key in ("inherit_env", "inherit_sys_path"):
            if options.pop(key, False):
                raise ValueError(
                    f"{key}=True would hand host state to the sandbox; pass what it needs in env / ro_paths"
                )
        problems = sandbox_problems(seccomp=seccomp)
        if problems:
            raise SandboxUnavailable("the sandbox cannot start on this machine:\n- " + "\n- ".join(problems))
        self.ro_paths = [os.path.abspath(p) for p in ro_paths]
        for p in self.ro_paths:
            if not os.path.exists(p):
                raise ValueError(f"ro_paths: {p} does not exist")
        self.package_dirs = [d for name in packages for d in package_dirs(name)]
        self.tmp_size_mb = tmp_size_mb
        self.seccomp = seccomp
        super().__init__(
            timeout,
            memory_limit_mb,
            cpu_time_limit_s,
            workdir,
            env,
            trust=trust,
            inherit_env=False,
            inherit_sys_path=False,
            **options,
        )
        self.max_frame_bytes = 64 << 20  # replies from an untrusted kernel: small frames, big data via files
        self._write_identity_files()

    def expose(self, paths: list[str] | tuple[str, ...]) -> None:
        """Show more host folders to the kernel, read-only (e.g. the skill folders a run offers). A running kernel
        is restarted to see them: registered objects are injected again, variables created by code are gone."""
        new = [os.path.abspath(p) for p in paths if os.path.exists(p)]
        new = [
            p for p in new if p not in self.ro_paths and not any(p.startswith(d + os.sep) for d in self.package_dirs)
        ]
        if not new:
            return
        self.ro_paths += new
        if self._kernel is not None:
            self.restart()

    @property
    def limits(self) -> dict[str, Any]:
        limits = super().limits
        nproc = "seccomp: no new processes" if self.seccomp else limits["max_processes"][1]
        limits.update(
            max_processes=(self.max_processes, nproc),
            capabilities="none (user namespace, all dropped)",
            network="none (own network namespace)",
            filesystem="read-only system and Python; writable: workdir, transfer folder, private /tmp",
        )
        return limits

    def _sandbox_spec(self) -> dict[str, Any]:
        spec = super()._sandbox_spec()
        spec["rlimits"]["NPROC"] = self.max_processes  # counted inside the jail's own user namespace
        spec["drop_caps"] = False  # the jail has none (bwrap --cap-drop ALL in a user namespace)
        spec["cgroup"] = None  # joined by the launcher below, outside the jail (no /sys inside)
        spec["seccomp"] = self.seccomp
        return spec

    async def _ainject_locked(self, name: str, meta: dict[str, Any], attachment: bytes) -> None:
        try:
            await super()._ainject_locked(name, meta, attachment)
        except TransferError as e:
            if "ModuleNotFoundError" not in str(e):
                raise
            raise TransferError(
                f"{e}. The sandbox shows the code only the Python environment and the packages "
                f"{', '.join(os.path.basename(p) for p in self.package_dirs)}: objects that refer to other "
                "modules by import need them shown, e.g. SandboxRuntime(ro_paths=[folder], "
                "env={'PYTHONPATH': folder}), or packages=('cave', 'mypkg')"
            ) from None

    def _write_identity_files(self) -> None:
        # /etc/passwd and /etc/group of the jail: the sandbox user only (nothing about the host's users).
        with open(os.path.join(self._ctl_dir, "passwd"), "w") as f:
            f.write(f"cave:x:{SANDBOX_UID}:{SANDBOX_UID}:cave sandbox:{self.workdir}:/bin/sh\n")
        with open(os.path.join(self._ctl_dir, "group"), "w") as f:
            f.write(f"cave:x:{SANDBOX_UID}:\n")

    def _kernel_env(self, sock_path: str, token: str, log_path: str) -> dict[str, str]:
        env = super()._kernel_env(sock_path, token, log_path)
        user_env = dict(self.env)
        keep = {
            k: v for k, v in env.items() if k.startswith("CAVE_") or k in ("PYTHONPATH", "ARROW_DEFAULT_MEMORY_POOL")
        }
        keep.update(
            PATH="/usr/local/bin:/usr/bin:/bin",
            HOME=self.workdir,
            USER="cave",
            LOGNAME="cave",
            LANG="C.UTF-8",
            TMPDIR="/tmp",
            PYTHONNOUSERSITE="1",
            PYTHONDONTWRITEBYTECODE="1",
            IPYTHONDIR="/tmp/.ipython",
            MPLCONFIGDIR="/tmp/.matplotlib",
            JUPYTER_CONFIG_DIR="/tmp/.jupyter",
            JUPYTER_DATA_DIR="/tmp/.jupyter/data",
            JUPYTER_RUNTIME_DIR="/tmp/.jupyter/runtime",
            JUPYTER_PLATFORM_DIRS="1",
            CAVE_KERNEL_LOG="/dev/stderr",  # the host's log file is not in the jail; stderr goes to it
        )
        user_env.pop("PYTHONPATH", None)  # already merged into PYTHONPATH above
        keep.update(user_env)
        return keep

    def _kernel_argv(self) -> list[str]:
        argv = [*self._bwrap_args(), "--", *super()._kernel_argv()]
        if self._cgroup is not None:  # join the pids cgroup first, so the jail and all in it are counted
            argv = ["/bin/sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', self._cgroup.path, *argv]
        return argv

    def _bwrap_args(self) -> list[str]:
        """bubblewrap's command line: namespaces, the filesystem view, and the kernel's own paths."""
        args = [shutil.which("bwrap") or "bwrap"]
        args += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
        args += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        args += ["--hostname", "cave-sandbox", "--cap-drop", "ALL"]
        # jupyter-client sets it so ipykernel exits when its parent is gone, which it checks as
        # "parent pid == 1": in the jail's pid namespace that is always so. The lifeline does that job.
        args += ["--unsetenv", "JPY_PARENT_PID"]
        args += ["--ro-bind", "/usr", "/usr"]
        for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(top):
                args += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                args += ["--ro-bind", top, top]
        for name in _ETC_FILES:
            path = os.path.join("/etc", name)
            if os.path.exists(path):
                args += ["--ro-bind", path, path]
        args += ["--ro-bind", os.path.join(self._ctl_dir, "passwd"), "/etc/passwd"]
        args += ["--ro-bind", os.path.join(self._ctl_dir, "group"), "/etc/group"]
        args += ["--proc", "/proc"]
        for hidden in _PROC_MASKED:  # writable by the jail's (root-mapped) uid otherwise, e.g. global sysctls
            if os.path.isdir(os.path.join("/proc", hidden)):
                args += ["--tmpfs", f"/proc/{hidden}", "--remount-ro", f"/proc/{hidden}"]
            elif os.path.exists(os.path.join("/proc", hidden)):
                args += ["--ro-bind", "/dev/null", f"/proc/{hidden}"]
        size = str(self.tmp_size_mb << 20)
        args += ["--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm", "--size", size, "--tmpfs", "/tmp"]
        for path in _python_paths() + self.package_dirs + self.ro_paths:
            args += ["--ro-bind", path, path]
        for path in (self._chan_dir, self._transfer_dir, self.workdir):  # the only writable host paths
            args += ["--bind", path, path]
        args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", self.workdir]
        return args


_ETC_FILES = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "timezone",
    "nsswitch.conf",
    "alternatives",
    "mime.types",
    "fonts",
)
_PROC_MASKED = ("sys", "sysrq-trigger", "kcore", "keys", "timer_list", "sched_debug", "latency_stats", "acpi", "scsi")


def _python_paths() -> list[str]:
    """The interpreter's installation and the environment's packages (read-only in the jail)."""
    paths = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)}
    exe = os.path.realpath(sys.executable)
    if not any(exe.startswith(p + os.sep) for p in paths):
        paths.add(os.path.dirname(exe))
    paths |= {os.path.realpath(p) for p in sys.path if p and "site-packages" in p and os.path.isdir(p)}
    # A venv's bin/python is a symlink to the base interpreter: the venv path itself must exist too.
    paths.add(os.path.abspath(sys.prefix))
    return sorted(p for p in paths if p not in ("/", "/usr") and not p.startswith("/usr/"))


def _package_dir(name: str) -> str:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"packages: {name!r} is not an importable package on this machine")
    return os.path.realpath(list(spec.submodule_search_locations)[0])


def package_dirs(name: str) -> list[str]:
    """The folders of package ``name``: its own, and those of subpackages an editable install maps elsewhere
    (cave's ``cave.runtimes`` is the repository's runtimes/, its bundled skills are skills/: the kernel in the
    jail imports them, and ``activate_skill`` reads the skill folders)."""
    dirs = [_package_dir(name)]
    for finder in sys.meta_path:
        mapping = getattr(sys.modules.get(getattr(finder, "__module__", "")), "MAPPING", None)
        if isinstance(mapping, dict):
            dirs += [
                os.path.realpath(p) for sub, p in mapping.items() if sub.startswith(name + ".") and os.path.isdir(p)
            ]
    return list(dict.fromkeys(dirs))


# -- is the sandbox possible here? --------------------------------------------------------------------


def sandbox_problems(seccomp: bool = True) -> list[str]:
    """What this machine lacks for the sandbox, each with how to get it ([] when it can run)."""
    problems = []
    if sys.platform != "linux":
        return [f"the sandbox needs Linux (namespaces, seccomp); this is {sys.platform}: use mode 'process'"]
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        problems.append(f"bubblewrap (bwrap) is not on PATH: {BWRAP_INSTALL_HINT}")
    else:
        problem = _namespaces_problem(bwrap)
        if problem:
            problems.append(problem)
    if seccomp:
        if _seccomp_arch() is None:
            problems.append(
                f"no seccomp filter for this CPU architecture ({platform.machine()}): only x86_64 and aarch64 "
                "are supported; pass seccomp=False to run without the syscall filter (new processes and "
                "non-Unix sockets are then stopped by the namespaces only)"
            )
        elif not _seccomp_supported():
            problems.append("this Linux kernel has no seccomp filtering (CONFIG_SECCOMP_FILTER)")
    return problems


@functools.lru_cache(maxsize=4)
def _namespaces_problem(bwrap: str) -> str | None:
    """Start a trivial jail with the namespaces the sandbox uses; None if it works."""
    cmd = [bwrap, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--ro-bind", "/", "/"]
    cmd += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "true"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bubblewrap could not run ({type(e).__name__}: {e}): {BWRAP_INSTALL_HINT}"
    if done.returncode == 0:
        return None
    why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit status {done.returncode}"
    return (
        f"bubblewrap cannot create the namespaces it needs ({why}). Unprivileged user namespaces are "
        "probably disabled: sysctl -w kernel.unprivileged_userns_clone=1 (Debian), "
        "sysctl -w user.max_user_namespaces=15000, or on Ubuntu 24.04+ "
        "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (or an AppArmor profile for bwrap); "
        "in a container, run it with --security-opt seccomp=unconfined or --privileged"
    )


def _seccomp_supported() -> bool:
    try:
        with open("/proc/self/status") as f:
            return any(line.startswith("Seccomp:") for line in f)
    except OSError:
        return False


# =====================================================================================================
# Inside the kernel process (before ipykernel loads): CAVE_KERNEL_SETUP=cave.runtimes.sandbox:kernel_setup
# =====================================================================================================


def kernel_setup() -> None:
    """Apply the limits and filters in $CAVE_SANDBOX to this process, irrevocably."""
    import resource

    spec = json.loads(os.environ.pop("CAVE_SANDBOX", "{}"))
    for name, value in spec.get("rlimits", {}).items():
        limit = getattr(resource, f"RLIMIT_{name}")
        _, hard = resource.getrlimit(limit)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(limit, (value, value))  # soft = hard: the code cannot raise it
    if spec.get("cgroup"):
        with open(os.path.join(spec["cgroup"], "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    if spec.get("drop_caps"):
        _drop_capabilities()
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    if spec.get("seccomp"):
        _no_subprocess_pipe()
        _install_seccomp()


def _no_subprocess_pipe() -> None:
    """ipykernel listens on a TCP port of 127.0.0.1 for the output of forked children. The filter allows
    no TCP sockets and no children, so it is not opened."""
    from ipykernel import iostream

    init = iostream.IOPubThread.__init__

    def without_pipe(self: Any, socket: Any, pipe: bool = False, **kwargs: Any) -> None:
        init(self, socket, pipe=False, **kwargs)

    iostream.IOPubThread.__init__ = without_pipe


_PR_SET_SECCOMP, _PR_CAPBSET_DROP, _PR_SET_SECUREBITS, _PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT = 22, 24, 28, 38, 47


@functools.cache
def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, *args: int) -> int:
    libc = _libc()
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    padded = (list(args) + [0, 0, 0, 0])[:4]
    result = libc.prctl(option, *padded)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}) failed: {os.strerror(err)}")
    return result


def _drop_capabilities() -> None:
    """Root without capabilities: cannot raise its limits, bypass file permissions, or regain them by exec."""
    securebits = 0x2F  # NOROOT(+locked), NO_SETUID_FIXUP(+locked), KEEP_CAPS_LOCKED
    with contextlib.suppress(OSError):
        _prctl(_PR_SET_SECUREBITS, securebits)
    _prctl(_PR_CAP_AMBIENT, 4)  # PR_CAP_AMBIENT_CLEAR_ALL
    for cap in range(64):
        try:
            _prctl(_PR_CAPBSET_DROP, cap)
        except OSError:
            break  # EINVAL past the last capability this kernel knows
    header = struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = bytes(24)  # two {effective, permitted, inheritable} = 0
    hdr_buf, data_buf = ctypes.create_string_buffer(header), ctypes.create_string_buffer(data)
    arch = _seccomp_arch()
    nr = 126 if arch is None or arch[0] == "x86_64" else 91  # capset
    if _libc().syscall(nr, hdr_buf, data_buf) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset failed: {os.strerror(err)}")


# -- seccomp ------------------------------------------------------------------------------------------

# Syscalls refused with EPERM, by name; numbers per architecture below.
_DENIED = (
    "fork vfork ptrace process_vm_readv process_vm_writev kexec_load kexec_file_load init_module "
    "finit_module delete_module mount umount2 pivot_root chroot swapon swapoff reboot unshare setns bpf "
    "perf_event_open userfaultfd keyctl add_key request_key open_by_handle_at name_to_handle_at acct syslog "
    "io_uring_setup io_uring_enter io_uring_register quotactl mount_setattr move_mount open_tree fsopen "
    "fsconfig fsmount fspick settimeofday clock_settime clock_adjtime adjtimex iopl ioperm vhangup "
    "pidfd_getfd lookup_dcookie uselib"
).split()
_X86_64 = dict(
    clone=56, clone3=435, fork=57, vfork=58, socket=41, ioctl=16, ptrace=101, process_vm_readv=310,
    process_vm_writev=311, kexec_load=246, kexec_file_load=320, init_module=175, finit_module=313,
    delete_module=176, mount=165, umount2=166, pivot_root=155, chroot=161, swapon=167, swapoff=168, reboot=169,
    unshare=272, setns=308, bpf=321, perf_event_open=298, userfaultfd=323, keyctl=250, add_key=248,
    request_key=249, open_by_handle_at=304, name_to_handle_at=303, acct=163, syslog=103, io_uring_setup=425,
    io_uring_enter=426, io_uring_register=427, quotactl=179, mount_setattr=442, move_mount=429, open_tree=428,
    fsopen=430, fsconfig=431, fsmount=432, fspick=433, settimeofday=164, clock_settime=227, clock_adjtime=305,
    adjtimex=159, iopl=172, ioperm=173, vhangup=153, pidfd_getfd=438, lookup_dcookie=212, uselib=134,
)  # fmt: skip
_AARCH64 = dict(
    clone=220, clone3=435, socket=198, ioctl=29, ptrace=117, process_vm_readv=270, process_vm_writev=271,
    kexec_load=104, kexec_file_load=294, init_module=105, finit_module=273, delete_module=106, mount=40,
    umount2=39, pivot_root=41, chroot=51, swapon=224, swapoff=225, reboot=142, unshare=97, setns=268, bpf=280,
    perf_event_open=241, userfaultfd=282, keyctl=219, add_key=217, request_key=218, open_by_handle_at=265,
    name_to_handle_at=264, acct=89, syslog=116, io_uring_setup=425, io_uring_enter=426, io_uring_register=427,
    quotactl=60, mount_setattr=442, move_mount=429, open_tree=428, fsopen=430, fsconfig=431, fsmount=432,
    fspick=433, settimeofday=170, clock_settime=112, clock_adjtime=266, adjtimex=171, vhangup=58,
    pidfd_getfd=438, lookup_dcookie=18,
)  # fmt: skip
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_CLONE_THREAD, _AF_UNIX, _TIOCSTI, _EPERM, _ENOSYS = 0x00010000, 1, 0x5412, 1, 38


def _seccomp_arch() -> tuple[str, dict[str, int]] | None:
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        return "x86_64", _X86_64
    if machine in ("aarch64", "arm64"):
        return "aarch64", _AARCH64
    return None


def seccomp_program() -> list[tuple[int, int, int, int]]:
    """The classic-BPF filter, as (code, jt, jf, k) instructions.

    Allows everything except: the syscalls in ``_DENIED`` (EPERM); ``clone`` without CLONE_THREAD, i.e. a
    new process (EPERM; threads are allowed); ``clone3`` (ENOSYS, so the C library falls back to
    ``clone``, whose flags a filter can read); ``socket`` for any family but AF_UNIX (EPERM); the TIOCSTI
    ioctl (EPERM); x32 syscalls; and any other architecture (the process is killed).
    """
    arch = _seccomp_arch()
    assert arch is not None, "no seccomp table for this architecture"
    name, table = arch
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, kill = 0x7FFF0000, 0x80000000
    eperm, enosys = 0x00050000 | _EPERM, 0x00050000 | _ENOSYS
    # Instructions with symbolic jump targets, resolved below.
    prog: list[tuple[int, Any, Any, int]] = [(ld, 0, 0, 4), (jeq, 0, "KILL", _AUDIT_ARCH[name]), (ld, 0, 0, 0)]
    if name == "x86_64":
        prog.append((jge, "EPERM", 0, 0x40000000))
    for syscall in _DENIED:
        if syscall in table:
            prog.append((jeq, "EPERM", 0, table[syscall]))
    prog += [
        (jeq, "CLONE", 0, table["clone"]),
        (jeq, "ENOSYS", 0, table["clone3"]),
        (jeq, "SOCKET", 0, table["socket"]),
        (jeq, "IOCTL", 0, table["ioctl"]),
        (ret, 0, 0, allow),
    ]
    labels: dict[str, int] = {}

    def label(name: str, *instructions: tuple[int, Any, Any, int]) -> None:
        labels[name] = len(prog)
        prog.extend(instructions)

    label("CLONE", (ld, 0, 0, 16), (jset, "ALLOW", "EPERM", _CLONE_THREAD))  # args[0]: flags (low 32 bits)
    label("SOCKET", (ld, 0, 0, 16), (jeq, "ALLOW", "EPERM", _AF_UNIX))  # args[0]: domain
    label("IOCTL", (ld, 0, 0, 24), (jeq, "EPERM", "ALLOW", _TIOCSTI))  # args[1]: request
    label("ALLOW", (ret, 0, 0, allow))
    label("EPERM", (ret, 0, 0, eperm))
    label("ENOSYS", (ret, 0, 0, enosys))
    label("KILL", (ret, 0, 0, kill))

    def offset(target: Any, i: int) -> int:
        if isinstance(target, int):
            return target
        jump = labels[target] - i - 1
        assert 0 <= jump < 256, "seccomp jump out of range"
        return jump

    return [(code, offset(jt, i), offset(jf, i), k) for i, (code, jt, jf, k) in enumerate(prog)]


def _install_seccomp() -> None:
    prog = seccomp_program()
    raw = b"".join(struct.pack("HBBI", code, jt, jf, k) for code, jt, jf, k in prog)
    buf = ctypes.create_string_buffer(raw)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
    libc = _libc()
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(_PR_SET_SECCOMP, 2, ctypes.byref(fprog), 0, 0) != 0:  # SECCOMP_MODE_FILTER
        err = ctypes.get_errno()
        raise OSError(err, f"installing the seccomp filter failed: {os.strerror(err)}")


def _register_modes() -> None:
    """Register the mode names. They come with the [kernel] extra, which two of the three need (a core
    install keeps just "inprocess" and "kernel", the latter explaining how to install the extra)."""
    if _installed("jupyter_client") and _installed("ipykernel"):
        for cls in (TrustedRuntime, ProcessRuntime, SandboxRuntime):
            register_runtime(cls.name)(cls)


_register_modes()

__all__ = [
    "MODES",
    "ProcessRuntime",
    "SandboxRuntime",
    "SandboxUnavailable",
    "TrustedRuntime",
    "kernel_setup",
    "runtime_for_mode",
    "sandbox_problems",
    "seccomp_program",
]
