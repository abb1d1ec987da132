"""The Alibaba GPU-sharing trace (cluster-trace-gpu-v2023, "openb") as pool objects.

Nodes become acceptors with their GPUs and CPU; pods become allocation requests. Device memory
is 1,000 MiB per GPU times a whole number, so every ``gpu_milli`` share is a whole number of
MiB and no rounding makes a pod fit or miss where the paper's simulator (which counts in
thousandths of a GPU) would not.

The trace is not in the repository (its terms allow research and study use only): its files
go in ``benchmarks/traces/alibaba-gpu-v2023`` (ignored by git), or in the directory named by
``RADIUM_TRACE``. benchmarks/traces/README.md says where to get them and how to check them.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from radium import gc_tuning
from radium.pool.core.policies import POLICIES
from radium.pool.core.state import PoolState
from radium.pool.model import AcceptorState, Device, DeviceState, Request
from radium.pool.store.sqlite import SQLiteStore

_HERE = Path(__file__).resolve().parent
TRACE = Path(os.environ.get("RADIUM_TRACE") or _HERE / "traces" / "alibaba-gpu-v2023")
#: GPU memory by model, in GB (the trace gives models only): 1 GB = 1,000 MiB here, see above.
MEMORY_GB = {"G2": 16, "G3": 32, "T4": 16, "P100": 16, "V100M16": 16, "V100M32": 32, "A10": 24}


def _missing(what: Path) -> SystemExit:
    """One line saying what is missing and how to get it: running a benchmark without the trace
    is a setup mistake, not a crash."""
    return SystemExit(
        f"benchmarks: the Alibaba trace's {what} is missing; download cluster-trace-gpu-v2023"
        " as benchmarks/traces/README.md says, or set RADIUM_TRACE to its directory"
    )


def require(*pod_lists: str) -> None:
    """Exit now, before a benchmark prints anything, if the GPU node list or one of these pod
    lists is missing."""
    for name in ["openb_node_list_gpu_node.csv", *(f"openb_pod_list_{n}.csv" for n in pod_lists)]:
        if not (TRACE / name).is_file():
            raise _missing(TRACE / name)


def _open(name: str) -> IO[str]:
    try:
        return open(TRACE / name, newline="")
    except FileNotFoundError:
        raise _missing(TRACE / name) from None


@dataclass(frozen=True)
class Pod:
    name: str
    cpu_milli: int
    gpus: int
    gpu_milli: int
    models: str
    created: float
    deleted: float
    #: Quality of service (LS, BE, Burstable, Guaranteed), phase (Running, Failed, Pending,
    #: Succeeded) and when it was scheduled (-1: never); "" and -1 where the list has none.
    qos: str = ""
    phase: str = ""
    scheduled: float = -1.0

    @property
    def lifetime(self) -> float:
        """Seconds it ran: from being scheduled (else created) until deleted."""
        return self.deleted - (self.scheduled if self.scheduled >= 0 else self.created)

    @property
    def gpu_share(self) -> float:
        """GPUs this pod takes: a part of one, or whole ones."""
        return self.gpus * self.gpu_milli / 1000

    def request(self) -> Request:
        selector = {"model": self.models} if self.models else {}
        if self.gpus == 1 and self.gpu_milli < 1000:
            return Request(
                fraction=self.gpu_milli / 1000, cpu_milli=self.cpu_milli, selector=selector
            )
        return Request(gpus=self.gpus, cpu_milli=self.cpu_milli, selector=selector)


def nodes(name: str = "openb_node_list_gpu_node.csv") -> list[AcceptorState]:
    acceptors = []
    with _open(name) as f:
        for row in csv.DictReader(f):
            memory = MEMORY_GB.get(row["model"], 0) * 1000
            devices = {
                str(i): DeviceState(Device(str(i), "nvidia", row["model"], memory))
                for i in range(int(row["gpu"]))
            }
            acceptors.append(
                AcceptorState(row["sn"], "", {}, devices, cpu_milli=int(row["cpu_milli"]))
            )
    return acceptors


def pods(name: str) -> list[Pod]:
    with _open(f"openb_pod_list_{name}.csv") as f:
        return [
            Pod(
                row["name"],
                int(row["cpu_milli"]),
                int(row["num_gpu"]),
                int(row["gpu_milli"]),
                row.get("gpu_spec") or "",
                float(row.get("creation_time") or 0),
                float(row.get("deletion_time") or 0),
                row.get("qos") or "",
                row.get("pod_phase") or "",
                float(row.get("scheduled_time") or -1),
            )
            for row in csv.DictReader(f)
        ]


def pod_lists() -> list[str]:
    names = sorted(p.name[len("openb_pod_list_") : -4] for p in TRACE.glob("openb_pod_list_*.csv"))
    if not names:
        raise _missing(TRACE / "openb_pod_list_*.csv")
    return names


def pool_of(acceptors: list[AcceptorState], policy: str) -> PoolState:
    """The pool's own state, in memory, with ``acceptors`` registered and leases that never
    expire (a benchmark's clock is its own)."""
    state = PoolState(
        SQLiteStore(":memory:"),
        lease_ttl=1e12,
        heartbeat_timeout=1e12,
        now=0.0,
        policy=POLICIES[policy](),
    )
    for acceptor in acceptors:
        state.register(acceptor, 0.0)
    gc_tuning.settle()  # as a running pool does every few minutes
    return state
