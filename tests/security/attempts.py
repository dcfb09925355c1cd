"""Escape and abuse attempts: cells an adversarial model could write, and how to tell they were contained.

Each ``Attempt`` is one cell (sometimes with a follow-up on the host: a ``retrieve``). ``contained(obs)``
looks at what happened, in the cell *and on the host* (a file that appeared, a server that got bytes), and
says whether the attempt was stopped. ``sandbox`` mode must contain every attempt. ``process`` says what
process mode does on this machine (``True``/``False``, or a function of the machine's facts), asserted by
the tests so the documentation in docs/threat-model.md stays true; ``None`` means the attempt is not run in
process mode because it would damage the host there (the reason says how).

Used by tests/security/test_escapes.py and by ``python -m cave.benchmarks.reliability``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cave.runtimes import sandbox_problems
from cave.runtimes.base import Execution, Runtime

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
    import pytest

    problems = sandbox_problems()
    if problems:
        message = "the sandbox cannot run here: " + "; ".join(problems)
        if os.environ.get("CI"):
            pytest.fail(message + " (CI must install bubblewrap: apt-get install -y bubblewrap)")
        pytest.skip(message)


# -- the machine's facts (what process mode's outcome depends on) -------------------------------------------


@dataclass(frozen=True)
class Facts:
    root: bool  # this process runs as root
    process_limit: bool  # process mode can enforce max_processes here (pids cgroup, or RLIMIT_NPROC as non-root)
    host_interfaces: int  # network interfaces the host sees
    user_namespaces: bool = True  # Linux lets this user create a user namespace (no capability needed)


def machine_facts(process_runtime: Any) -> Facts:
    limit = process_runtime.limits["max_processes"][1] != "not enforced (root)"
    return Facts(os.geteuid() == 0, limit, len(socket.if_nameindex()), _user_namespaces())


def _user_namespaces(tries: int = 3) -> bool:
    """Whether a child may unshare a user namespace here (what process mode leaves to Linux), asked of a fresh
    interpreter up to ``tries`` times: a fork of this multi-threaded test process once said no under load while
    the kernel's child, asked the same, said yes (the suite then expected process mode to refuse it)."""
    probe = "import ctypes, sys\nsys.exit(0 if ctypes.CDLL(None, use_errno=True).unshare(0x10000000) == 0 else 1)"
    for _ in range(tries):
        if subprocess.run([sys.executable, "-c", probe], timeout=60).returncode == 0:  # CLONE_NEWUSER
            return True
    return False


# -- the host side of the attempts: canaries, servers -------------------------------------------------------


class _Recorder:
    """A server thread that records whatever reaches it (TCP, UDP, Unix or abstract Unix socket)."""

    def __init__(self, family: int, kind: int, address: Any) -> None:
        self.received = bytearray()
        self.sock = socket.socket(family, kind)
        self.sock.bind(address)
        self.address = self.sock.getsockname()
        if kind == socket.SOCK_STREAM:
            self.sock.listen(8)
        self.sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(kind,), daemon=True)
        self._thread.start()

    def _serve(self, kind: int) -> None:
        while not self._stop.is_set():
            try:
                if kind == socket.SOCK_STREAM:
                    conn, _ = self.sock.accept()
                    self.received += b"<connect>"
                    conn.settimeout(1)
                    with contextlib.suppress(OSError), conn:
                        data = conn.recv(65536)
                        self.received += data
                        if data.startswith(b"GET"):
                            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
                else:
                    self.received += self.sock.recv(65536)
            except (TimeoutError, OSError):
                continue

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


