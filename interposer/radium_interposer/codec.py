"""Values on the data plane: a JSON tree plus out-of-band buffers. Nothing is ever pickled.

Both ends use this module: the interposer (stdlib only, numpy optional) and the worker. A tree
node is a JSON scalar, a JSON list (a Python list) or a tagged object ``{"$": tag, ...}``; raw
bytes and array contents travel as the frame's buffers and the tree names them by index. Arrays
cross as dtype + shape + raw bytes, so the two ends may run different numpy versions, and an end
without numpy still reads them (:mod:`radium_interposer.arrays`). Spec: docs/data-plane.md,
"Values".

Decoding takes the side's ``modules`` policy: how it gets a module a value names (a record's
class, numpy for an array). The client's (the default, :func:`loaded`) takes only modules it has
already imported, so a worker can never make it import code; the worker's (:func:`importing`)
may import, as its client (the tenant) names what its own code uses.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, Dict, List, Optional

from radium_interposer import arrays, reflection, scalars, structs, tags

__all__ = [
    "PLAIN_BYTES",
    "PLAIN_NODES",
    "SCALARS",
    "Buffers",
    "DecodeError",
    "EncodeError",
    "Modules",
    "Refer",
    "Resolve",
    "Tree",
    "class_ref",
    "decode",
    "encode",
    "exception_node",
    "find_class",
    "importing",
    "is_array",
    "is_plain",
    "loaded",
    "numpy_is_remote",
    "rebuild_exception",
    "unpickle",
]

Tree = Any
Buffers = List[Any]
#: How a side turns an object it cannot send by value into a reference tree (or None: refuse).
Refer = Callable[[Any], Optional[Dict[str, Any]]]
#: How a side turns a reference tree back into an object.
Resolve = Callable[[Dict[str, Any]], Any]

SCALARS = (type(None), bool, int, float, str)
_NUMBERS = frozenset((type(None), bool, int, float, complex))
_BUILTINS = frozenset(
    (*SCALARS, bytes, bytearray, complex, slice, list, tuple, dict, set, frozenset)
)
#: How this side names a class to the other (its import path there), or None if it cannot.
#: The interposer replaces it with one that ships the user's own classes first.
class_ref: Callable[[type], Optional[str]] = reflection.class_path
#: A result is "plain" (sent back by value) when it has at most this many nodes and bytes.
PLAIN_NODES = 4096
PLAIN_BYTES = 1 << 18
#: How this side sends an exception by value (an ``ex`` node, exits.node), or None: it does not.
#: Only the client does (the body's exception to a remote ``__exit__``); the worker's stay
#: remote as handles, and the client refuses an ``ex`` node (docs/data-plane.md, "Values").
exception_node: Optional[Callable[[BaseException, Callable[[Any], Any]], Any]] = None


class EncodeError(TypeError):
    """The object cannot cross the data plane (not plain, and this side cannot refer to it)."""


#: A value this side will not or cannot rebuild (a ValueError).
DecodeError = structs.DecodeError
#: How a side gets a module a value names: the module, or None (it has none, or will not).
Modules = Callable[[str], Any]


def loaded(name: str) -> Any:
    """A module this process has already imported, or None: the client's policy."""
    return sys.modules.get(name)


def importing(name: str) -> Any:
    """A module, imported if need be, or None if there is none: the worker's policy."""
    module = loaded(name)  # each array decoded asks for numpy; import_module takes a lock
    if module is not None:
        return module
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


#: Set by the interposer when numpy itself is remoted: then this side has no numpy of its own.
numpy_is_remote = False
#: How this side loads a ``pk`` (pickled) node: set by the worker only; the client refuses them.
unpickle: Optional[Callable[[Dict[str, Any], Buffers], Any]] = None
#: How this side makes an exception of an ``ex`` node (exits.rebuild): set by the worker only.
rebuild_exception: Optional[Callable[[Dict[str, Any], Callable[[Any], Any]], Any]] = None


def _numpy() -> Any:
    """numpy when this process already imported a local one: an array can only exist if it did."""
    np = sys.modules.get("numpy")
    return None if reflection.remote_module(np) else np


