"""What to remote, and the import hooks that do it.

``RADIUM_REMOTE=torch,numpy.linalg,app.model:train_step`` or a split file (``RADIUM_SPLIT``,
TOML: ``modules = [...]`` and ``functions = ["module:function", ...]``). A remoted module (and
everything under it) is provided by the worker, so it may be absent from the image. A remoted
function of the user's own code stays importable locally; calling it runs it on the worker,
after shipping the module's source there if the worker lacks the module.
"""

from __future__ import annotations

import fnmatch
import importlib.machinery
import os
import sys
import types
from typing import Any, Callable, Dict, List, Optional, Sequence, Set

from radium_interposer import (
    client_points,
    client_warnings,
    codec,
    cwd,
    exits,
    local_draws,
    main_module,
    ops,
    proxy,
    reads,
    received,
    wiring,
)
from radium_interposer.after_import import Loader, find_spec_then
from radium_interposer.client import state
from radium_interposer.errors import RemoteError, hide_our_frames
from radium_interposer.split_file import parse_entries
from radium_interposer.tags import PATH

__all__ = ["RemoteFinder", "RemoteModule", "install", "remote_function", "remote_main_function"]

#: Module attributes that stay this process's own (the import system's), whatever the worker's.
_OWN = frozenset(("__name__", "__loader__", "__spec__", "__path__", "__package__",
                  "__builtins__", "__cached__", "__dict__"))  # fmt: skip


class RemoteModule(types.ModuleType):
    """A module that lives on the worker: its attributes are values, submodules, classes (as
    local stand-ins) or proxies; its plain dunders (``__version__``, ``__file__``, ``__doc__``)
    are the worker's."""

    __radium_remote__ = True

    def __init__(self, name: str, directory: Dict[str, Any], exported: Optional[List[str]]) -> None:
        super().__init__(name)
        self.__radium_directory__ = directory
        if exported is not None:
            self.__all__ = exported
        for attr, kind in directory.items():
            if (
                attr.startswith("__")
                and attr not in _OWN
                and isinstance(kind, list)
                and (kind[0] == "v")
            ):
                setattr(self, attr, kind[1])

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        kind = self.__radium_directory__.get(attr)
        if kind == "l":  # a property of the module's class: the worker's value now, not kept
            return reads.call("builtins.getattr", self._rd_itself(), attr, pipeline=False)
        if kind is None or kind == "m":
            try:
                value: Any = importlib.import_module(f"{self.__name__}.{attr}")
            except ImportError:
                if kind == "m":
                    raise AttributeError(
                        f"remote module {self.__name__!r} has no {attr!r}"
                    ) from None
                value = self._rd_dynamic(attr)
        elif isinstance(kind, list) and kind[0] == "c":
            from radium_interposer import classes

            value = classes.stand_in(str(kind[1]), kind[2])
        elif isinstance(kind, list):
            value = kind[1]
        else:
            value = proxy.Remote({"$": PATH, "p": f"{self.__name__}.{attr}"}, "", None)
        setattr(self, attr, value)
        return value

    def __setattr__(self, attr: str, value: Any) -> None:
        directory = self.__dict__.get("__radium_directory__", {})
        if directory.get(attr) == "l":  # torch.backends.cudnn.benchmark = True: the worker's
            reads.call("builtins.setattr", self._rd_itself(), attr, value, pipeline=False)
        else:
            super().__setattr__(attr, value)

    def _rd_dynamic(self, attr: str) -> Any:
        """An attribute the module makes on demand (a module ``__getattr__``, PEP 562, or a
        module object standing in for another, as torch.backends.cudnn): the worker's."""
        missing: Set[str] = self.__dict__.setdefault("__radium_missing__", set())
        if attr not in missing:
            try:
                return reads.call("builtins.getattr", self._rd_itself(), attr, pipeline=False)
            except AttributeError:
                missing.add(attr)  # hasattr() in a loop asks once
        raise AttributeError(f"remote module {self.__name__!r} has no {attr!r}")

    def _rd_itself(self) -> proxy.Remote:
        """This module on the worker, as a call's argument (by its import path)."""
        return proxy.Remote({"$": PATH, "p": self.__name__}, "", None)

    def __dir__(self) -> List[str]:
        return sorted(self.__radium_directory__)

    def __repr__(self) -> str:
        return f"<remote module {self.__name__!r} (radium)>"


