"""Parts of benchmarks/dataplane.py: other RPC systems' noop call, and the client's cost of a
streamed call.

rpyc 6.0.2 and Pyro5 5.17 (the ``test`` extra installs them) serve a noop on the acceptor side
(``serve_peers``, in dataplane_server.py) at the data plane's port + 3 and + 4; the client times
one call each as dataplane.py times ours and the raw socket. Where one is not installed, its line
says "skipped: not installed".
"""

from __future__ import annotations

import json
import subprocess
import threading
import tracemalloc
from collections.abc import Callable
from typing import Any

from benchmarks import remoted

#: A remoted program: ``a = a + 1`` N times on a small array between two syncs, with the time
#: this thread spent on the CPU issuing them (``thread_time``: the client's own cost, not the
#: waits) and the interposer's counters.
STREAMED = """
import json, sys, time
import numpy as np
from radium_interposer.client import state
n = int(sys.argv[1])
a = np.zeros(16)
a = a + 1  # the call site learns that it returns a remote object
float(a[0])  # a sync
counts = dict(state.counts)
cpu, wall = time.thread_time(), time.perf_counter()
for _ in range(n):
    a = a + 1
cpu, issued = time.thread_time() - cpu, time.perf_counter() - wall
value = float(a[0])  # a sync: every streamed call has run
done = time.perf_counter() - wall
counts = {k: state.counts[k] - counts[k] for k in counts}
print(json.dumps({"cpu": cpu, "issued": issued, "done": done, "ok": value == n + 1.0, **counts}))
"""

#: A call that waits for its value (np.ndim: a handle in, an int back), from a numpy-less client.
WAITING = """
import json, sys, time
import numpy as np
from radium_interposer.client import state
n = int(sys.argv[1])
a = np.zeros(16)
np.ndim(a)  # the site's first call
counts = dict(state.counts)
samples = []
for _ in range(n):
    began = time.perf_counter()
    np.ndim(a)
    samples.append(time.perf_counter() - began)
counts = {k: state.counts[k] - counts[k] for k in counts}
print(json.dumps({"p50": sorted(samples)[n // 2], **counts}))
"""
#: Waiting calls as records (data-plane version 3) and as JSON frames.
WAITING_MODES = (("records", {}), ("JSON", {"RADIUM_BINARY_WAITS": "0"}))


def _rpyc_server(host: str, port: int) -> None:
    import rpyc  # type: ignore[import-untyped]
    from rpyc.utils.server import ThreadedServer  # type: ignore[import-untyped]

    class Noop(rpyc.Service):  # type: ignore[misc]
        def exposed_noop(self, payload: bytes) -> None:
            """Small arguments in, nothing out (as benchmarks.dpfuncs.noop)."""

    ThreadedServer(Noop, hostname=host, port=port).start()


def _pyro_server(host: str, port: int) -> None:
    import Pyro5.api  # type: ignore[import-untyped]

    Pyro5.config.SOCK_NODELAY = True  # as ours and the raw socket: no Nagle delay

    @Pyro5.api.expose
    class Noop:
        def noop(self, payload: bytes) -> None:
            """Small arguments in, nothing out."""

    daemon = Pyro5.api.Daemon(host=host, port=port)
    daemon.register(Noop(), objectId="noop")
    daemon.requestLoop()


SERVERS: dict[str, Callable[[str, int], None]] = {"rpyc": _rpyc_server, "Pyro5": _pyro_server}
#: Each one's port, after the data plane's (+1 raw echo, +2 grpcio).
OFFSETS = {"rpyc": 3, "Pyro5": 4}


def installed(name: str) -> bool:
    try:
        __import__(name)
    except ImportError:
        return False
    return True


def serve_peers(host: str, port: int) -> None:
    """Start every installed one's server (daemon threads) at ``port`` + its offset."""
    for name, serve in SERVERS.items():
        if installed(name):
            threading.Thread(target=serve, args=(host, port + OFFSETS[name]), daemon=True).start()


