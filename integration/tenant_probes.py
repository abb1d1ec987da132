"""What a hostile tenant tries from inside its lease's worker.

The tests name these functions in ``RADIUM_REMOTE`` (``tenant_probes:attack``...), so the
interposer ships this file to the worker and runs them there, as any tenant's code would run.
Stdlib only: it runs on the acceptor's Python and inside images. Each probe answers
``"yes: ..."`` when the attempt worked and ``"no: ..."`` with what stopped it.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import socket
import subprocess
import sys
import tempfile
from typing import Any, Callable, Dict, List

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
PTRACE_SEIZE = 0x4206
INIT_MODULE = {"x86_64": 175, "aarch64": 105}


class Refused(Exception):
    """The attempt did not work, for a reason that is not an OSError."""


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> str:
    if result != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return what


def _in_child(code: str) -> str:
    """Run ``code`` in a child Python (it may leave namespaces or tracees behind it)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        raise Refused((done.stderr.strip().splitlines() or ["failed"])[-1])
    return done.stdout.strip()


def root(t: Dict[str, Any]) -> str:
    if os.getuid() != 0:
        raise Refused(f"uid {os.getuid()}")
    return "uid 0"


def setuid_root(t: Dict[str, Any]) -> str:
    os.setuid(0)
    return "setuid(0)"


def _read(path: str) -> str:
    with open(path, "rb") as f:
        return f"read {len(f.read())} bytes of {path}"


def read_config(t: Dict[str, Any]) -> str:
    return _read(t["config"])


def read_pool_db(t: Dict[str, Any]) -> str:
    return _read(t["pool_db"])


def read_other_credential(t: Dict[str, Any]) -> str:
    with open(t["other_record"]) as f:
        if "credential" not in f.read():
            raise Refused("no credential in it")
    return "read another lease's credential"


def list_slots(t: Dict[str, Any]) -> str:
    return f"{len(os.listdir(t['slots']))} slots listed"


def read_other_memory(t: Dict[str, Any]) -> str:
    pid = t["victim_pid"]
    with open(f"/proc/{pid}/maps") as maps:
        start = next(int(line.split("-")[0], 16) for line in maps if line.split()[1][0] == "r")
    with open(f"/proc/{pid}/mem", "rb") as memory:
        memory.seek(start)
        return f"read {len(memory.read(64))} bytes of pid {pid}'s memory"


def signal_other(t: Dict[str, Any]) -> str:
    os.kill(t["victim_pid"], 0)
    return f"may signal pid {t['victim_pid']}"


def ptrace_other(t: Dict[str, Any]) -> str:
    return _in_child(
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"if libc.ptrace({PTRACE_SEIZE}, {t['victim_pid']}, 0, 0) != 0:\n"
        "    raise SystemExit('ptrace: ' + os.strerror(ctypes.get_errno()))\n"
        f"print('seized pid {t['victim_pid']}')\n"
    )


def _connect(address: str) -> str:
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=3):
        return f"connected to {address}"


def connect_pool(t: Dict[str, Any]) -> str:
    return _connect(t["pool"])


def connect_acceptor(t: Dict[str, Any]) -> str:
    return _connect(t["data_plane"])


def connect_outside(t: Dict[str, Any]) -> str:
    return _connect(t["outside"])


def interfaces(t: Dict[str, Any]) -> str:
    names = sorted(name for _, name in socket.if_nameindex())
    if names == ["lo"]:
        raise Refused("only lo")
    return ",".join(names)


def host_processes(t: Dict[str, Any]) -> str:
    pid = t["acceptor_pid"]
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            seen = b"acceptor" in f.read()
    except OSError:
        seen = False
    if not seen:
        count = sum(1 for name in os.listdir("/proc") if name.isdigit())
        raise Refused(f"the acceptor is not visible ({count} processes visible)")
    return f"sees the acceptor, pid {pid}"