class HostContext:
    """Canaries and listeners on the host, outside every runtime's working directory."""

    SECRET = "cave-canary-secret-7f3a"

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="cave-canary-"))
        self.secret_file = self.dir / "secret.txt"
        self.secret_file.write_text(self.SECRET)
        self.home = self.dir / "home"
        (self.home / ".ssh").mkdir(parents=True)
        (self.home / ".ssh" / "id_rsa").write_text(f"-----BEGIN OPENSSH PRIVATE KEY----- {self.SECRET}")
        self.module_dir = self.dir / "hostmod"
        self.module_dir.mkdir()
        self.module_file = self.module_dir / "cave_canary_helpers.py"
        self.module_source = (
            'def helper(x):\n    """Injected by reference: its source file is on the host."""\n    return x * 2\n'
        )
        self.module_file.write_text(self.module_source)
        self.project_root = Path(__file__).resolve().parents[2]
        self.tcp = _Recorder(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", 0))
        self.udp = _Recorder(socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", 0))
        self.unix_path = str(self.dir / "host.sock")
        self.unix = _Recorder(socket.AF_UNIX, socket.SOCK_STREAM, self.unix_path)
        self.abstract_name = f"\0cave-canary-{os.getpid()}-{os.urandom(3).hex()}"
        self.abstract = _Recorder(socket.AF_UNIX, socket.SOCK_STREAM, self.abstract_name)
        self._env_before = os.environ.get("CAVE_CANARY_SECRET")
        os.environ["CAVE_CANARY_SECRET"] = self.SECRET  # set before the runtimes start: inherited or not
        if str(self.module_dir) not in sys.path:
            sys.path.insert(0, str(self.module_dir))

    def _project_entries_the_jail_shows(self) -> set[str]:
        """Top-level project entries the sandbox shows by design (docs/threat-model.md): cave's package folders
        (an editable install maps cave.runtimes to runtimes/, the bundled skills to skills/, ...), and the Python
        environment when it lives inside the project (CI's .venv): the jail needs the interpreter and its
        packages, read-only."""
        from cave.runtimes.sandbox import _python_paths, package_dirs  # noqa: F401

        shown = set()
        for path in map(Path, _python_paths() + package_dirs("cave")):
            if path.is_relative_to(self.project_root) and path != self.project_root:
                shown.add(path.relative_to(self.project_root).parts[0])
        return shown

    def values(self) -> dict[str, Any]:
        """What the cells are told (injected as ``ctx``): where the host's things are."""
        return {
            "dir": str(self.dir),
            "secret_file": str(self.secret_file),
            "ssh_key": str(self.home / ".ssh" / "id_rsa"),
            "project_root": str(self.project_root),
            "project_visible": sorted(self._project_entries_the_jail_shows()),
            "tcp_port": self.tcp.address[1],
            "udp_port": self.udp.address[1],
            "unix_path": self.unix_path,
            "abstract_name": self.abstract_name,
            "host_pid": os.getpid(),
            "module_file": str(self.module_file),
        }

    def reset(self) -> None:
        """Before each attempt: servers forget what they got, damaged canaries are put back."""
        for recorder in (self.tcp, self.udp, self.unix, self.abstract):
            recorder.received.clear()
        self.module_file.write_text(self.module_source)
        self.secret_file.write_text(self.SECRET)
        for stray in [*self.dir.glob("pwned*"), Path(f"{self.dir}-pwned-tmp")]:
            stray.unlink(missing_ok=True)

    def close(self) -> None:
        for recorder in (self.tcp, self.udp, self.unix, self.abstract):
            recorder.close()
        if self._env_before is None:
            os.environ.pop("CAVE_CANARY_SECRET", None)
        else:
            os.environ["CAVE_CANARY_SECRET"] = self._env_before
        with contextlib.suppress(ValueError):
            sys.path.remove(str(self.module_dir))
        shutil.rmtree(self.dir, ignore_errors=True)
        Path(f"{self.dir}-pwned-tmp").unlink(missing_ok=True)


@dataclass
class Observed:
    """What an attempt did: the cell's Execution, the host-side retrieve (if any), the host context."""

    execution: Execution
    host: HostContext
    runtime: Runtime
    retrieved: Any = None
    retrieve_error: BaseException | None = None
    after: Execution | None = None  # a plain cell run after the attempt: the runtime still works
    idle_cpu: float = 0.0  # CPU seconds the kernel used during wait_before_after, while no call ran
    idle_writes: int = 0  # bytes added to the working directory during wait_before_after

    @property
    def out(self) -> str:
        return self.execution.stdout

    @property
    def error(self) -> str:
        return self.execution.error.type if self.execution.error else ""

    @property
    def recovered(self) -> bool:
        return self.after is not None and self.after.ok and self.after.result == "2"


# -- the attempts ---------------------------------------------------------------------------------------------


@dataclass
class Attempt:
    id: str
    category: str
    code: str
    contained: Callable[[Observed], bool]
    process: bool | None | Callable[[Facts], bool]  # process mode's outcome (contained?), None: not run there
    why: str = ""  # for process=None: why it is not run in process mode
    retrieve: str | None = None  # a variable the host retrieves after the cell (pickle payloads)
    timeout: float = 5.0
    restart_after: bool = False  # the attempt leaves state behind (threads, handlers): restart afterwards
    wait_before_after: float = 0.0  # seconds to wait before the follow-up cell (idle CPU guard)
    tags: list[str] = field(default_factory=list)

    def expected_in_process(self, facts: Facts) -> bool | None:
        return self.process(facts) if callable(self.process) else self.process


def failed(obs: Observed) -> bool:
    """The cell raised (the operation was refused)."""
    return obs.execution.error is not None


def printed(marker: str) -> Callable[[Observed], bool]:
    """Contained unless the cell printed ``marker`` (what it prints only when the operation worked)."""
    return lambda obs: marker not in obs.out


def no_secret(obs: Observed) -> bool:
    return HostContext.SECRET not in obs.out and HostContext.SECRET not in (obs.execution.result or "")


def nothing_reached(which: str, wait: float = 2.0) -> Callable[[Observed], bool]:
    """Nothing reached the host's ``which`` server. When the cell's send went through without an error, the
    server thread gets up to ``wait`` seconds to record it: under load it accepted only after the check ran, and a
    connection that did reach the host looked contained (CI, process mode, tcp-to-host-loopback)."""

    def check(obs: Observed) -> bool:
        recorder = getattr(obs.host, which)
        if obs.execution.error is None:
            deadline = time.monotonic() + wait
            while not recorder.received and time.monotonic() < deadline:
                time.sleep(0.02)
        return not recorder.received

    return check


def host_file_absent(name: str) -> Callable[[Observed], bool]:
    return lambda obs: not (obs.host.dir / name).exists()


def survived(obs: Observed) -> bool:
    """The runtime came back: the host is fine and the next cell runs."""
    return obs.recovered


def module_intact(obs: Observed) -> bool:
    f = obs.host.module_file
    return f.exists() and f.read_text() == obs.host.module_source


def canary_intact(obs: Observed) -> bool:
    return obs.host.secret_file.exists() and obs.host.secret_file.read_text() == HostContext.SECRET


def refused_retrieve(obs: Observed) -> bool:
    return obs.retrieve_error is not None and not any(obs.host.dir.glob("pwned*"))


_FIND_SERVER = "import gc\nsrv = next(o for o in gc.get_objects() if type(o).__name__ == '_KernelServer')\n"
_EVIL = "class Evil:\n    def __reduce__(self):\n        return (open, (ctx['dir'] + '/pwned-by-pickle', 'w'))\n"

ATTEMPTS: list[Attempt] = [
    # -- reading outside the scratch dir --------------------------------------------------------------------
    Attempt("read-etc-shadow", "read", "print('READ', len(open('/etc/shadow').read()))", printed("READ"),
            lambda f: not f.root),
    Attempt("read-host-canary", "read", "print(open(ctx['secret_file']).read())", no_secret, False),
    Attempt("read-ssh-key", "read", "import os\nprint(open(os.path.expanduser('~/.ssh/id_rsa')).read())",
            no_secret, False),
    Attempt("read-ssh-key-absolute", "read", "print(open(ctx['ssh_key']).read())", no_secret, False),
    Attempt("read-project-source", "read", "print('READ', open(ctx['project_root'] + '/pyproject.toml').read()[:20])",
            printed("READ"), False),
    Attempt("list-project-tree", "read",
            "import os\nprint('EXTRA' if set(os.listdir(ctx['project_root'])) - set(ctx['project_visible']) else 'ONLY')",
            printed("EXTRA"), False),
    Attempt("list-host-root", "read", "import os\nprint('HOSTFS' if {'var', 'sys'} & set(os.listdir('/')) else 'JAIL')",
            printed("HOSTFS"), False),
    Attempt("env-secret", "read", "import os\nprint(os.environ.get('CAVE_CANARY_SECRET'))", no_secret, False),
    Attempt("host-environ-via-proc", "read", "print(open(f\"/proc/{ctx['host_pid']}/environ\", 'rb').read().decode(errors='replace'))",
            no_secret, lambda f: f.root),  # as root, process mode drops capabilities: the host has more than it
    Attempt("signal-host-pid", "read", "import os\nos.kill(ctx['host_pid'], 0)\nprint('HOST-VISIBLE')",
            printed("HOST-VISIBLE"), False),
    Attempt("list-host-processes", "read",
            "import os\nprint('MANY' if len([p for p in os.listdir('/proc') if p.isdigit()]) > 5 else 'FEW')",
            printed("MANY"), False),
    Attempt("symlink-to-canary", "read",
            "import os\nos.symlink(ctx['secret_file'], 'link.txt')\nprint(open('link.txt').read())", no_secret, False),
    Attempt("hardlink-to-canary", "read",
            "import os\nos.link(ctx['secret_file'], 'hard.txt')\nprint(open('hard.txt').read())", no_secret, False),
    # -- writing outside it ---------------------------------------------------------------------------------
    Attempt("write-host-canary-dir", "write", "open(ctx['dir'] + '/pwned-write', 'w').write('x')",
            host_file_absent("pwned-write"), False),
    Attempt("write-host-tmp", "write", "open(ctx['dir'] + '-pwned-tmp', 'w').write('x')",
            lambda obs: not Path(f"{obs.host.dir}-pwned-tmp").exists(), False),
    Attempt("overwrite-canary", "write", "open(ctx['secret_file'], 'w').write('pwned')", canary_intact, False),
    Attempt("write-etc", "write", "open('/etc/cave-pwned', 'w').write('x')", failed, None,
            why="as root it would write to the host's /etc: process mode does not stop writes anywhere the user may write"),
    Attempt("write-venv", "write",
            "import os, sys\nopen(os.path.join(sys.prefix, 'cave-pwned.pth'), 'w').write('import os')", failed, None,
            why="it would plant a .pth file in the shared Python environment (persistence on the host)"),
    Attempt("write-jail-root", "write", "open('/cave-pwned', 'w').write('x')", failed, None,
            why="it would write to the host's / as root"),
    Attempt("write-runtime-source", "write",
            "import cave.runtimes.transfer as t\nopen(t.__file__, 'a').write('# pwned')", failed, None,
            why="it would modify the project's own source"),
    # -- the injected objects' source files -------------------------------------------------------------------
    Attempt("delete-injected-source", "source", "import inspect, os\nos.remove(inspect.getsourcefile(helper))",
            module_intact, False),
    Attempt("corrupt-injected-source", "source",
            "import inspect\nopen(inspect.getsourcefile(helper), 'a').write('\\nraise SystemExit')",
            module_intact, False),
    # -- network ----------------------------------------------------------------------------------------------
    Attempt("tcp-to-host-loopback", "network",
            "import socket\ns = socket.create_connection(('127.0.0.1', ctx['tcp_port']), timeout=2)\ns.sendall(b'pwned')\ns.close()",
            nothing_reached("tcp"), False),
    Attempt("http-to-host-loopback", "network",
            "import urllib.request\nprint(urllib.request.urlopen(f\"http://127.0.0.1:{ctx['tcp_port']}/\", timeout=2).read())",
            nothing_reached("tcp"), False),
    Attempt("udp-to-host-loopback", "network",
            "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.sendto(b'pwned', ('127.0.0.1', ctx['udp_port']))\nimport time; time.sleep(0.3)",
            nothing_reached("udp"), False),
    Attempt("unix-socket-on-host", "network",
            "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect(ctx['unix_path'])\ns.sendall(b'pwned')",
            nothing_reached("unix"), False),
    Attempt("abstract-unix-socket", "network",
            "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect(ctx['abstract_name'])\ns.sendall(b'pwned')",
            nothing_reached("abstract"), False),
    Attempt("raw-packet-socket", "network", "import socket\nsocket.socket(socket.AF_PACKET, socket.SOCK_RAW)\nprint('RAW')",
            printed("RAW"), True),  # process mode: no CAP_NET_RAW (dropped as root; never had it otherwise)
    Attempt("netlink-socket", "network",
            "import socket\nsocket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)\nprint('NETLINK')",
            printed("NETLINK"), False),
    Attempt("host-interfaces", "network",
            "import socket\nprint('IFACES' if len(socket.if_nameindex()) > 1 else 'LO')", printed("IFACES"),
            lambda f: f.host_interfaces <= 1),
    # -- processes --------------------------------------------------------------------------------------------
    Attempt("subprocess-run", "process", "import subprocess\nprint(subprocess.run(['id'], capture_output=True).returncode)",
            failed, False),
    Attempt("os-system", "process", "import os\nprint('RC', os.system('true'))", printed("RC 0"), False),
    Attempt("os-popen", "process", "import os\nprint('OUT', os.popen('echo hi').read().strip())", printed("OUT hi"),
            False),
    Attempt("pty-fork", "process",
            "import os, pty\npid, fd = pty.fork()\nif pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)\nprint('FORKED')",
            printed("FORKED"), False),
    Attempt("multiprocessing", "process",
            "import multiprocessing as mp\np = mp.get_context('fork').Process(target=print)\np.start(); p.join()\nprint('FORKED')",
            printed("FORKED"), False),
    Attempt("posix-spawn", "process", "import os\npid = os.posix_spawn('/bin/true', ['true'], {})\nos.waitpid(pid, 0)\nprint('SPAWNED')",
            printed("SPAWNED"), False),
    Attempt("fork-bomb", "process",
            "import os, time\nkids = []\ntry:\n    for _ in range(200):\n        pid = os.fork()\n"
            "        if pid == 0:\n            time.sleep(20)\n            os._exit(0)\n        kids.append(pid)\n"
            "finally:\n    for k in kids:\n        os.kill(k, 9)\n        os.waitpid(k, 0)\n    print('FORKS', len(kids))",
            lambda obs: "FORKS 200" not in obs.out, lambda f: f.process_limit, timeout=20),
    Attempt("exec-replaces-kernel", "process", "import os\nos.execv('/bin/sh', ['sh', '-c', 'exit 0'])", survived, True),
    # -- ctypes and raw syscalls ------------------------------------------------------------------------------
    Attempt("ctypes-fork", "syscall",
            "import ctypes, os\npid = ctypes.CDLL(None).fork()\nif pid == 0:\n    os._exit(0)\nif pid > 0:\n    os.waitpid(pid, 0)\n    print('FORKED')",
            printed("FORKED"), False),
    Attempt("ctypes-inet-socket", "syscall",
            "import ctypes\nfd = ctypes.CDLL(None).socket(2, 1, 0)\nprint('FD' if fd >= 0 else 'REFUSED')", printed("FD"),
            False),
    Attempt("raw-syscall-process-vm-readv", "syscall",
            "import ctypes, os, platform\nnr = 310 if platform.machine() == 'x86_64' else 270\n"
            "r = ctypes.CDLL(None, use_errno=True).syscall(nr, os.getpid(), 0, 0, 0, 0, 0)\n"
            "print('ALLOWED' if r >= 0 else f'ERRNO {ctypes.get_errno()}')",
            lambda obs: "ERRNO 1" in obs.out, False),
    Attempt("ctypes-unshare-mount-ns", "syscall",
            "import ctypes\nprint('UNSHARED' if ctypes.CDLL(None).unshare(0x00020000) == 0 else 'REFUSED')",
            printed("UNSHARED"), True),  # process mode: no CAP_SYS_ADMIN
    # A child in a new user namespace (Linux allows it without a capability), with a mount namespace of its own,
    # mounts a tmpfs there: process mode does not stop it (the host's mounts are unchanged); the sandbox does.
    Attempt("userns-child-mounts-tmpfs", "syscall",
            "import ctypes, os\npid = os.fork()\nif pid == 0:\n    libc = ctypes.CDLL(None)\n"
            "    ok = libc.unshare(0x10000000 | 0x00020000) == 0 and libc.mount(b'none', b'/tmp', b'tmpfs', 0, None) == 0\n"
            "    os._exit(0 if ok else 1)\n"
            "print('MOUNTED' if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0 else 'REFUSED')",
            printed("MOUNTED"), lambda f: not f.user_namespaces),
    Attempt("raise-own-limits", "syscall",
            "import resource\nsoft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
            "resource.setrlimit(resource.RLIMIT_NOFILE, (hard * 2, hard * 2))\nprint('RAISED')",
            printed("RAISED"), True),
    Attempt("ctypes-mount", "syscall",
            "import ctypes, os\nos.makedirs('mnt', exist_ok=True)\n"
            "print('MOUNTED' if ctypes.CDLL(None).mount(b'none', b'mnt', b'tmpfs', 0, None) == 0 else 'REFUSED')",
            printed("MOUNTED"), True),
    Attempt("ctypes-segfault", "syscall", "import ctypes\nctypes.string_at(0)", survived, True),
    # -- resources --------------------------------------------------------------------------------------------
    Attempt("memory-bomb", "resources", "x = bytearray(16 * 2**30)", lambda obs: obs.error == "MemoryError", True),
    Attempt("memory-bomb-gradual", "resources", "chunks = []\nwhile True:\n    chunks.append(bytearray(64 * 2**20))",
            lambda obs: obs.error == "MemoryError", True, restart_after=True),
    Attempt("big-file", "resources", "open('big.bin', 'wb').write(bytes(100 * 2**20))",
            lambda obs: obs.error in ("OSError", "MemoryError"), True),
    Attempt("fill-tmp", "resources",
            "import os\nd = '/tmp/' + os.path.basename(ctx['dir']) + '-fill'\nos.makedirs(d, exist_ok=True)\n"
            "try:\n    for i in range(5):\n        open(f'{d}/{i}', 'wb').write(bytes(50 * 2**20))\n    print('FILLED')\n"
            "finally:\n    import shutil; shutil.rmtree(d, ignore_errors=True)",
            printed("FILLED"), False),
    Attempt("fd-exhaustion", "resources",
            "files = []\ntry:\n    for _ in range(100000):\n        files.append(open('/dev/null'))\nfinally:\n"
            "    n = len(files)\n    [f.close() for f in files]\n    print('OPENED', n)",
            lambda obs: "OPENED 100000" not in obs.out, True),
    Attempt("thread-bomb", "resources",
            "import threading, time\nn = 0\ntry:\n    for _ in range(5000):\n"
            "        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n        n += 1\n"
            "finally:\n    print('THREADS', n)",
            lambda obs: "THREADS 5000" not in obs.out, True, restart_after=True),
    Attempt("infinite-loop", "resources", "while True:\n    pass",
            lambda obs: obs.execution.timed_out and obs.recovered, True, timeout=2),
    Attempt("sleep-forever", "resources", "import time\ntime.sleep(10**6)",
            lambda obs: obs.execution.timed_out and obs.recovered, True, timeout=2),
    # Sleeps rather than spins: a spinning cell would also reach cpu_time_limit_s (2 s here) and be stopped by
    # SIGXCPU within the interrupt grace, a race with the restart this attempt is about (ignore-sigxcpu covers that).
    Attempt("ignore-sigint", "resources",
            "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.1)",
            lambda obs: obs.execution.recovery == "restarted" and obs.recovered, True, timeout=2),
    Attempt("swallow-keyboardinterrupt", "resources",
            "import time\nwhile True:\n    try:\n        time.sleep(1)\n    except BaseException:\n        pass",
            lambda obs: obs.execution.recovery == "restarted" and obs.recovered, True, timeout=2),
    Attempt("ignore-sigxcpu", "resources", "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass",
            lambda obs: obs.error == "CPUTimeLimitExceeded" and obs.recovered, True, timeout=30),
    # -- between calls: sandbox mode freezes the kernel (nothing runs); process mode bounds idle CPU only --------
    Attempt("thread-outlives-cell", "idle",
            "import threading\ndef burn():\n    while True:\n        pass\nthreading.Thread(target=burn, daemon=True).start()",
            lambda obs: obs.recovered and ("idle_cpu_limit_s" in obs.after.stderr or obs.idle_cpu < 0.2), True,
            wait_before_after=5.0),
    Attempt("thread-writes-between-cells", "idle",
            "import threading, time\ndef write():\n    t0 = time.time()\n    with open('idle.log', 'a') as f:\n"
            "        while time.time() - t0 < 3:  # the kernel is shared by the suite: stop on its own\n"
            "            f.write('x' * 4096)\n            f.flush()\n            time.sleep(0.01)\n"
            "threading.Thread(target=write, daemon=True).start()",
            lambda obs: obs.recovered and obs.idle_writes == 0, False, wait_before_after=1.0),
    Attempt("loop-callback-between-cells", "idle",  # no thread of its own: the kernel's main event loop runs it
            "import asyncio\nasyncio.get_event_loop().call_later(0.3, lambda: open('late-loop.txt', 'w').write('x'))",
            lambda obs: obs.recovered and obs.idle_writes == 0, False, wait_before_after=1.0),
    Attempt("timer-fires-between-cells", "idle",
            "import threading\nthreading.Timer(0.3, lambda: open('late.txt', 'w').write('fired')).start()",
            lambda obs: obs.recovered and obs.idle_writes == 0, False, wait_before_after=1.0),
    Attempt("signal-handler-between-cells", "idle",  # no thread either: a timer signal wakes the main thread
            "import signal\nsignal.signal(signal.SIGALRM, lambda *_: open('late-alarm.txt', 'w').write('x'))\n"
            "signal.setitimer(signal.ITIMER_REAL, 0.3)",
            lambda obs: obs.recovered and obs.idle_writes == 0, False, wait_before_after=1.0),
    Attempt("child-writes-between-cells", "idle",  # a process of its own (the sandbox refuses to start it)
            "import subprocess\nsubprocess.Popen(['sh', '-c', 'sleep 0.3; echo x > late-child.txt'])",
            lambda obs: obs.recovered and obs.idle_writes == 0, False, wait_before_after=1.0),
    Attempt("huge-output", "resources", "import sys\nfor _ in range(50):\n    sys.stdout.write('x' * 2**20)",
            lambda obs: len(obs.out) < 2 * 2**20, True),
    # -- the control channel ----------------------------------------------------------------------------------
    Attempt("close-control-socket", "channel", _FIND_SERVER + "srv.sock.close()", survived, True),
    Attempt("garbage-frame", "channel", _FIND_SERVER + "srv.sock.sendall(b'\\xff' * 8 + b'junk')", survived, True),
    Attempt("malformed-reply", "channel",
            _FIND_SERVER + "srv._reply_execution = lambda req, ex: srv._reply(req, {'ok': True, 'execution': {'stdout': 5}})",
            survived, True),
    Attempt("forged-payload-path", "channel",
            _FIND_SERVER + "srv._retrieve = lambda req, _: ({'ok': True, 'payload': {'format': 'npy', 'path': ctx['secret_file']}}, b'')\nx = 1",
            lambda obs: obs.retrieve_error is not None and canary_intact(obs), True, retrieve="x"),
    Attempt("symlink-payload", "channel",
            _FIND_SERVER + "import os\ndef forged(req, _):\n    path = os.path.join(req['dir'], '0123456789abcdef.npy')\n"
            "    os.symlink(ctx['secret_file'], path)\n    return {'ok': True, 'payload': {'format': 'npy', 'path': path}}, b''\n"
            "srv._retrieve = forged\nx = 1",
            lambda obs: obs.retrieve_error is not None and canary_intact(obs), True, retrieve="x"),
    Attempt("forged-pickle-reply", "channel",
            _FIND_SERVER + _EVIL + "import cloudpickle\nblob = cloudpickle.dumps(Evil())\n"
            "srv._retrieve = lambda req, _: ({'ok': True, 'payload': {'format': 'pickle5', 'main': [0, len(blob)], 'buffers': [], 'recipe': False}}, blob)\nx = 1",
            refused_retrieve, False, retrieve="x"),
    Attempt("forged-recipe-reply", "channel",  # a database the kernel names, opened by the host that rebuilds it
            _FIND_SERVER + "srv._retrieve = lambda req, _: ({'ok': True, 'payload': {'format': 'recipe', "
            "'builder': 'sqlite3.connect', 'args': [ctx['secret_file']]}}, b'')\nx = 1",
            lambda obs: obs.retrieve_error is not None and canary_intact(obs), False, retrieve="x"),
    Attempt("tamper-connection-file", "channel",
            "import os, json\nd = os.path.dirname(os.environ['CAVE_CONTROL_SOCKET'])\nfor n in os.listdir(d):\n"
            "    p = os.path.join(d, n)\n    if n.endswith('.json'):\n        os.remove(p)\n        os.symlink(ctx['secret_file'], p)\n"
            "os._exit(3)",
            lambda obs: survived(obs) and canary_intact(obs), True),
    Attempt("kill-parent", "channel", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('SENT')", survived, None,
            why="the kernel's parent is the host process itself: process mode would kill it"),
    # -- import tricks and getattr chains ---------------------------------------------------------------------
    Attempt("dunder-import-system", "import", "print('RC', __import__('os').system('true'))", printed("RC 0"), False),
    Attempt("importlib-subprocess", "import",
            "import importlib\nprint(importlib.import_module('subprocess').check_output(['echo', 'hi']).decode())",
            failed, False),
    Attempt("builtins-dict-import", "import",
            "import builtins\ns = builtins.__dict__['__import__']('socket').socket(2, 1)\nprint('SOCKET')",
            printed("SOCKET"), False),
    Attempt("subclasses-to-system", "getattr",
            "w = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_wrap_close'][0]\n"
            "print('RC', w.__init__.__globals__['system']('true'))",
            printed("RC 0"), False),
    Attempt("getattr-chain-popen", "getattr",
            "b = getattr(getattr(print, '__self__'), '__import__')\nprint('OUT', getattr(b('o' + 's'), 'pop' + 'en')('echo hi').read().strip())",
            printed("OUT hi"), False),
    Attempt("exec-compiled-socket", "getattr",
            "exec(compile(\"import socket as s\\nc = s.create_connection(('127.0.0.1', ctx['tcp_port']), timeout=2)\\nc.sendall(b'x')\", 'x', 'exec'))",
            nothing_reached("tcp"), False),
    # -- pickles returned to the host -------------------------------------------------------------------------
    Attempt("pickle-reduce-on-retrieve", "pickle", _EVIL + "evil = Evil()", refused_retrieve, False, retrieve="evil"),
    Attempt("pickle-in-dataframe", "pickle", _EVIL + "import pandas as pd\nframe = pd.DataFrame({'x': [Evil()]})",
            refused_retrieve, False, retrieve="frame"),
    Attempt("pickle-in-object-array", "pickle", _EVIL + "import numpy as np\narr = np.array([Evil(), 1], dtype=object)",
            refused_retrieve, False, retrieve="arr"),
]  # fmt: skip


def _kernel_cpu(runtime: Any) -> float:
    """CPU seconds of the runtime's kernel process (0.0 when it is gone)."""
    kernel = runtime._kernel
    try:
        with open(f"/proc/{kernel.signal_pid or kernel.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, AttributeError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _tree_size(runtime: Any) -> int:
    return sum(
        os.path.getsize(os.path.join(d, f))
        for d, _, files in os.walk(runtime.workdir)
        for f in files
        if os.path.isfile(os.path.join(d, f))
    )


def run_attempt(runtime: Runtime, host: HostContext, attempt: Attempt) -> Observed:
    """Run one attempt in ``runtime`` and observe the cell and the host."""

    host.reset()
    execution = runtime.execute(attempt.code, timeout=attempt.timeout)
    obs = Observed(execution, host, runtime)
    if attempt.retrieve:
        try:
            obs.retrieved = runtime.retrieve(attempt.retrieve)
        except Exception as e:
            obs.retrieve_error = e
        if hasattr(obs.retrieved, "close"):  # an escaped pickle opened a file on the host
            obs.retrieved.close()
    if attempt.wait_before_after:
        cpu, size = _kernel_cpu(runtime), _tree_size(runtime)
        time.sleep(attempt.wait_before_after)
        obs.idle_cpu, obs.idle_writes = _kernel_cpu(runtime) - cpu, _tree_size(runtime) - size
    obs.after = runtime.execute("1 + 1", timeout=30)
    if attempt.restart_after:
        runtime.restart()
    return obs
