"""The Radium configuration tree: one frozen, typed dataclass per section, complete defaults,
and every bound a value must keep declared on its field (``Annotated`` rules, ``Literal``
choices) or, when it spans fields, checked as the tree is made. The sections of a container's
start (bundles, hook, runtime, shim) are :mod:`radium.configstart`'s; :mod:`radium.config`
reads the tree from its file, strictly.
"""

from dataclasses import dataclass, field
from typing import Literal, Mapping

from radium.addresses import parse_address, parse_addresses
from radium.bounds import AbsolutePath, Positive, PositiveInt, checked
from radium.configstart import BundlesConfig, HookConfig, RuntimeConfig, ShimConfig
from radium.errors import ConfigError

__all__ = [
    "AcceptorConfig",
    "AgentConfig",
    "ClientConfig",
    "Config",
    "EtcdConfig",
    "PoolConfig",
    "QueueConfig",
    "SandboxConfig",
    "TlsConfig",
]


@dataclass(frozen=True)
class TlsConfig:
    """Mutual TLS on the control plane (``radium certs`` makes the files); all empty = off."""

    #: The CA certificate that signed every node of this pool (PEM).
    ca: str = ""
    #: This node's certificate (it names its role) and key, from ``radium certs issue``.
    cert: str = ""
    key: str = ""

    @property
    def enabled(self) -> bool:
        return bool(self.ca or self.cert or self.key)


@dataclass(frozen=True)
class QueueConfig:
    """A queue fixed by the config file (``[pool.queues.NAME]``), as ``radium queues add``."""

    deserved: float = 0.0
    weight: float = 1.0
    #: GPUs; -1: no limit.
    limit: float = -1.0
    priority: int = 0
    parent: str = ""


@dataclass(frozen=True)
class EtcdConfig:
    """The etcd cluster of a pool with ``store = "etcd"`` (docs/store.md); etcd 3.4 or later."""

    #: Client URLs of the members (http:// or https://); a call moves on when one refuses.
    endpoints: tuple[str, ...] = ("http://127.0.0.1:2379",)
    #: Every key of this pool lives under it: pools may share one etcd cluster.
    prefix: str = "/radium/"
    #: Deadline of one etcd call, in seconds: with no quorum, allocations fail after it.
    timeout: Positive = 2.0
    #: Seconds the leader key outlives a leader that died: the failover time (etcd's least is 2).
    election_ttl: PositiveInt = 2
    #: TLS to etcd: its CA, and a client certificate and key when etcd asks for one.
    ca: str = ""
    cert: str = ""
    key: str = ""


@dataclass(frozen=True)
class PoolConfig:
    """``radium pool serve``: where it listens, where its state lives, whom it trusts."""

    listen: str = "127.0.0.1:7400"
    #: host:port of the lease socket (docs/lease-socket.md): the lease stream's calls without
    #: gRPC, at a fraction of its CPU; "" serves none (node agents then lease over gRPC).
    lease_listen: str = ""
    #: "sqlite" (one pool process; the embedded default) or "etcd" (replicas; [pool.etcd]).
    store: Literal["sqlite", "etcd"] = "sqlite"
    etcd: EtcdConfig = field(default_factory=EtcdConfig)
    #: SQLite database (WAL): every lease survives a pool restart.
    db: str = "/var/lib/radium/pool.db"
    #: "normal": durable across pool crashes (fsync at WAL checkpoints); "full": also across
    #: power loss (fsync per commit, slower).
    synchronous: Literal["normal", "full"] = "normal"
    lease_ttl: Positive = 30.0
    heartbeat_timeout: Positive = 10.0
    #: Where leases go: "fgd" (fragmentation gradient descent: fractions pack so that the
    #: requests the pool sees keep fitting) or "bestfit" (docs/scheduling.md).
    placement: Literal["fgd", "bestfit"] = "fgd"
    #: Seconds a preempted lease keeps its worker after its notice.
    preempt_grace: Positive = 30.0
    #: Ended leases listed by `radium leases --all`: at most this many (the newest), and none
    #: longer than ``ended_retention`` seconds after they ended (docs/store.md).
    ended_kept: PositiveInt = 10_000
    ended_retention: Positive = 7 * 24 * 3600.0
    #: host:port of its Prometheus /metrics endpoint (docs/metrics.md); "" serves none.
    metrics: str = "127.0.0.1:7410"
    #: Queues set at every start (over what `radium queues` stored); others stay as stored.
    queues: Mapping[str, QueueConfig] = field(default_factory=dict)
    #: Tokens accepted from node agents and the CLI (leases, status).
    agent_tokens: tuple[str, ...] = ()
    #: Tokens accepted from acceptors (register, heartbeat, watch).
    acceptor_tokens: tuple[str, ...] = ()
    #: With TLS, callers authenticate by certificate (its role decides) and tokens are unused.
    tls: TlsConfig = field(default_factory=TlsConfig)


