"""Read the dynamic loader's cache (``/etc/ld.so.cache``) the way nvidia-container-cli does.

The loader finds a library by its name in this cache, so the cache is what says which host
files a program would load: reading it (rather than walking directories) finds the driver
libraries wherever the distribution or the driver installer put them. Only the format glibc
writes since 2.32 (``glibc-ld.so.cache1.1``, alone or after the old one) is read.
"""

from __future__ import annotations

import platform
import struct
from dataclasses import dataclass
from pathlib import Path

from radium.errors import DeviceError

__all__ = ["MAGIC", "CacheEntry", "entries", "native_flags"]

MAGIC = b"glibc-ld.so.cache1.1"
#: magic, nlibs, len_strings, flags, 3 pad bytes, extension offset, 3 unused words
_HEADER = struct.Struct(f"<{len(MAGIC)}sIIB3xI12x")
#: flags, key (name) offset, value (path) offset, osversion, hwcap
_ENTRY = struct.Struct("<iIIIQ")
#: FLAG_ELF_LIBC6 with the architecture bits of a 64-bit library of that machine (glibc's
#: ldconfig.h); a 32-bit library of the same name (no arch bits) must not be bound.
_NATIVE = {"x86_64": 0x0303, "aarch64": 0x0A03, "ppc64le": 0x0503}


@dataclass(frozen=True)
class CacheEntry:
    """One library the loader knows: its name (soname, or a link name) and host path."""

    name: str
    path: str
    flags: int


def native_flags(machine: str | None = None) -> int | None:
    """The cache flags of this machine's own libraries; None when unknown (take any)."""
    return _NATIVE.get(machine or platform.machine())


def entries(root: Path = Path("/")) -> list[CacheEntry]:
    """Every entry of ``root``'s loader cache, in the cache's order."""
    cache = root / "etc/ld.so.cache"
    try:
        data = cache.read_bytes()
    except OSError as exc:
        raise DeviceError(f"cannot read the loader cache {cache}: {exc.strerror}") from exc
    start = data.find(MAGIC)
    if start < 0 or len(data) < start + _HEADER.size:
        raise DeviceError(
            f"{cache} is not a loader cache this acceptor reads (no {MAGIC.decode()} header)",
            hint="run ldconfig to rebuild it",
        )
    _, count, _, _, _ = _HEADER.unpack_from(data, start)
    found = []
    for index in range(count):
        at = start + _HEADER.size + index * _ENTRY.size
        if at + _ENTRY.size > len(data):
            raise DeviceError(f"{cache} is truncated", hint="run ldconfig to rebuild it")
        flags, key, value, _, _ = _ENTRY.unpack_from(data, at)
        found.append(CacheEntry(_string(data, start + key), _string(data, start + value), flags))
    return found


def _string(data: bytes, at: int) -> str:
    end = data.find(b"\0", at)
    return data[at : end if end >= 0 else len(data)].decode(errors="surrogateescape")
