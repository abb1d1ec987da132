"""The Debian package: `scripts/build-deb` builds it, dpkg installs it into a fresh
debootstrapped Debian root, its commands run there, dpkg removes and purges it; lintian checks
it. The tests of the installed root run in file order (removal comes last) on one root."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import stat
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import radium
from integration import debroot, host, images
from radium import config as config_module
from radium.configtree import QueueConfig

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
SUITE = "bookworm"
COMMANDS = ("radium", "radium-runtime", "radium-hook", "containerd-shim-radium-v2")
UNITS = ("radium-pool.service", "radium-acceptor.service", "radium-agent.service")
HOOKS_D = "usr/share/containers/oci/hooks.d"
CONFFILE = "etc/radium/config.toml"
ENGINE_CONFIGS = ("etc/docker", "etc/containerd", "etc/containers", "etc/crio")
#: Lintian warnings (W:) the package may show, each with why it is accepted. Tags that follow
#: from the design are overridden in the package itself (packaging/deb/lintian-overrides, each
#: with its reason): lintian reports those as "O:", which this test checks are all explained.
LINTIAN_ALLOWED: dict[str, str] = {}


@dataclasses.dataclass
class Built:
    deb: Path
    lintian: subprocess.Popen[str]


def build_deb(
    out: Path, tmp: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(REPO / "scripts" / "build-deb"), str(out)],
        env={**(env or os.environ), "TMPDIR": str(tmp)},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    """The .deb, built once; lintian starts on it at once and runs beside the other tests."""
    host.need_root()
    for tool, package in (
        ("dpkg-deb", "dpkg"),
        ("dpkg-shlibdeps", "dpkg-dev"),
        ("strip", "binutils"),
        ("unshare", "util-linux"),
        ("lintian", "lintian"),
    ):
        host.need(tool, package)
    out, tmp = tmp_path_factory.mktemp("deb"), tmp_path_factory.mktemp("deb-tmp")
    done = build_deb(out, tmp)
    assert done.returncode == 0, f"scripts/build-deb failed:\n{done.stderr[-4000:]}"
    deb = Path(done.stdout.strip().splitlines()[-1])
    assert deb.is_file() and deb.parent == out, done.stdout
    assert not list(tmp.iterdir()), "build-deb left its staging directory behind"
    lintian = subprocess.Popen(
        ["lintian", "--tag-display-limit", "0", "--show-overrides", str(deb)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield Built(deb, lintian)
    finally:
        if lintian.poll() is None:
            lintian.kill()
        lintian.communicate()


def field(deb: Path, name: str) -> str:
    return subprocess.run(
        ["dpkg-deb", "--field", str(deb), name], capture_output=True, text=True, check=True
    ).stdout.strip()


def depends(deb: Path) -> list[str]:
    """The first alternative of every Depends group, by name."""
    return [group.split("|")[0].split()[0] for group in field(deb, "Depends").split(",")]


def test_the_package_is_named_and_described_from_the_project(built: Built) -> None:
    arch = subprocess.run(
        ["dpkg", "--print-architecture"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert built.deb.name == f"radium_{radium.__version__}_{arch}.deb"
    assert field(built.deb, "Package") == "radium"
    assert field(built.deb, "Version") == radium.__version__
    assert field(built.deb, "Architecture") == arch
    minor = int(
        subprocess.run(
            ["/usr/bin/python3", "-c", "import sys; print(sys.version_info[1])"],
            capture_output=True, text=True, check=True,
        ).stdout
    )  # fmt: skip
    groups = [g.strip() for g in field(built.deb, "Depends").split(",")]
    assert f"python3 (>= 3.{minor}~)" in groups and f"python3 (<< 3.{minor + 1})" in groups
    assert {"runc | crun", "bubblewrap", "libseccomp2"} <= set(groups)
    assert any(g.startswith("libc6 (>= ") for g in groups), groups
    # Engines are never required: the package configures none of them.
    assert not {"docker.io", "containerd", "podman"} & set(depends(built.deb))
    control = subprocess.run(
        ["dpkg-deb", "--info", str(built.deb)], capture_output=True, text=True, check=True
    ).stdout
    assert "conffiles" in control and "md5sums" in control


def test_no_path_of_the_build_machine_is_in_the_package(built: Built, tmp_path: Path) -> None:
    subprocess.run(["dpkg-deb", "--raw-extract", str(built.deb), str(tmp_path)], check=True)
    assert (tmp_path / "DEBIAN" / "conffiles").read_text() == f"/{CONFFILE}\n"
    needles = [str(REPO).encode(), b"/radium-deb."]
    leaks = []
    for path in tmp_path.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            leaks += [f"{path.relative_to(tmp_path)}: {n.decode()}" for n in needles if n in data]
    assert not leaks
    cfg = (tmp_path / "opt" / "radium" / "pyvenv.cfg").read_text()
    assert "home = /usr/bin" in cfg and "/opt/radium" in cfg


def test_a_failed_build_leaves_nothing_behind(tmp_path: Path) -> None:
    """pip finds nothing to build with: build-deb fails, and its staging directory is gone."""
    host.need_root()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1")
    out, tmp = tmp_path / "out", tmp_path / "tmp"
    tmp.mkdir()
    done = build_deb(out, tmp, env)
    assert done.returncode != 0 and "setuptools" in done.stderr, done.stderr[-2000:]
    assert not list(tmp.iterdir()), "build-deb left its staging directory behind"
    assert not out.exists() or not list(out.iterdir())


def test_the_conffile_loads_and_shows_every_default() -> None:
    """/etc/radium/config.toml: every line commented out, each the built-in default, every key."""
    text = (REPO / "packaging" / "deb" / "config.toml").read_text()
    assert config_module.from_dict(tomllib.loads(text)) == config_module.Config()
    uncommented = tomllib.loads(re.sub(r"(?m)^#(\[|[a-z_]+ = )", r"\1", text))
    queues = uncommented["pool"].pop("queues")
    assert config_module.from_dict(uncommented) == config_module.Config()
    example = config_module.from_dict({"pool": {"queues": queues}}).pool.queues
    assert all(q == QueueConfig() for q in example.values())

    def keys(cls: Any, data: dict[str, Any], prefix: str) -> list[str]:
        hints = typing.get_type_hints(cls)
        missing = []
        for f in dataclasses.fields(cls):
            if f.name == "queues":
                continue
            if dataclasses.is_dataclass(hints[f.name]):
                missing += keys(hints[f.name], data.get(f.name, {}), f"{prefix}{f.name}.")
            elif f.name not in data:
                missing.append(prefix + f.name)
        return missing

    assert not keys(config_module.Config, uncommented, ""), "keys missing from the conffile"


# --------------------------------------------------------------------------- the installed root


@pytest.fixture(scope="module")
def installed(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh minbase root with the .deb's dependencies, radium installed with dpkg -i."""
    host.need("debootstrap", "debootstrap")
    try:
        tar = debroot.root_tar(SUITE, depends(built.deb))
        root = images.extract(tar, tmp_path_factory.mktemp("debroot") / "root")
    except images.ImageBuildError as exc:
        pytest.fail(f"cannot build the Debian root: {exc}", pytrace=False)
    try:
        etc_before = host.tree_digest(root / "etc")
        shutil.copy(built.deb, root / "tmp" / "radium.deb")
        done = debroot.chroot(root, "dpkg", "-i", "/tmp/radium.deb")
        assert done.returncode == 0, done.stdout + done.stderr
        (root / "tmp" / "radium.deb").unlink()
        changed = set(host.tree_digest(root / "etc").items()) ^ set(etc_before.items())
        # Installing adds the conffile and touches nothing else under /etc: no engine config,
        # no enabled unit.
        assert {path for path, _ in changed} == {f"{root}/etc/radium", f"{root}/{CONFFILE}"}
        yield root
    finally:
        # chroot() mounts only in namespaces of its own; this is the net under that net.
        host.unmount_all_under(root)
        assert not host.mounts_under(root), "mounts left under the Debian root"
        shutil.rmtree(root.parent, ignore_errors=True)


