"""The worker's handle table: objects left remote, by id, with their proxies' reference counts."""

from __future__ import annotations

import threading
from typing import Any, Dict, List

__all__ = ["Failure", "HandleTable"]


class Failure:
    """What a pipelined call left behind when it raised: using it raises the same error."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class HandleTable:
    """Objects left remote, by id, with a count of the client proxies that refer to them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.objects: Dict[int, List[Any]] = {}
        self._next_local = 0

    def put(self, handle: int, obj: Any) -> None:
        with self.lock:
            self.objects[handle] = [obj, 1]

    def put_new(self, obj: Any) -> int:
        """Store under an id of the worker's own (negative: clients pick positive ids)."""
        with self.lock:
            self._next_local -= 1
            self.objects[self._next_local] = [obj, 1]
            return self._next_local

    def get(self, handle: Any) -> Any:
        entry = self.objects.get(handle) if isinstance(handle, int) else None
        if entry is None:
            raise LookupError(f"unknown handle {handle!r} (released, or not this lease's)")
        if isinstance(entry[0], Failure):
            raise entry[0].error
        return entry[0]

    def fetch(self, handle: int) -> Any:
        """:meth:`get` of a handle known to be an int (a binary record's slot)."""
        entry = self.objects.get(handle)
        if entry is None:
            raise LookupError(f"unknown handle {handle!r} (released, or not this lease's)")
        obj = entry[0]
        if obj.__class__ is Failure:
            raise obj.error
        return obj

    def retain(self, handles: List[Any]) -> None:
        with self.lock:
            for handle in handles:
                entry = self.objects.get(handle)
                if entry is not None:
                    entry[1] += 1

    def release(self, handles: List[Any]) -> None:
        with self.lock:
            for handle in handles:
                entry = self.objects.get(handle)
                if entry is not None:
                    entry[1] -= 1
                    if entry[1] <= 0:
                        del self.objects[handle]
