"""What the image itself set, read from the record the engine wrote for this container.

Engines merge an image's ``ENV`` into the spec's ``process.env`` (docker, containerd, podman),
and podman merges the image's manifest annotations into the spec's annotations, so a
``RADIUM_*`` variable or a ``radium.io/`` annotation in a spec may be the image author's. Before
it calls the runtime, the engine has written its own record of the container and the image:

- docker: ``<data-root>/containers/<id>/config.v2.json`` (``ID``, ``Image``, ``Driver``) and
  ``<data-root>/image/<driver>/imagedb/content/sha256/<hex>`` (``config.Env``). The data root is
  found from the spec docker wrote: its ``/etc/hostname``, ``/etc/hosts`` or
  ``/etc/resolv.conf`` bind mount comes from ``<data-root>/containers/<some id>/``.
- podman (containers/storage): the bundle is ``<graphroot>/<driver>-containers/<id>/userdata``;
  ``<driver>-containers/containers.json`` maps the id to its image, whose directory under
  ``<driver>-images/<image id>/`` holds ``manifest`` (``annotations``) and the config (``Env``).

The records are read as the runtime's own user (root) only: every component below the data
root is opened with ``O_NOFOLLOW`` relative to its parent, must belong to root (or this uid) and
not be writable by others, and every file is bounded. Anything else means "not found" (None),
which :func:`radium.shim.request.from_spec` treats as untrusted environment.
"""

from __future__ import annotations

import json
import os
import stat

from radium.shim.request import ImageSet, env_map

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping, Optional, Sequence

__all__ = [
    "MAX_CONTAINERS_BYTES",
    "MAX_RECORD_BYTES",
    "RecordError",
    "docker",
    "docker_data_root",
    "lookup",
    "podman",
    "read_under",
]

#: Bounds for the engine's JSON files (an image config or manifest is a few KiB; containers.json
#: holds about 1 KiB per container on the host).
MAX_RECORD_BYTES = 8 << 20
MAX_CONTAINERS_BYTES = 64 << 20
_HEX = frozenset("0123456789abcdef")
_DRIVER_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")
#: Docker's own bind mounts, from <data-root>/containers/<id>/<name>.
_DOCKER_FILES = ("/etc/hostname", "/etc/hosts", "/etc/resolv.conf")


def _is_id(value: str) -> bool:
    """A 64-hex id (no ``re``: imported on the container start path)."""
    return len(value) == 64 and set(value) <= _HEX


def _is_driver(value: str) -> bool:
    return 0 < len(value) <= 32 and set(value) <= _DRIVER_CHARS


class RecordError(Exception):
    """A record is missing, unsafe or malformed (internal: it means "not found")."""


def _safe(fd: int, what: str) -> os.stat_result:
    info = os.fstat(fd)
    if info.st_uid not in (0, os.geteuid()) or info.st_mode & 0o022:
        raise RecordError(f"{what} is not owned by root or is writable by others")
    return info


def read_under(root: str, names: Sequence[str], limit: int = MAX_RECORD_BYTES) -> bytes:
    """The file ``root/names...``, each component opened without following links."""
    fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _safe(fd, root)
        for index, name in enumerate(names):
            if name in ("", ".", "..") or "/" in name:
                raise RecordError(f"bad path component {name!r}")
            last = index == len(names) - 1
            flags = os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_RDONLY if last else os.O_PATH)
            child = os.open(name, flags | (0 if last else os.O_DIRECTORY), dir_fd=fd)
            os.close(fd)
            fd = child
            info = _safe(fd, name)
        if not names or not stat.S_ISREG(info.st_mode):
            raise RecordError(f"{'/'.join(names)} is not a regular file")
        if info.st_size > limit:
            raise RecordError(f"{'/'.join(names)} is larger than {limit} bytes")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(limit + 1)
        if len(data) > limit:
            raise RecordError(f"{'/'.join(names)} is larger than {limit} bytes")
        return data
    except OSError as exc:
        raise RecordError(f"cannot read {'/'.join(names)} under {root}: {exc.strerror}") from exc
    finally:
        os.close(fd)


def _json(root: str, names: Sequence[str], limit: int = MAX_RECORD_BYTES) -> Any:
    try:
        return json.loads(read_under(root, names, limit))
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordError(f"{'/'.join(names)} under {root} is not JSON") from exc


