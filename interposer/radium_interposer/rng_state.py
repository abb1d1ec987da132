"""The global random generators that are part of a program's state, as both ends read, write
and send them (docs/remoting.md, "The program's state"; docs/data-plane.md, meta key ``ps``).

Three kinds: ``random`` (the standard library's global generator, ``random.getstate()``),
``numpy`` (numpy's legacy global generator, ``np.random.get_state()``) and ``torch`` (torch's
CPU generator, ``torch.get_rng_state()``); the last two only where this process has its own
numpy or torch (a remoted one keeps its state on the worker already). Each state has a local
form, cheap to compare (taken once per call while a program syncs), and a wire form (JSON
lists). A wire form from the other end is checked before use: the client applies the worker's,
and nothing in it may make the client allocate, import or run anything.
"""

from __future__ import annotations

import random
import sys
from typing import Any

__all__ = ["KINDS", "available", "dump", "get", "load", "put"]

KINDS = ("random", "numpy", "torch")
#: torch's CPU generator state is 5056 bytes today: a bound on what is accepted.
_TORCH_MAX = 1 << 16
#: The standard library's global generator itself: the client wraps ``random``'s module
#: functions (local_draws), and reading or setting the state must not count as the program's.
_GLOBAL = random._inst
#: The Mersenne Twister's state: 624 words and a position.
_WORDS = 624


def _numpy_random() -> Any:
    """This process's own numpy.random (imported already, not a remoted one), or None."""
    np = sys.modules.get("numpy")
    if np is None or getattr(np, "__radium_remote__", False):
        return None
    return getattr(np, "random", None)


def _torch() -> Any:
    """This process's own torch (imported already, not a remoted one), or None."""
    torch = sys.modules.get("torch")
    return None if torch is None or getattr(torch, "__radium_remote__", False) else torch


def available(kind: str) -> bool:
    """Whether this process has the generator ``kind`` of its own."""
    if kind == "numpy":
        return _numpy_random() is not None
    return kind == "random" or (kind == "torch" and _torch() is not None)


def get(kind: str) -> Any:
    """The generator's state, in its local form (compared with ``==``)."""
    if kind == "random":
        return _GLOBAL.getstate()
    if kind == "torch":
        return bytes(_torch().get_rng_state().numpy())
    name, keys, pos, has_gauss, cached = _numpy_random().get_state(legacy=True)
    return (str(name), keys.tobytes(), int(pos), int(has_gauss), float(cached))


def put(kind: str, state: Any) -> None:
    """Set the generator to ``state`` (a local form)."""
    if kind == "random":
        _GLOBAL.setstate(state)
        return
    if kind == "torch":
        torch = _torch()
        torch.set_rng_state(torch.frombuffer(bytearray(state), dtype=torch.uint8))
        return
    np = sys.modules["numpy"]
    name, keys, pos, has_gauss, cached = state
    keys = np.frombuffer(keys, dtype=np.uint32).copy()
    _numpy_random().set_state((name, keys, pos, has_gauss, cached))


def dump(kind: str, state: Any) -> Any:
    """A local form as its wire form."""
    if kind == "random":
        version, words, gauss = state
        return [version, list(words), gauss]
    if kind == "torch":
        return state.hex()
    name, keys, pos, has_gauss, cached = state
    return [name, list(memoryview(keys).cast("I")), pos, has_gauss, cached]


def load(kind: str, tree: Any) -> Any:
    """A wire form as a local form; ValueError if it is not a well-formed state."""
    if kind == "torch":
        if not isinstance(tree, str) or len(tree) > 2 * _TORCH_MAX:
            raise ValueError("malformed torch generator state")
        return bytes.fromhex(tree)
    if (
        kind not in KINDS
        or not isinstance(tree, list)
        or len(tree) != (3 if kind == "random" else 5)
    ):
        raise ValueError(f"malformed {kind} generator state")
    if kind == "random":
        version, words, gauss = tree
        if (
            version != 3
            or not _words(words, _WORDS + 1)
            or not isinstance(gauss, (float, type(None)))
        ):
            raise ValueError("malformed random generator state")
        return (3, tuple(words), gauss)
    name, keys, pos, has_gauss, cached = tree
    if name != "MT19937" or not _words(keys, _WORDS) or not isinstance(cached, (int, float)):
        raise ValueError("malformed numpy generator state")
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in (pos, has_gauss)):
        raise ValueError("malformed numpy generator state")
    packed = memoryview(bytearray(4 * _WORDS)).cast("I")
    for i, word in enumerate(keys):
        packed[i] = word
    return (name, packed.tobytes(), pos, has_gauss, float(cached))


def _words(words: Any, count: int) -> bool:
    """``count`` unsigned 32-bit words (the last of random's is a position, also in range)."""
    return (
        isinstance(words, list)
        and len(words) == count
        and all(type(w) is int and 0 <= w < 1 << 32 for w in words)
    )
