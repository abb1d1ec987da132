"""radium-runtime + radium-hook with real runc on real root filesystems."""

from __future__ import annotations

import json
import os
import shutil
import sys
import sysconfig
from pathlib import Path
from typing import Any

from integration import images, runc
from integration.conftest import Rootfs
from integration.host import mount_table
from integration.radium_env import RadiumEnv

REPORT = (
    "import json, os, sys, radium_interposer as r, radium_interposer.handshake; rep = r.report(); "
    "flags = os.statvfs('/usr/lib/radium').f_flag; "
    "rep.update(python='%d.%d' % sys.version_info[:2], module=r.__file__, "
    "ro=bool(flags & os.ST_RDONLY), nosuid=bool(flags & os.ST_NOSUID), "
    "nodev=bool(flags & os.ST_NODEV)); "
    "print(json.dumps(rep))"
)
# A bundle written by hand has no engine record of an image: annotations ask, not env.
ASK = {"radium.io/gpus": "1"}


def report_of(result: runc.RuncResult, radium: RadiumEnv) -> dict[str, Any]:
    assert result.returncode == 0, f"{result.stderr}\n{radium.logs()}"
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_debian_python_imports_the_interposer_without_env_change(
    radium: RadiumEnv, rootfs: Rootfs, tmp_path: Path
) -> None:
    before = mount_table()
    bundle = runc.make_bundle(tmp_path, rootfs.get("bookworm"), ["python3", "-c", REPORT], [], ASK)
    report = report_of(runc.run(radium, bundle), radium)
    assert report["bundle"]["name"] == "glibc-x86_64"
    assert report["bundle"]["libc"] == "glibc"
    assert report["module"].startswith("/usr/lib/radium/python/radium_interposer/")
    assert report["python"] == images.python_version("bookworm") == "3.11"
    assert report["platform"]["distro_id"] == "debian"
    assert report["platform"]["distro_version"] == "12"
    assert report["platform"]["pythons"][0]["site_dir"] == "/usr/lib/python3/dist-packages"
    assert report["request"] == {"radium.io/gpus": "1"}
    assert (report["ro"], report["nosuid"], report["nodev"]) == (True, True, True)
    assert mount_table() == before
    assert list(radium.state_dir.iterdir()) == [], "poststop must remove the runtime directory"


def test_alpine_gets_the_musl_bundle(radium: RadiumEnv, rootfs: Rootfs, tmp_path: Path) -> None:
    script = "cat /usr/lib/radium/manifest.json; echo; cat /run/radium/info.json"
    bundle = runc.make_bundle(tmp_path, rootfs.get("alpine"), ["sh", "-c", script], [], ASK)
    result = runc.run(radium, bundle)
    assert result.returncode == 0, f"{result.stderr}\n{radium.logs()}"
    decoder = json.JSONDecoder()
    manifest, end = decoder.raw_decode(result.stdout)
    info = json.loads(result.stdout[end:])
    assert (manifest["name"], manifest["libc"]) == ("musl-x86_64", "musl")
    assert info["platform"]["distro_id"] == "alpine"
    assert info["platform"]["libc"] == "musl"
    assert info["platform"]["pythons"] == []  # the minirootfs has no python: started without


def test_busybox_without_os_release_uses_the_fallback(
    radium: RadiumEnv, rootfs: Rootfs, tmp_path: Path
) -> None:
    bundle = runc.make_bundle(
        tmp_path, rootfs.get("busybox"), ["cat", "/run/radium/info.json"], [], ASK
    )
    result = runc.run(radium, bundle)
    assert result.returncode == 0, f"{result.stderr}\n{radium.logs()}"
    info = json.loads(result.stdout)
    assert info["platform"]["distro_id"] == "unknown"
    assert info["platform"]["libc"] == "none"
    assert info["bundle"]["name"] == "glibc-x86_64"


