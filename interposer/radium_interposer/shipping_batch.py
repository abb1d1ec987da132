"""One module's definitions shipped together (:mod:`radium_interposer.shipping`): the user's
classes and functions as source, each after those of its module it refers to, with the globals
they use bound by value or by reference; one ``ship`` operation defines them all on the worker.
"""

from __future__ import annotations

import inspect
import textwrap
import types
from typing import Any, Callable, Dict, List, Optional

from radium_interposer import codec, local_defs, nested, ops, pickled, program_state
from radium_interposer.client import state
from radium_interposer.errors import RemoteError
from radium_interposer.shipped_paths import is_users, known, remember
from radium_interposer.tags import DICT

__all__ = ["Batch", "Refer", "ShipError"]

#: How a shipped module's globals refer to what is not a value (modules, remote objects, library
#: functions and classes): shipping's, given to each batch (it ships what they name in turn).
Refer = Callable[[Any], Optional[Dict[str, Any]]]


class ShipError(RemoteError):
    """A class or function of the user's code cannot be sent to the worker (no source)."""


# Programs meet it as shipping's (their tracebacks, ``except shipping.ShipError``), which
# re-exports it: the error of shipping as a whole, defined below its batches that raise it.
ShipError.__module__ = "radium_interposer.shipping"


class Batch:
    """Definitions of one module to send together, each after those it refers to."""

    def __init__(self, module: types.ModuleType, refer: Refer) -> None:
        self.module = module
        self.refer = refer
        self.defs: List[Dict[str, Any]] = []
        self.names: Dict[str, Any] = {}
        self.objects: List[Any] = []
        self.seen: set = set()  # type: ignore[type-arg]
        self.keys: Dict[int, str] = {}  # local classes' own paths (local_defs.unique_key)

    def key(self, obj: Any) -> str:
        """Where the worker keeps ``obj`` in its namespace: its qualname, one of its own for a
        class defined in a function."""
        return self.keys.get(id(obj)) or str(obj.__qualname__)

    def add(self, obj: Any) -> None:
        """Add a class or function by its source, after the module's own definitions it uses."""
        if id(obj) in self.seen or known(obj) is not None:
            return
        self.seen.add(id(obj))
        try:
            lines, line = inspect.getsourcelines(obj)
            filename = inspect.getsourcefile(obj) or ""
        except (OSError, TypeError) as exc:
            raise ShipError(
                f"{obj.__qualname__} cannot run on the worker: its source is not available "
                f"({exc}); define it in a file"
            ) from None
        source = textwrap.dedent("".join(lines))
        for name in sorted(program_state.global_names(source)):  # not its locals
            self.bind(name, obj)
        self.defs.append({"src": source, "line": line, "file": filename})
        if local_defs.is_local(obj):
            self.keys[id(obj)] = self.defs[-1]["k"] = local_defs.unique_key(obj.__qualname__)
        self.objects.append(obj)

    def bind(self, name: str, owner: Any) -> None:
        """A global the definition refers to: its definition, or its value, for the worker.
        Watched from now on: sent again once it appears or is rebound (program_state)."""
        namespace = vars(self.module)
        if name not in namespace:
            program_state.watch(self.module.__name__, name)  # assigned later (in __main__)
            return
        value = namespace[name]
        if name in self.names or value is owner:
            return
        program_state.note(value, owner)
        program_state.watch(self.module.__name__, name, value)
        if (
            is_users(value)
            and getattr(value, "__module__", None) == self.module.__name__
            and known(value) is None
        ):
            self.add(value)  # the module's own: defined there too, first
            return
        self.names[name] = value  # shipped ones too: by path (a name rebound to one of them)

    def send(self) -> None:
        """Define the batch on the worker, and remember where each of its definitions is."""
        buffers: List[Any] = []
        tree: Dict[str, List[Any]] = {"k": [], "v": []}
        unsent: Dict[str, str] = {}
        for name, value in self.names.items():
            try:
                encoded = codec.encode(value, buffers, _globals_refer(buffers, self.refer))
            except (codec.EncodeError, ShipError) as exc:
                # Bound there to a stand-in that raises this at any use: never a bare NameError.
                unsent[name] = pickled.why_unsent(self.module.__name__, name, value, exc)
                continue
            tree["k"].append(name)
            tree["v"].append(encoded)
        for definition, obj in zip(self.defs, self.objects):
            if "." in obj.__qualname__:  # nested in a class: defined apart (nested.py)
                definition["q"] = obj.__qualname__
        meta = {"op": ops.SHIP, "mod": self.module.__name__, "defs": self.defs,
                "g": {"$": DICT, **tree}}  # fmt: skip
        if unsent:
            meta["x"] = unsent
        frame = state.connection().request(meta, buffers)
        assert frame is not None
        namespace = str(frame.meta["ns"])
        for obj in self.objects:
            path = nested.worker_path(namespace, self.key(obj))
            remember(obj, path, f"{namespace}.{obj.__qualname__}")


def _globals_refer(buffers: List[Any], refer: Refer) -> codec.Refer:
    """How a shipped module's globals refer to what is not a value: as ``refer``, and this
    process's own library objects (a torch.device, a tensor of its torch) by pickle."""

    def globals_refer(obj: Any) -> Optional[Dict[str, Any]]:
        ref = refer(obj) or program_state.bound_method_ref(obj)
        return ref or pickled.reference(obj, buffers)

    return globals_refer