@dataclass(frozen=True)
class ClientConfig:
    """How this node's agent and CLI reach the pool."""

    pool: str = "127.0.0.1:7400"
    #: The pool's lease sockets ([pool] lease_listen of each replica, comma-separated): the
    #: node agent's leases go there instead of on a gRPC stream (docs/lease-socket.md).
    leases: str = ""
    token: str = ""
    #: Deadline of every control-plane call, in seconds.
    timeout: Positive = 5.0
    #: A pool with TLS is reached with an agent (or admin) certificate instead of the token.
    tls: TlsConfig = field(default_factory=TlsConfig)


@dataclass(frozen=True)
class AgentConfig:
    """The node agent: holds this node's leases for its containers."""

    #: Give containers that ask for Radium a lease from the pool ([client] says which pool).
    #: Off, the hook only injects the client bundle.
    enabled: bool = False
    socket: str = "/run/radium/agent.sock"
    #: Containers and their leases, so an agent restart loses track of nothing.
    state_file: str = "/var/lib/radium/agent/state.json"
    log_file: str = "/var/log/radium/agent.log"
    #: Start the agent from the hook when it is not running (the embedded default).
    autostart: bool = True
    #: Lease holders are "<node>/<container id>"; "" means this host's name.
    node: str = ""
    #: host:port of its Prometheus /metrics endpoint (docs/metrics.md); "" (the default
    #: outside `radium up`) serves none.
    metrics: str = ""


@dataclass(frozen=True)
class SandboxConfig:
    """How each lease's worker is confined on the acceptor (docs/security.md)."""

    #: false runs workers as root with no sandbox, cgroup caps or rlimits: only for the tests
    #: that show each confinement probe would catch the hole. Never on a pool with tenants.
    enabled: bool = True
    #: Each lease's worker runs as a uid (and gid) of its own from this range; never 0.
    uid_min: PositiveInt = 200000
    uid_max: int = 299999
    #: Root's own directory of one lock file per worker uid: every acceptor of the host takes
    #: its uids through it, so no two share one (acceptor/uids.py).
    uid_lock_dir: AbsolutePath = "/run/radium/uids"
    #: Processes and threads of one worker (RLIMIT_NPROC and the pids cgroup).
    max_processes: PositiveInt = 512
    #: Open files of each worker process (RLIMIT_NOFILE).
    max_open_files: PositiveInt = 4096
    #: Size bound of the worker's private /tmp and of its /dev/shm (each; memory within its cap).
    tmp_mib: PositiveInt = 1024
    #: More host paths workers may read (datasets, model caches), read-only.
    read_only: tuple[str, ...] = ()


