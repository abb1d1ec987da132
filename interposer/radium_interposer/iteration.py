"""When iterating a remote list or tuple (or a ``torch.Size``) takes its items in one round
trip (the ``items`` operation, docs/data-plane.md) instead of one ``next`` each; so does a
loop over a module's parameters (the worker reads such a generator whole:
``worker_objects.drain``).

Only where the result is the same as iterating it remotely: a tuple cannot change while it is
iterated, and a list being unpacked (``x, y = batch``) is read whole by that one instruction,
with no code of the program in between. A list iterated by a ``for`` loop is not: the loop's
body may change it, and its iterator sees the change.
"""

from __future__ import annotations

from types import FrameType
from typing import Any, Callable, Dict, List, Optional

from radium_interposer import codec, instructions, known, ops
from radium_interposer.tags import HANDLE

__all__ = ["MAX_ITEMS", "items", "keep", "kept", "unpacks_next", "whole"]

#: At most this many items come in one answer; a longer list or tuple is iterated remotely.
MAX_ITEMS = 256
_UNPACK_NAMES = ("UNPACK_SEQUENCE", "UNPACK_EX")
Decode = Callable[[Any, List[Any]], Any]
#: Tuples and the tuple types iterated as tuples are (the worker checks it again).
_TUPLES = frozenset(("builtins.tuple", "torch.Size"))
#: Whether the worker knows ``items`` (False after one answered it is unknown).
_supported = True


def whole(kind: str, frame: Optional[FrameType]) -> bool:
    """Whether an object of remote type ``kind``, iterated by the program's ``frame`` (its
    caller), may be read whole: a tuple, or a list that the frame is unpacking."""
    if kind in _TUPLES:
        return True
    if kind != "builtins.list" or frame is None:
        return False
    now = instructions.instruction(frame)
    return now is not None and now[0] in _UNPACK_NAMES


def unpacks_next(frame: Optional[FrameType]) -> bool:
    """Whether the program's ``frame`` calls ``next`` for a ``for`` loop that unpacks what it
    gets (``for x, y in loader``; ``for i, (x, y) in enumerate(loader)`` too, whose tuple is
    unpacked at once): then the item's items come with it (``ni``)."""
    now = instructions.instruction(frame)
    return now is not None and now[0] == "FOR_ITER" and now[2] in _UNPACK_NAMES


def keep(result: Any, tree: Any, buffers: List[Any], decode: Decode) -> None:
    """The items that came with the answer of an unpacked ``next`` (``vi``) for its result
    (a proxy): kept as metadata is (:mod:`known`), until a call may have changed the list."""
    if tree is None:
        return
    if not isinstance(tree, list) or len(tree) > MAX_ITEMS:  # checked before decoding it
        raise codec.DecodeError("the worker answered `next` with more items than a list may hold")
    ref = object.__getattribute__(result, "_rd_ref")
    known.remember(ref["id"], "items", decode(tree, buffers))


def kept(ref: Dict[str, Any], take: bool = False) -> Optional[List[Any]]:
    """The items of the remote list ``ref`` kept from its ``next`` answer, if still valid;
    ``take``: of the generator ``ref`` from its ``iter`` answer (a module's parameters, read
    whole on the worker), taken, not kept: the loop holds them now."""
    if ref["$"] != HANDLE:
        return None
    key = (ref["id"], "items")
    value: Optional[List[Any]] = known.answers.pop(key, None) if take else known.answers.get(key)
    return value


def items(
    ref: Dict[str, Any], request: Callable[..., Dict[str, Any]], decode: Decode
) -> Optional[List[Any]]:
    """The items of the remote list or tuple ``ref``, read in one round trip with ``request``
    (proxy.request) and ``decode`` (proxy.decode); None when it must be iterated remotely
    (too long, or a worker from before ``items``)."""
    global _supported
    if not _supported:
        return None
    try:
        answer = request(ops.ITEMS, o=ref)
    except ValueError as exc:
        if "unknown operation 'items'" not in str(exc):
            raise
        _supported = False  # an older worker: it iterates, as before
        return None
    tree = answer.get("v")
    if tree is None:
        return None
    if not isinstance(tree, list) or len(tree) > MAX_ITEMS:  # checked before decoding it
        raise codec.DecodeError("the worker answered `items` with more than a list may hold")
    decoded: List[Any] = decode(tree, answer["buffers"])
    return decoded
