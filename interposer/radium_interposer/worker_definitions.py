"""The worker's operations that give it the client's code: what a module holds (``import``),
whether the worker has a module (``ensure``, ``find``), the client's modules as source
(``define``) and its classes and functions as source (``ship``). Spec: docs/data-plane.md.

:class:`Definitions` is a mixin of :class:`radium_interposer.worker.Worker`, whose table of
operations names these methods.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import logging
import sys
import types
import warnings
from typing import Any, Dict, List, Tuple

from radium_interposer import names, pickled, shipped, shipped_modules, worker_warnings
from radium_interposer.naming import directory_entry, live_attributes
from radium_interposer.tags import DICT

__all__ = ["Definitions", "Reply"]

log = logging.getLogger("radium.worker")
Reply = Tuple[Dict[str, Any], List[Any]]


class Definitions:
    """The client's code on the worker; ``shipped`` is what it sent as source, by module."""

    def __init__(self) -> None:
        #: Module name to the sha256 of the source the client shipped for it.
        self.shipped: Dict[str, str] = {}

    def decode(self, tree: Any, buffers: List[Any]) -> Any:
        raise NotImplementedError  # the Worker's: values as the worker resolves them

    def op_import(self, meta: Dict[str, Any], buffers: List[Any]) -> Reply:
        module = importlib.import_module(str(meta["m"]))
        directory: Dict[str, Any] = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name in dir(module):
                with contextlib.suppress(Exception):
                    directory[name] = directory_entry(getattr(module, name))
        directory.update(dict.fromkeys(live_attributes(module), "l"))
        exported = getattr(module, "__all__", None)
        reply = {"dir": directory, "all": list(exported) if exported is not None else None}
        return {**reply, "wf": worker_warnings.filters_of(module.__name__)}, []

    def op_ensure(self, meta: Dict[str, Any], buffers: List[Any]) -> Reply:
        """Whether the worker has module ``m`` (its own copy, or the client's shipped source)."""
        name = str(meta["m"])
        if self.shipped.get(name) == meta.get("sha"):
            return {"have": True}, []
        try:
            native = name not in self.shipped and importlib.util.find_spec(name) is not None
        except ImportError:
            native = False
        return {"have": native}, []

    def op_find(self, meta: Dict[str, Any], buffers: List[Any]) -> Reply:
        """Whether module ``m`` can be imported here, else the closest names that can."""
        return names.find(meta.get("m", "")), []  # find refuses what is not a module name

    def op_define(self, meta: Dict[str, Any], buffers: List[Any]) -> Reply:
        """Load the client's source of module ``m`` (shipped because the worker lacked it);
        with ``mods``: register the program's own modules, imported when needed."""
        if "mods" in meta:
            self.shipped.update(shipped_modules.register(meta["mods"], buffers, self.decode))
            return {}, []
        name, source = str(meta["m"]), bytes(buffers[0])
        parent = name.rpartition(".")[0]
        if parent and parent not in sys.modules:
            try:
                importlib.import_module(parent)
            except ImportError:
                package = types.ModuleType(parent)
                package.__path__ = []
                sys.modules[parent] = package
        module = types.ModuleType(name)
        module.__file__ = f"<radium: shipped {meta.get('file', name)}>"
        exec(compile(source, module.__file__, "exec"), module.__dict__)
        sys.modules[name] = module
        self.shipped[name] = hashlib.sha256(source).hexdigest()
        log.info("loaded shipped module %s (%d bytes)", name, len(source))
        return {}, []

    def op_ship(self, meta: Dict[str, Any], buffers: List[Any]) -> Reply:
        """Define the client's classes and functions (source) with what they refer to."""
        names = self.decode(meta.get("g", {"$": DICT, "k": [], "v": []}), buffers)
        if not isinstance(names, dict):
            raise ValueError("ship: g must be a mapping of names")
        names.update(pickled.placeholders(meta.get("x")))  # globals the client could not send
        defs = meta.get("defs", [])
        if not isinstance(defs, list) or not all(isinstance(d, dict) for d in defs):
            raise ValueError("ship: defs must be a list of definitions")
        where = shipped.define(str(meta["mod"]), names, defs)
        heads = [_head(str(d.get("src", ""))) for d in defs]
        log.info("defined in %s: %s", where, "; ".join(heads))
        return {"ns": where}, []


def _head(source: str) -> str:
    """A definition's first line past its decorators, for the log: ``def evaluate(model)``."""
    lines = [line.strip() for line in source.splitlines() if line.strip()]
    return next((line for line in lines if not line.startswith("@")), "").rstrip(":")