class _RemoteLoader(Loader):  # (importlib.abc's for the type checker only: after_import)
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        reply = proxy.request(ops.IMPORT, m=spec.name)
        client_warnings.import_filters(reply.get("wf"))  # its own warnings' filters
        return RemoteModule(spec.name, reply["dir"], reply.get("all"))

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def _remote_functions(functions: Sequence[str]) -> Callable[[types.ModuleType], None]:
    """Replaces the listed functions of a module, once loaded, with their remote stand-ins."""

    def wrap(module: types.ModuleType) -> None:
        for name in functions:
            local = getattr(module, name, None)
            if callable(local):
                setattr(module, name, remote_function(module, name, local))

    return wrap


class RemoteFinder:  # (no importlib.abc base: see after_import.AfterLoading)
    """The import hook that serves the remoted modules (and functions) from the worker."""

    def __init__(self, modules: Set[str], functions: Dict[str, List[str]]) -> None:
        self.modules, self.functions = modules, functions

    def covers(self, fullname: str) -> bool:
        parts = fullname.split(".")
        return any(".".join(parts[:n]) in self.modules for n in range(1, len(parts) + 1))

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if self.covers(fullname):
            return importlib.machinery.ModuleSpec(fullname, _RemoteLoader(), is_package=True)
        functions = self.functions.get(fullname)
        if functions:
            return find_spec_then(self, fullname, path, target, _remote_functions(functions))
        return None


_shipped: Set[str] = set()


def _ensure_shipped(module: types.ModuleType) -> None:
    """Ship the module's source to the worker unless it has that module (once per process)."""
    name = module.__name__
    if name in _shipped:
        return
    from radium_interposer import user_modules

    user_modules.sync()  # the program's modules: this one, and those it imports, found there
    path = getattr(module, "__file__", None)
    source = b""
    if path:
        with open(path, "rb") as f:
            source = f.read()
    import hashlib  # here: a split file's function only (not every remoted Python's start)

    digest = hashlib.sha256(source).hexdigest()
    if not proxy.request(ops.ENSURE, m=name, sha=digest)["have"]:
        if not source:
            raise RemoteError(f"the worker lacks module {name} and its source is unknown")
        state.connection().request({"op": ops.DEFINE, "m": name, "file": path}, [source])
    _shipped.add(name)


def remote_function(module: types.ModuleType, name: str, local: Any) -> Any:
    """The stand-in of a split-file function of an imported module: its module's source is
    shipped once, then the call runs there."""

    def where() -> str:
        _ensure_shipped(module)
        return f"{module.__name__}.{name}"

    return _stand_in(local, where)


def remote_main_function(local: Any) -> Any:
    """The stand-in of a split-file function of the main module (``python train.py``): shipped
    alone with what it refers to (the script's top level must not run on the worker)."""

    def where() -> str:
        from radium_interposer import shipping

        return shipping.ship_function(local)

    return _stand_in(local, where)


def _stand_in(local: Any, where: Callable[[], str]) -> Any:
    """Calls run at the worker path ``where()`` gives, with this program's arguments and
    allowed environment."""

    def call(*args: Any, **kwargs: Any) -> Any:
        path = where()
        from radium_interposer import user_modules

        user_modules.refresh()  # `config.lr = ...` set since: seen by this call, as here
        return proxy.invoke({"$": PATH, "p": path}, args, kwargs, path, context=_context())

    return main_module.stand_in(local, call)


#: Environment variables (fnmatch patterns) a split file lets remoted functions see.
_environment: List[str] = []


def _context() -> Dict[str, Any]:
    """What a split-file function sees of this program: its arguments and allowed variables."""
    env = (
        {
            key: value
            for key, value in os.environ.items()
            if any(fnmatch.fnmatchcase(key, pattern) for pattern in _environment)
        }
        if _environment
        else {}
    )
    return {"argv": list(sys.argv), "env": env}


def _class_ref(cls: type) -> Optional[str]:
    from radium_interposer import shipping  # imported on the first class to cross

    return shipping.class_ref(cls)


def install(entries: Sequence[str], environment: Sequence[str] = ()) -> RemoteFinder:
    """Put the remote finder first on ``sys.meta_path`` for ``entries``."""
    modules, functions = parse_entries(entries)
    _environment[:] = environment
    finder = RemoteFinder(modules, functions)
    main_module.watch(functions, remote_main_function)
    wiring.install()  # the lower layers' upcalls, before any connection
    codec.numpy_is_remote = finder.covers("numpy")
    codec.class_ref = _class_ref  # the user's classes are shipped, remote ones named
    codec.exception_node = exits.node  # a `with` body's exception, to a remote __exit__
    received.remoted = finder.covers  # what a worker's module references may import
    sys.meta_path.insert(0, finder)
    client_points.install_print_barrier(state)
    local_draws.install()  # the program's draws from random take the worker's state first
    cwd.install()  # the express lane reads the directory again only after a change
    hide_our_frames()
    return finder
