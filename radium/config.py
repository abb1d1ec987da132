"""The Radium configuration: one frozen, typed tree with complete defaults, loaded strictly.

The file is TOML (``/etc/radium/config.toml``, or the path in ``RADIUM_CONFIG``; for the
``radium`` command line, the config of the user's default ``radium up`` when neither is there).
Every key is optional; an unknown key or a value of the wrong type is an error that names the key.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import os
import typing
from dataclasses import dataclass, field
from typing import Any, Mapping, TypeVar

from radium import tomlcache
from radium.errors import ConfigError

DEFAULT_PATH = "/etc/radium/config.toml"
ENV_VAR = "RADIUM_CONFIG"


@dataclass(frozen=True)
class BundlesConfig:
    """Where the per-platform client bundles live and how one is chosen."""

    dir: str = "/usr/lib/radium/bundles"
    #: TOML file of selection rules; empty means the rules shipped with Radium.
    rules: str = ""


@dataclass(frozen=True)
class HookConfig:
    """What ``radium-hook`` does inside a container."""

    log_file: str = "/var/log/radium/hook.log"
    #: Host directory holding one runtime directory per container.
    state_dir: str = "/run/radium/containers"
    #: Where the selected bundle appears inside the container (read-only).
    bundle_target: str = "/usr/lib/radium"
    #: Where the container's runtime directory appears inside the container.
    runtime_target: str = "/run/radium"
    #: An image without Python: "start" it without the interposer (logged) or "fail" the start.
    no_python: str = "start"


@dataclass(frozen=True)
class RuntimeConfig:
    """What ``radium-runtime`` execs and where it logs."""

    #: Low-level OCI runtimes to try, in order: names looked up in PATH, or absolute paths.
    runtimes: tuple[str, ...] = ("runc", "crun")
    log_file: str = "/var/log/radium/runtime.log"
    #: The hook command put into config.json; empty means this installation's radium-hook.
    hook_command: tuple[str, ...] = ()


@dataclass(frozen=True)
class ShimConfig:
    """What ``containerd-shim-radium-v2`` execs and where it logs (it may print nothing)."""

    #: The containerd shim that does the real work: a name looked up in PATH, or a path.
    runc_shim: str = "containerd-shim-runc-v2"
    log_file: str = "/var/log/radium/shim.log"


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
    timeout: float = 2.0
    #: Seconds the leader key outlives a leader that died: the failover time (etcd's least is 2).
    election_ttl: int = 2
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
    store: str = "sqlite"
    etcd: EtcdConfig = field(default_factory=EtcdConfig)
    #: SQLite database (WAL): every lease survives a pool restart.
    db: str = "/var/lib/radium/pool.db"
    #: "normal": durable across pool crashes (fsync at WAL checkpoints); "full": also across
    #: power loss (fsync per commit, slower).
    synchronous: str = "normal"
    lease_ttl: float = 30.0
    heartbeat_timeout: float = 10.0
    #: Where leases go: "fgd" (fragmentation gradient descent: fractions pack so that the
    #: requests the pool sees keep fitting) or "bestfit" (docs/scheduling.md).
    placement: str = "fgd"
    #: Seconds a preempted lease keeps its worker after its notice.
    preempt_grace: float = 30.0
    #: Ended leases listed by `radium leases --all`: at most this many (the newest), and none
    #: longer than ``ended_retention`` seconds after they ended (docs/store.md).
    ended_kept: int = 10_000
    ended_retention: float = 7 * 24 * 3600.0
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
    timeout: float = 5.0
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
    uid_min: int = 200000
    uid_max: int = 299999
    #: Root's own directory of one lock file per worker uid: every acceptor of the host takes
    #: its uids through it, so no two share one (acceptor/uids.py).
    uid_lock_dir: str = "/run/radium/uids"
    #: Processes and threads of one worker (RLIMIT_NPROC and the pids cgroup).
    max_processes: int = 512
    #: Open files of each worker process (RLIMIT_NOFILE).
    max_open_files: int = 4096
    #: Size bound of the worker's private /tmp and of its /dev/shm (each; memory within its cap).
    tmp_mib: int = 1024
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
    backend: str = "auto"
    cpu_devices: int = 2
    cpu_memory_mib: int = 16384
    state_dir: str = "/var/lib/radium/acceptor"
    heartbeat_interval: float = 2.0
    #: host:port of its Prometheus /metrics endpoint (docs/metrics.md); "" serves none.
    metrics: str = "127.0.0.1:7411"
    #: The local container engine ("docker" or "containerd"; "" = none): it pulls registered
    #: images and runs container-mode workers.
    engine: str = ""
    #: Its socket; "" = unix:///var/run/docker.sock or /run/containerd/containerd.sock.
    engine_address: str = ""
    #: How fractional leases share an NVIDIA GPU: "mps" (under an NVIDIA MPS control daemon
    #: per GPU: compute share and memory enforced; a GPU without MPS takes whole leases only)
    #: or "unenforced" (fractions without MPS: nothing keeps a lease to its share).
    gpu_sharing: str = "mps"
    #: The nvidia-cuda-mps-control binary; "" = found on PATH, then in /usr/local/nvidia/bin.
    mps_control: str = ""
    #: Root's directory of each GPU's MPS pipe and log directories. Not under state_dir: the
    #: MPS server, run as the GPU's shared worker uid, must reach its pipe directory.
    mps_dir: str = "/run/radium/mps"
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
        for key, value in (
            ("bundles.dir", self.bundles.dir),
            ("hook.state_dir", self.hook.state_dir),
            ("hook.bundle_target", self.hook.bundle_target),
            ("hook.runtime_target", self.hook.runtime_target),
        ):
            if not value.startswith("/"):
                raise ConfigError(f"config key {key} must be an absolute path, got {value!r}")
        if self.hook.no_python not in ("start", "fail"):
            raise ConfigError(
                f'config key hook.no_python must be "start" or "fail", got {self.hook.no_python!r}'
            )
        if not self.runtime.runtimes:
            raise ConfigError("config key runtime.runtimes must name at least one runtime")
        if self.pool.synchronous not in ("normal", "full"):
            raise ConfigError(
                'config key pool.synchronous must be "normal" or "full", '
                f"got {self.pool.synchronous!r}"
            )
        if self.pool.store not in ("sqlite", "etcd"):
            raise ConfigError(
                f'config key pool.store must be "sqlite" or "etcd", got {self.pool.store!r}'
            )
        etcd = self.pool.etcd
        if not etcd.prefix.startswith("/") or not etcd.prefix.endswith("/"):
            raise ConfigError(
                f"config key pool.etcd.prefix must start and end with '/', got {etcd.prefix!r}"
            )
        if bool(etcd.cert) != bool(etcd.key):
            raise ConfigError("config key pool.etcd needs cert and key together")
        if self.acceptor.backend not in ("auto", "nvml", "cpu"):
            raise ConfigError(
                'config key acceptor.backend must be "auto", "nvml" or "cpu", '
                f"got {self.acceptor.backend!r}"
            )
        if self.acceptor.gpu_sharing not in ("mps", "unenforced"):
            raise ConfigError(
                'config key acceptor.gpu_sharing must be "mps" or "unenforced", '
                f"got {self.acceptor.gpu_sharing!r}"
            )
        if not self.acceptor.mps_dir.startswith("/"):
            raise ConfigError(
                "config key acceptor.mps_dir must be an absolute path, "
                f"got {self.acceptor.mps_dir!r}"
            )
        if self.acceptor.engine not in ("", "docker", "containerd"):
            raise ConfigError(
                'config key acceptor.engine must be "", "docker" or "containerd", '
                f"got {self.acceptor.engine!r}"
            )
        if self.pool.placement not in ("fgd", "bestfit"):
            raise ConfigError(
                f'config key pool.placement must be "fgd" or "bestfit", got {self.pool.placement!r}'
            )
        for key, number in (
            ("pool.lease_ttl", self.pool.lease_ttl),
            ("pool.preempt_grace", self.pool.preempt_grace),
            ("pool.heartbeat_timeout", self.pool.heartbeat_timeout),
            ("pool.ended_kept", self.pool.ended_kept),
            ("pool.ended_retention", self.pool.ended_retention),
            ("client.timeout", self.client.timeout),
            ("pool.etcd.timeout", etcd.timeout),
            ("pool.etcd.election_ttl", etcd.election_ttl),
            ("acceptor.heartbeat_interval", self.acceptor.heartbeat_interval),
            ("acceptor.cpu_devices", self.acceptor.cpu_devices),
            ("acceptor.cpu_memory_mib", self.acceptor.cpu_memory_mib),
            ("acceptor.sandbox.uid_min", self.acceptor.sandbox.uid_min),
            ("acceptor.sandbox.max_processes", self.acceptor.sandbox.max_processes),
            ("acceptor.sandbox.max_open_files", self.acceptor.sandbox.max_open_files),
            ("acceptor.sandbox.tmp_mib", self.acceptor.sandbox.tmp_mib),
        ):
            if number <= 0:
                raise ConfigError(f"config key {key} must be positive, got {number}")
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
        if not sandbox.uid_lock_dir.startswith("/"):
            raise ConfigError(
                "config key acceptor.sandbox.uid_lock_dir must be an absolute path, "
                f"got {sandbox.uid_lock_dir!r}"
            )
        for path in sandbox.read_only:
            if not path.startswith("/"):
                raise ConfigError(
                    f"config key acceptor.sandbox.read_only must list absolute paths, got {path!r}"
                )


T = TypeVar("T")


def parse_address(address: str, key: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) as ``(host, port)``; a clear error naming ``key``."""
    if "," in address:
        raise ConfigError(f"config key {key} is one host:port, got {address!r}")
    return _host_port(address, key, address, "")


