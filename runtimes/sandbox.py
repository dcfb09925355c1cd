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
  modules. Nothing of the jail runs between calls: the host stops the kernel (SIGSTOP) when a call returns
  and continues it at the next (``freeze_idle``). Retrieval is safe-format only (``trust=False``: Arrow,
  npy, JSON, never a pickle). If a mechanism is missing, construction fails with ``SandboxUnavailable`` saying what and how to get it.

docs/threat-model.md says what each mode stops and what it does not.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from typing import Any

from cave.runtimes.base import (
    Runtime,
    RuntimeError_,
    TransferError,
    create_runtime,
    register_runtime,
)
from cave.runtimes.confine import kernel_setup, seccomp_arch, seccomp_program
from cave.runtimes.kernel import installed
from cave.runtimes.process import ProcessRuntime, TrustedRuntime

MODES = ("trusted", "process", "sandbox")
BWRAP_INSTALL_HINT = (
    "install bubblewrap: apt-get install -y bubblewrap (Debian/Ubuntu), dnf install bubblewrap (Fedora), "
    "apk add bubblewrap (Alpine)"
)
SANDBOX_UID = 1000  # the uid (and gid) the code runs as inside the jail's user namespace


class SandboxUnavailable(RuntimeError_):
    """This machine lacks a mechanism the sandbox needs; the message says which and how to get it."""


def runtime_for_mode(mode: str, **options: Any) -> Runtime:
    """The runtime for a run mode: "trusted" (in-process), "process" (limits) or "sandbox" (limits + jail)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; use one of: {', '.join(MODES)} (see docs/threat-model.md)")
    return create_runtime(mode, **options)


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
        options.setdefault("freeze_idle", True)  # nothing of the jail runs between calls: see docs/threat-model.md
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

    def _sibling_options(self, options: dict[str, Any]) -> dict[str, Any]:
        return {**options, "ro_paths": list(self.ro_paths)}  # what it was made with and what was exposed since

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
        # The kernel is frozen between calls (freeze_idle), so its own lifeline cannot see the host die: the jail
        # dies with the host's launcher thread instead (a thread that lives as long as the host: kernel._LAUNCHERS).
        args += ["--die-with-parent"]
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
        if seccomp_arch() is None:
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
# Inside the kernel process (before ipykernel loads): see cave.runtimes.confine (CAVE_KERNEL_SETUP)
# =====================================================================================================


def _register_modes() -> None:
    """Register the mode names. They come with the [kernel] extra, which two of the three need (a core
    install keeps just "inprocess" and "kernel", the latter explaining how to install the extra)."""
    if installed("jupyter_client") and installed("ipykernel"):
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