def _write(path: str) -> str:
    with open(path, "x") as f:
        f.write("written by a tenant\n")
    return f"wrote {path}"


def write_etc(t: Dict[str, Any]) -> str:
    return _write(t["write_etc"])


def write_usr(t: Dict[str, Any]) -> str:
    return _write(t["write_usr"])


def write_state(t: Dict[str, Any]) -> str:
    return _write(t["write_state"])


def mount(t: Dict[str, Any]) -> str:
    libc = _libc()
    target = tempfile.mkdtemp().encode()
    _check(libc.mount(b"none", target, b"tmpfs", 0, None), "")
    libc.umount2(target, 0)
    return "mounted a tmpfs"


def load_module(t: Dict[str, Any]) -> str:
    number = INIT_MODULE[platform.machine()]
    image = ctypes.create_string_buffer(64)
    if _libc().syscall(number, image, 64, b"") == 0:
        return "loaded a module"
    error = ctypes.get_errno()
    if error == errno.EPERM:
        raise OSError(error, os.strerror(error))
    # Past every permission check (a garbage image, or a kernel built without modules, stops
    # it after them): nothing but the kernel's own limits stood in the way.
    return f"not refused by any permission check ({errno.errorcode.get(error, error)})"


def create_namespace(t: Dict[str, Any]) -> str:
    flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET
    return _in_child(
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"if libc.unshare({flags}) != 0:\n"
        "    raise SystemExit('unshare: ' + os.strerror(ctypes.get_errno()))\n"
        "print('new user, mount and network namespaces')\n"
    )


PROBES: Dict[str, Callable[[Dict[str, Any]], str]] = {
    f.__name__: f
    for f in (
        root, setuid_root, read_config, read_pool_db, read_other_credential, list_slots,
        read_other_memory, signal_other, ptrace_other, connect_pool, connect_acceptor,
        connect_outside, interfaces, host_processes, write_etc, write_usr, write_state, mount,
        load_module, create_namespace,
    )
}  # fmt: skip


def attack(targets: Dict[str, Any]) -> Dict[str, str]:
    """Every probe, in this worker: ``{name: "yes: ..." | "no: ..."}``."""
    results = {}
    for name, probe in PROBES.items():
        try:
            results[name] = "yes: " + probe(targets)
        except Refused as exc:
            results[name] = f"no: {exc}"
        except OSError as exc:
            results[name] = f"no: {errno.errorcode.get(exc.errno or 0, '?')} {exc.strerror}"
        except Exception as exc:  # a probe's own failure still says "no" and why
            results[name] = f"no: {type(exc).__name__}: {exc}"
    return results


def workspace() -> Dict[str, str]:
    """What the lease may use: its own scratch (/tmp, /dev/shm) and home, written and read back."""
    results = {}
    for where in ("/tmp", "/dev/shm", os.path.expanduser("~")):
        try:
            with tempfile.NamedTemporaryFile(dir=where) as f:
                f.write(b"scratch")
                f.flush()
                f.seek(0)
                results[where] = "ok" if f.read() == b"scratch" else "corrupt"
        except OSError as exc:
            results[where] = f"{errno.errorcode.get(exc.errno or 0, '?')} {exc.strerror}"
    return results


def fork_bomb(limit: int) -> int:
    """Start up to ``limit`` processes; how many it got (all are killed again)."""
    children: List[subprocess.Popen[bytes]] = []
    try:
        for _ in range(limit):
            children.append(subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL))
    except OSError:
        pass
    finally:
        for child in children:
            child.kill()
        for child in children:
            child.wait()
    return len(children)


def memory_bomb(mib: int) -> int:
    """Touch up to ``mib`` MiB in 16 MiB steps; how far it got (a cap may kill it first)."""
    held = []
    try:
        for _ in range(mib // 16):
            held.append(b"\x01" * (16 << 20))
    except MemoryError:
        pass
    return len(held) * 16
