"""Installs the client's files into the worker (docs/remoting.md, "Files"): ``open``, the ``os``
functions that look at paths, and the libraries that open files their own way.

Everything here only routes: a path :func:`client_files.is_client_path` calls the client's goes
to the client (``open``/``file``/``fs`` requests), any other path to the worker's own
filesystem, exactly as before.
"""

from __future__ import annotations

import builtins
import io
import os
import sys
import types
from typing import Any, Callable, Dict

from radium_interposer import ops
from radium_interposer.after_import import find_spec_then
from radium_interposer.client_files import (
    ask,
    current_cwd,
    is_client_path,
    open_client_or_local,
)

__all__ = ["install"]

#: The os functions as they were, for the worker's own paths.
_real = {
    name: getattr(os, name)
    for name in ("stat", "lstat", "listdir", "mkdir", "remove", "unlink", "rename", "replace")
}


def install() -> None:
    """The worker's ``open`` becomes the client-aware one, before any library keeps a copy of
    the real one, and libraries that open files their own way are adapted as they load. Remote
    code sees the client's working directory as its own (``os.getcwd``, ``os.path.abspath``)."""
    builtins.open = io.open = open_client_or_local
    os.getcwd = current_cwd
    for name, routed in _ROUTED.items():
        setattr(os, name, routed)
    sys.meta_path.insert(0, _AdaptOnImport())


def _stat(path: Any, *, dir_fd: Any = None, follow_symlinks: bool = True) -> os.stat_result:
    if dir_fd is not None or not is_client_path(path):
        return _real["stat"](path, dir_fd=dir_fd, follow_symlinks=follow_symlinks)  # type: ignore[no-any-return]
    fields, times = ask({"op": ops.FS, "m": "stat", "a": [os.fspath(path), follow_symlinks]})
    return os.stat_result(fields, times)


def _lstat(path: Any, *, dir_fd: Any = None) -> os.stat_result:
    if dir_fd is not None or not is_client_path(path):
        return _real["lstat"](path, dir_fd=dir_fd)  # type: ignore[no-any-return]
    return _stat(path, follow_symlinks=False)


def _listdir(path: Any = ".") -> Any:
    if not is_client_path(path):
        return _real["listdir"](path)
    names = ask({"op": ops.FS, "m": "listdir", "a": [os.fspath(path)]})
    return [os.fsencode(n) for n in names] if isinstance(path, bytes) else names


def _mkdir(path: Any, mode: int = 0o777, *, dir_fd: Any = None) -> None:
    if dir_fd is not None or not is_client_path(path):
        return _real["mkdir"](path, mode, dir_fd=dir_fd)  # type: ignore[no-any-return]
    ask({"op": ops.FS, "m": "mkdir", "a": [os.fspath(path), mode & 0o777]})
    return None


def _remove(path: Any, *, dir_fd: Any = None) -> None:
    if dir_fd is not None or not is_client_path(path):
        return _real["remove"](path, dir_fd=dir_fd)  # type: ignore[no-any-return]
    ask({"op": ops.FS, "m": "remove", "a": [os.fspath(path)]})
    return None


def _renamer(name: str) -> Callable[..., None]:
    def rename(src: Any, dst: Any, **kwargs: Any) -> None:
        theirs = is_client_path(src), is_client_path(dst)
        if not any(theirs) or kwargs:
            return _real[name](src, dst, **kwargs)  # type: ignore[no-any-return]
        if not all(theirs):
            raise OSError(18, "cannot move a file between the client and the worker", src)
        ask({"op": ops.FS, "m": name, "a": [os.fspath(src), os.fspath(dst)]})
        return None

    return rename


_ROUTED: Dict[str, Callable[..., Any]] = {
    "stat": _stat, "lstat": _lstat, "listdir": _listdir, "mkdir": _mkdir,
    "remove": _remove, "unlink": _remove, "rename": _renamer("rename"),
    "replace": _renamer("replace"),
}  # fmt: skip


def _adapt_torch(serialization: types.ModuleType) -> None:
    # Before torch/__init__ binds torch.save and torch.load from here.
    serialization.save = _through_open(serialization.save, 1, "wb")  # type: ignore[attr-defined]
    serialization.load = _through_open(serialization.load, 0, "rb")  # type: ignore[attr-defined]


def _adapt_numpy(datasource: types.ModuleType) -> None:
    datasource.open = _datasource_open(datasource.open)  # type: ignore[attr-defined]


def _adapt_fromfile(numpy: types.ModuleType) -> None:
    # np.fromfile(f) with the program's file object f reads through it (no descriptor here).
    from radium_interposer.client_arrays import fromfile_adapted

    numpy.fromfile = fromfile_adapted(numpy.fromfile)  # type: ignore[attr-defined]


_ADAPTERS: Dict[str, Callable[[types.ModuleType], None]] = {
    "torch.serialization": _adapt_torch,
    "numpy.lib._datasource": _adapt_numpy,
    "numpy": _adapt_fromfile,
}


class _AdaptOnImport:  # (no importlib.abc base: see after_import.AfterLoading)
    """Runs a library's adapter right after the library's module is loaded."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        adapter = _ADAPTERS.get(name)
        return None if adapter is None else find_spec_then(self, name, path, target, adapter)


def _through_open(function: Any, position: int, mode: str) -> Any:
    """``function`` whose path argument at ``position`` (or ``f``) is opened here first when it
    is the client's: torch then streams through the file object instead of its own writer."""

    def adapted(*args: Any, **kwargs: Any) -> Any:
        args_list = list(args)
        key: Any = position if len(args_list) > position else "f"
        target = args_list[position] if key == position else kwargs.get("f")
        if not is_client_path(target):
            return function(*args, **kwargs)
        with open_client_or_local(target, mode) as handle:
            if key == position:
                args_list[position] = handle
            else:
                kwargs["f"] = handle
            return function(*args_list, **kwargs)

    adapted.__wrapped__ = function  # type: ignore[attr-defined]
    adapted.__name__, adapted.__doc__ = function.__name__, function.__doc__
    return adapted


def _datasource_open(function: Any) -> Any:
    """numpy's text readers and writers (loadtxt, genfromtxt, savetxt) look for the file on this
    machine first; a client path goes straight to the client's file instead."""

    def adapted(path: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if not is_client_path(path):
            return function(path, mode, *args, **kwargs)
        return open_client_or_local(
            path, mode, encoding=kwargs.get("encoding"), newline=kwargs.get("newline")
        )

    adapted.__wrapped__ = function  # type: ignore[attr-defined]
    return adapted
