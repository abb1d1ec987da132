"""The one exception tree of Radium.

Every error a caller can act on is a leaf of ``RadiumError``. Each carries a ``kind`` drawn from a
small closed set (modelled on containerd's errdefs) and an optional ``hint`` telling the user what
to do. Foreign exceptions are translated at module boundaries with ``raise ... from``.
"""

from __future__ import annotations

__all__ = [
    "KIND_TO_CLASS",
    "LEAVES_BY_NAME",
    "AlreadyExistsError",
    "AuthError",
    "BuildError",
    "CapacityError",
    "ConfigError",
    "DeadlineError",
    "DeviceError",
    "InternalError",
    "InvalidRequestError",
    "Kind",
    "LeaseNotFoundError",
    "LeaseWireError",
    "MountError",
    "NoBundleError",
    "NoPythonError",
    "NotLeaderError",
    "NotRegisteredError",
    "PermissionDeniedError",
    "QuotaError",
    "RadiumError",
    "RootfsError",
    "RuntimeNotFoundError",
    "SandboxError",
    "ServiceError",
    "SpecError",
    "StoreUnavailableError",
    "UnavailableError",
    "UnsafePathError",
    "UnsafeStateDirError",
    "UsageError",
    "named_leaf",
    "rebuild",
]


class Kind:
    """The closed set of error kinds; the gRPC mapping will key on these.

    Plain strings rather than an Enum: this module is on every container start's import path.
    """

    INVALID_ARGUMENT = "invalid argument"
    NOT_FOUND = "not found"
    ALREADY_EXISTS = "already exists"
    FAILED_PRECONDITION = "failed precondition"
    PERMISSION_DENIED = "permission denied"
    UNAVAILABLE = "unavailable"
    RESOURCE_EXHAUSTED = "resource exhausted"
    UNAUTHENTICATED = "unauthenticated"
    DEADLINE_EXCEEDED = "deadline exceeded"
    INTERNAL = "internal"


class RadiumError(Exception):
    """Base of every error Radium raises on purpose."""

    kind: str = Kind.INTERNAL

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        """The single line shown to users: what failed, then what to do."""
        text = self.message.replace("\n", " ")
        return f"{text}; {self.hint}" if self.hint else text


class ConfigError(RadiumError):
    """The Radium configuration file is missing, unreadable, not TOML or has a bad key/value."""

    kind = Kind.INVALID_ARGUMENT


class SpecError(RadiumError):
    """An OCI bundle's config.json or the OCI state is malformed or unusable."""

    kind = Kind.INVALID_ARGUMENT


class RootfsError(RadiumError):
    """The container's root filesystem is missing or a path in it cannot be resolved safely."""

    kind = Kind.FAILED_PRECONDITION


class UnsafePathError(RootfsError):
    """A path inside the container rootfs tried to escape it or has an unexpected file type."""

    kind = Kind.PERMISSION_DENIED


class NoBundleError(RadiumError):
    """No Radium client bundle matches the container's platform, or the bundle is broken."""

    kind = Kind.NOT_FOUND


class NoPythonError(RadiumError):
    """The image has no Python interpreter for the interposer to load into."""

    kind = Kind.FAILED_PRECONDITION


class MountError(RadiumError):
    """A mount into the container could not be made or undone."""

    kind = Kind.INTERNAL


class RuntimeNotFoundError(RadiumError):
    """None of the configured low-level OCI runtimes (runc, crun) is installed."""

    kind = Kind.NOT_FOUND


class UsageError(RadiumError):
    """A command line could not be understood."""

    kind = Kind.INVALID_ARGUMENT


class CapacityError(RadiumError):
    """The pool has no capacity for a request (now, or within the wait the request allowed)."""

    kind = Kind.RESOURCE_EXHAUSTED


class QuotaError(CapacityError):
    """A queue's limit, or its deserved quota for non-preemptible leases, is reached now."""


class LeaseNotFoundError(RadiumError):
    """No such lease, or it has ended (expired, revoked, released)."""

    kind = Kind.NOT_FOUND


class AuthError(RadiumError):
    """A call carried no token, or one the server does not accept for it."""

    kind = Kind.UNAUTHENTICATED


class UnavailableError(RadiumError):
    """A Radium service (pool, acceptor, agent) cannot be reached."""

    kind = Kind.UNAVAILABLE


class StoreUnavailableError(UnavailableError):
    """The pool's store (an etcd cluster) cannot be reached or has no quorum: nothing changed."""


