"""Runtime directories: private parent, each container's reachable by its own user only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from radium.errors import SpecError
from radium.hooks import rundir


def test_the_owner_is_the_spec_user_through_the_user_namespace_mappings() -> None:
    assert rundir.container_owner({}) == (0, 0)
    assert rundir.container_owner({"process": {"user": {"uid": 1000, "gid": 100}}}) == (1000, 100)
    mapped = {
        "process": {"user": {"uid": 0, "gid": 5}},
        "linux": {
            "uidMappings": [{"containerID": 0, "hostID": 100000, "size": 65536}],
            "gidMappings": [
                {"containerID": 0, "hostID": 200000, "size": 1},
                {"containerID": 1, "hostID": 300001, "size": 100},
            ],
        },
    }
    assert rundir.container_owner(mapped) == (100000, 300005)


@pytest.mark.parametrize(
    "spec",
    [
        {"process": {"user": {"uid": -1, "gid": 0}}},
        {"process": {"user": {"uid": "0", "gid": 0}}},
        {
            "process": {"user": {"uid": 70000, "gid": 0}},
            "linux": {"uidMappings": [{"containerID": 0, "hostID": 1, "size": 65536}]},
        },
    ],
)
def test_a_malformed_or_unmapped_user_is_a_spec_error(spec: dict[str, object]) -> None:
    with pytest.raises(SpecError):
        rundir.container_owner(spec)


def test_the_parent_is_private_and_each_directory_is_its_containers_group(tmp_path: Path) -> None:
    parent = tmp_path / "containers"
    parent.mkdir(mode=0o755)
    os.chmod(parent, 0o755)  # as an older install left it
    path = Path(rundir.make(str(parent), "c1", (4321, 4322)))
    assert path == parent / "c1"
    assert parent.stat().st_mode & 0o7777 == 0o700
    info = path.stat()
    assert (info.st_mode & 0o7777, info.st_uid, info.st_gid) == (0o750, os.geteuid(), 4322)
    assert rundir.make(str(parent), "c1", (4321, 4322)) == str(path)  # again: the same


def test_a_directory_someone_else_made_or_linked_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 4321, 4321)
    with pytest.raises(SpecError, match="another user may have made it"):
        rundir.make(str(theirs), "c1", (0, 0))
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(SpecError, match="not a directory"):
        rundir.make(str(link), "c1", (0, 0))
    parent = tmp_path / "containers"
    parent.mkdir()
    (parent / "c2").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SpecError, match="not a directory"):
        rundir.make(str(parent), "c2", (0, 0))
    assert not (tmp_path / "elsewhere" / "c1").exists()
