"""The system calls a lease's worker may not make, as one policy rendered two ways.

Process-mode workers get it as a BPF program compiled by libseccomp (Debian ``libseccomp2``,
through ctypes: the filter's architecture checks and syscall numbering stay libseccomp's job)
and loaded by bubblewrap; container-mode workers get the same policy as an OCI seccomp profile
that the engine's runtime compiles. Everything else is allowed: the worker is already an
unprivileged uid with no capabilities, so the list removes kernel surface that needs none
(namespaces, io_uring, userfaultfd, bpf, perf, keyrings) and names what needs privileges anyway
(mount, modules, kexec, ptrace) so a refusal never depends on a capability check alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import platform
from typing import Any

from radium.errors import SandboxError

__all__ = ["CLONE_NEW", "DENIED", "ENOSYS_CALLS", "bpf", "oci_profile"]

#: Refused with EPERM.
DENIED = (
    # mounts and the root
    "mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr",
    # other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    # namespaces (clone with CLONE_NEW* flags is refused below)
    "unshare", "setns",
    # the kernel itself
    "bpf", "perf_event_open", "kexec_load", "kexec_file_load", "reboot",
    "init_module", "finit_module", "delete_module", "syslog", "acct", "swapon", "swapoff",
    "iopl", "ioperm", "quotactl", "lookup_dcookie", "open_by_handle_at", "name_to_handle_at",
    # keyrings, io_uring, userfaultfd: wide kernel surface no worker needs
    "keyctl", "add_key", "request_key", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "userfaultfd",
)  # fmt: skip
#: clone(2) flags that create namespaces.
CLONE_NEW = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
#: clone3 passes its flags in memory a filter cannot read: ENOSYS makes libc fall back to clone.
ENOSYS_CALLS = ("clone3",)

_ACT_ALLOW = 0x7FFF0000
_ACT_ERRNO = 0x00050000
_CMP_MASKED_EQ = 7
_OCI_ARCHES = {
    "x86_64": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
    "aarch64": ["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"],
}


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def _library() -> Any:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        raise SandboxError(
            f"libseccomp is not installed ({exc})", hint="apt-get install libseccomp2"
        ) from exc
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    ]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


def _add(lib: Any, ctx: int, action: int, name: str, cmp: _ArgCmp | None = None) -> None:
    number = lib.seccomp_syscall_resolve_name(name.encode())
    if number < 0:
        return  # not a system call of this architecture
    result = lib.seccomp_rule_add_array(
        ctx, action, number, 1 if cmp else 0, ctypes.byref(cmp) if cmp else None
    )
    if result < 0:
        raise SandboxError(f"libseccomp refused the rule for {name}: {os.strerror(-result)}")


def bpf() -> bytes:
    """The policy as a BPF program for ``bwrap --seccomp`` (native architecture; others killed)."""
    lib = _library()
    ctx = lib.seccomp_init(_ACT_ALLOW)
    if not ctx:
        raise SandboxError("libseccomp could not create a filter")
    read_end, write_end = os.pipe()
    try:
        for name in DENIED:
            _add(lib, ctx, _ACT_ERRNO | errno.EPERM, name)
        for flag in CLONE_NEW.values():
            _add(
                lib, ctx, _ACT_ERRNO | errno.EPERM, "clone", _ArgCmp(0, _CMP_MASKED_EQ, flag, flag)
            )
        for name in ENOSYS_CALLS:
            _add(lib, ctx, _ACT_ERRNO | errno.ENOSYS, name)
        result = lib.seccomp_export_bpf(ctx, write_end)
        if result < 0:
            raise SandboxError(f"libseccomp could not export the filter: {os.strerror(-result)}")
        os.close(write_end)
        write_end = -1
        chunks = []
        while chunk := os.read(read_end, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        lib.seccomp_release(ctx)
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


def oci_profile() -> dict[str, Any]:
    """The same policy as an OCI/docker seccomp profile (``--security-opt seccomp=...``)."""
    clone_rules = [
        {
            "names": ["clone"],
            "action": "SCMP_ACT_ERRNO",
            "errnoRet": errno.EPERM,
            "args": [{"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}],
        }
        for flag in CLONE_NEW.values()
    ]
    return {
        "defaultAction": "SCMP_ACT_ALLOW",
        # Every ABI of this machine: a 32-bit syscall must not slip past the names below.
        "architectures": _OCI_ARCHES.get(platform.machine(), []),
        "syscalls": [
            {"names": list(DENIED), "action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM},
            *clone_rules,
            {"names": list(ENOSYS_CALLS), "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS},
        ],
    }
