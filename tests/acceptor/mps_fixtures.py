"""What the MPS tests share: the stand-in control binary installed as NVIDIA names it, an
acceptor config that uses it, NVIDIA devices from the stand-in NVML, and a look at what runs."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil

from radium.acceptor.gpu_sharing import Sharing
from radium.acceptor.mps import CONTROL
from radium.acceptor.nvidia import NvmlBackend
from radium.configtree import AcceptorConfig, SandboxConfig
from tests.acceptor.fake_nvml import FakeGpu, FakeNvml

FAKE = Path(__file__).with_name("fake_mps_control.py")
UUIDS = ("GPU-3f6030b9-a1e1-e569-82f4-fca1785843ac", "GPU-00000000-1111-2222-3333-444444444444")


def install_control(directory: Path) -> Path:
    """The stand-in, executable under NVIDIA's name (its process name is the real one's)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / CONTROL
    path.write_text(f"#!{sys.executable}\n" + FAKE.read_text())
    path.chmod(0o755)
    return path


def short_dir() -> Iterator[Path]:
    """A directory of a short path: the daemon's sockets are bound under it (unix socket
    paths are at most 107 bytes, and pytest's own directories are long)."""
    path = Path(tempfile.mkdtemp(prefix="mps-", dir="/tmp"))
    path.chmod(0o711)  # the GPU's worker uid passes through to the pipe directory
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def config(tmp_path: Path, control: Path | str, **keys: object) -> AcceptorConfig:
    sandbox = SandboxConfig(uid_lock_dir=str(tmp_path / "uids"), uid_min=61000, uid_max=61099)
    keys.setdefault("mps_dir", str(tmp_path / "mps"))
    keys.setdefault("sandbox", sandbox)
    return AcceptorConfig(
        state_dir=str(tmp_path / "state"),
        mps_control=str(control),
        **keys,  # type: ignore[arg-type]
    )


def backend(tmp_path: Path | None = None) -> NvmlBackend:
    """Two H100s through the stand-in NVML; the host's own loader cache and /dev (with no
    NVIDIA driver here: no library and no node, which the MPS tests do not need)."""
    return NvmlBackend(FakeNvml(*(FakeGpu(u, i) for i, u in enumerate(UUIDS))))


def commands(sharing: Sharing, device_id: str) -> list[str]:
    """What the stand-in daemon of the GPU recorded: its starts and every command."""
    return (sharing.daemons[device_id].log / "commands").read_text().splitlines()


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has ended: its reaper is init's business)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
