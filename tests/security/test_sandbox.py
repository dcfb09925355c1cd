"""The run modes themselves: registration, refusal when a mechanism is missing, objects still arriving in
the jail, interrupts through the jail, limits reported, nothing left running after close."""

from __future__ import annotations

import os
import stat
import time

import numpy as np
import pandas as pd
import psutil
import pytest
import sqlalchemy as sa
from cave.runtimes import (
    MODES,
    InProcessRuntime,
    ProcessRuntime,
    SandboxRuntime,
    SandboxUnavailable,
    TrustedRuntime,
    create_runtime,
    runtime_for_mode,
)
from cave.runtimes import process as process_mod
from cave.runtimes import sandbox as sandbox_mod
from cave.runtimes.base import TransferError

from tests.security.attempts import require_sandbox

pytestmark = pytest.mark.timeout(120)


def test_modes_are_registered_runtimes():
    assert MODES == ("trusted", "process", "sandbox")
    trusted = runtime_for_mode("trusted")
    assert isinstance(trusted, TrustedRuntime) and isinstance(trusted, InProcessRuntime)
    assert trusted.execute("1 + 1").result == "2"
    with pytest.warns(UserWarning) if os.geteuid() == 0 and not process_mod._pids_cgroup_dirs() else _nothing():
        process = create_runtime("process", timeout=5)
    assert isinstance(process, ProcessRuntime) and process.name == "process"
    process.close()  # never started: closing is still clean
    with pytest.raises(ValueError, match="use one of: trusted, process, sandbox"):
        runtime_for_mode("jail")


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_sandbox_refuses_without_bubblewrap(monkeypatch):
    monkeypatch.setattr(sandbox_mod.shutil, "which", lambda name: None)
    with pytest.raises(SandboxUnavailable) as info:
        SandboxRuntime()
    assert "bubblewrap (bwrap) is not on PATH" in str(info.value)
    assert "apt-get install -y bubblewrap" in str(info.value)


def test_sandbox_refuses_when_user_namespaces_are_disabled(tmp_path, monkeypatch):
    # A bwrap that fails the way a real one does when unprivileged user namespaces are off.
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    sandbox_mod._namespaces_problem.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable) as info:
            SandboxRuntime()
    finally:
        sandbox_mod._namespaces_problem.cache_clear()
    message = str(info.value)
    assert "No permissions to creating new namespace" in message
    assert "unprivileged_userns_clone" in message and "max_user_namespaces" in message


def test_sandbox_refuses_host_state_options():
    require_sandbox()
    with pytest.raises(ValueError, match="inherit_env=True would hand host state"):
        SandboxRuntime(inherit_env=True)


def test_seccomp_program_is_well_formed():
    if sandbox_mod.seccomp_arch() is None:
        pytest.skip("no seccomp table for this architecture")
    prog = sandbox_mod.seccomp_program()
    assert prog[0] == (0x20, 0, 0, 4)  # load the architecture first
    assert prog[-1] == (0x06, 0, 0, 0x80000000)  # a foreign architecture kills the process
    for i, (code, jt, jf, _) in enumerate(prog):
        if code & 0x07 == 0x05:  # jumps stay inside the program
            assert i + 1 + max(jt, jf) < len(prog)
    assert len(prog) < 256


@pytest.fixture(scope="module")
def jail(tmp_path_factory):
    require_sandbox()
    workdir = tmp_path_factory.mktemp("jail-work")
    runtime = SandboxRuntime(timeout=20, workdir=str(workdir), interrupt_grace_s=1.0)
    yield runtime
    runtime.close()


def test_objects_still_arrive_in_the_jail(jail):
    df = pd.DataFrame({"region": ["n", "s", "n"], "revenue": [1.5, 2.0, 3.5]})
    jail.inject("sales", df, description="one row per order")
    jail.inject("weights", np.arange(6.0).reshape(2, 3))
    ex = jail.execute("by_region = sales.groupby('region', as_index=False)['revenue'].sum()\nfloat(weights.sum())")
    assert ex.ok, ex.error
    assert ex.result == "15.0"
    back = jail.retrieve("by_region")  # Arrow: the safe format, no unpickling
    assert back.to_dict("list") == {"region": ["n", "s"], "revenue": [5.0, 2.0]}
    assert jail.retrieve("weights").shape == (2, 3)
    jail.execute("summary = {'rows': 3, 'regions': ['n', 's']}")
    assert jail.retrieve("summary") == {"rows": 3, "regions": ["n", "s"]}
    jail.execute("import numpy as np\nodd = {1, 2}\nmean = np.float64(2.5)\nclass Point:\n    x = 1\npoint = Point()")
    assert jail.retrieve("odd") == {1, 2} and type(jail.retrieve("mean")).__name__ == "float64"  # tagged JSON
    with pytest.raises(TransferError, match="no safe format"):
        jail.retrieve("point")  # a class of the kernel's own: only a pickle could bring it, and those are refused