def _image_env(config: Any) -> dict[str, str]:
    inner = config.get("config") if isinstance(config, dict) else None
    return env_map(inner.get("Env") if isinstance(inner, dict) else None)


def docker_data_root(spec: Mapping[str, Any]) -> Optional[str]:
    """The data root of the docker that wrote ``spec``: from its own hostname/hosts mounts."""
    mounts = spec.get("mounts")
    for mount in mounts if isinstance(mounts, list) else ():
        if not isinstance(mount, dict) or mount.get("destination") not in _DOCKER_FILES:
            continue
        source = mount.get("source")
        if not isinstance(source, str) or not source.startswith("/"):
            continue
        directory = os.path.dirname(os.path.normpath(source))
        containers, other_id = os.path.split(directory)
        if os.path.basename(containers) == "containers" and _is_id(other_id):
            # Another container's files (--network container:X) still name the data root.
            return os.path.dirname(containers)
    return None


def docker(spec: Mapping[str, Any], container_id: str) -> Optional[ImageSet]:
    """The image's own values from docker's record of ``container_id``; None: not docker's."""
    data_root = docker_data_root(spec)
    if data_root is None or not _is_id(container_id):
        return None
    record = _json(data_root, ("containers", container_id, "config.v2.json"))
    if not isinstance(record, dict) or record.get("ID") != container_id:
        raise RecordError(f"docker's record of {container_id} names another container")
    image, driver = record.get("Image"), record.get("Driver")
    if not isinstance(image, str) or not isinstance(driver, str) or not _is_driver(driver):
        raise RecordError(f"docker's record of {container_id} has no image or storage driver")
    algorithm, _, digest = image.partition(":")
    if algorithm != "sha256" or not _is_id(digest):
        raise RecordError(f"docker's record of {container_id} names image {image!r}")
    config = _json(data_root, ("image", driver, "imagedb", "content", "sha256", digest))
    return ImageSet("docker", _image_env(config), {})


def _podman_image_id(graphroot: str, driver: str, container_id: str) -> str:
    records = _json(graphroot, (f"{driver}-containers", "containers.json"), MAX_CONTAINERS_BYTES)
    for record in records if isinstance(records, list) else ():
        if isinstance(record, dict) and record.get("id") == container_id:
            image = record.get("image")
            if isinstance(image, str) and _is_id(image):
                return image
            raise RecordError(f"container {container_id} names image {image!r}")
    raise RecordError(f"container {container_id} is not in {driver}-containers/containers.json")


def podman(bundle: str, container_id: str) -> Optional[ImageSet]:
    """The image's own values from containers/storage (podman); None: not its layout."""
    userdata = os.path.normpath(bundle)
    directory, leaf = os.path.split(userdata)
    containers, own_id = os.path.split(directory)
    graphroot, kind = os.path.split(containers)
    driver = kind[: -len("-containers")]
    if leaf != "userdata" or not kind.endswith("-containers") or not _is_driver(driver):
        return None
    if not _is_id(own_id) or (container_id and container_id != own_id):
        return None
    image = _podman_image_id(graphroot, driver, own_id)
    images = f"{driver}-images"
    manifest = _json(graphroot, (images, image, "manifest"))
    raw = manifest.get("annotations") if isinstance(manifest, dict) else None
    annotations = (
        {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, str)}
        if isinstance(raw, dict)
        else {}
    )
    import base64

    # containers/storage names a big-data file "=" + base64(key); the config's key is its digest.
    key = "=" + base64.b64encode(f"sha256:{image}".encode()).decode()
    return ImageSet("podman", _image_env(_json(graphroot, (images, image, key))), annotations)


def lookup(
    bundle: str, spec: Mapping[str, Any], container_id: str, notes: list[str]
) -> Optional[ImageSet]:
    """What the image of the container in ``bundle`` set; None (and why, in ``notes``) when
    no engine record of it was found."""
    try:
        found = docker(spec, container_id) or podman(bundle, container_id)
    except RecordError as exc:
        notes.append(f"the engine's record of the image was not usable: {exc}")
        return None
    if found is None:
        notes.append("no docker or podman record of this container's image")
    return found