class NotLeaderError(UnavailableError):
    """This pool replica does not (or no longer) hold the leadership: another one serves."""


class DeadlineError(RadiumError):
    """A call to a Radium service did not finish within its deadline."""

    kind = Kind.DEADLINE_EXCEEDED


class InvalidRequestError(RadiumError):
    """A request that no pool could satisfy as written (0 GPUs, a fraction of 2, ...)."""

    kind = Kind.INVALID_ARGUMENT


class LeaseWireError(InvalidRequestError):
    """A peer broke the lease socket's protocol (docs/lease-socket.md): its connection ends."""


class PermissionDeniedError(RadiumError):
    """An authenticated caller whose role may not make this call (mTLS certificate roles)."""

    kind = Kind.PERMISSION_DENIED


class AlreadyExistsError(RadiumError):
    """Something exists that must not be replaced or doubled (a CA; a running ``radium up``)."""

    kind = Kind.ALREADY_EXISTS


class NotRegisteredError(RadiumError):
    """An acceptor called before registering, or after the pool marked it down."""

    kind = Kind.FAILED_PRECONDITION


class SandboxError(RadiumError):
    """A lease's worker sandbox cannot be set up (bubblewrap or libseccomp missing, bad paths)."""

    kind = Kind.FAILED_PRECONDITION


class BuildError(RadiumError):
    """A program Radium builds on the machine (the agent's native client) cannot be built."""

    kind = Kind.FAILED_PRECONDITION


class UnsafeStateDirError(RadiumError):
    """A state directory another local user could read, replace or redirect (its owner, its
    mode, a directory above it, or a link on the way), or one that cannot be opened: nothing
    is written there."""

    kind = Kind.PERMISSION_DENIED


class DeviceError(RadiumError):
    """An accelerator or its vendor library cannot be used or queried (NVML, the driver's
    libraries, the loader cache that names them)."""

    kind = Kind.FAILED_PRECONDITION


class InternalError(RadiumError):
    """A fault of Radium's own, or one a peer reported without a kind we know: a bug to
    report, not something the caller can mend."""

    kind = Kind.INTERNAL


class ServiceError(RadiumError):
    """A service Radium drives on this machine failed it: systemd, a container engine's
    daemon, a process ``radium up`` started."""

    kind = Kind.FAILED_PRECONDITION


#: Each kind's leaf, for an error that crossed to us by its kind alone (a gRPC status, an agent
#: reply from an older agent): the one table both directions use, so ``except
#: LeaseNotFoundError`` catches a lease the pool or the agent did not find.
KIND_TO_CLASS: dict[str, type[RadiumError]] = {
    Kind.INVALID_ARGUMENT: InvalidRequestError,
    Kind.NOT_FOUND: LeaseNotFoundError,
    Kind.ALREADY_EXISTS: AlreadyExistsError,
    Kind.FAILED_PRECONDITION: NotRegisteredError,
    Kind.PERMISSION_DENIED: PermissionDeniedError,
    Kind.UNAVAILABLE: UnavailableError,
    Kind.RESOURCE_EXHAUSTED: CapacityError,
    Kind.UNAUTHENTICATED: AuthError,
    Kind.DEADLINE_EXCEEDED: DeadlineError,
    Kind.INTERNAL: InternalError,
}
#: Every leaf of this module by its name: what a peer may name (a name, never a path: nothing
#: is imported or looked up anywhere else on a peer's word).
LEAVES_BY_NAME: dict[str, type[RadiumError]] = {
    cls.__name__: cls
    for cls in list(globals().values())
    if isinstance(cls, type) and issubclass(cls, RadiumError) and cls is not RadiumError
}


def named_leaf(name: str, kind: str | None) -> type[RadiumError] | None:
    """The leaf a peer named, when it is one of ours of the ``kind`` it reported; else None."""
    named = LEAVES_BY_NAME.get(name)
    return named if named is not None and named.kind == kind else None


def rebuild(kind: str, message: str, hint: str = "", name: str = "") -> RadiumError:
    """The error a peer reported as ``kind`` (and the leaf's ``name``, when it said one): that
    leaf when it is one of ours of that kind (:func:`named_leaf`), else the kind's
    (:data:`KIND_TO_CLASS`), else (a kind we do not know) :class:`InternalError`."""
    leaf = named_leaf(name, kind) or KIND_TO_CLASS.get(kind, InternalError)
    return leaf(message, hint=hint)