def test_no_python_can_be_made_fatal(radium: RadiumEnv, rootfs: Rootfs, tmp_path: Path) -> None:
    config = radium.write_config("no-python-fails.toml", 'no_python = "fail"\n')
    before = mount_table()
    bundle = runc.make_bundle(tmp_path, rootfs.get("busybox"), ["true"], [], ASK)
    result = runc.run(radium, bundle, config=config)
    assert result.returncode != 0
    assert "radium-hook: image of container" in result.stderr
    assert "has no Python interpreter; use an image with python3" in result.log
    assert mount_table() == before
    assert list(radium.state_dir.iterdir()) == []


def test_missing_bundle_fails_clearly_and_leaves_nothing(
    radium: RadiumEnv, rootfs: Rootfs, tmp_path: Path
) -> None:
    config = radium.write_config("no-bundles.toml", bundles_dir=tmp_path / "empty")
    before = mount_table()
    bundle = runc.make_bundle(tmp_path, rootfs.get("bookworm"), ["true"], [], ASK)
    result = runc.run(radium, bundle, config=config)
    assert result.returncode != 0
    assert "Radium bundle glibc-x86_64 is not installed" in result.stderr
    assert "radium bundles build" in result.stderr
    assert mount_table() == before
    assert list(radium.state_dir.iterdir()) == []


def test_failure_after_a_mount_undoes_everything(
    radium: RadiumEnv, rootfs: Rootfs, tmp_path: Path
) -> None:
    """The .pth target is a directory in this image: the bundle is already mounted by then."""
    root = rootfs.get("bullseye")
    target = root / "usr/lib/python3/dist-packages/radium.pth"
    if target.is_file():
        target.unlink()
    target.mkdir()
    try:
        before = mount_table()
        result = runc.run(radium, runc.make_bundle(tmp_path, root, ["true"], [], ASK))
    finally:
        target.rmdir()
    assert result.returncode != 0
    assert (
        "/usr/lib/python3/dist-packages/radium.pth exists in the image but is not a regular file"
        in result.stderr
    )
    assert mount_table() == before
    assert list(radium.state_dir.iterdir()) == []


def test_container_that_asks_nothing_is_untouched(
    radium: RadiumEnv, rootfs: Rootfs, tmp_path: Path
) -> None:
    bundle = runc.make_bundle(
        tmp_path,
        rootfs.get("bookworm"),
        ["sh", "-c", "test ! -e /run/radium/info.json && echo plain"],
        [],
    )
    original = (bundle / "config.json").read_bytes()
    result = runc.run(radium, bundle)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "plain\n"
    assert (bundle / "config.json").read_bytes() == original


def test_hook_works_as_create_runtime_hook(
    radium: RadiumEnv, rootfs: Rootfs, tmp_path: Path
) -> None:
    """As with hooks.d: no wrapper; runc runs the hook at createRuntime; annotations ask."""
    bundle = runc.make_bundle(
        tmp_path,
        rootfs.get("trixie"),
        ["python3", "-c", REPORT],
        [],
        annotations={"radium.io/gpus": "1"},
    )
    spec = json.loads((bundle / "config.json").read_text())
    command = [sys.executable, "-I", os.path.join(sysconfig.get_path("scripts"), "radium-hook")]
    env = ["PATH=/usr/bin:/bin", f"RADIUM_CONFIG={radium.config}"]
    spec["hooks"] = {
        "createRuntime": [{"path": command[0], "args": [*command, "createRuntime"], "env": env}],
        "poststop": [{"path": command[0], "args": [*command, "poststop"], "env": env}],
    }
    (bundle / "config.json").write_text(json.dumps(spec))
    runc_path = shutil.which("runc")
    assert runc_path
    direct = RadiumEnv(**{**radium.__dict__, "runtime": Path(runc_path)})
    report = report_of(runc.run(direct, bundle), radium)
    assert report["python"] == "3.13"
    assert report["platform"]["distro_version"] == "13"
    assert report["ro"] is True
