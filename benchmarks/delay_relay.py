"""An emulated datacenter link: a user-space TCP relay that holds each chunk ≥ D µs each way.

    .venv/bin/python -m benchmarks.delay_relay UPSTREAM_HOST:PORT DELAY_US

This kernel has no ``sch_netem`` (``tc qdisc … netem delay`` fails), so the delay of a link
between a node and a GPU server in the same datacenter is made here instead: the relay listens
on a free loopback port (it prints ``ready PORT``), dials the upstream for each connection it
accepts, and forwards every chunk it reads only once it is ``DELAY_US`` old. Chunks keep their
order; the relay adds its own cost (two thread hops per chunk), which is why a benchmark using
it prints the RTT it measured through it, never the nominal delay alone.

:class:`RelayedHarness` is a ``WorkerHarness`` whose connections go through such a relay: the
stand-in agent hands the client a TCP socket to the relay, and the worker the upstream end.
"""

from __future__ import annotations

import contextlib
import ctypes
import heapq
import itertools
import selectors
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.interposer.harness import WorkerHarness

CHUNK = 1 << 20
#: The node agent's answer to ``connect``, as the interposer of this tree expects it.
PR_SET_TIMERSLACK = 29


def precise_sleeps() -> None:
    """Timer slack 1 ns: Linux otherwise adds up to 50 µs to every sleep, the delay itself."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)


class Relay:
    """One thread, one selector: every chunk read is queued with the time it may leave, and
    leaves then (no thread hop per chunk: the relay's own cost stays small beside the delay).
    Sends never block the loop: what a peer cannot take yet waits in its buffer."""

    def __init__(self, listener: socket.socket, upstream: tuple[str, int], delay: float) -> None:
        self.listener, self.upstream, self.delay = listener, upstream, delay
        # select(2), not epoll: its timeout is in µs, epoll rounds a 50 µs wait up to 1 ms.
        self.selector = selectors.SelectSelector()
        self.selector.register(listener, selectors.EVENT_READ)
        self.peer: dict[socket.socket, socket.socket] = {}
        self.out: dict[socket.socket, bytearray] = {}
        #: (due, sequence, sink, chunk); an empty chunk is the source's end of stream.
        self.due: list[tuple[float, int, socket.socket, bytes]] = []
        self.sequence = itertools.count()
        self.reading: set[socket.socket] = set()
        #: Sockets whose peer's stream ended: shut for writing once their buffer is sent.
        self.ending: set[socket.socket] = set()

    def run(self) -> None:
        while True:
            timeout = max(0.0, self.due[0][0] - time.perf_counter()) if self.due else None
            for key, events in self.selector.select(timeout):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self.listener:
                    self.accept()
                    continue
                if events & selectors.EVENT_WRITE and sock in self.out:
                    self.send(sock)
                if events & selectors.EVENT_READ and sock in self.reading:
                    self.receive(sock)
            now = time.perf_counter()
            while self.due and self.due[0][0] <= now:
                _, _, sink, chunk = heapq.heappop(self.due)
                if sink in self.out:
                    self.out[sink] += chunk
                    if not chunk:
                        self.ending.add(sink)
                    self.send(sink)

    def accept(self) -> None:
        client, _ = self.listener.accept()
        server = socket.create_connection(self.upstream)
        for one, other in ((client, server), (server, client)):
            one.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            one.setblocking(False)
            self.peer[one], self.out[one] = other, bytearray()
            self.reading.add(one)
            self.selector.register(one, selectors.EVENT_READ)

    def receive(self, sock: socket.socket) -> None:
        try:
            chunk = sock.recv(CHUNK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        due = time.perf_counter() + self.delay
        heapq.heappush(self.due, (due, next(self.sequence), self.peer[sock], chunk))
        if not chunk:  # its end reaches the peer after the delay too
            self.reading.discard(sock)
            self.watch(sock)

    def send(self, sink: socket.socket) -> None:
        buffer = self.out[sink]
        try:
            sent = sink.send(buffer) if buffer else 0
        except BlockingIOError:
            sent = 0
        except OSError:
            self.close(sink)
            return
        del buffer[:sent]
        self.watch(sink)
        if sink in self.ending and not buffer:
            self.ending.discard(sink)
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)
            if sink not in self.reading:  # both ways ended
                self.close(sink)

    def watch(self, sock: socket.socket) -> None:
        """Selected for what it has to do: read while open, write while its buffer holds."""
        events = (selectors.EVENT_READ if sock in self.reading else 0) | (
            selectors.EVENT_WRITE if self.out[sock] else 0
        )
        registered = sock in self.selector.get_map()
        if events and registered:
            self.selector.modify(sock, events)
        elif events:
            self.selector.register(sock, events)
        elif registered:
            self.selector.unregister(sock)

    def close(self, sock: socket.socket) -> None:
        for one in (sock, self.peer.get(sock)):
            if one is not None and one in self.peer:
                self.reading.discard(one)
                self.ending.discard(one)
                del self.out[one]
                if one in self.selector.get_map():
                    self.selector.unregister(one)
                del self.peer[one]
                one.close()


def start(upstream: tuple[str, int], delay_us: float) -> tuple[subprocess.Popen[str], int]:
    """A relay process to ``upstream`` and the loopback port it listens on."""
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.delay_relay", f"{upstream[0]}:{upstream[1]}",
         str(delay_us)],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parent.parent,
    )  # fmt: skip
    assert process.stdout is not None
    line = process.stdout.readline().split()
    if line[:1] != ["ready"]:
        process.kill()
        raise RuntimeError("the delay relay did not start")
    return process, int(line[1])


def echo_server() -> int:
    """A loopback TCP echo (a thread per connection); its port."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve(conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn:
            while data := conn.recv(CHUNK):
                conn.sendall(data)

    def accept() -> None:
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return int(listener.getsockname()[1])


def rtt_us(port: int, count: int = 300) -> float:
    """p50 µs of a 32-byte ping-pong with the echo behind ``port`` (after 20 warm-up)."""
    samples = []
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(count + 20):
            started = time.perf_counter()
            sock.sendall(b"p" * 32)
            got = 0
            while got < 32:
                got += len(sock.recv(64))
            if i >= 20:
                samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1e6


class RelayedHarness(WorkerHarness):
    """A worker whose every connection crosses a delay relay (TCP on both sides of it)."""

    def __init__(self, root: Path, delay_us: float) -> None:
        self.upstream = socket.create_server(("127.0.0.1", 0))
        self.relay, self.relay_port = start(("127.0.0.1", self.upstream.getsockname()[1]),
                                            delay_us)  # fmt: skip
        echo = echo_server()
        self.direct_rtt = rtt_us(echo)
        self.echo_relay, echo_port = start(("127.0.0.1", echo), delay_us)
        self.link_rtt = rtt_us(echo_port)
        super().__init__(root)

    def connection(self) -> tuple[socket.socket, socket.socket]:
        """The worker's end and the container's, with the relay between them (TCP)."""
        client = socket.create_connection(("127.0.0.1", self.relay_port))
        worker_side, _ = self.upstream.accept()
        for s in (client, worker_side):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return worker_side, client

    def close(self) -> None:
        super().close()
        for process in (self.relay, self.echo_relay):
            process.kill()
            process.wait()
        self.upstream.close()


def main(argv: list[str]) -> int:
    host, _, port = argv[0].rpartition(":")
    precise_sleeps()
    listener = socket.create_server(("127.0.0.1", 0))
    print("ready", listener.getsockname()[1], flush=True)
    Relay(listener, (host, int(port)), float(argv[1]) / 1e6).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