def peer_call(name: str, host: str, port: int) -> Callable[[bytes], Any] | None:
    """One noop call of ``name`` bound and ready (None: not installed)."""
    if not installed(name):
        return None
    if name == "rpyc":
        import rpyc

        conn = rpyc.connect(host, port + OFFSETS[name])
        function: Callable[[bytes], Any] = conn.root.noop  # bound once: one round trip a call
        return function
    import Pyro5.api

    Pyro5.config.SOCK_NODELAY = True
    proxy = Pyro5.api.Proxy(f"PYRO:noop@{host}:{port + OFFSETS[name]}")
    proxy._pyroBind()
    noop: Callable[[bytes], Any] = proxy.noop
    return noop


#: The client's ways of making the calls streamed_cost compares (remoted's), and their
#: environment.
STREAM_MODES = tuple(
    (remoted.LABELS[mode], remoted.MODES[mode]) for mode in ("stream", "noexpress", "nostream")
)


def streamed_cost(env: dict[str, str], calls: int, reps: int = 3) -> None:
    """The client's cost of a streamed call (by its express lane, and down the full path)
    against a waiting one, from a numpy-less client: the median of ``reps`` runs each."""
    print(f"{calls} x `a = a + 1` (numpy, 16 floats) between two syncs, remoted from a "
          f"numpy-less client; median of {reps} runs")  # fmt: skip
    for label, extra in STREAM_MODES:
        runs = _runs(STREAMED, calls, {**env, **extra}, reps)
        r = sorted(runs, key=lambda run: run["cpu"])[len(runs) // 2]
        print(
            f"  {label:<10} client CPU {r['cpu'] / calls * 1e6:7.1f} µs/call (thread_time); "
            f"wall {r['issued'] / calls * 1e6:7.1f} µs/call issuing, "
            f"{r['done'] / calls * 1e6:7.1f} µs/call to the sync; streamed {r['streamed']} "
            f"(express {r.get('express', 0)}), round trips {r['round_trips']} of {r['calls']} "
            f"calls; result right: {all(run['ok'] for run in runs)}"
        )


def waiting_cost(env: dict[str, str], calls: int, raw_p50: float, reps: int = 3) -> None:
    """A waiting call's p50 sent as a record and as JSON, against the raw ping-pong's p50 of
    this run: the median of ``reps`` runs each, from a numpy-less client."""
    print(f"{calls} x `np.ndim(a)` (a call that waits for its value), remoted from a numpy-less "
          f"client; median of {reps} runs' p50")  # fmt: skip
    for label, extra in WAITING_MODES:
        r = sorted(_runs(WAITING, calls, {**env, **extra}, reps), key=lambda run: run["p50"])[
            reps // 2
        ]
        print(
            f"  waiting call as {label:<8} p50 {r['p50'] * 1e6:7.1f} µs   raw p50 "
            f"{raw_p50 * 1e6:7.1f} µs   {r['p50'] / raw_p50:6.2f}x raw; as records "
            f"{r['waited']}, round trips {r['round_trips']} of {r['calls']} calls"
        )


def _runs(script: str, calls: int, env: dict[str, str], reps: int) -> list[dict[str, Any]]:
    """What ``script`` printed last (JSON), run ``reps`` times by a numpy-less client."""
    runs = []
    for _ in range(reps):
        done = subprocess.run(
            ["/usr/bin/python3", "-c", "import radium_interposer.boot\n" + script, str(calls)],
            env=env, capture_output=True, text=True, check=True, timeout=600,
        )  # fmt: skip
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return runs


def memory(action: Callable[[], Any]) -> tuple[int, int]:
    """Peak extra bytes during ``action``: this process (tracemalloc) and the worker (VmHWM)."""
    from benchmarks import dpfuncs

    before_worker = dpfuncs.rss_peak_reset()
    tracemalloc.start()
    result = action()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del result
    return peak, max(0, dpfuncs.rss_peak() - before_worker)
