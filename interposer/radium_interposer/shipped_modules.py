"""The program's own modules on the worker: sent by the client as source (operation
``define`` with ``mods``, :mod:`radium_interposer.user_modules`), imported here by their own
names when something imports them.

The sources are registered with a finder placed first on ``sys.meta_path``: a module of the
program shadows a same-named module of the worker's, as the program's folder shadows
site-packages locally. A module runs when first imported here (a shipped function's reference,
or one module of the program importing another, ``from . import util`` in a package). Its
top level already ran in the program, which printed what it prints: here its output is dropped.
A module sent again with other source (another program on the same worker) is reloaded from the
new source at its next import.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import logging
import re
import sys
import threading
import types
from typing import Any, Callable, Dict, List, Optional, Tuple

from radium_interposer.after_import import Loader

__all__ = ["register"]

log = logging.getLogger("radium.worker")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class _Sources(Loader):  # (importlib.abc's for the type checker only: after_import)
    """The program's modules: name -> (source, the client's file name, is a package)."""

    def __init__(self) -> None:
        self.sources: Dict[str, Tuple[bytes, str, bool]] = {}
        #: The program's values of a module's globals, set over its run of the source.
        self.values: Dict[str, Dict[str, Any]] = {}

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        found = self.sources.get(fullname)
        if found is None:
            return None
        _, file, package = found
        spec = importlib.machinery.ModuleSpec(
            fullname, self, origin=file or None, is_package=package
        )
        spec.has_location = bool(file)  # __file__: the program's own path (data beside it)
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[types.ModuleType]:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        source, file, _ = self.sources[module.__name__]
        code = compile(source, file or f"<radium: shipped {module.__name__}>", "exec")
        with _quiet():
            exec(code, module.__dict__)
        module.__dict__.update(self.values.get(module.__name__, {}))
        log.info("loaded shipped module %s (%d bytes)", module.__name__, len(source))
        self._import_children(module.__name__)

    def _import_children(self, package: str) -> None:
        """The package's submodules the program has loaded, imported too: ``import pkg.sub``
        in its main program (which does not run here) made ``pkg.sub`` an attribute there."""
        prefix = f"{package}."
        for name in list(self.sources):
            if name.startswith(prefix) and "." not in name[len(prefix) :]:
                try:
                    importlib.import_module(name)
                except Exception as exc:  # its own error, raised where it is used instead
                    log.info("shipped module %s not loaded: %s", name, exc)


_finder = _Sources()
_lock = threading.Lock()


def register(
    mods: Any, buffers: List[Any], decode: Callable[[Any, List[Any]], Any]
) -> Dict[str, str]:
    """Register the client's modules: each ``mods`` entry names one, with its source (``s``: a
    buffer's index) and/or the program's values of its globals (``g``); the sha256 of each
    source, by name."""
    if not isinstance(mods, list) or not all(isinstance(m, dict) for m in mods):
        raise ValueError("define: mods must be a list of modules")
    digests: Dict[str, str] = {}
    with _lock:
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)
        for mod in mods:
            name = mod.get("m")
            if not isinstance(name, str) or not _MODULE.match(name):
                raise ValueError(f"define: not a module name: {name!r}")
            if "s" in mod:
                entry = (
                    bytes(buffers[int(mod["s"])]),
                    str(mod.get("file") or ""),
                    bool(mod.get("pkg")),
                )
                if _finder.sources.get(name) not in (None, entry) and name in sys.modules:
                    del sys.modules[name]  # another program's copy: this one's at the next import
                    _finder.values.pop(name, None)
                _finder.sources[name] = entry
                digests[name] = hashlib.sha256(entry[0]).hexdigest()
            if "g" in mod:
                _set_values(name, decode(mod["g"], buffers))
    return digests


def _set_values(name: str, values: Any) -> None:
    """The program's values of module ``name``'s globals: now if it runs here, else after."""
    if not isinstance(values, dict) or not all(isinstance(k, str) for k in values):
        raise ValueError("define: g must map names to values")
    _finder.values.setdefault(name, {}).update(values)
    module = sys.modules.get(name)
    if module is not None and getattr(module.__spec__, "loader", None) is _finder:
        module.__dict__.update(values)


class _quiet:
    """Drops what a module's top level prints while it runs here (the worker's streams are
    per-call captures: :class:`radium_interposer.worker_context.Capture`)."""

    def __enter__(self) -> None:
        self.saved = [(s, getattr(s.local, s.stream, None)) for s in _captures()]
        for stream, _ in self.saved:
            setattr(stream.local, stream.stream, [])

    def __exit__(self, *exc: Any) -> None:
        for stream, sink in self.saved:
            setattr(stream.local, stream.stream, sink)


def _captures() -> List[Any]:
    return [
        s
        for s in (sys.stdout, sys.stderr)
        if isinstance(getattr(s, "local", None), threading.local) and hasattr(s, "stream")
    ]