def in_root(root: Path, *argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return debroot.chroot(root, *argv, timeout=120, stdin=stdin)


def assert_mode(root: Path, path: str, mode: int) -> None:
    st = (root / path).lstat()
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (mode, 0, 0), path


def test_dpkg_installs_every_part_with_its_mode(built: Built, installed: Path) -> None:
    root = installed
    assert_mode(root, "opt/radium/bin/python", 0o777)  # a link into /usr/bin/python3
    for command in COMMANDS:
        link = root / "usr" / "bin" / command
        assert link.is_symlink() and os.readlink(link) == f"/opt/radium/bin/{command}"
    fronts = ("radium-runtime", "containerd-shim-radium-v2")  # docs/runtime-front.md
    for command in (*COMMANDS, *(f"{front}-full" for front in fronts)):
        assert_mode(root, f"opt/radium/bin/{command}", 0o755)
        shebang = (root / "opt" / "radium" / "bin" / command).read_text().splitlines()[0]
        expected = "#!/bin/sh" if command in fronts else "#!/opt/radium/bin/python"
        assert shebang == expected, command
    bundles = sorted(p.name for p in (root / "usr/lib/radium/bundles").iterdir())
    assert bundles == [f"glibc-{os.uname().machine}", f"musl-{os.uname().machine}"]
    for bundle in bundles:
        assert_mode(root, f"usr/lib/radium/bundles/{bundle}", 0o755)
        assert_mode(root, f"usr/lib/radium/bundles/{bundle}/manifest.json", 0o644)
    for stage in ("prestart", "poststop"):
        assert_mode(root, f"{HOOKS_D}/radium-{stage}.json", 0o644)
    for unit in UNITS:
        assert_mode(root, f"lib/systemd/system/{unit}", 0o644)
        text = (root / "lib/systemd/system" / unit).read_text()
        program = re.search(r"(?m)^ExecStart=(\S+)", text)
        assert program and in_root(root, "test", "-x", program.group(1)).returncode == 0, unit
    # The conffile holds no secret as shipped; users (`radium run`) read it.
    assert_mode(root, CONFFILE, 0o644)
    assert (root / CONFFILE).read_text() == (REPO / "packaging/deb/config.toml").read_text()
    for doc in ("copyright", "changelog.gz"):
        assert_mode(root, f"usr/share/doc/radium/{doc}", 0o644)
    # Nothing the package installs is writable by others, set-id, or owned by anyone but root.
    listing = in_root(root, "dpkg", "-L", "radium").stdout.split()
    for path in listing:
        st = (root / path.lstrip("/")).lstat()
        if stat.S_ISLNK(st.st_mode):
            continue
        assert st.st_uid == st.st_gid == 0 and not st.st_mode & (stat.S_IWOTH | 0o6000), path
    # Nothing enabled: postinst never enables a unit (the tree under /etc is checked too).
    assert not list((root / "etc").glob("systemd/system/*/radium-*"))
    assert not [p for p in ENGINE_CONFIGS if (root / p).exists()]


def test_radium_runs_in_the_installed_root(installed: Path) -> None:
    version = in_root(installed, "radium", "--version")
    assert (version.returncode, version.stdout) == (0, f"radium {radium.__version__}\n")
    verify = in_root(installed, "radium", "bundles", "verify")
    assert verify.returncode == 0, verify.stderr
    assert re.search(r"(?m)^ok  glibc-\S+  " + re.escape(radium.__version__), verify.stdout)
    prefix = in_root(installed, "/opt/radium/bin/python", "-c", "import sys; print(sys.prefix)")
    assert prefix.stdout == "/opt/radium\n"


def test_radium_doctor_runs_with_engines_absent(installed: Path) -> None:
    """It fails (no pool here, and no network), but only where it should, without a traceback."""
    done = in_root(installed, "radium", "doctor")
    assert "Traceback" not in done.stdout + done.stderr
    assert done.returncode == 1, done.stdout + done.stderr
    status = {
        line[6:24].strip(): line[:5].strip()
        for line in done.stdout.splitlines()
        if not line.startswith(" ")
    }
    assert status == {
        "runtime": "ok", "programs": "ok", "bundles": "ok",
        "engine docker": "skip", "engine containerd": "skip", "engine crio": "skip",
        "engine podman": "skip", "agent": "skip", "pool": "FAIL",
    }, done.stdout  # fmt: skip


def test_the_linked_programs_find_their_venv(installed: Path) -> None:
    """radium-runtime, radium-hook and the shim, run through /usr/bin, import Radium and fail
    (or pass through) cleanly: one line, no traceback."""
    runtime = in_root(installed, "radium-runtime", "--version")
    assert runtime.returncode == 0 and runtime.stdout.startswith("runc version"), runtime
    hook = in_root(installed, "radium-hook", "prestart", stdin="not json")
    assert hook.returncode != 0 and hook.stderr.startswith("radium-hook: "), hook
    shim = in_root(installed, "containerd-shim-radium-v2", "-v")
    assert shim.returncode != 0 and "containerd-shim-runc-v2 is not installed" in shim.stderr
    for done in (hook, shim):
        assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1, done


def test_the_hooks_d_entries_are_what_radium_setup_writes(installed: Path) -> None:
    """So `radium setup podman` leaves them alone and `radium doctor` finds podman configured."""
    done = in_root(installed, "radium", "setup", "podman", "--dry-run")
    assert done.returncode == 0, done.stderr
    for stage in ("prestart", "poststop"):
        assert f"# /{HOOKS_D}/radium-{stage}.json: unchanged" in done.stdout


def test_reinstalling_keeps_an_edited_conffile(built: Built, installed: Path) -> None:
    """dpkg -i over the installed package: prerm, unpack and postinst of an upgrade."""
    conffile = installed / CONFFILE
    edited = conffile.read_text().replace(
        "\n[client]\n", '\n[client]\npool = "pool.example:7400"\n'
    )
    conffile.write_text(edited)
    shutil.copy(built.deb, installed / "tmp" / "radium.deb")
    done = in_root(installed, "dpkg", "-i", "/tmp/radium.deb")
    (installed / "tmp" / "radium.deb").unlink()
    assert done.returncode == 0, done.stdout + done.stderr
    assert conffile.read_text() == edited
    status = in_root(installed, "radium", "status")  # loads the edited file, then fails to dial
    assert "Traceback" not in status.stderr and "pool.example:7400" in status.stderr, status
    assert in_root(installed, "radium", "bundles", "verify").returncode == 0


def test_dpkg_remove_keeps_only_the_conffile_and_purge_removes_it(installed: Path) -> None:
    """Runs after the tests above ran Radium's programs in the root (bytecode they might
    write must go too)."""
    root = installed
    listing = in_root(root, "dpkg", "-L", "radium").stdout.split()
    removed = in_root(root, "dpkg", "--remove", "radium")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert "not empty" not in removed.stdout + removed.stderr, removed.stderr
    left = [p for p in listing if p != "/." and os.path.lexists(root / p.lstrip("/"))]
    # What remains is the conffile, its directory and directories other packages own.
    for path in left:
        if path in (f"/{CONFFILE}", "/etc/radium"):
            continue
        owners = in_root(root, "dpkg-query", "--search", path)
        assert owners.returncode == 0 and (root / path.lstrip("/")).is_dir(), path
    assert (root / CONFFILE).is_file()
    assert not (root / "opt" / "radium").exists()
    status = in_root(root, "dpkg-query", "-W", "-f", "${Status}", "radium").stdout
    assert status == "deinstall ok config-files"

    purged = in_root(root, "dpkg", "--purge", "radium")
    assert purged.returncode == 0, purged.stdout + purged.stderr
    assert not (root / "etc" / "radium").exists()
    assert in_root(root, "dpkg-query", "-W", "radium").returncode != 0


# --------------------------------------------------------------------------- lintian


def test_lintian_finds_no_error_and_only_explained_warnings(built: Built) -> None:
    output, _ = built.lintian.communicate(timeout=600)
    tags: dict[str, set[str]] = {}
    for line in output.splitlines():
        match = re.match(r"([EWO]): radium(?: \w+)?: (\S+)", line)
        if match:
            tags.setdefault(match.group(1), set()).add(match.group(2))
    assert not tags.get("E"), output
    assert tags.get("W", set()) <= set(LINTIAN_ALLOWED), output
    # Every override the package ships says why: a comment opens each group of overrides.
    overridden, unexplained = set(), set()
    explained = False
    for line in (REPO / "packaging" / "deb" / "lintian-overrides").read_text().splitlines():
        explained = line.startswith("#") or (explained and line.startswith("radium:"))
        if line.startswith("radium:"):
            overridden.add(line.split()[1])
            if not explained:
                unexplained.add(line)
    assert not unexplained
    # ...and each is still needed: a stale override would hide a future finding.
    assert tags.get("O", set()) == overridden, output
