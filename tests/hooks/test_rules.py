from __future__ import annotations

from pathlib import Path

import pytest

from radium.errors import ConfigError, NoBundleError
from radium.hooks import rules
from radium.hooks.detect import Platform


def platform(
    distro_id: str = "debian", libc: str = "glibc", arch: str = "x86_64", like: tuple[str, ...] = ()
) -> Platform:
    return Platform(distro_id, "12", like, distro_id, libc, arch)


def test_shipped_rules_pick_by_libc_and_arch() -> None:
    shipped = rules.load_rules("")
    assert rules.select(shipped, platform(libc="musl")) == "musl-x86_64"
    assert rules.select(shipped, platform(libc="glibc", arch="aarch64")) == "glibc-aarch64"
    assert rules.select(shipped, platform("unknown", libc="none")) == "glibc-x86_64"


def test_first_match_wins_and_like_counts(tmp_path: Path) -> None:
    path = tmp_path / "r.toml"
    path.write_text(
        '[[rule]]\ndistro = ["rhel"]\nbundle = "el-{arch}"\n'
        '[[rule]]\nlibc = "glibc"\nbundle = "glibc-{arch}"\n'
    )
    loaded = rules.load_rules(str(path))
    assert rules.select(loaded, platform("rocky", like=("rhel", "centos", "fedora"))) == "el-x86_64"
    assert rules.select(loaded, platform("debian")) == "glibc-x86_64"
    with pytest.raises(NoBundleError, match="no Radium bundle rule matches"):
        rules.select(loaded, platform(libc="musl"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no [[rule]] entries"),
        ("[[rule]]\nlibc = 'musl'\n", "'bundle' must be a non-empty string"),
        ("[[rule]]\nbundle = 'x'\nlibcs = 'musl'\n", "unknown key 'libcs'"),
        ("[[rule]]\nbundle = 'x'\narch = 3\n", "'arch' must be a string or a list"),
        ("rules = 1\n", "unknown key 'rules'"),
        ("[[rule]\n", "not valid TOML"),
    ],
)
def test_bad_rules_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "r.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=None) as info:
        rules.load_rules(str(path))
    assert message in info.value.message


def test_unreadable_rules_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read bundle rules"):
        rules.load_rules(str(tmp_path / "absent.toml"))


def test_bundle_name_cannot_escape_the_bundles_dir(tmp_path: Path) -> None:
    path = tmp_path / "r.toml"
    path.write_text('[[rule]]\nbundle = "../../etc"\n')
    with pytest.raises(NoBundleError, match="invalid bundle name"):
        rules.select(rules.load_rules(str(path)), platform())