def parse_addresses(text: str, key: str) -> list[tuple[str, int]]:
    """``host:port`` or a comma-separated list of them, in order (a pool's replicas)."""
    form = " (or a comma-separated list)"
    return [_host_port(part.strip(), key, text, form) for part in text.split(",")]


def _host_port(part: str, key: str, text: str, form: str) -> tuple[str, int]:
    found = split_host_port(part)
    if found is None:
        raise ConfigError(f"config key {key} must be host:port{form}, got {text!r}")
    return found


def split_host_port(address: str) -> tuple[str, int] | None:
    """``host:port`` (``[v6]:port`` too) as ``(host, port)``; None when it is not one."""
    host, sep, port = address.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        return None
    return host, int(port)


def _build(cls: type[T], data: Mapping[str, Any], prefix: str) -> T:
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if key not in known:
            raise ConfigError(
                f"unknown config key {dotted!r}", hint="remove it or fix its spelling"
            )
        values[key] = _convert(hints[key], value, dotted)
    return cls(**values)


def _convert(hint: Any, value: Any, dotted: str) -> Any:
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise ConfigError(f"config key {dotted!r} must be a table")
        return _build(hint, value, f"{dotted}.")  # type: ignore[arg-type]
    if typing.get_origin(hint) in (Mapping, collections.abc.Mapping):
        if not isinstance(value, dict):
            raise ConfigError(f"config key {dotted!r} must be a table")
        item = typing.get_args(hint)[1]
        return {str(k): _convert(item, v, f"{dotted}.{k}") for k, v in value.items()}
    if typing.get_origin(hint) is tuple:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"config key {dotted!r} must be a list of strings")
        return tuple(value)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
        raise ConfigError(f"config key {dotted!r} must be of type {hint.__name__}")
    return value


