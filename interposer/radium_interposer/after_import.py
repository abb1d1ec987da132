"""Run code right after a module loads, whichever finder finds it: the interposer wraps the
split file's functions of the user's modules, the worker adapts libraries that open files."""

from __future__ import annotations

import importlib.machinery
import sys
import types
from typing import TYPE_CHECKING, Any, Callable, Optional

if TYPE_CHECKING:  # the type only: see AfterLoading
    from importlib.abc import Loader
else:
    Loader = object

__all__ = ["After", "AfterLoading", "Loader", "find_spec_then"]

After = Callable[[types.ModuleType], None]


class AfterLoading(Loader):
    """The module's real loader, then ``after(module)``. (An ``importlib.abc.Loader`` for the
    type checker only: the import system calls ``create_module`` and ``exec_module``, and
    importing ``importlib.abc`` would cost every remoted Python tens of milliseconds at start:
    it loads ``importlib.resources``, ``tempfile``, ``pathlib``...)"""

    def __init__(self, real: Any, after: After) -> None:
        self.real, self.after = real, after

    def __getattr__(self, name: str) -> Any:
        # get_code, get_source, is_package, get_filename...: runpy (``python -m``) asks for them.
        return getattr(self.real, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[types.ModuleType]:
        module: Optional[types.ModuleType] = self.real.create_module(spec)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        self.real.exec_module(module)
        self.after(module)


def find_spec_then(
    caller: object, name: str, path: Any, target: Any, after: After
) -> Optional[importlib.machinery.ModuleSpec]:
    """The spec the other finders give for ``name``, its loader followed by ``after``."""
    for finder in sys.meta_path:
        if finder is caller or not hasattr(finder, "find_spec"):
            continue
        spec = finder.find_spec(name, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = AfterLoading(spec.loader, after)
            return spec
    return None
