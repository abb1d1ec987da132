"""The client's own tensors that the worker has a copy of, kept equal at each call
(docs/remoting.md, "Your own library objects"; docs/data-plane.md, meta key ``tw``).

In function mode from a Python that has torch, the program's model, tensors and optimizer cross
by pickle once (:mod:`radium_interposer.pickled`) and the worker keeps its copy. The program
may use both: train remotely, then ``torch.save(model.state_dict())`` here; update a tensor here
(``weights -= weights.grad * lr``) and use it remotely again. So each tensor in those pickles is
a mirror: before a call, the tensors the program changed here (their version or checksum, or
their ``.grad``) go to the worker; after it, those the call changed come back in its answer and
are copied into the program's tensors. Raw bytes, dtype and shape only: nothing the worker
sends makes the client run code (the dtype is one of a fixed list).
"""

from __future__ import annotations

import sys
import threading
import weakref
import zlib
from typing import Any, Dict, List, Optional

__all__ = ["DTYPES", "apply", "changed", "forget", "is_tensor", "track", "tracking"]

#: Dtypes a tensor's contents may have on the wire (by name, looked up in torch).
DTYPES = frozenset(
    ("float64", "float32", "float16", "bfloat16", "complex64", "complex128", "int64", "int32",
     "int16", "int8", "uint8", "bool")
)  # fmt: skip
#: handle -> [weak reference to the tensor, its version, its grad's (id, version) or None]
_tracked: Dict[int, List[Any]] = {}
_lock = threading.Lock()


def _torch() -> Any:
    torch = sys.modules.get("torch")
    return None if torch is None or getattr(torch, "__radium_remote__", False) else torch


def is_tensor(obj: Any) -> bool:
    """Whether ``obj`` is a torch tensor (False when torch is not imported)."""
    torch = _torch()
    return torch is not None and isinstance(obj, torch.Tensor)


def tracking() -> bool:
    """Whether any tensor is mirrored (then calls are not pipelined: each answer syncs)."""
    return bool(_tracked)


def track(handle: int, tensor: Any) -> None:
    """Mirror ``tensor``, which the other side holds as ``handle``, from now on."""
    with _lock:
        _tracked[handle] = [weakref.ref(tensor), *_versions(tensor)]


def forget() -> None:
    """Mirror nothing (a forked child: its tensors are its own, sent anew when they cross)."""
    with _lock:
        _tracked.clear()


def _versions(tensor: Any) -> List[Any]:
    """What says the tensor changed: its version counter and its contents' checksum (a write
    through ``p.data`` moves no version counter), and its grad's identity and version."""
    grad = tensor.grad
    return [
        (tensor._version, _checksum(tensor)),
        None if grad is None else (id(grad), grad._version),
    ]


def _checksum(tensor: Any) -> int:
    """CRC-32 of the contents: a few ms per 10 MB, where a cryptographic digest costs ten
    times as much; a change it misses must also leave the version counter alone."""
    flat = tensor.detach().cpu().contiguous().reshape(-1)
    return zlib.crc32(flat.view(_torch().uint8).numpy()) if flat.numel() else 0


def changed(buffers: List[Any]) -> Optional[List[Any]]:
    """The mirrored tensors changed here since they were last in step, as ``tw`` entries
    (their contents appended to ``buffers``); None if none changed."""
    entries = []
    with _lock:
        for handle, entry in list(_tracked.items()):
            tensor = entry[0]()
            if tensor is None:
                del _tracked[handle]
                continue
            now = _versions(tensor)
            if now == entry[1:]:
                continue
            data = _encode(tensor.detach(), buffers) if now[0] != entry[1] else None
            grad: Any = None
            if now[1] != entry[2]:
                grad = False if tensor.grad is None else _encode(tensor.grad, buffers)
            entries.append([handle, data, grad])
            entry[1:] = now
    return entries or None


def apply(entries: Any, buffers: List[Any]) -> None:
    """Copy the other side's changes (``tw``) into the mirrored tensors, then count them as in
    step. Checked: handles we mirror, dtypes of the list, buffers of the frame."""
    torch = _torch()
    if torch is None or not isinstance(entries, list):
        return
    for item in entries:
        if not isinstance(item, list) or len(item) != 3:
            raise ValueError("tw entries are [handle, data, grad]")
        handle, data, grad = item
        entry = _tracked.get(handle) if isinstance(handle, int) else None
        tensor = entry[0]() if entry is not None else None
        if entry is None or tensor is None:
            continue  # released meanwhile
        with torch.no_grad():
            if data is not None:
                tensor.copy_(_decode(torch, data, buffers))
            if grad is False:
                tensor.grad = None
            elif grad is not None:
                tensor.grad = _decode(torch, grad, buffers).to(tensor.device)
        with _lock:
            entry[1:] = _versions(tensor)


def _encode(tensor: Any, buffers: List[Any]) -> Dict[str, Any]:
    flat = tensor.detach().cpu().contiguous().reshape(-1)
    buffers.append(flat.view(_torch().uint8).numpy() if flat.numel() else b"")
    name = str(flat.dtype).rpartition(".")[2]
    return {"d": name, "s": list(tensor.shape), "i": len(buffers) - 1}


def _decode(torch: Any, node: Any, buffers: List[Any]) -> Any:
    if not isinstance(node, dict) or node.get("d") not in DTYPES:
        raise ValueError("a tensor's contents: a dtype of the list, a shape, a buffer")
    shape, index = node.get("s"), node.get("i")
    if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise ValueError("a tensor's shape is a list of sizes")
    if not isinstance(index, int) or not 0 <= index < len(buffers):
        raise ValueError("a tensor's contents name a buffer of the frame")
    dtype = getattr(torch, node["d"])
    data = buffers[index]
    if not len(data):
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtype).reshape(shape)
