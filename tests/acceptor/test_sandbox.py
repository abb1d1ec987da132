"""The worker sandbox's pure parts: what of the host it shows, bubblewrap's argv, the seccomp
policy in both renderings and the engine options. Integration tests run it for real."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from radium.acceptor import seccomp
from radium.acceptor.hostview import HostView, host_view
from radium.acceptor.limits import Share
from radium.acceptor.nvidia_files import nvidia_nodes
from radium.acceptor.sandbox import HOME_TARGET, Sandbox, Tenant
from radium.configtree import SandboxConfig

FDS = {"seccomp": 11, "passwd": 12, "group": 13, "nsswitch": 16, "info": 14, "block": 15}


def fake_root(tmp_path: Path) -> Path:
    """A merged-/usr host (lib, bin links), a separate /lib64 directory, a venv and secrets."""
    root = tmp_path / "root"
    for path in ("usr/lib", "usr/bin", "lib64", "etc/radium", "opt/venv/lib", "var/lib/radium"):
        (root / path).mkdir(parents=True)
    (root / "etc/ld.so.cache").write_text("")
    os.symlink("usr/lib", root / "lib")
    os.symlink("usr/bin", root / "bin")
    return root


def test_host_view_is_an_allow_list_without_repeats(tmp_path: Path) -> None:
    root = fake_root(tmp_path)
    view = host_view(["/opt/venv", "/opt/venv/lib", "/usr/lib/python3", "/nowhere", ""], root)
    assert view.links == (("usr/bin", "/bin"), ("usr/lib", "/lib"))
    assert view.binds == ("/etc/ld.so.cache", "/lib64", "/opt/venv", "/usr")
    assert not [b for b in view.binds if b.startswith(("/etc/radium", "/var", "/etc/passwd"))]


def sandbox(**config: object) -> Sandbox:
    view = HostView(binds=("/usr", "/opt/venv", "/etc/ld.so.cache"), links=(("usr/lib", "/lib"),))
    settings = SandboxConfig(**config)  # type: ignore[arg-type]
    return Sandbox(settings, view, bwrap="/usr/bin/bwrap", setpriv="/usr/bin/setpriv")


def pairs(args: list[str], flag: str) -> list[tuple[str, str]]:
    return [(args[i + 1], args[i + 2]) for i, a in enumerate(args) if a == flag]


def test_bubblewrap_argv_confines_the_tenant() -> None:
    tenant = Tenant(
        lease_id="l-1",
        uid=200007,
        home=Path("/state/slots/l-1/home"),
        env={"RADIUM_LEASE_ID": "l-1"},
        devices=("/dev/nvidia0", "/dev/nvidiactl"),
        share=Share(memory_mib=256, cpus=1.0, processes=64),
    )
    args = sandbox(tmp_mib=1024).command(tenant, ["python", "-m", "w"], FDS)
    for flag in ("--unshare-net", "--unshare-pid", "--unshare-ipc", "--die-with-parent",
                 "--new-session", "--clearenv"):  # fmt: skip
        assert flag in args
    assert "--unshare-user" not in args and "--share-net" not in args
    # Read-only host view, one writable directory: the lease's home.
    assert pairs(args, "--ro-bind") == [(p, p) for p in ("/usr", "/opt/venv", "/etc/ld.so.cache")]
    assert pairs(args, "--bind") == [("/state/slots/l-1/home", HOME_TARGET)]
    assert pairs(args, "--dev-bind") == [("/dev/nvidia0",) * 2, ("/dev/nvidiactl",) * 2]
    # Private /tmp and /dev/shm, bounded by the lease's memory cap (256 MiB < tmp_mib).
    assert pairs(args, "--size") == [(str(256 << 20), "--tmpfs")] * 2
    # The payload drops to the tenant's uid with nothing left.
    drop = args[args.index("/usr/bin/setpriv") :]
    assert drop[:8] == ["/usr/bin/setpriv", "--reuid=200007", "--regid=200007",
                        "--clear-groups", "--bounding-set=-all", "--inh-caps=-all",
                        "--no-new-privs", "--"]  # fmt: skip
    assert drop[8:] == ["python", "-m", "w"]
    assert args[args.index("--seccomp") + 1] == "11"
    env = dict(pairs(args, "--setenv"))
    assert env["HOME"] == HOME_TARGET and env["RADIUM_LEASE_ID"] == "l-1"
    assert not [v for v in env if "TOKEN" in v or v == "RADIUM_CONFIG"]


def test_scratch_is_everyone_s_and_mounted_before_host_paths_under_it() -> None:
    view = HostView(binds=("/tmp/ci/main/.venv", "/usr"), links=())
    box = Sandbox(SandboxConfig(), view, bwrap="bwrap", setpriv="setpriv")
    args = box.command(Tenant("l-3", 200003, Path("/h")), ["python"], FDS)
    tmpfs = [i for i, a in enumerate(args) if a == "--tmpfs"]
    assert [args[i + 1] for i in tmpfs] == ["/tmp", "/dev/shm"]
    assert all(args[i - 4 : i - 2] == ["--perms", "1777"] for i in tmpfs)  # like a host's /tmp
    assert max(tmpfs) < args.index("/tmp/ci/main/.venv")  # the venv is not hidden under it
    assert "/tmp" not in [args[i + 1] for i, a in enumerate(args) if a == "--dir"]


def test_tmpfs_size_without_a_memory_cap() -> None:
    assert sandbox(tmp_mib=64).tmp_bytes(Share()) == 64 << 20


def test_the_seccomp_filter_compiles_and_the_profile_names_the_same_calls() -> None:
    program = seccomp.bpf()
    assert program and len(program) % 8 == 0  # struct sock_filter is 8 bytes
    profile = seccomp.oci_profile()
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    denied = profile["syscalls"][0]
    assert set(denied["names"]) == set(seccomp.DENIED)
    for needed in ("mount", "ptrace", "bpf", "kexec_load", "init_module", "finit_module",
                   "keyctl", "perf_event_open", "unshare", "setns"):  # fmt: skip
        assert needed in denied["names"]
    clones = [rule for rule in profile["syscalls"] if rule["names"] == ["clone"]]
    assert {rule["args"][0]["value"] for rule in clones} == set(seccomp.CLONE_NEW.values())


def test_container_mode_gets_the_same_guarantees_from_the_engine() -> None:
    tenant = Tenant("l-2", 200003, Path("/h"), devices=("/dev/nvidia1",), share=Share(128))
    user, host = sandbox(max_processes=64, max_open_files=256).docker_options(tenant)
    assert user == "200003:200003"
    assert host["CapDrop"] == ["ALL"] and host["ReadonlyRootfs"] is True
    assert host["PidsLimit"] == 64
    assert host["SecurityOpt"][0] == "no-new-privileges"
    assert host["SecurityOpt"][1].startswith("seccomp={")
    assert {u["Name"]: u["Hard"] for u in host["Ulimits"]} == {"nproc": 64, "nofile": 256}
    assert host["Devices"] == [
        {"PathOnHost": "/dev/nvidia1", "PathInContainer": "/dev/nvidia1", "CgroupPermissions": "rw"}
    ]
    assert host["Tmpfs"] == {"/tmp": f"rw,nosuid,nodev,size={128 << 20}"}
    assert host["LogConfig"]["Config"] == {"max-size": "1m", "max-file": "1"}  # tenant's output


def test_nvidia_device_nodes_are_the_lease_s_and_the_control_nodes(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    for name in ("nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1", "nvidia2"):
        (tmp_path / "dev" / name).write_text("")
    assert nvidia_nodes([2], tmp_path) == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia2"]


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("uid_min", 0, "acceptor.sandbox.uid_min must be positive"),
        ("uid_max", 10, "uid_max must not be below uid_min"),
        ("read_only", ["data"], "must list absolute paths"),
    ],
)
def test_bad_sandbox_settings_are_refused(key: str, value: object, message: str) -> None:
    from radium.config import from_dict
    from radium.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        from_dict({"acceptor": {"sandbox": {key: value}}})
