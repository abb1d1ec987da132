"""A lease's driver libraries in a real bubblewrap sandbox: a library outside the host view is
there read-only under the name the loader cache gives it; one inside the view is bound again,
read-only; both read as the worker's unprivileged uid."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from integration.host import need_root
from radium.acceptor.hostview import host_view, python_paths
from radium.acceptor.sandbox import Sandbox, Tenant
from radium.configtree import SandboxConfig

UID = 200091


def test_driver_libraries_outside_the_view_are_bound_read_only(tmp_path: Path) -> None:
    need_root()
    lib = tmp_path / "opt/nvidia/lib64"  # under /tmp: the sandbox's /tmp is its own tmpfs
    lib.mkdir(parents=True)
    real = lib / "libcuda.so.580.159.04"
    real.write_text("the driver\n")
    real.chmod(0o644)
    os.symlink(real.name, lib / "libcuda.so.1")
    shown = tmp_path / "view/lib"  # in the host view: bound again, read-only, on top of it
    shown.mkdir(parents=True)
    (shown / "libnvidia-ml.so.580.159.04").write_text("nvml\n")
    (shown / "libnvidia-ml.so.580.159.04").chmod(0o644)
    os.symlink("libnvidia-ml.so.580.159.04", shown / "libnvidia-ml.so.1")
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, UID, UID)
    libraries = (
        (str(lib / "libcuda.so.1"), str(real)),
        (str(shown / "libnvidia-ml.so.1"), str(shown / "libnvidia-ml.so.580.159.04")),
    )
    tenant = Tenant("l-lib", UID, home, libraries=libraries)
    script = (
        f"cat {lib}/libcuda.so.1; readlink {lib}/libcuda.so.1; "
        f"(echo x >> {real}) 2>/dev/null && echo writable || echo read-only; "
        f"ls {lib}; cat {shown}/libnvidia-ml.so.1; "
        f"(echo x >> {shown}/libnvidia-ml.so.1) 2>/dev/null && echo writable || echo read-only; "
        "id -u"
    )
    lines = run_in_sandbox(tmp_path, tenant, script, [str(tmp_path / "view")])
    assert lines == [
        "the driver",
        str(real),
        "read-only",
        "libcuda.so.1",
        "libcuda.so.580.159.04",
        "nvml",
        "read-only",
        str(UID),
    ]
    assert real.read_text() == "the driver\n"


def test_the_worker_s_user_is_found_by_name_and_by_id(tmp_path: Path) -> None:
    # getpass.getuser() (torch's cache directories) asks USER, then the passwd database. The
    # sandbox's /etc/passwd was bound 0600 (bubblewrap's default for data), so no lookup found
    # the worker: a remoted CNN's training failed on the H100 with "uid not found".
    need_root()
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, UID, UID)
    script = (
        "echo $USER $LOGNAME; id -un; getent passwd $(id -u) | cut -d: -f1,6; "
        "grep '^passwd' /etc/nsswitch.conf"
    )
    lines = run_in_sandbox(tmp_path, Tenant("l-user", UID, home), script, [])
    assert lines == ["worker worker", "worker", "worker:/lease", "passwd: files"]


def run_in_sandbox(tmp_path: Path, tenant: Tenant, script: str, more_view: list[str]) -> list[str]:
    """``script`` run by ``/bin/sh`` in ``tenant``'s sandbox: its output's lines."""
    out = tmp_path / "out"
    keep_read, keep_write = os.pipe()
    view = host_view([*python_paths(), *more_view])
    sandbox = Sandbox(SandboxConfig(), view)  # held: its forking thread's end kills the sandbox
    with out.open("wb") as output:
        process = sandbox.spawn(
            tenant, ["/bin/sh", "-c", script], keep_write, lambda pid: None, output.fileno()
        )
        try:
            assert process.wait(timeout=60) == 0, out.read_text()
        except subprocess.TimeoutExpired:
            process.kill()
            raise
        finally:
            os.close(keep_read)
            os.close(keep_write)
    return out.read_text().splitlines()