def from_dict(data: Mapping[str, Any]) -> Config:
    """Build a Config from parsed TOML, strictly."""
    return _build(Config, data, "")


#: Whether this process also looks for the config of the user's default ``radium up``
#: (:func:`find_up_config`): the ``radium`` command line does; the container start path
#: (hook, runtime, shim: the engine names their config, or /etc's) never does.
_FIND_UP_CONFIG = {"on": False}


def find_up_config() -> None:
    """From now on, without ``RADIUM_CONFIG`` or :data:`DEFAULT_PATH`, read the config of this
    user's default ``radium up`` when it has one (``radium up --detach`` and then ``radium
    gpus`` need no ``export``)."""
    _FIND_UP_CONFIG["on"] = True


def config_path(environ: Mapping[str, str] = os.environ) -> tuple[str, bool]:
    """The file to read and whether it must exist: ``RADIUM_CONFIG``; else
    :data:`DEFAULT_PATH`; else, when :func:`find_up_config` was called and the default
    ``radium up`` state directory has a config (and is safe: radium.statedir), that one."""
    explicit = environ.get(ENV_VAR, "")
    if explicit:
        return explicit, True
    if _FIND_UP_CONFIG["on"] and not os.path.exists(DEFAULT_PATH):
        from radium.statedir import up_config  # not on the container start path

        found = up_config(environ)
        if found is not None:
            return str(found), True
    return DEFAULT_PATH, False


def load(
    path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] = os.environ
) -> Config:
    """Load the configuration; a missing default file means all defaults."""
    if path is None:
        path, explicit = config_path(environ)
    else:
        path, explicit = os.fspath(path), True
    try:
        data = tomlcache.load_file(path, f"config file {path}")
    except FileNotFoundError as exc:
        if not explicit:
            return Config()
        raise ConfigError(
            f"config file {path} does not exist", hint=f"create it or unset {ENV_VAR}"
        ) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    try:
        return from_dict(data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc.message}", hint=exc.hint) from exc