@dataclass(frozen=True)
class AcceptorConfig:
    """``radium acceptor serve``: its devices and how it reaches the pool."""

    #: Name in the pool; "" means this host's name.
    name: str = ""
    pool: str = "127.0.0.1:7400"
    token: str = ""
    #: Where lease workers are reached (the data plane).
    data_address: str = "127.0.0.1:7401"
    #: "auto" (NVIDIA through NVML when present, else CPU), "nvml" or "cpu".
    backend: Literal["auto", "nvml", "cpu"] = "auto"
    cpu_devices: PositiveInt = 2
    cpu_memory_mib: PositiveInt = 16384
    state_dir: str = "/var/lib/radium/acceptor"
    heartbeat_interval: Positive = 2.0
    #: host:port of its Prometheus /metrics endpoint (docs/metrics.md); "" serves none.
    metrics: str = "127.0.0.1:7411"
    #: The local container engine ("docker" or "containerd"; "" = none): it pulls registered
    #: images and runs container-mode workers.
    engine: Literal["", "docker", "containerd"] = ""
    #: Its socket; "" = unix:///var/run/docker.sock or /run/containerd/containerd.sock.
    engine_address: str = ""
    #: How fractional leases share an NVIDIA GPU: "mps" (under an NVIDIA MPS control daemon
    #: per GPU: compute share and memory enforced; a GPU without MPS takes whole leases only)
    #: or "unenforced" (fractions without MPS: nothing keeps a lease to its share).
    gpu_sharing: Literal["mps", "unenforced"] = "mps"
    #: The nvidia-cuda-mps-control binary; "" = found on PATH, then in /usr/local/nvidia/bin.
    mps_control: str = ""
    #: Root's directory of each GPU's MPS pipe and log directories. Not under state_dir: the
    #: MPS server, run as the GPU's shared worker uid, must reach its pipe directory.
    mps_dir: AbsolutePath = "/run/radium/mps"
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    #: A pool with TLS is reached with an acceptor certificate instead of the token.
    tls: TlsConfig = field(default_factory=TlsConfig)


@dataclass(frozen=True)
class Config:
    """The whole configuration tree."""

    bundles: BundlesConfig = field(default_factory=BundlesConfig)
    hook: HookConfig = field(default_factory=HookConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    shim: ShimConfig = field(default_factory=ShimConfig)
    pool: PoolConfig = field(default_factory=PoolConfig)
    client: ClientConfig = field(default_factory=ClientConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    acceptor: AcceptorConfig = field(default_factory=AcceptorConfig)

    def __post_init__(self) -> None:
        checked(self, "")
        if not self.runtime.runtimes:
            raise ConfigError("config key runtime.runtimes must name at least one runtime")
        etcd = self.pool.etcd
        if not etcd.prefix.startswith("/") or not etcd.prefix.endswith("/"):
            raise ConfigError(
                f"config key pool.etcd.prefix must start and end with '/', got {etcd.prefix!r}"
            )
        if bool(etcd.cert) != bool(etcd.key):
            raise ConfigError("config key pool.etcd needs cert and key together")
        if self.pool.lease_listen:
            parse_address(self.pool.lease_listen, "pool.lease_listen")
        if self.client.leases:
            parse_addresses(self.client.leases, "client.leases")
        for key, tls in (
            ("pool.tls", self.pool.tls),
            ("client.tls", self.client.tls),
            ("acceptor.tls", self.acceptor.tls),
        ):
            if tls.enabled and not (tls.ca and tls.cert and tls.key):
                raise ConfigError(
                    f"config key {key} needs ca, cert and key together",
                    hint="radium certs issue prints the three lines",
                )
        sandbox = self.acceptor.sandbox
        if sandbox.uid_max < sandbox.uid_min:
            raise ConfigError(
                "config key acceptor.sandbox.uid_max must not be below uid_min, "
                f"got {sandbox.uid_max} < {sandbox.uid_min}"
            )
        for path in sandbox.read_only:
            if not path.startswith("/"):
                raise ConfigError(
                    f"config key acceptor.sandbox.read_only must list absolute paths, got {path!r}"
                )