def is_array(obj: Any) -> bool:
    """Whether ``obj`` is a numpy array (False when numpy is not imported)."""
    np = _numpy()
    return np is not None and isinstance(obj, (np.ndarray, np.generic))


def _array(obj: Any, buffers: Buffers) -> Dict[str, Any]:
    np = _numpy()
    if obj.dtype.hasobject or obj.dtype.fields is not None:
        raise EncodeError(f"arrays of dtype {obj.dtype} cannot cross the data plane")
    scalar = isinstance(obj, np.generic)
    # asarray keeps a 0-d array (and makes one of a scalar); ascontiguousarray would make it
    # shape (1,). A flat byte view: memoryview refuses some dtypes (datetime64, longdouble).
    array = np.asarray(obj)
    array = array if array.flags.c_contiguous else np.ascontiguousarray(array)
    buffers.append(memoryview(array.reshape(-1).view(np.uint8)) if array.nbytes else b"")
    node = {"$": tags.ARRAY, "dt": array.dtype.str, "sh": list(array.shape), "i": len(buffers) - 1}
    if scalar:
        node["sc"] = 1
    return node


def encode(obj: Any, buffers: Buffers, refer: Refer) -> Tree:
    """``obj`` as a tree; bytes and arrays are appended to ``buffers`` (not copied)."""
    kind = type(obj)
    # Not np.float64 / np.str_ (subclasses of float / str): they keep their type. By the real
    # type: a remote np.float64's proxy says it is a float to isinstance() (scalar_proxies).
    if kind in SCALARS or (issubclass(kind, SCALARS) and not is_array(obj)):
        return obj
    if kind is list:
        return [encode(item, buffers, refer) for item in obj]
    if kind is tuple:
        return {"$": tags.TUPLE, "v": [encode(item, buffers, refer) for item in obj]}
    if kind is dict:
        return {
            "$": tags.DICT,
            "k": [encode(k, buffers, refer) for k in obj],
            "v": [encode(v, buffers, refer) for v in obj.values()],
        }
    if kind in (bytes, bytearray):
        buffers.append(obj)
        return {"$": tags.BYTES if kind is bytes else tags.BYTEARRAY, "i": len(buffers) - 1}
    if kind in (set, frozenset):
        return {"$": kind.__name__, "v": [encode(item, buffers, refer) for item in obj]}
    if kind is complex:
        return {"$": tags.COMPLEX, "v": [obj.real, obj.imag]}
    if kind is slice:
        return {
            "$": tags.SLICE,
            "v": [encode(x, buffers, refer) for x in (obj.start, obj.stop, obj.step)],
        }
    if obj is Ellipsis:
        return {"$": tags.ELLIPSIS}
    if is_array(obj):
        return _array(obj, buffers)
    if isinstance(obj, type):
        path = class_ref(obj)
        if path is not None:  # a class by its import path: resolved by the other side
            return {"$": tags.CLASS, "p": path, "e": reflection.exception_kind(obj)}
    if exception_node is not None and isinstance(obj, BaseException):
        return exception_node(obj, lambda part: encode(part, buffers, refer))
    node = structs.encode(obj, lambda part: encode(part, buffers, refer), _path_of)
    if node is not None:
        return node
    reference = refer(obj)
    if reference is not None:
        return reference
    raise EncodeError(f"a {kind.__module__}.{kind.__qualname__} cannot cross the data plane")


