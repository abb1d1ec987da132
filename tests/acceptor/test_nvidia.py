"""The NVIDIA backend against a stand-in NVML (no GPU here): discovery, health, pinning by UUID,
the device nodes and driver libraries an NVIDIA lease's sandbox gets (fixture /dev and library
trees, a loader cache written in glibc's format), and errors of one line."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from radium.acceptor.devices import CpuBackend
from radium.acceptor.ldcache import MAGIC, entries
from radium.acceptor.nvidia import NvmlBackend
from radium.acceptor.nvidia_files import driver_libraries, nvidia_nodes
from radium.acceptor.sandbox import HostView, Sandbox, Tenant
from radium.configtree import SandboxConfig
from radium.errors import DeviceError
from tests.acceptor.fake_nvml import FakeGpu, FakeNvml

UUID0, UUID1 = (
    "GPU-3f6030b9-a1e1-e569-82f4-fca1785843ac",
    "GPU-0b6f8e2c-5d1a-4c3e-9f00-1a2b3c4d5e6f",
)
X86_64, I386 = 0x0303, 0x0003
FDS = {"seccomp": 11, "passwd": 12, "group": 13, "nsswitch": 16, "info": 14, "block": 15}


def two_gpus() -> FakeNvml:
    return FakeNvml(FakeGpu(UUID0, minor=0), FakeGpu(UUID1, minor=1, mig=[1, 1]))


def test_discovery_labels_each_gpu_and_pins_workers_by_uuid() -> None:
    backend = NvmlBackend(two_gpus())
    devices = backend.devices()
    assert [(d.id, d.vendor, d.model, d.memory_mib) for d in devices] == [
        ("0", "nvidia", "NVIDIA H100 80GB HBM3", 81920),
        ("1", "nvidia", "NVIDIA H100 80GB HBM3", 81920),
    ]
    assert dict(devices[1].labels) == {
        "backend": "nvml", "uuid": UUID1, "mig": "enabled", "minor": "1", "health": "ok",
    }  # fmt: skip
    assert devices[0].labels["mig"] == "disabled"
    assert backend.visible_devices_env(["1"]) == {
        "CUDA_VISIBLE_DEVICES": UUID1,
        "NVIDIA_VISIBLE_DEVICES": UUID1,
    }
    assert backend.visible_devices_env(["1", "0"])["CUDA_VISIBLE_DEVICES"] == f"{UUID1},{UUID0}"
    assert [(g.uuid, g.mig_enabled) for g in backend.gpus(["0", "1"])] == [
        (UUID0, False),
        (UUID1, True),
    ]


def test_a_gpu_without_mig_support_says_so() -> None:
    backend = NvmlBackend(FakeNvml(FakeGpu(UUID0, minor=0, mig=None)))
    assert backend.devices()[0].labels["mig"] == "unsupported"


@pytest.mark.parametrize(
    ("trouble", "health"),
    [
        ({"lost": True}, "NVML cannot query it: GPU is lost"),
        ({"retired_pending": 1}, "retired memory pages pending: reset the GPU"),
        ({"rows": (0, 1, 1, 0)}, "memory row remapping pending: reset the GPU"),
        ({"rows": (0, 9, 0, 1)}, "memory row remapping failed"),
        ({"volatile_uncorrected": 2}, "2 uncorrectable ECC errors since the driver loaded"),
    ],
)
def test_an_unhealthy_gpu_is_not_offered(trouble: dict[str, object], health: str) -> None:
    nvml = two_gpus()
    backend = NvmlBackend(nvml)
    assert [d.id for d in backend.devices()] == ["0", "1"]
    for name, value in trouble.items():
        setattr(nvml.gpus[0], name, value)
    assert [d.id for d in backend.devices()] == ["1"]  # checked anew at each call
    assert [(g.id, g.health) for g in backend.gpus()] == [("0", health), ("1", "ok")]


def test_checks_a_gpu_does_not_support_are_skipped() -> None:
    backend = NvmlBackend(FakeNvml(FakeGpu(UUID0, minor=0, retired_pending=None)))
    assert [g.health for g in backend.gpus()] == ["ok"]


def test_nvml_errors_are_one_line_device_errors() -> None:
    with pytest.raises(DeviceError) as failed:
        NvmlBackend(FakeNvml(init_fails=True))
    assert failed.value.one_line().startswith("NVML cannot start: Driver Not Loaded; check")
    assert "\n" not in failed.value.one_line()
    with pytest.raises(DeviceError, match="this acceptor has no GPU 7"):
        NvmlBackend(two_gpus()).visible_devices_env(["7"])


def fixture_dev(root: Path) -> None:
    """A host with GPUs 0 and 1: their nodes, the control nodes, modeset and MIG caps."""
    names = ["nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"]
    (root / "dev/nvidia-caps").mkdir(parents=True)
    for name in [*names, "nvidia-modeset", "nvidia-caps/nvidia-cap1", "null"]:
        (root / "dev" / name).write_text("")


def write_cache(root: Path, listed: list[tuple[int, str, str]]) -> None:
    """``root``'s /etc/ld.so.cache in glibc's new format: (flags, name, path) entries."""
    strings, offsets = b"", []
    base = 48 + 24 * len(listed)  # header, entries, then the strings
    for _, name, path in listed:
        offsets.append((base + len(strings), base + len(strings) + len(name) + 1))
        strings += name.encode() + b"\0" + path.encode() + b"\0"
    data = struct.pack(f"<{len(MAGIC)}sIIB3xI12x", MAGIC, len(listed), len(strings), 0, 0)
    for (flags, _, _), (key, value) in zip(listed, offsets):
        data += struct.pack("<iIIIQ", flags, key, value, 0, 0)
    (root / "etc").mkdir(parents=True, exist_ok=True)
    (root / "etc/ld.so.cache").write_bytes(data + strings)


def fixture_libraries(root: Path) -> None:
    """The lent GPU machine's layout: the driver in /usr/local/nvidia/lib64 and, through the
    merged-/usr /lib, /lib/libcuda.so.1 again; a driver in /opt too, and a 32-bit build."""
    lib64, opt = root / "usr/local/nvidia/lib64", root / "opt/nvidia/lib"
    for directory in (lib64, opt, root / "usr/lib/i386-linux-gnu", root / "usr/lib/x86_64"):
        directory.mkdir(parents=True, exist_ok=True)
    os.symlink("usr/lib", root / "lib")
    for lib in ("libcuda", "libnvidia-ml", "libnvidia-ptxjitcompiler", "libnvidia-glcore"):
        name = f"{lib}.so.580.159.04"
        (lib64 / name).write_text("elf")
        os.symlink(name, lib64 / f"{lib}.so.1")
    (opt / "libnvidia-nvvm.so.580.159.04").write_text("elf")
    os.symlink("libnvidia-nvvm.so.580.159.04", opt / "libnvidia-nvvm.so.4")
    os.symlink("/usr/local/nvidia/lib64/libcuda.so.1", root / "usr/lib/libcuda.so.1")
    (root / "usr/lib/i386-linux-gnu/libcuda.so.1").write_text("elf32")
    (root / "usr/lib/x86_64/libz.so.1").write_text("elf")
    nv = "/usr/local/nvidia/lib64"
    write_cache(root, [
        (X86_64, "libz.so.1", "/usr/lib/x86_64/libz.so.1"),
        (X86_64, "libnvidia-ptxjitcompiler.so.1", f"{nv}/libnvidia-ptxjitcompiler.so.1"),
        (X86_64, "libnvidia-nvvm.so.4", "/opt/nvidia/lib/libnvidia-nvvm.so.4"),
        (X86_64, "libnvidia-ml.so.1", f"{nv}/libnvidia-ml.so.1"),
        (X86_64, "libnvidia-glcore.so.1", f"{nv}/libnvidia-glcore.so.1"),  # graphics: not ours
        (X86_64, "libcuda.so.1", f"{nv}/libcuda.so.1"),
        (X86_64, "libcuda.so.1", "/lib/libcuda.so.1"),
        (I386, "libcuda.so.1", "/usr/lib/i386-linux-gnu/libcuda.so.1"),
        (X86_64, "libcudart.so.12", f"{nv}/libcudart.so.12"),  # the toolkit's, and stale
    ])  # fmt: skip


def test_driver_libraries_are_found_through_the_loader_cache(tmp_path: Path) -> None:
    fixture_libraries(tmp_path)
    nv = "/usr/local/nvidia/lib64"
    assert driver_libraries(tmp_path, machine="x86_64") == [
        (f"{nv}/libnvidia-ptxjitcompiler.so.1", f"{nv}/libnvidia-ptxjitcompiler.so.580.159.04"),
        ("/opt/nvidia/lib/libnvidia-nvvm.so.4", "/opt/nvidia/lib/libnvidia-nvvm.so.580.159.04"),
        (f"{nv}/libnvidia-ml.so.1", f"{nv}/libnvidia-ml.so.580.159.04"),
        (f"{nv}/libcuda.so.1", f"{nv}/libcuda.so.580.159.04"),
        ("/lib/libcuda.so.1", f"{nv}/libcuda.so.580.159.04"),  # an absolute link, in root
    ]


def test_an_nvidia_lease_s_sandbox_gets_its_nodes_and_the_driver_read_only(
    tmp_path: Path,
) -> None:
    fixture_dev(tmp_path)
    fixture_libraries(tmp_path)
    backend = NvmlBackend(two_gpus(), root=tmp_path)
    nodes = backend.device_nodes(["1"])
    assert nodes == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia1"]
    view = HostView(binds=("/usr", "/etc/ld.so.cache"), links=(("usr/lib", "/lib"),))
    box = Sandbox(SandboxConfig(), view, bwrap="bwrap", setpriv="setpriv")
    libraries = tuple(driver_libraries(tmp_path, machine="x86_64"))
    tenant = Tenant("l-1", 200001, Path("/h"), devices=tuple(nodes), libraries=libraries)
    args = box.command(tenant, ["python"], FDS)
    dev = [(args[i + 1], args[i + 2]) for i, a in enumerate(args) if a == "--dev-bind"]
    assert dev == [(n, n) for n in nodes]
    of_view = {("--ro-bind", b, b) for b in view.binds} | {("--symlink", *x) for x in view.links}
    mounts = [
        tuple(args[i : i + 3])
        for i, a in enumerate(args)
        if a in ("--ro-bind", "--symlink") and tuple(args[i : i + 3]) not in of_view
    ]
    nv = "/usr/local/nvidia/lib64"
    nvvm = "/opt/nvidia/lib/libnvidia-nvvm.so"
    assert mounts == [
        ("--ro-bind", *[f"{nv}/libnvidia-ptxjitcompiler.so.580.159.04"] * 2),
        ("--ro-bind", *[f"{nvvm}.580.159.04"] * 2),
        ("--ro-bind", *[f"{nv}/libnvidia-ml.so.580.159.04"] * 2),
        ("--ro-bind", *[f"{nv}/libcuda.so.580.159.04"] * 2),  # once, though named twice
        # /opt is not in the view: the name the loader looks up is made there
        ("--symlink", f"{nvvm}.580.159.04", f"{nvvm}.4"),
    ]
    made = [args[i + 1] for i, a in enumerate(args) if a == "--dir"]
    assert {"/opt", "/opt/nvidia", "/opt/nvidia/lib"} <= set(made)
    assert not [d for d in made if d.startswith("/usr")]  # the view shows /usr already
    # no other GPU's node, no MIG capabilities, nothing writable of the driver
    assert not [a for a in args if "nvidia0" in a or "nvidia-caps" in a or "modeset" in a]
    assert not [a for i, a in enumerate(args) if a == "--bind" and "nvidia" in args[i + 1]]


def test_cpu_leases_get_no_device_files() -> None:
    cpu = CpuBackend(2, 1024)
    assert cpu.device_nodes(["cpu0"]) == [] and cpu.driver_files() == [] and cpu.gpus() == []
    assert cpu.processes() is None


def test_node_list_skips_what_the_host_lacks(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/nvidiactl").write_text("")
    (tmp_path / "dev/nvidia3").write_text("")
    assert nvidia_nodes([3, 4], tmp_path) == ["/dev/nvidiactl", "/dev/nvidia3"]


def test_the_cache_reader_agrees_with_ldconfig_on_this_host() -> None:
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"  # libc-bin: on every glibc host
    listed = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, check=True)
    expected = [
        (line.split(" (")[0].strip(), line.split(" => ")[-1])
        for line in listed.stdout.splitlines()
        if " => " in line
    ]
    assert expected and [(e.name, e.path) for e in entries(Path("/"))] == expected


def test_a_broken_cache_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/ld.so.cache").write_bytes(b"garbage")
    with pytest.raises(DeviceError, match="is not a loader cache this acceptor reads"):
        entries(tmp_path)
    with pytest.raises(DeviceError, match="cannot read the loader cache"):
        entries(tmp_path / "nowhere")
