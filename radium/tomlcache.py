"""Parsed TOML files, cached by (size, inode, mtime) in a root-only tmpfs directory.

The runtime wrapper and the hook read the config on every container start; parsing TOML costs
more than the rest of their work, so each parse result is kept (marshal: a builtin, no import
cost) until the file changes or the machine reboots. Without a writable cache directory (not
root) every call parses, which is correct, only slower.

The cache is bounded: each write (a miss: a new or changed file) drops the entries of files that
no longer exist, then the oldest written beyond :data:`MAX_ENTRIES`. Hits never scan it.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import sys

from radium.errors import ConfigError

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

__all__ = ["CACHE_DIR", "MAX_ENTRIES", "entry_name", "load", "load_file", "parse"]

CACHE_DIR = "/run/radium/toml-cache"
#: Entries kept at most (a machine reads a handful of configs; tests make hundreds of them).
MAX_ENTRIES = 64


def parse(raw: bytes, source: str) -> dict[str, Any]:
    """TOML bytes as a dict; ConfigError naming ``source`` when they are not UTF-8 TOML."""
    # Imported here: with the cache warm, container starts never need the parser.
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on older interpreters only
        import tomli as tomllib
    try:
        data: dict[str, Any] = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source} is not UTF-8 text") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source} is not valid TOML: {exc}") from exc
    return data


def load_file(path: str, source: str, cache_dir: str | None = None) -> dict[str, Any]:
    """The TOML file at ``path`` parsed (see :func:`parse`), from the cache when unchanged."""
    return load(path, lambda raw: parse(raw, source), cache_dir)


def load(
    path: str, parse: Callable[[bytes], dict[str, Any]], cache_dir: str | None = None
) -> dict[str, Any]:
    """``parse(contents of path)``, from the cache when the file has not changed.

    OSError from reading ``path`` and whatever ``parse`` raises go to the caller.
    """
    st = os.stat(path)
    key = (st.st_size, st.st_ino, st.st_mtime_ns)
    cache_file = os.path.join(cache_dir or CACHE_DIR, entry_name(path))
    entry = _read(cache_file)
    if entry is not None and entry[0] == key:
        return entry[1]
    with open(path, "rb") as f:
        data = parse(f.read())
    if _write(cache_file, (key, data)):
        _prune(os.path.dirname(cache_file), keep=os.path.basename(cache_file))
    return data


def entry_name(path: str) -> str:
    """The cache file's name for ``path``: its absolute path percent-encoded, "%" first (every
    path has a name of its own: "/" as "%" alone made "x/25" and "x%" one file)."""
    return os.path.abspath(path).replace("%", "%25").replace("/", "%2F")


def _source(name: str) -> str:
    return name.replace("%2F", "/").replace("%25", "%")  # the inverse of entry_name


def _prune(cache_dir: str, keep: str) -> None:
    """Drop entries whose file is gone, then the oldest beyond MAX_ENTRIES (never ``keep``)."""
    live = []
    try:
        with os.scandir(cache_dir) as entries:
            for entry in entries:
                if entry.name == keep or not entry.name.startswith("%2F"):  # a temporary file
                    continue
                if os.path.exists(_source(entry.name)):
                    with contextlib.suppress(OSError):
                        live.append((entry.stat(follow_symlinks=False).st_mtime_ns, entry.name))
                    continue
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
    except OSError:
        return
    live.sort()
    for _, name in live[: max(0, len(live) - (MAX_ENTRIES - 1))]:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(cache_dir, name))


def _read(cache_file: str) -> tuple[tuple[int, int, int], dict[str, Any]] | None:
    try:
        with open(cache_file, "rb") as f:
            entry = marshal.load(f)
    except (OSError, EOFError, ValueError, TypeError):
        return None
    ok = isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], dict)
    return entry if ok else None


def _write(cache_file: str, entry: tuple[tuple[int, int, int], dict[str, Any]]) -> bool:
    """Whether the entry was written (not for datetimes, nor without a writable directory)."""
    directory, name = os.path.split(cache_file)
    tmp = os.path.join(directory, f".{os.getpid()}.{name}")  # "." first: never pruned
    try:
        blob = marshal.dumps(entry)  # ValueError for TOML datetimes: those files go uncached
        os.makedirs(os.path.dirname(cache_file), mode=0o700, exist_ok=True)
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, cache_file)
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False
    return True
