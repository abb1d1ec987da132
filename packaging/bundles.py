"""Radium client bundles: one host directory per (libc, arch), with a manifest.

A bundle is what the hook bind-mounts read-only into a container::

    <bundles.dir>/glibc-x86_64/
        manifest.json            name, version, libc, arch, content hash, per-file hashes
        python/radium_interposer/...

The interposer is stdlib-only Python today, so bundles differ only in their manifest; the
per-platform split is where native pieces (a preload library, wheels) will go.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import radium
from radium.errors import NoBundleError
from radium.packaging.manifest import FORMAT, MANIFEST, PYTHON_DIR
from radium.packaging.manifest import read as read_manifest

__all__ = ["DEFAULT_LIBCS", "Manifest", "build", "build_one", "interposer_source", "verify"]

DEFAULT_LIBCS = ("glibc", "musl")


@dataclass(frozen=True)
class Manifest:
    """What a client bundle is: its name, version, libc, architecture and content digest."""

    name: str
    version: str
    libc: str
    arch: str
    content_sha256: str
    files: dict[str, str]

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": FORMAT,
                "name": self.name,
                "version": self.version,
                "libc": self.libc,
                "arch": self.arch,
                "content_sha256": self.content_sha256,
                "files": self.files,
            },
            indent=2,
            sort_keys=True,
        )


def interposer_source() -> Path:
    """The directory of the installed ``radium_interposer`` package."""
    import radium_interposer

    return Path(radium_interposer.__file__).parent


def _hash_files(root: Path) -> dict[str, str]:
    import hashlib  # not at module level: the hook only reads manifests, on every start

    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name != MANIFEST
    }


def _content_hash(files: dict[str, str]) -> str:
    import hashlib

    digest = hashlib.sha256()
    for name, file_hash in sorted(files.items()):
        digest.update(f"{name}\0{file_hash}\n".encode())
    return digest.hexdigest()


def build_one(out_dir: Path, libc: str, arch: str, source: Path) -> Manifest:
    """Build (or rebuild) the bundle ``{libc}-{arch}`` under ``out_dir``, atomically."""
    name = f"{libc}-{arch}"
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=out_dir))
    try:
        shutil.copytree(
            source,
            staging / PYTHON_DIR / source.name,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
        files = _hash_files(staging)
        manifest = Manifest(name, radium.__version__, libc, arch, _content_hash(files), files)
        (staging / MANIFEST).write_text(manifest.to_json() + "\n", encoding="utf-8")
        for path in [staging, *staging.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        final = out_dir / name
        if final.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{name}-old-", dir=out_dir))
            os.rename(final, old / name)
            os.rename(staging, final)
            shutil.rmtree(old)
        else:
            os.rename(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return manifest


def build(out_dir: Path, libcs: Iterable[str] = DEFAULT_LIBCS, arch: str = "") -> list[Manifest]:
    """Build one bundle per libc for ``arch`` (default: this machine's)."""
    source = interposer_source()
    return [build_one(out_dir, libc, arch or platform.machine(), source) for libc in libcs]


def verify(bundle_dir: Path) -> dict[str, Any]:
    """Check every file of the bundle against its manifest; return the manifest."""
    manifest = read_manifest(bundle_dir)
    actual = _hash_files(bundle_dir)
    if actual != manifest.get("files") or _content_hash(actual) != manifest.get("content_sha256"):
        raise NoBundleError(
            f"Radium bundle {bundle_dir} does not match its manifest",
            hint="rebuild it with 'radium bundles build'",
        )
    return manifest
