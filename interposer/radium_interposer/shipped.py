"""The client's own code on the worker: classes and functions shipped as source and defined in
a namespace of their own per client module, ``radium_shipped.<module>`` (never the worker's own
``__main__``). Their ``__module__`` is that namespace, so they are found by import path like any
class: ``radium_shipped.__main__.Net``. Spec: docs/data-plane.md, operation ``ship``.
"""

from __future__ import annotations

import re
import sys
import types
from typing import Any, Dict, List

from radium_interposer import nested

__all__ = ["ROOT", "define", "namespace"]

ROOT = "radium_shipped"
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def namespace(client_module: str) -> types.ModuleType:
    """The worker's module for the client's module ``client_module`` (made once)."""
    if not _MODULE.match(client_module):
        raise ValueError(f"not a module name: {client_module!r}")
    name = f"{ROOT}.{client_module}"
    module = sys.modules.get(name)
    if module is None:
        if ROOT not in sys.modules:
            package = types.ModuleType(ROOT)
            package.__path__ = []
            sys.modules[ROOT] = package
        module = types.ModuleType(name)
        sys.modules[name] = module
    return module


def define(client_module: str, names: Dict[str, Any], defs: List[Dict[str, Any]]) -> str:
    """Bind ``names`` (what the definitions refer to) in the module's namespace, then run each
    definition's source there, in order; the namespace's name."""
    module = namespace(client_module)
    module.__dict__.update(names)
    for definition in defs:
        # Blank lines first: tracebacks name the client's file and its real line numbers.
        padding = "\n" * max(0, int(definition.get("line", 1)) - 1)
        filename = str(definition.get("file") or f"<radium: shipped from {client_module}>")
        code = compile(padding + str(definition["src"]), filename, "exec")
        qualname = definition.get("q")
        if isinstance(qualname, str):
            key = definition.get("k")  # a class defined in a function: a path of its own
            nested.define(module, qualname, code, key if isinstance(key, str) else qualname)
        else:
            exec(code, module.__dict__)
    return module.__name__
