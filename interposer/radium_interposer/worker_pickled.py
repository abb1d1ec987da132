"""The worker's side of the client's own library objects, sent by pickle (tag ``pk``;
docs/data-plane.md). Only the worker unpickles: what it loads is the tenant's, as the code it
runs is (:mod:`radium_interposer.pickled` is the client's side).

A call's pickles are one stream (one pickler's memo on the client): the first ``pk`` node of a
frame loads them all, in order, and the others take theirs by number. Each object the client
registered (``reg``: memo index to handle) goes into the handle table, so that it crosses again
by handle as this same copy; a pickle names such objects by handle (``persistent_id``).
"""

from __future__ import annotations

import io
import pickle
import threading
from typing import Any, Dict, List, Tuple

from radium_interposer import tensor_sync
from radium_interposer.handles import HandleTable

__all__ = ["load"]

#: Per session thread: the streams of the frame being decoded (its buffer, what it held).
_local = threading.local()


class _Unpickler(pickle.Unpickler):
    def __init__(self, reader: io.BytesIO, buffers: List[Any], table: HandleTable) -> None:
        super().__init__(reader, buffers=buffers)
        self.table = table

    def persistent_load(self, pid: Any) -> Any:
        return self.table.get(pid)  # an object the client sent before: this same copy


def load(node: Dict[str, Any], buffers: List[Any], table: HandleTable) -> Any:
    """The client's object a ``pk`` node names."""
    index, number, oob, reg = node.get("i"), node.get("n"), node.get("oob"), node.get("reg")
    if not isinstance(index, int) or not isinstance(number, int) or not isinstance(oob, list):
        raise ValueError("a pk node names its stream, its number and its buffers")
    if not isinstance(reg, dict):
        raise ValueError("a pk node maps memo indices to handles")
    data = buffers[index]
    loaded: Dict[int, Tuple[Any, List[Any]]] = getattr(_local, "loaded", None) or {}
    _local.loaded = loaded
    entry = loaded.get(id(data))
    if entry is None or entry[0] is not data:
        loaded.clear()  # an earlier frame's: its objects are in the table if they must live on
        entry = loaded[id(data)] = (data, _load_all(data, [buffers[i] for i in oob], reg, table))
    return entry[1][number]


def _load_all(data: Any, oob: List[Any], reg: Dict[str, Any], table: HandleTable) -> List[Any]:
    reader = io.BytesIO(data)
    unpickler = _Unpickler(reader, oob, table)
    objects: List[Any] = []
    while reader.tell() < len(data):  # one pickle after the other, sharing one memo
        objects.append(unpickler.load())
    memo = unpickler.memo.copy()
    for idx, handle in reg.items():
        if int(idx) in memo and isinstance(handle, int):
            table.put(handle, memo[int(idx)])
            if tensor_sync.is_tensor(memo[int(idx)]):
                tensor_sync.track(handle, memo[int(idx)])  # a mirror of the client's
    return objects
