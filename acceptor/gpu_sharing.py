"""How fractional leases share this acceptor's NVIDIA GPUs: under MPS, unenforced, or not at all.

``[acceptor] gpu_sharing = "mps"`` (the default) starts one NVIDIA MPS control daemon per GPU
when the acceptor starts (:mod:`radium.acceptor.mps`): whether a GPU can share is then known
before the acceptor registers, so the pool never places a fraction on a GPU that cannot take
one, and a lease's first call does not wait for a daemon. A GPU whose daemon cannot run (no
binary, or it fails to start) is labelled ``sharing=exclusive``: the pool places whole-GPU
leases only there (:data:`radium.pool.core.demand.SHARED`), and a fractional lease that reaches it
anyway is refused when its slot is made. ``"unenforced"`` runs no daemon and labels every GPU
``sharing=unenforced``: fractions are placed, and nothing keeps a lease to its share.

A fractional lease on an MPS GPU (a fraction below 1 of one GPU) runs as the GPU's shared
worker uid (:class:`radium.acceptor.uids.UidLocks` groups): MPS serves one uid at a time per
GPU, and leases of different uids would wait for each other's whole run. The uid is taken by
the GPU's first such lease, its daemon's directories given to it, and with its last lease the
GPU's MPS servers are shut down and the uid goes back to the host. A whole-GPU lease bypasses
MPS: its own uid, no MPS environment. A watch thread restarts a daemon that died (with backoff).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from radium.acceptor.mps import Daemon, find_control
from radium.configtree import AcceptorConfig
from radium.errors import RadiumError, UnavailableError
from radium.proto import pool_pb2 as pb

__all__ = ["EXCLUSIVE", "MPS", "SHARING", "UNENFORCED", "Sharing", "Uids"]

log = logging.getLogger(__name__)
#: The device label, and its values.
SHARING, MPS, UNENFORCED, EXCLUSIVE = "sharing", "mps", "unenforced", "exclusive"
#: Seconds between two looks at the daemons, and the most a restart waits after failures.
WATCH_INTERVAL = 2.0
MAX_BACKOFF = 60.0


class Uids(Protocol):
    """What sharing needs of :class:`radium.acceptor.uids.UidLocks`."""

    def take(self, group: str = "") -> int: ...

    def sharing(self, uid: int) -> int: ...

    def release(self, uid: int) -> bool: ...


class Sharing:
    """The sharing state of each NVIDIA device of ``devices``, and their MPS daemons."""

    def __init__(self, config: AcceptorConfig, devices: Sequence[pb.Device]) -> None:
        gpus = {d.id: d.labels.get("uuid") or d.id for d in devices if d.vendor == "nvidia"}
        self.mode = config.gpu_sharing
        #: device id -> MPS, UNENFORCED or EXCLUSIVE
        self.state: dict[str, str] = {}
        self.daemons: dict[str, Daemon] = {}
        #: device id -> (the next restart's time, the backoff after it), for dead daemons
        self.retry: dict[str, tuple[float, float]] = {}
        self.lock = threading.Lock()  # one lease's take or release of a shared uid at a time
        self.stopping = threading.Event()
        self.watcher: threading.Thread | None = None
        if not gpus:
            return
        if config.gpu_sharing == UNENFORCED:
            self.state = dict.fromkeys(gpus, UNENFORCED)
            log.warning("acceptor.gpu_sharing = \"unenforced\": fractional leases share GPUs "
                        "with nothing keeping each to its share")  # fmt: skip
            return
        control = find_control(config.mps_control)
        if control is None:
            self.state = dict.fromkeys(gpus, EXCLUSIVE)
            where = config.mps_control or "on PATH or in /usr/local/nvidia/bin"
            log.warning("NVIDIA MPS is not available (no nvidia-cuda-mps-control %s): GPUs %s "
                        "take whole-GPU leases only; install the driver's MPS binaries, set "
                        "acceptor.mps_control, or set acceptor.gpu_sharing = \"unenforced\"",
                        where, ", ".join(gpus))  # fmt: skip
            return
        for device_id, uuid in gpus.items():
            daemon = Daemon(uuid, control, Path(config.mps_dir) / uuid)
            try:
                daemon.start()
            except RadiumError as exc:
                self.state[device_id] = EXCLUSIVE
                log.warning("NVIDIA MPS does not start on GPU %s (%s): it takes whole-GPU "
                            "leases only; see its log in %s, or set acceptor.gpu_sharing = "
                            "\"unenforced\"", device_id, exc.message, daemon.log)  # fmt: skip
                continue
            self.state[device_id] = MPS
            self.daemons[device_id] = daemon

    def start_watch(self) -> None:
        """Watch the daemons in a thread until :meth:`close` (none when there are none)."""
        if self.daemons and self.watcher is None:
            self.watcher = threading.Thread(target=self._watch, name="mps-watch", daemon=True)
            self.watcher.start()

    def labelled(self, devices: Sequence[pb.Device]) -> list[pb.Device]:
        """``devices`` with each NVIDIA one's ``sharing`` label (what the pool places by)."""
        out = []
        for device in devices:
            copy = pb.Device()
            copy.CopyFrom(device)
            if device.id in self.state:
                copy.labels[SHARING] = self.state[device.id]
            elif device.vendor == "nvidia":  # not seen at start (it was unhealthy): no daemon
                copy.labels[SHARING] = EXCLUSIVE if self.mode == MPS else UNENFORCED
            out.append(copy)
        return out

    def group(self, device_ids: Sequence[str], fraction: float, lease_id: str = "") -> str:
        """The uid group of a lease: its GPU's when it is a fraction of an MPS GPU, "" when it
        has a uid of its own; UnavailableError for a fraction of a GPU that cannot share."""
        if len(device_ids) != 1 or fraction >= 1 or device_ids[0] not in self.state:
            return ""
        state = self.state[device_ids[0]]
        if state == EXCLUSIVE:
            raise UnavailableError(
                f"lease {lease_id}: GPU {device_ids[0]} of this acceptor takes whole-GPU leases "
                "only (NVIDIA MPS is not available there; its log says why)",
                hint='ask for whole GPUs, or set acceptor.gpu_sharing = "unenforced" there',
            )
        return f"mps-{device_ids[0]}" if state == MPS else ""

    def take(self, group: str, uids: Uids) -> int:
        """The group's shared uid for one more lease; the first gets the daemon's directories."""
        with self.lock:
            uid = uids.take(group)
            if uids.sharing(uid) == 1:
                self.own(group, uid)
            return uid

    def own(self, group: str, uid: int) -> None:
        """Give the group's GPU's MPS directories to its shared uid (its server's)."""
        self.daemons[group.removeprefix("mps-")].own(uid)

    def release(self, uid: int, uids: Uids) -> None:
        """A lease of ``uid`` ended; with a group's last, its MPS servers end first and its
        directories go back to root, so nothing runs as the uid when the host gets it back."""
        with self.lock:
            if uids.sharing(uid) == 1:
                for daemon in self.daemons.values():
                    if daemon.owner == uid:
                        daemon.shutdown_servers()
                        daemon.own(0)
            uids.release(uid)

    def env(self, device_ids: Sequence[str], fraction: float, memory_mib: int) -> dict[str, str]:
        """The MPS client environment of a fractional lease on an MPS GPU (inherited by every
        process of the lease); a note for one on an unenforced GPU; nothing otherwise."""
        if len(device_ids) != 1 or fraction >= 1:
            return {}
        state = self.state.get(device_ids[0])
        if state == UNENFORCED:
            return {"RADIUM_GPU_SHARING": UNENFORCED}
        daemon = self.daemons.get(device_ids[0])
        if state != MPS or daemon is None:
            return {}
        env = {
            "RADIUM_GPU_SHARING": MPS,
            "CUDA_MPS_PIPE_DIRECTORY": str(daemon.pipe),
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(max(1, min(100, round(fraction * 100)))),
        }
        if memory_mib > 0:  # index 0: the lease's CUDA_VISIBLE_DEVICES narrows it to its GPU
            env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = f"0={memory_mib}M"
        return env

    def binds(self, env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
        """(host directory, path in the sandbox) the lease's sandbox binds in, given its
        :meth:`env`: its GPU's MPS pipe directory, at its own path. Its /dev/shm stays its
        own: MPS clients of Volta and later GPUs need none of the server's (measured)."""
        pipe = env.get("CUDA_MPS_PIPE_DIRECTORY")
        return ((pipe, pipe),) if pipe else ()

    def check(self, now: float | None = None) -> None:
        """One look at the daemons: a dead or silent one is restarted (with backoff)."""
        now = time.monotonic() if now is None else now
        for device_id, daemon in list(self.daemons.items()):
            if self.stopping.is_set():
                return
            when, backoff = self.retry.get(device_id, (0.0, 0.0))
            if now < when:
                continue
            if _healthy(daemon):
                self.retry.pop(device_id, None)
                continue
            log.warning("the MPS control daemon of GPU %s is gone or silent; starting it again",
                        device_id)  # fmt: skip
            try:
                daemon.stop()  # what is left of it
                daemon.start()
                self.retry.pop(device_id, None)
            except RadiumError as exc:
                backoff = min(MAX_BACKOFF, max(1.0, backoff * 2))
                self.retry[device_id] = (now + backoff, backoff)
                log.warning("MPS on GPU %s: %s; next try in %.0fs", device_id, exc.message,
                            backoff)  # fmt: skip

    def _watch(self) -> None:
        while not self.stopping.wait(WATCH_INTERVAL):
            try:
                self.check()
            except Exception:  # the watch must outlive one bad look
                log.exception("MPS watch failed")

    def close(self) -> None:
        """Stop the watch and every daemon with its servers (the acceptor stops)."""
        self.stopping.set()
        if self.watcher is not None:
            self.watcher.join(timeout=WATCH_INTERVAL + 30)
        for daemon in self.daemons.values():
            daemon.stop()


def _healthy(daemon: Daemon) -> bool:
    """Whether the daemon runs and answers ``get_server_list``."""
    try:
        return daemon.alive() and daemon.servers() is not None
    except RadiumError:
        return False
