"""What a connection keeps unsent: streamed records and pipelined frames together never wait
past one bound (docs/data-plane.md, "Calls are pipelined"), so the worker runs them while the
program makes the next ones."""

from __future__ import annotations

import socket

from radium_interposer import client, records


def _received(sock: socket.socket) -> int:
    total = 0
    while True:
        try:
            chunk = sock.recv(1 << 16, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return total
        total += len(chunk)


def test_records_and_pipelined_frames_mixed_go_once_they_add_up_to_the_bound() -> None:
    """A step of records then one pipelined JSON call (a ``with``'s exit, a setattr), repeated:
    each JSON call closes the batch into the outbox, so a bound on the batch alone never fires;
    what waits must still go once it holds PENDING_BYTES."""
    ours, theirs = socket.socketpair()
    conn = client.Connection(ours)
    layout = records.call_struct("hf")
    record = layout.pack(records.CALL, 1, 7, 3, 0.5)
    try:
        for step in range(300):
            for _ in range(5):
                conn.stream(record)
            conn.request({"op": "call", "f": {"$": "p", "p": "builtins.len"}, "a": []}, wait=False)
            waiting = len(conn.batch) + conn.outbox_bytes
            # At most the bound plus what one step adds after it was checked.
            assert waiting < client.PENDING_BYTES + 512, (step, waiting, len(conn.outbox))
        assert _received(theirs) > 250 * (5 * len(record))
    finally:
        ours.close()
        theirs.close()