def decode(tree: Tree, buffers: Buffers, resolve: Resolve, modules: Modules = loaded) -> Any:
    """The object a tree describes; buffers are used in place where the type allows. Modules
    the tree names (records' classes, numpy) come from ``modules`` only."""
    if not isinstance(tree, (list, dict)):
        return tree
    if isinstance(tree, list):
        return [decode(item, buffers, resolve, modules) for item in tree]
    tag = tree.get("$")
    if tag == tags.TUPLE:
        return tuple(decode(item, buffers, resolve, modules) for item in tree["v"])
    if tag == tags.DICT:
        keys = [decode(k, buffers, resolve, modules) for k in tree["k"]]
        return dict(zip(keys, (decode(v, buffers, resolve, modules) for v in tree["v"])))
    if tag == tags.BYTES:
        return bytes(buffers[tree["i"]])
    if tag == tags.BYTEARRAY:
        return bytearray(buffers[tree["i"]])
    if tag in (tags.SET, tags.FROZENSET):
        items = (decode(item, buffers, resolve, modules) for item in tree["v"])
        return set(items) if tag == tags.SET else frozenset(items)
    if tag == tags.COMPLEX:
        return complex(*tree["v"])
    if tag == tags.SLICE:
        return slice(*(decode(x, buffers, resolve, modules) for x in tree["v"]))
    if tag == tags.ELLIPSIS:
        return Ellipsis
    if tag == tags.ARRAY:
        return arrays.decode(tree, buffers[tree["i"]], _own_numpy(modules))
    if tag in tags.REFERENCES:
        return resolve(tree)
    if tag == tags.EXCEPTION and modules is not loaded and rebuild_exception is not None:
        # Only a worker makes one (the client never does on the worker's word).
        return rebuild_exception(tree, lambda part: decode(part, buffers, resolve, modules))
    if tag == tags.PICKLED:  # the client's library object, pickled: only a worker loads it
        if unpickle is None:
            raise DecodeError("a pickled value is refused: this side never unpickles")
        return unpickle(tree, buffers)
    if tag in structs.TAGS:
        return structs.decode(
            tree,
            lambda part: decode(part, buffers, resolve, modules),
            lambda path: find_class(path, modules),
        )
    raise DecodeError(f"unknown value tag {tag!r}")


def _path_of(cls: type) -> str:
    """The path a record's class is named by: resolvable on the other side, or just its name
    (then that side rebuilds the record without it)."""
    return class_ref(cls) or f"{cls.__module__}.{cls.__qualname__}"


def find_class(path: str, modules: Modules = loaded) -> Optional[type]:
    """The class at ``module.qualname``: the longest prefix ``modules`` gives, then the names
    it and its classes define themselves (nothing else runs); None if there is no class."""
    module, found = path, None
    while module and found is None:
        module = module.rpartition(".")[0]
        found = modules(module) if module else None
    for part in path[len(module) + 1 :].split(".") if found is not None else []:
        found = reflection.own_attribute(found, part)
    return found if isinstance(found, type) else None


def _own_numpy(modules: Modules) -> Any:
    """This side's own numpy as ``modules`` gives it (not a remoted one), or None."""
    np = None if numpy_is_remote else modules("numpy")
    return None if reflection.remote_module(np) else np


def is_plain(obj: Any, budget: Optional[List[int]] = None) -> bool:
    """Whether ``obj`` is small and made only of values both sides have (sent by value)."""
    if budget is None:
        if type(obj) in _NUMBERS:  # most answers (an int, a float, None): one node, no bytes
            return True
        budget = [PLAIN_NODES, PLAIN_BYTES]
    budget[0] -= 1
    if budget[0] < 0:
        return False
    if type(obj) not in _BUILTINS and is_array(obj):  # np.float64 is a float, np.str_ a str
        budget[1] -= obj.nbytes
        return scalars.plain(obj) and budget[1] >= 0
    if isinstance(obj, (str, bytes, bytearray)):
        budget[1] -= len(obj)
        return budget[1] >= 0
    if isinstance(obj, SCALARS) or type(obj) in (complex, slice) or obj is Ellipsis:
        return True
    kind = type(obj)
    if kind in (list, tuple, set, frozenset):
        return all(is_plain(item, budget) for item in obj)
    if kind is dict:
        return all(is_plain(k, budget) and is_plain(v, budget) for k, v in obj.items())
    if isinstance(obj, type):
        return class_ref(obj) is not None
    if structs.plain(obj):
        return all(is_plain(part, budget) for part in _parts(obj))
    return False


def _parts(obj: Any) -> List[Any]:
    """What a by-structure value holds (checked for plainness like its container)."""
    if isinstance(obj, range):
        return []
    if hasattr(obj, "__dict__") and not hasattr(obj, "keys"):  # the namespaces
        return list(vars(obj).values())
    if hasattr(obj, "keys"):  # the mappings of collections
        factory = getattr(obj, "default_factory", None)
        return [*obj.keys(), *obj.values(), *([factory] if factory is not None else [])]
    if hasattr(obj, "maxlen"):
        return list(obj)
    return []
