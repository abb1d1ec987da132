"""``radium agent``: the node agent. Holds this node's leases on behalf of its containers.

The hook asks it for a lease when a container starts (``acquire``) and gives it back when the
container ends (``release``); the agent keeps every lease alive, writes the lease into the
container's runtime directory, and releases the lease itself when the container's init process
disappears (psutil) even if no poststop ever comes. Its state is a file, so a restarted agent
resumes keepalives and watching. One agent per node: a lock file keeps a second one out.

It also wires containers to their acceptor: each leased container gets a socket in its runtime
directory; on request the agent dials the lease's acceptor, proves the lease credential (the
data-plane handshake) and passes the connected socket into the container (``SCM_RIGHTS``). The
container never sees the credential and needs no network of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import json
import logging
import os
import signal
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import psutil

from radium import rpc
from radium.config import Config
from radium.errors import (
    AuthError,
    InvalidRequestError,
    LeaseNotFoundError,
    RadiumError,
    UnavailableError,
)
from radium.leasestream import LeaseStream
from radium.proto import pool_pb2 as pb
from radium.shim.request import allocation
from radium_interposer import handshake, wire

log = logging.getLogger(__name__)
WATCH_INTERVAL = 1.0
KEEPALIVE_TICK = 0.25
MAX_REQUEST = 1 << 16
#: The container's data-plane socket, in its runtime directory (``/run/radium`` inside).
DATA_SOCKET = "dp.sock"
DIAL_TIMEOUT = 10.0


@dataclass
class Held:
    """One container's lease, as the agent remembers it across restarts."""

    container: str
    lease_id: str
    ttl: float
    pid: int
    pid_started: float
    runtime_dir: str
    lease: dict[str, Any]
    credential: str = ""


