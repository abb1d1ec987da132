"""Images built to attack the host through the hook: symlinks out of the rootfs, hostile env."""

from __future__ import annotations

from pathlib import Path

import pytest

from integration.dockerd import Dockerd
from integration.host import mount_table, tree_digest
from integration.radium_env import RadiumEnv
from integration.test_docker import ASK, RUN, build, image


def host_digest() -> dict[str, str]:
    """All of /etc, and what lies directly in /root (its deep trees are toolchains, gigabytes)."""
    return {**tree_digest(Path("/etc")), **tree_digest(Path("/root"), depth=1)}


IMPORTS = "import radium_interposer as r; print(r.report()['bundle']['name'])"

ATTACKS = {
    "bundle-target-absolute": ["mkdir -p /usr/lib", "ln -s /etc /usr/lib/radium"],
    "bundle-target-dotdot": ["ln -s ../../../../../../../../etc /usr/lib/radium"],
    "runtime-dir-parent": ["rm -rf /run", "ln -s /root /run"],
    "site-dir": [
        "rm -rf /usr/lib/python3/dist-packages",
        "ln -s /etc /usr/lib/python3/dist-packages",
    ],
    "site-dir-parent": [
        "mv /usr/lib/python3 /usr/lib/python3.orig",
        "mkdir -p /root/dist-packages",
        "ln -s /../../root /usr/lib/python3",
    ],
    "pth-file": ["ln -s /etc/passwd /usr/lib/python3/dist-packages/radium.pth"],
    "pth-file-dangling": ["ln -s /etc/radium-evil.pth /usr/lib/python3/dist-packages/radium.pth"],
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_symlinks_never_reach_the_host(dockerd: Dockerd, radium: RadiumEnv, attack: str) -> None:
    tag = build(
        dockerd, f"radium-test/attack-{attack}", image(dockerd, "bookworm"), *ATTACKS[attack]
    )
    host_before = host_digest()
    mounts_before = mount_table()
    result = dockerd.docker(
        *RUN, "--runtime=radium", *ASK, tag, "python3", "-c", IMPORTS, check=False
    )
    # Every path resolved inside the container's own rootfs, so the container still works.
    assert result.returncode == 0, f"{result.stderr}\n{radium.logs()}"
    assert result.stdout.strip() == "glibc-x86_64"
    assert host_digest() == host_before
    assert mount_table() == mounts_before


def test_container_environment_never_reaches_the_hook(
    dockerd: Dockerd, radium: RadiumEnv, tmp_path: Path
) -> None:
    evil = tmp_path / "evil"
    evil.mkdir()
    marker = tmp_path / "pwned"
    payload = f"open({str(marker)!r}, 'w').write('hook ran attacker code')\n"
    for module in ("sitecustomize.py", "distro.py", "usercustomize.py"):
        (evil / module).write_text(payload)
    hostile = [
        f"PYTHONPATH={evil}",
        f"PYTHONSTARTUP={evil / 'distro.py'}",
        "PYTHONHOME=/nonexistent",
        "RADIUM_CONFIG=/nonexistent/radium.toml",
        "LD_LIBRARY_PATH=/nonexistent",
        "LD_PRELOAD=/nonexistent/evil.so",
        "PATH=/nonexistent:/usr/bin:/bin",
    ]
    args = [a for var in hostile for a in ("-e", var)]
    result = dockerd.docker(
        *RUN,
        "--runtime=radium",
        *ASK,
        *args,
        image(dockerd, "bookworm"),
        "/usr/bin/true",
        check=False,
    )
    assert result.returncode == 0, f"{result.stderr}\n{radium.logs()}"
    assert not marker.exists()
