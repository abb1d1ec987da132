"""OCI image archives (for ``ctr image import``) made from the rootfs tars in images.py."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from integration.images import CACHE_DIR

IMAGE_ENV = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]


def _sha256_file(path: Path, *, gunzip: bool = False) -> str:
    digest = hashlib.sha256()
    opener = gzip.open if gunzip else open
    with opener(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _add_blob(archive: tarfile.TarFile, data: bytes) -> dict[str, Any]:
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size = len(data)
    archive.addfile(info, _Bytes(data))
    return {"digest": f"sha256:{digest}", "size": len(data)}


class _Bytes:
    def __init__(self, data: bytes) -> None:
        self._data, self._pos = data, 0

    def read(self, size: int = -1) -> bytes:
        end = len(self._data) if size < 0 else self._pos + size
        chunk, self._pos = self._data[self._pos : end], min(end, len(self._data))
        return chunk


def oci_archive(
    rootfs_tar: Path, name: str, env: list[str] | None = None, entrypoint: list[str] | None = None
) -> Path:
    """An OCI layout tar with one layer (the rootfs tar) named ``name`` (e.g. docker.io/x/y:z),
    whose config's Env is IMAGE_ENV and ``env``, and whose Entrypoint is ``entrypoint``."""
    gz = rootfs_tar.name.endswith(".gz")
    key = f"{rootfs_tar.name}-{rootfs_tar.stat().st_mtime_ns}-{name}".replace("/", "_").replace(
        ":", "_"
    ) + "".join(f"-{item}" for item in [*(env or []), *(entrypoint or [])])
    out = CACHE_DIR / f"oci-{hashlib.sha256(key.encode()).hexdigest()[:16]}.tar"
    if out.exists():
        return out
    layer_digest = _sha256_file(rootfs_tar)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Env": [*IMAGE_ENV, *(env or [])],
            **({"Entrypoint": entrypoint} if entrypoint else {}),
        },
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{_sha256_file(rootfs_tar, gunzip=gz)}"]},
    }
    fd, tmp = tempfile.mkstemp(prefix=".oci-", dir=CACHE_DIR)
    os.close(fd)
    with tarfile.open(tmp, "w") as archive:
        archive.add(rootfs_tar, arcname=f"blobs/sha256/{layer_digest}")
        config_ref = _add_blob(archive, json.dumps(config).encode())
        layer_type = "application/vnd.oci.image.layer.v1.tar" + ("+gzip" if gz else "")
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config_ref},
            "layers": [
                {
                    "mediaType": layer_type,
                    "digest": f"sha256:{layer_digest}",
                    "size": rootfs_tar.stat().st_size,
                }
            ],
        }
        manifest_ref = _add_blob(archive, json.dumps(manifest).encode())
        index = {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    **manifest_ref,
                    "annotations": {
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1],
                    },
                }
            ],
        }
        for filename, content in (
            ("index.json", index),
            ("oci-layout", {"imageLayoutVersion": "1.0.0"}),
        ):
            data = json.dumps(content).encode()
            info = tarfile.TarInfo(filename)
            info.size = len(data)
            archive.addfile(info, _Bytes(data))  # type: ignore[arg-type]
    os.replace(tmp, out)
    return out
