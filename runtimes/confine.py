"""What runs INSIDE the kernel process before ipykernel loads (``CAVE_KERNEL_SETUP``): the rlimits, dropping
capabilities, no_new_privs, and in sandbox mode the seccomp filter. Nothing here runs in the host."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import platform
import struct
from typing import Any

__all__ = ["kernel_setup", "seccomp_program"]


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
    arch = seccomp_arch()
    nr = 126 if arch is None or arch[0] == "x86_64" else 91  # capset
    if _libc().syscall(nr, hdr_buf, data_buf) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset failed: {os.strerror(err)}")


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


def seccomp_arch() -> tuple[str, dict[str, int]] | None:
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
    arch = seccomp_arch()
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