def test_an_engine_arrives_by_recipe_when_its_file_is_in_the_workdir(jail):
    db = os.path.join(jail.workdir, "shop.db")
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(sa.text("create table orders (id integer, total real)"))
        conn.execute(sa.text("insert into orders values (1, 9.5), (2, 0.5)"))
    jail.inject("db", engine)
    ex = jail.execute(
        "import sqlalchemy as sa\nwith db.connect() as c:\n    n = c.execute(sa.text('select sum(total) from orders')).scalar()\nn"
    )
    assert ex.result == "10.0", ex.error


def test_files_the_code_writes_in_its_workdir_reach_the_host(jail):
    assert jail.execute("open('report.txt', 'w').write('done')").ok
    with open(os.path.join(jail.workdir, "report.txt")) as f:
        assert f.read() == "done"


def test_interrupt_reaches_the_kernel_through_the_jail(jail):
    t0 = time.perf_counter()
    ex = jail.execute("import time\ntime.sleep(30)", timeout=1)
    assert ex.timed_out and ex.recovery == "interrupted", ex  # not a restart: SIGINT got through
    assert time.perf_counter() - t0 < 5
    assert jail.execute("1 + 1").result == "2"


def test_jail_identity_and_environment(jail):
    ex = jail.execute(
        "import os, socket\n(os.getuid(), socket.gethostname(), os.environ['HOME'], "
        "sorted(k for k in os.environ if not k.startswith(('CAVE_', 'JUPYTER', 'MPL', 'IPYTHON', 'PYTHON'))))"
    )
    uid, hostname, home, keys = eval(ex.result)
    assert (uid, hostname, home) == (1000, "cave-sandbox", jail.workdir)
    assert set(keys) <= {"ARROW_DEFAULT_MEMORY_POOL", "CLICOLOR", "CLICOLOR_FORCE", "FORCE_COLOR", "GIT_PAGER",
                         "HOME", "LANG", "LOGNAME", "PAGER", "PATH", "PWD", "TERM", "TMPDIR", "USER",
                         "PYDEVD_USE_FRAME_EVAL"}  # fmt: skip
    status = jail.execute("print(open('/proc/self/status').read())").stdout
    assert "NoNewPrivs:\t1" in status and "CapEff:\t0000000000000000" in status
    assert "Seccomp:\t2" in status


def test_limits_say_what_is_enforced(jail):
    limits = jail.limits
    assert limits["max_processes"][1] == "seccomp: no new processes"
    assert limits["network"].startswith("none")
    assert limits["memory_limit_mb"] == 2048


def test_nothing_is_left_running_after_close(tmp_path):
    require_sandbox()
    runtime = SandboxRuntime(timeout=10)
    runtime.execute("import threading, time\nthreading.Thread(target=time.sleep, args=(600,)).start()")
    kernel = runtime._kernel
    pids = {kernel.pid, kernel.signal_pid}
    assert all(psutil.pid_exists(p) for p in pids)
    runtime.close()
    deadline = time.time() + 5
    while time.time() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_an_object_from_a_module_the_jail_cannot_see_says_how_to_show_it(jail, tmp_path):
    import sys

    (tmp_path / "jail_hidden_mod.py").write_text("def f():\n    return 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import jail_hidden_mod

        with pytest.raises(TransferError, match=r"ro_paths=\[folder\]"):
            jail.inject_function(jail_hidden_mod.f)
    finally:
        sys.path.remove(str(tmp_path))
    assert "f" not in jail.registered


def test_an_engine_whose_file_the_jail_cannot_see_is_refused_at_inject(jail, tmp_path):
    db = tmp_path / "outside.db"  # not in the jail: SQLite would have made an empty database in its place
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(sa.text("create table t (x integer)"))
    with pytest.raises(TransferError, match="ro_paths"):
        jail.inject("outside_db", engine)
    assert jail.execute("'outside_db' in dir()").result == "False"


def test_a_sibling_sandbox_has_the_same_options_and_folders_but_its_own_workdir(tmp_path):
    require_sandbox()
    shown = tmp_path / "shown"
    shown.mkdir()
    (shown / "data.csv").write_text("x\n1\n2\n")
    later = tmp_path / "later"
    later.mkdir()
    (later / "note.txt").write_text("exposed after start")
    work = tmp_path / "work"
    runtime = SandboxRuntime(timeout=20, workdir=str(work), ro_paths=[str(shown)], env={"CAVE_T": "1"})
    runtime.expose([str(later)])
    runtime.inject("n", 3)
    sibling = runtime.sibling()
    try:
        assert type(sibling) is SandboxRuntime and sibling.timeout == 20 and sibling.registered == {}
        assert sibling.workdir != runtime.workdir and str(later) in sibling.ro_paths
        code = (
            f"import os\nrows = open({str(shown / 'data.csv')!r}).read().count(chr(10))\n"
            f"note = open({str(later / 'note.txt')!r}).read()\nenv = os.environ.get('CAVE_T')\n"
            "open('mine.txt', 'w').write('x')"
        )
        ex = sibling.execute(code)
        assert ex.ok, ex.error
        assert sibling.retrieve("rows") == 3 and sibling.retrieve("note") == "exposed after start"
        assert sibling.retrieve("env") == "1" and not (work / "mine.txt").exists()
    finally:
        sibling.close()
        runtime.close()
