"""Finding what the image set from docker's and podman's own records (fake data roots)."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest

from radium.shim import image_record
from radium.shim.image_record import RecordError

CID = "c" * 64
IMAGE = "a" * 64


def docker_root(tmp_path: Path, env: list[str], record: dict[str, Any] | None = None) -> Path:
    root = tmp_path / "docker"
    (root / "containers" / CID).mkdir(parents=True)
    record = (
        {"ID": CID, "Image": f"sha256:{IMAGE}", "Driver": "overlay2"} if record is None else record
    )
    (root / "containers" / CID / "config.v2.json").write_text(json.dumps(record))
    images = root / "image" / "overlay2" / "imagedb" / "content" / "sha256"
    images.mkdir(parents=True)
    (images / IMAGE).write_text(json.dumps({"config": {"Env": env, "Labels": {"x": "y"}}}))
    return root


def docker_spec(root: Path, owner: str = CID) -> dict[str, Any]:
    source = str(root / "containers" / owner / "hostname")
    return {"mounts": [{"destination": "/etc/hostname", "type": "bind", "source": source}]}


def test_docker_record_gives_the_images_env(tmp_path: Path) -> None:
    root = docker_root(tmp_path, ["PATH=/bin", "RADIUM_GPUS=2"])
    image = image_record.docker(docker_spec(root), CID)
    assert image is not None and image.engine == "docker"
    assert image.env == {"PATH": "/bin", "RADIUM_GPUS": "2"}
    assert image.annotations == {}
    # --network container:X: the files are another container's, the data root is the same.
    assert image_record.docker(docker_spec(root, "d" * 64), CID) is not None


def test_a_spec_docker_did_not_write_is_not_dockers(tmp_path: Path) -> None:
    assert image_record.docker({"mounts": []}, CID) is None
    assert image_record.docker(docker_spec(tmp_path / "x", "not-an-id"), CID) is None
    notes: list[str] = []
    assert image_record.lookup(str(tmp_path / CID), {}, CID, notes) is None
    assert notes == ["no docker or podman record of this container's image"]


@pytest.mark.parametrize(
    "record",
    [
        {"ID": "e" * 64, "Image": f"sha256:{IMAGE}", "Driver": "overlay2"},  # another container
        {"ID": CID, "Image": "sha256:../../x", "Driver": "overlay2"},
        {"ID": CID, "Image": f"sha256:{IMAGE}", "Driver": "../.."},
    ],
)
def test_a_record_that_does_not_fit_is_not_used(tmp_path: Path, record: dict[str, Any]) -> None:
    root = docker_root(tmp_path, [], record)
    notes: list[str] = []
    assert image_record.lookup(str(tmp_path / CID), docker_spec(root), CID, notes) is None
    assert notes[0].startswith("the engine's record of the image was not usable: ")


def test_records_are_read_without_following_links_and_only_if_safe(tmp_path: Path) -> None:
    root = docker_root(tmp_path, ["RADIUM_GPUS=2"])
    images = root / "image" / "overlay2" / "imagedb" / "content" / "sha256"
    elsewhere = tmp_path / "elsewhere"
    (images / IMAGE).rename(elsewhere)
    (images / IMAGE).symlink_to(elsewhere)
    with pytest.raises(RecordError, match="cannot read"):
        image_record.docker(docker_spec(root), CID)
    (images / IMAGE).unlink()
    elsewhere.rename(images / IMAGE)
    os.chmod(images / IMAGE, 0o666)
    with pytest.raises(RecordError, match="writable by others"):
        image_record.docker(docker_spec(root), CID)
    os.chmod(images / IMAGE, 0o644)
    (images / IMAGE).write_bytes(b" " * (image_record.MAX_RECORD_BYTES + 1))
    with pytest.raises(RecordError, match="larger than"):
        image_record.docker(docker_spec(root), CID)


def podman_root(tmp_path: Path, annotations: dict[str, str], env: list[str]) -> Path:
    graph = tmp_path / "storage"
    (graph / "overlay-containers" / CID / "userdata").mkdir(parents=True)
    (graph / "overlay-containers" / "containers.json").write_text(
        json.dumps([{"id": "f" * 64, "image": "b" * 64}, {"id": CID, "image": IMAGE}])
    )
    images = graph / "overlay-images" / IMAGE
    images.mkdir(parents=True)
    (images / "manifest").write_text(json.dumps({"annotations": annotations}))
    key = "=" + base64.b64encode(f"sha256:{IMAGE}".encode()).decode()
    (images / key).write_text(json.dumps({"config": {"Env": env}}))
    return graph / "overlay-containers" / CID / "userdata"


def test_podman_record_gives_the_images_annotations_and_env(tmp_path: Path) -> None:
    bundle = podman_root(tmp_path, {"radium.io/gpus": "2"}, ["RADIUM_WAIT=9"])
    image = image_record.podman(str(bundle), CID)
    assert image is not None and image.engine == "podman"
    assert image.annotations == {"radium.io/gpus": "2"}
    assert image.env == {"RADIUM_WAIT": "9"}
    assert image_record.podman(str(bundle), "f" * 64) is None  # not the runtime's container
    assert image_record.podman(str(tmp_path / "bundle"), CID) is None  # not podman's layout


def test_a_podman_container_missing_from_its_store_is_an_error(tmp_path: Path) -> None:
    bundle = podman_root(tmp_path, {}, [])
    (tmp_path / "storage" / "overlay-containers" / "containers.json").write_text("[]")
    with pytest.raises(RecordError, match=r"is not in overlay-containers/containers\.json"):
        image_record.podman(str(bundle), CID)
