"""What an answer from the worker carries besides its value, applied as each arrives on a
connection: the output its calls printed, the program's random state and tensors that shipped
code changed, its warnings, and its error, raised here (docs/data-plane.md, "Output").
"""

from __future__ import annotations

from typing import Any

from radium_interposer import client_warnings, upcalls, wire
from radium_interposer.errors import rebuild_error

__all__ = ["apply"]


def apply(conn: Any, frame: wire.Frame) -> None:
    """Apply what ``frame``, an answer on ``conn`` (a client.Connection, which imports this
    module), carries besides its value; raise its error, if it is one."""
    client_warnings.forward_output(frame.meta)
    if "ps" in frame.meta:  # the program's random state after shipped code drew from it
        upcalls.bound.random_states(conn, frame.meta["ps"])
    if "tw" in frame.meta:  # the worker's changes to the program's own tensors (mirrored)
        from radium_interposer import tensor_sync

        tensor_sync.apply(frame.meta["tw"], frame.buffers)
    client_warnings.raise_pending(frame)  # a remote warning the filters made an error
    if frame.type == wire.ERROR:
        error = rebuild_error(frame.meta)
        if "at" in frame.meta:  # a streamed call's, reported at this sync point
            client_warnings.note_streamed(error, frame.meta["at"])
        raise error
