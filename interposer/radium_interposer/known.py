"""What this side already knows of remote tensors and arrays: their metadata, answered without
a round trip once read (docs/remoting.md, "Metadata read once").

Two kinds of answers are kept:

- **Metadata** (``x.shape``, ``x.ndim``, ``x.dtype``, ``x.requires_grad``, ``len(x)``...) of a
  ``torch.Tensor``, ``Parameter`` or ``numpy.ndarray``: kept until the program makes a call that
  could change some (:func:`harmless` says which cannot), then all forgotten at once. Only a
  few operations change an object's metadata in place (``resize_``, ``x.data = y``, an in-place
  op whose operand requires grad, code of the program's own), and a training step always makes
  one, so nothing kept outlives a step.
- **Answers about immutable objects** (a ``torch.Size``, ``torch.dtype``, ``torch.device``, a
  numpy dtype): ``str(s)``, ``s[0]``, ``len(s)``, its items. They never change, so they are kept
  as long as room allows.

Nothing here imports the rest of the interposer: the proxies and ``calls.invoke`` call in.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Hashable, Sequence, Tuple

from radium_interposer.tags import ATTRIBUTE, PATH

__all__ = [
    "ATTRIBUTES",
    "LIBRARY",
    "METHODS",
    "TYPES",
    "answers",
    "attribute",
    "forget",
    "harmless",
    "immutable",
    "of_immutable",
    "remember",
]

#: Exact types whose metadata is kept (subclasses may compute theirs: they are asked).
TYPES = frozenset(("torch.Tensor", "torch.nn.parameter.Parameter", "numpy.ndarray"))
#: Their attributes kept once read (``len`` too). ``grad``, ``data``, ``T`` are not metadata.
ATTRIBUTES = frozenset(
    (
        "shape", "ndim", "size", "dtype", "device", "requires_grad", "is_leaf", "is_cuda",
        "itemsize", "nbytes", "layout", "is_sparse", "is_quantized", "is_meta",
    )
)  # fmt: skip
#: Their methods whose answers (given ints, or nothing) are metadata too.
METHODS = frozenset(
    ("size", "dim", "ndimension", "numel", "nelement", "element_size", "is_floating_point")
)
#: Types whose objects never change.
_IMMUTABLE = frozenset(("torch.Size", "torch.dtype", "torch.device", "torch.layout", "numpy.dtype"))
#: The remote type given for a library's object named by path (``torch.float32``).
LIBRARY = "<library>"
#: At most this many answers of each kind are kept (then all are dropped).
LIMIT = 4096

#: (handle id, attribute or "len") -> the answer: a plain value or an immutable object's proxy.
answers: Dict[Tuple[int, str], Any] = {}
#: (handle id, operation, argument) -> the answer, for immutable objects.
_immutable: Dict[Tuple[int, str, Hashable], Any] = {}


def immutable(kind: str) -> bool:
    """Whether objects of remote type ``kind`` never change (their answers are kept)."""
    return kind in _IMMUTABLE or kind.startswith("numpy.dtypes.")


def forget() -> None:
    """Drop every kept metadata answer: a call may have changed some."""
    answers.clear()


def attribute(handle: int, name: str, ask: Callable[[], Any], kept: Callable[[Any], bool]) -> Any:
    """The metadata ``name`` of the object ``handle``, asked with ``ask`` the first time and
    kept while nothing may have changed it, when ``kept`` says its answer may be."""
    key = (handle, name)
    if key in answers:
        return answers[key]
    value = ask()
    if kept(value):
        _keep(answers, key, value)
    return value


def remember(handle: int, name: str, value: Any) -> None:
    """Keep ``value`` as what ``name`` of the object ``handle`` is, as a read metadata answer
    is (the items of a list that came with the ``next`` that made it)."""
    _keep(answers, (handle, name), value)


def of_immutable(handle: int, operation: str, argument: Hashable, ask: Callable[[], Any]) -> Any:
    """The answer of ``operation`` (with ``argument``) on the immutable object ``handle``."""
    key = (handle, operation, argument)
    try:
        return _immutable[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable argument: asked each time
        return ask()
    value = ask()
    _keep(_immutable, key, value)
    return value


def _keep(store: Dict[Any, Any], key: Any, value: Any) -> None:
    if len(store) >= LIMIT:  # bounded: dropped all at once, asked again when read again
        store.clear()
    store[key] = value


# -- which calls cannot change kept metadata -------------------------------------------------

#: Operators that make a new object (never the in-place ``iadd``..., nor ``setitem``: a
#: tensor given an element that requires grad comes to require grad itself).
_OPERATORS = frozenset(
    (
        "add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift",
        "and_", "or_", "xor", "lt", "le", "eq", "ne", "gt", "ge", "getitem", "neg", "pos",
        "abs", "invert", "index", "contains",
    )
)  # fmt: skip
_READS = frozenset(
    (
        "getattr", "len", "repr", "str", "format", "bool", "int", "float", "complex", "hash",
        "iter", "isinstance",
    )
)  # fmt: skip
#: Methods of the kept types that change their metadata without the in-place ``_`` suffix,
#: or run the program's own code (hooks, a custom Function's backward).
_CHANGING_METHODS = frozenset(("resize", "setflags", "backward", "register_hook"))
_LIBRARIES = ("torch.", "numpy.")
_PLAIN = (int, float, bool, str, bytes, complex, type(None), slice, range, type(Ellipsis))
_sites: Dict[str, bool] = {}


def harmless(
    function: Dict[str, Any], site: str, args: Sequence[Any], kwargs: Dict[str, Any], kind: Any
) -> bool:
    """Whether calling ``function`` (a reference tree, ``site`` its call site) cannot change
    the metadata of a kept object: a library's function or a tensor's or array's method that
    makes a new object, given only tensors, arrays, immutable objects and plain values.
    ``kind(obj)`` is an argument's remote type, or None for a local value."""
    known = _sites.get(site)
    if known is None:
        known = _sites[site] = _harmless_function(function, site)
    if not known or "out" in kwargs or kwargs.get("inplace"):
        return False  # torch resizes what ``out=`` names
    return all(_harmless_value(a, kind) for a in args) and all(
        _harmless_value(v, kind) for v in kwargs.values()
    )


def _harmless_function(function: Dict[str, Any], site: str) -> bool:
    tag = function.get("$")
    if tag == ATTRIBUTE:  # a method: its site is "<type>.<name>"
        owner, _, name = site.split("|", 1)[0].rpartition(".")
        return owner in TYPES and not name.endswith("_") and name not in _CHANGING_METHODS
    if tag != PATH:
        return False  # a handle (a model, a shipped function): anything may happen
    path = str(function.get("p", ""))
    module, _, name = path.rpartition(".")
    if module == "operator":
        return name in _OPERATORS
    if module == "builtins":
        return name in _READS
    return (
        path.startswith(_LIBRARIES)
        and not name.endswith("_")
        and name not in _CHANGING_METHODS
        and not path.startswith("torch.autograd.")  # runs hooks, Functions of the program's
    )


def _harmless_value(value: Any, kind: Callable[[Any], Any]) -> bool:
    if isinstance(value, _PLAIN):
        return True
    remote = kind(value)
    if remote is not None:
        return bool(remote in TYPES or remote == LIBRARY or immutable(remote))
    if type(value) in (list, tuple):
        return all(_harmless_value(item, kind) for item in value)
    return False  # a local callable (a callback), an object of the program's: its code may run