class Agent:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.node = config.agent.node or socket.gethostname()
        self.state_file = Path(config.agent.state_file)
        self.held: dict[str, Held] = {}
        self.lock = asyncio.Lock()
        #: Containers whose lease is being taken from the pool (it may wait for capacity).
        self.acquiring: dict[str, asyncio.Task[dict[str, Any] | None]] = {}
        self.channel = rpc.aio_channel(config.client.pool, config.client.tls)
        #: Every pool call of the agent is on this one stream (docs/lease-stream.md).
        self.pool = LeaseStream(
            self.channel,
            rpc.metadata(config.client.token),
            f"pool at {config.client.pool}",
            config.client.timeout,
            config.client.tls.enabled,
        )
        self.data_servers: dict[str, asyncio.AbstractServer] = {}
        #: Told of each request answered: (op, error kind or "", seconds); the metrics.
        self.answered: Callable[[str, str, float], None] = lambda op, kind, seconds: None

    # -- state on disk ---------------------------------------------------------------------
    def load(self) -> None:
        try:
            data = json.loads(self.state_file.read_text())
            self.held = {h["container"]: Held(**h) for h in data.get("held", [])}
        except FileNotFoundError:
            self.held = {}
        except (ValueError, TypeError, KeyError) as exc:
            log.error("agent state %s is unreadable (%s); starting empty", self.state_file, exc)
            self.held = {}
        log.info("agent resumes %d leases", len(self.held))

    def save(self) -> None:
        self.state_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.state_file.parent.chmod(0o700)  # it holds lease credentials
        tmp = self.state_file.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # 0600 from the start
        with os.fdopen(fd, "w") as f:
            json.dump({"held": [asdict(h) for h in self.held.values()]}, f)
        os.replace(tmp, self.state_file)

    # -- operations ------------------------------------------------------------------------
    async def acquire(self, message: dict[str, Any]) -> dict[str, Any]:
        """The container's lease: the one it holds, the one being taken for it, or a new one.

        The pool call runs outside ``lock``: a request that waits for capacity (``wait``) must
        not hold up other containers' starts, nor the releases that would make room for it.
        """
        container = str(message.get("container", ""))
        annotations = message.get("request") or {}
        if not container or not isinstance(annotations, dict):
            raise InvalidRequestError("acquire needs a container id and its request")
        if container in self.held:
            return {"ok": True, "lease": self.held[container].lease}
        taking = self.acquiring.get(container)
        if taking is None:  # no await since the checks: no second task for the container
            taking = asyncio.create_task(self._take(container, message, annotations))
            self.acquiring[container] = taking
            taking.add_done_callback(lambda _: self.acquiring.pop(container, None))
        return {"ok": True, "lease": await asyncio.shield(taking)}

    async def _take(
        self, container: str, message: dict[str, Any], annotations: dict[Any, Any]
    ) -> dict[str, Any] | None:
        wanted = allocation({str(k): str(v) for k, v in annotations.items()})
        if wanted is None:
            return None
        holder = f"{self.node}/{container}"
        lease = await self.pool.allocate(pb.AllocateRequest(holder=holder, **wanted))
        pid = int(message.get("pid", 0))
        summary = {
            "id": lease.id,
            "acceptor": lease.acceptor,
            "data_address": lease.data_address,
            "devices": list(lease.device_ids),
            "fraction": lease.fraction,
            "memory_mib": lease.memory_mib,
            "holder": holder,
            "queue": lease.queue,
            "priority": lease.priority,
            "state": lease.state,
        }
        held = Held(
            container,
            lease.id,
            float(lease.ttl_seconds),
            pid,
            _started(pid),
            str(message.get("runtime_dir", "")),
            summary,
            lease.credential,
        )
        async with self.lock:
            self.held[container] = held
            self.save()
        self._write_lease_file(held)
        try:
            await self.open_data_socket(held)
        except RadiumError:
            await self.release(container, "no data-plane socket")
            raise
        log.info(
            "container %s: lease %s on %s %s",
            container,
            lease.id,
            lease.acceptor,
            summary["devices"],
        )
        return summary

    def _note_state(self, held: Held, state: str, message: str) -> None:
        """A preemption notice goes into the container's lease.json (its worker says it too)."""
        if not state or held.lease.get("state") == state:
            return
        held.lease.update(state=state, message=message)
        log.warning(
            "container %s: lease %s is %s: %s", held.container, held.lease_id, state, message
        )
        self.save()
        self._write_lease_file(held)

    def _write_lease_file(self, held: Held) -> None:
        if held.runtime_dir and os.path.isdir(held.runtime_dir):
            path = Path(held.runtime_dir) / "lease.json"
            tmp = path.with_suffix(".tmp")  # replaced whole: the container may be reading it
            tmp.write_text(json.dumps(held.lease, indent=2) + "\n")
            os.replace(tmp, path)

    # -- data plane ------------------------------------------------------------------------
    async def open_data_socket(self, held: Held) -> None:
        """The container's socket for data-plane connections (re-made by a restarted agent)."""
        if not held.runtime_dir or not os.path.isdir(held.runtime_dir):
            return
        path = os.path.join(held.runtime_dir, DATA_SOCKET)
        try:
            listener = bind_unix(path)
        except OSError as exc:
            raise RadiumError(
                f"cannot create the container's data-plane socket {path}: {exc.strerror or exc}"
            ) from exc
        server = await asyncio.start_unix_server(
            functools.partial(self.serve_data, held.container), sock=listener
        )
        self.data_servers[held.container] = server

    def close_data_socket(self, container: str) -> None:
        server = self.data_servers.pop(container, None)
        if server is not None:
            server.close()

    async def serve_data(
        self, container: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """One ``connect`` request: dial the acceptor, authenticate, pass the socket in."""
        connected: socket.socket | None = None
        try:
            await asyncio.wait_for(reader.readline(), timeout=10)
            held = self.held.get(container)
            if held is None:
                raise LeaseNotFoundError(f"container {container} holds no lease")
            connected = await asyncio.to_thread(
                dial, str(held.lease.get("data_address", "")), held.lease_id, held.credential
            )
            reply: dict[str, Any] = {"ok": True}
        except RadiumError as exc:
            reply = {"ok": False, "error": exc.one_line()}
        except (asyncio.TimeoutError, ConnectionError, ValueError) as exc:
            reply = {"ok": False, "error": f"bad request: {type(exc).__name__}"}
        try:
            raw = writer.get_extra_info("socket")
            with socket.socket(fileno=os.dup(raw.fileno())) as out:
                out.setblocking(True)
                payload = json.dumps(reply).encode() + b"\n"
                if connected is not None:
                    wire.send_fd(out, payload, connected.fileno())
                else:
                    out.sendall(payload)
        except OSError as exc:
            log.warning("container %s: handing over a connection: %s", container, exc)
        finally:
            if connected is not None:
                connected.close()
            writer.close()

    async def release(self, container: str, why: str) -> bool:
        async with self.lock:
            held = self.held.pop(container, None)
            if held is None:
                return False
            self.save()
        self.close_data_socket(container)
        try:
            await self.pool.release(held.lease_id)
        except RadiumError as exc:  # the pool will expire it after its TTL anyway
            log.warning("releasing lease %s: %s", held.lease_id, exc.one_line())
        log.info("container %s: lease %s released (%s)", container, held.lease_id, why)
        return True

    async def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        op = message.get("op")
        if op == "ping":
            return {"ok": True}
        if op == "acquire":
            return await self.acquire(message)
        if op == "release":
            return {
                "ok": True,
                "released": await self.release(str(message.get("container", "")), "poststop"),
            }
        if op == "list":
            return {"ok": True, "held": [asdict(h) for h in self.held.values()]}
        raise InvalidRequestError(f"unknown agent operation {op!r}")

    async def serve_client(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        began, op = time.perf_counter(), ""
        try:
            line = await asyncio.wait_for(reader.readline(), timeout=10)
            if len(line) > MAX_REQUEST:
                raise InvalidRequestError("request too large")
            try:
                message = json.loads(line)
            except ValueError as exc:
                raise InvalidRequestError("a request is one JSON object per line") from exc
            if not isinstance(message, dict):
                raise InvalidRequestError("a request is one JSON object per line")
            op = str(message.get("op"))
            reply = await self.handle(message)
        except RadiumError as exc:
            reply = {"ok": False, "error": exc.message, "hint": exc.hint, "kind": exc.kind}
        except (
            asyncio.TimeoutError,
            ConnectionError,
            asyncio.LimitOverrunError,
            ValueError,
        ) as exc:
            reply = {"ok": False, "error": f"bad request: {type(exc).__name__}"}
        except Exception as exc:  # never leave a caller (a container's hook) waiting
            log.exception("agent request failed")
            reply = {"ok": False, "error": f"node agent internal error: {exc}"}
        kind = "" if reply.get("ok") else str(reply.get("kind", "internal"))
        self.answered(op, kind, time.perf_counter() - began)
        with contextlib.suppress(ConnectionError):
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
        writer.close()

    # -- background loops ------------------------------------------------------------------
    async def keep_alive_forever(self) -> None:
        """Renew each lease at once (a resumed agent may be late), then every third of its TTL."""
        renewed: dict[str, float] = {}
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(KEEPALIVE_TICK)
            now = loop.time()
            current = {held.lease_id for held in self.held.values()}
            renewed = {lease_id: at for lease_id, at in renewed.items() if lease_id in current}
            for held in list(self.held.values()):
                if now - renewed.get(held.lease_id, float("-inf")) < held.ttl / 3:
                    continue
                renewed[held.lease_id] = now
                try:
                    answer = await self.pool.keep_alive(held.lease_id)
                    self._note_state(held, answer.state, answer.message)
                except LeaseNotFoundError as exc:
                    log.warning(
                        "container %s: lease %s ended in the pool", held.container, held.lease_id
                    )
                    self._note_state(held, "ended", exc.message)
                    async with self.lock:
                        self.held.pop(held.container, None)
                        self.save()
                    self.close_data_socket(held.container)
                except RadiumError as exc:
                    log.warning("keeping lease %s alive: %s", held.lease_id, exc.one_line())

    async def watch_forever(self) -> None:
        while True:
            await asyncio.sleep(WATCH_INTERVAL)
            for held in list(self.held.values()):
                if held.pid and _started(held.pid) != held.pid_started:
                    await self.release(held.container, "container process gone")


def bind_unix(path: str) -> socket.socket:
    """A listening unix socket at ``path``, however long (container ids make long paths).

    sun_path holds 108 bytes; binding through ``/proc/self/fd/N`` of the directory does not
    depend on the directory's path length.
    """
    directory, name = os.path.split(path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    fd = os.open(directory, os.O_PATH | os.O_DIRECTORY)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(f"/proc/self/fd/{fd}/{name}")
        os.chmod(path, 0o666)  # any user of the container may use its lease
        listener.listen(64)
    except OSError:
        listener.close()
        raise
    finally:
        os.close(fd)
    return listener


def dial(address: str, lease_id: str, credential: str) -> socket.socket:
    """A connection to the lease's worker, authenticated with the lease credential."""
    host, _, port = address.rpartition(":")
    try:
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=DIAL_TIMEOUT)
    except (OSError, ValueError) as exc:
        raise UnavailableError(
            f"acceptor data plane at {address!r} is unreachable: {exc}",
            hint="is the lease's acceptor running and its data_address reachable from here?",
        ) from exc
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        handshake.client(sock, lease_id, credential)
        sock.settimeout(None)
    except handshake.AuthenticationError as exc:
        sock.close()
        raise AuthError(f"acceptor at {address} refused lease {lease_id}: {exc}") from exc
    except (OSError, wire.ProtocolError) as exc:
        sock.close()
        raise UnavailableError(f"data-plane handshake with {address} failed: {exc}") from exc
    return sock


def _started(pid: int) -> float:
    """The process's start time (0 when it does not exist): pid plus this survives pid reuse."""
    try:
        return psutil.Process(pid).create_time() if pid > 0 else 0.0
    except psutil.Error:
        return 0.0


async def serve(config: Config) -> None:
    lock_path = Path(config.agent.state_file).with_suffix(".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock = open(lock_path, "w")  # noqa: SIM115 - held for the agent's life
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log.info("another agent is running (lock %s)", lock_path)
        return
    agent = Agent(config)
    agent.load()
    endpoint = None
    if config.agent.metrics:
        # Imported only then: prometheus-client takes 60 ms to import, and the hook may be
        # waiting for this agent to start (autostart) before its container can.
        from radium import metrics
        from radium.shim.agent_metrics import AgentMetrics

        registry = metrics.new_registry()
        agent.answered = AgentMetrics(registry, lambda: len(agent.held)).request
        endpoint = metrics.serve(config.agent.metrics, registry, "agent.metrics")
    socket_path = config.agent.socket
    os.makedirs(os.path.dirname(socket_path), exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(socket_path)
    server = await asyncio.start_unix_server(agent.serve_client, path=socket_path)
    os.chmod(socket_path, 0o600)
    tasks = [
        asyncio.create_task(agent.keep_alive_forever()),
        asyncio.create_task(agent.watch_forever()),
    ]
    for held in agent.held.values():
        agent._write_lease_file(held)
        await agent.open_data_socket(held)
    log.info("agent of node %s listening on %s", agent.node, socket_path)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        for task in tasks:
            task.cancel()
        server.close()
        for container in list(agent.data_servers):
            agent.close_data_socket(container)
        await agent.pool.close()
        await agent.channel.close()
        if endpoint is not None:
            endpoint.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(socket_path)
        lock.close()
