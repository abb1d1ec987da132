from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Device(_message.Message):
    __slots__ = ("id", "vendor", "model", "memory_mib", "labels")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    VENDOR_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MIB_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    id: str
    vendor: str
    model: str
    memory_mib: int
    labels: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[str] = ..., vendor: _Optional[str] = ..., model: _Optional[str] = ..., memory_mib: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Acceptor(_message.Message):
    __slots__ = ("name", "data_address", "devices", "labels", "cpu_milli")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    DATA_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    CPU_MILLI_FIELD_NUMBER: _ClassVar[int]
    name: str
    data_address: str
    devices: _containers.RepeatedCompositeFieldContainer[Device]
    labels: _containers.ScalarMap[str, str]
    cpu_milli: int
    def __init__(self, name: _Optional[str] = ..., data_address: _Optional[str] = ..., devices: _Optional[_Iterable[_Union[Device, _Mapping]]] = ..., labels: _Optional[_Mapping[str, str]] = ..., cpu_milli: _Optional[int] = ...) -> None: ...

class AllocateRequest(_message.Message):
    __slots__ = ("gpus", "fraction", "memory_mib", "selector", "min_memory_mib", "queue", "holder", "ttl_seconds", "wait_seconds", "image", "worker", "priority", "cpu_milli")
    class SelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    GPUS_FIELD_NUMBER: _ClassVar[int]
    FRACTION_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MIB_FIELD_NUMBER: _ClassVar[int]
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    MIN_MEMORY_MIB_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    CPU_MILLI_FIELD_NUMBER: _ClassVar[int]
    gpus: int
    fraction: float
    memory_mib: int
    selector: _containers.ScalarMap[str, str]
    min_memory_mib: int
    queue: str
    holder: str
    ttl_seconds: int
    wait_seconds: float
    image: str
    worker: str
    priority: str
    cpu_milli: int
    def __init__(self, gpus: _Optional[int] = ..., fraction: _Optional[float] = ..., memory_mib: _Optional[int] = ..., selector: _Optional[_Mapping[str, str]] = ..., min_memory_mib: _Optional[int] = ..., queue: _Optional[str] = ..., holder: _Optional[str] = ..., ttl_seconds: _Optional[int] = ..., wait_seconds: _Optional[float] = ..., image: _Optional[str] = ..., worker: _Optional[str] = ..., priority: _Optional[str] = ..., cpu_milli: _Optional[int] = ...) -> None: ...

class Lease(_message.Message):
    __slots__ = ("id", "acceptor", "data_address", "device_ids", "fraction", "memory_mib", "credential", "ttl_seconds", "holder", "state", "expires_at", "queue", "cpu_percent", "rss_bytes", "image", "worker", "priority", "preempted_at", "preempted_for", "cpu_milli", "calls", "bytes_in", "bytes_out", "busy_seconds", "errors", "created_at", "gpu_memory_bytes", "gpu_sm_percent")
    ID_FIELD_NUMBER: _ClassVar[int]
    ACCEPTOR_FIELD_NUMBER: _ClassVar[int]
    DATA_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    DEVICE_IDS_FIELD_NUMBER: _ClassVar[int]
    FRACTION_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MIB_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    CPU_PERCENT_FIELD_NUMBER: _ClassVar[int]
    RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    PREEMPTED_AT_FIELD_NUMBER: _ClassVar[int]
    PREEMPTED_FOR_FIELD_NUMBER: _ClassVar[int]
    CPU_MILLI_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    BYTES_IN_FIELD_NUMBER: _ClassVar[int]
    BYTES_OUT_FIELD_NUMBER: _ClassVar[int]
    BUSY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    GPU_MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    GPU_SM_PERCENT_FIELD_NUMBER: _ClassVar[int]
    id: str
    acceptor: str
    data_address: str
    device_ids: _containers.RepeatedScalarFieldContainer[str]
    fraction: float
    memory_mib: int
    credential: str
    ttl_seconds: int
    holder: str
    state: str
    expires_at: float
    queue: str
    cpu_percent: float
    rss_bytes: int
    image: str
    worker: str
    priority: str
    preempted_at: float
    preempted_for: str
    cpu_milli: int
    calls: int
    bytes_in: int
    bytes_out: int
    busy_seconds: float
    errors: int
    created_at: float
    gpu_memory_bytes: int
    gpu_sm_percent: float
    def __init__(self, id: _Optional[str] = ..., acceptor: _Optional[str] = ..., data_address: _Optional[str] = ..., device_ids: _Optional[_Iterable[str]] = ..., fraction: _Optional[float] = ..., memory_mib: _Optional[int] = ..., credential: _Optional[str] = ..., ttl_seconds: _Optional[int] = ..., holder: _Optional[str] = ..., state: _Optional[str] = ..., expires_at: _Optional[float] = ..., queue: _Optional[str] = ..., cpu_percent: _Optional[float] = ..., rss_bytes: _Optional[int] = ..., image: _Optional[str] = ..., worker: _Optional[str] = ..., priority: _Optional[str] = ..., preempted_at: _Optional[float] = ..., preempted_for: _Optional[str] = ..., cpu_milli: _Optional[int] = ..., calls: _Optional[int] = ..., bytes_in: _Optional[int] = ..., bytes_out: _Optional[int] = ..., busy_seconds: _Optional[float] = ..., errors: _Optional[int] = ..., created_at: _Optional[float] = ..., gpu_memory_bytes: _Optional[int] = ..., gpu_sm_percent: _Optional[float] = ...) -> None: ...

class LeaseRef(_message.Message):
    __slots__ = ("lease_id",)
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    def __init__(self, lease_id: _Optional[str] = ...) -> None: ...

class KeepAliveResponse(_message.Message):
    __slots__ = ("expires_at", "state", "message")
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    expires_at: float
    state: str
    message: str
    def __init__(self, expires_at: _Optional[float] = ..., state: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ReleaseResponse(_message.Message):
    __slots__ = ("released",)
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    released: bool
    def __init__(self, released: _Optional[bool] = ...) -> None: ...

class LeaseCall(_message.Message):
    __slots__ = ("id", "allocate", "release", "keep_alive", "more")
    ID_FIELD_NUMBER: _ClassVar[int]
    ALLOCATE_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    KEEP_ALIVE_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    id: int
    allocate: AllocateRequest
    release: LeaseRef
    keep_alive: LeaseRef
    more: _containers.RepeatedCompositeFieldContainer[LeaseCall]
    def __init__(self, id: _Optional[int] = ..., allocate: _Optional[_Union[AllocateRequest, _Mapping]] = ..., release: _Optional[_Union[LeaseRef, _Mapping]] = ..., keep_alive: _Optional[_Union[LeaseRef, _Mapping]] = ..., more: _Optional[_Iterable[_Union[LeaseCall, _Mapping]]] = ...) -> None: ...

class CallError(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class LeaseReply(_message.Message):
    __slots__ = ("id", "lease", "released", "kept", "error", "more")
    ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    KEPT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    id: int
    lease: Lease
    released: ReleaseResponse
    kept: KeepAliveResponse
    error: CallError
    more: _containers.RepeatedCompositeFieldContainer[LeaseReply]
    def __init__(self, id: _Optional[int] = ..., lease: _Optional[_Union[Lease, _Mapping]] = ..., released: _Optional[_Union[ReleaseResponse, _Mapping]] = ..., kept: _Optional[_Union[KeepAliveResponse, _Mapping]] = ..., error: _Optional[_Union[CallError, _Mapping]] = ..., more: _Optional[_Iterable[_Union[LeaseReply, _Mapping]]] = ...) -> None: ...

class LeaseHello(_message.Message):
    __slots__ = ("version", "token")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    version: int
    token: str
    def __init__(self, version: _Optional[int] = ..., token: _Optional[str] = ...) -> None: ...

class LeaseWelcome(_message.Message):
    __slots__ = ("version", "error")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    version: int
    error: CallError
    def __init__(self, version: _Optional[int] = ..., error: _Optional[_Union[CallError, _Mapping]] = ...) -> None: ...

class ListLeasesRequest(_message.Message):
    __slots__ = ("all", "page_size", "page_token")
    ALL_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    all: bool
    page_size: int
    page_token: str
    def __init__(self, all: _Optional[bool] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListLeasesResponse(_message.Message):
    __slots__ = ("leases", "next_page_token")
    LEASES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    leases: _containers.RepeatedCompositeFieldContainer[Lease]
    next_page_token: str
    def __init__(self, leases: _Optional[_Iterable[_Union[Lease, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DeviceStatus(_message.Message):
    __slots__ = ("acceptor", "device", "allocated_fraction", "allocated_mib", "holders", "up")
    ACCEPTOR_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    ALLOCATED_FRACTION_FIELD_NUMBER: _ClassVar[int]
    ALLOCATED_MIB_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    UP_FIELD_NUMBER: _ClassVar[int]
    acceptor: str
    device: Device
    allocated_fraction: float
    allocated_mib: int
    holders: _containers.RepeatedScalarFieldContainer[str]
    up: bool
    def __init__(self, acceptor: _Optional[str] = ..., device: _Optional[_Union[Device, _Mapping]] = ..., allocated_fraction: _Optional[float] = ..., allocated_mib: _Optional[int] = ..., holders: _Optional[_Iterable[str]] = ..., up: _Optional[bool] = ...) -> None: ...

class AcceptorStatus(_message.Message):
    __slots__ = ("name", "data_address", "up", "last_heartbeat", "devices")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DATA_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    UP_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    name: str
    data_address: str
    up: bool
    last_heartbeat: float
    devices: int
    def __init__(self, name: _Optional[str] = ..., data_address: _Optional[str] = ..., up: _Optional[bool] = ..., last_heartbeat: _Optional[float] = ..., devices: _Optional[int] = ...) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("devices", "acceptors", "active_leases", "version")
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    ACCEPTORS_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_LEASES_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    devices: _containers.RepeatedCompositeFieldContainer[DeviceStatus]
    acceptors: _containers.RepeatedCompositeFieldContainer[AcceptorStatus]
    active_leases: int
    version: str
    def __init__(self, devices: _Optional[_Iterable[_Union[DeviceStatus, _Mapping]]] = ..., acceptors: _Optional[_Iterable[_Union[AcceptorStatus, _Mapping]]] = ..., active_leases: _Optional[int] = ..., version: _Optional[str] = ...) -> None: ...

class Queue(_message.Message):
    __slots__ = ("name", "deserved", "weight", "limit", "priority", "parent")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESERVED_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    name: str
    deserved: float
    weight: float
    limit: float
    priority: int
    parent: str
    def __init__(self, name: _Optional[str] = ..., deserved: _Optional[float] = ..., weight: _Optional[float] = ..., limit: _Optional[float] = ..., priority: _Optional[int] = ..., parent: _Optional[str] = ...) -> None: ...

class QueueChange(_message.Message):
    __slots__ = ("queue", "create")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    CREATE_FIELD_NUMBER: _ClassVar[int]
    queue: Queue
    create: bool
    def __init__(self, queue: _Optional[_Union[Queue, _Mapping]] = ..., create: _Optional[bool] = ...) -> None: ...

class QueueRef(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class QueueStatus(_message.Message):
    __slots__ = ("queue", "allocated", "fair_share", "deserved", "leases", "waiting")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    ALLOCATED_FIELD_NUMBER: _ClassVar[int]
    FAIR_SHARE_FIELD_NUMBER: _ClassVar[int]
    DESERVED_FIELD_NUMBER: _ClassVar[int]
    LEASES_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    queue: Queue
    allocated: float
    fair_share: float
    deserved: float
    leases: int
    waiting: int
    def __init__(self, queue: _Optional[_Union[Queue, _Mapping]] = ..., allocated: _Optional[float] = ..., fair_share: _Optional[float] = ..., deserved: _Optional[float] = ..., leases: _Optional[int] = ..., waiting: _Optional[int] = ...) -> None: ...

class ListQueuesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListQueuesResponse(_message.Message):
    __slots__ = ("queues",)
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedCompositeFieldContainer[QueueStatus]
    def __init__(self, queues: _Optional[_Iterable[_Union[QueueStatus, _Mapping]]] = ...) -> None: ...

class ImageRef(_message.Message):
    __slots__ = ("ref",)
    REF_FIELD_NUMBER: _ClassVar[int]
    ref: str
    def __init__(self, ref: _Optional[str] = ...) -> None: ...

class ImageStatus(_message.Message):
    __slots__ = ("ref", "acceptor", "state", "progress", "digest", "error")
    REF_FIELD_NUMBER: _ClassVar[int]
    ACCEPTOR_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ref: str
    acceptor: str
    state: str
    progress: float
    digest: str
    error: str
    def __init__(self, ref: _Optional[str] = ..., acceptor: _Optional[str] = ..., state: _Optional[str] = ..., progress: _Optional[float] = ..., digest: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...

class ImageProgress(_message.Message):
    __slots__ = ("acceptors",)
    ACCEPTORS_FIELD_NUMBER: _ClassVar[int]
    acceptors: _containers.RepeatedCompositeFieldContainer[ImageStatus]
    def __init__(self, acceptors: _Optional[_Iterable[_Union[ImageStatus, _Mapping]]] = ...) -> None: ...

class ListImagesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListImagesResponse(_message.Message):
    __slots__ = ("images",)
    IMAGES_FIELD_NUMBER: _ClassVar[int]
    images: _containers.RepeatedCompositeFieldContainer[ImageStatus]
    def __init__(self, images: _Optional[_Iterable[_Union[ImageStatus, _Mapping]]] = ...) -> None: ...

class RegisterRequest(_message.Message):
    __slots__ = ("acceptor",)
    ACCEPTOR_FIELD_NUMBER: _ClassVar[int]
    acceptor: Acceptor
    def __init__(self, acceptor: _Optional[_Union[Acceptor, _Mapping]] = ...) -> None: ...

class RegisterResponse(_message.Message):
    __slots__ = ("heartbeat_interval", "leases", "images")
    HEARTBEAT_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    LEASES_FIELD_NUMBER: _ClassVar[int]
    IMAGES_FIELD_NUMBER: _ClassVar[int]
    heartbeat_interval: float
    leases: _containers.RepeatedCompositeFieldContainer[Lease]
    images: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, heartbeat_interval: _Optional[float] = ..., leases: _Optional[_Iterable[_Union[Lease, _Mapping]]] = ..., images: _Optional[_Iterable[str]] = ...) -> None: ...

class LeaseUsage(_message.Message):
    __slots__ = ("lease_id", "cpu_percent", "rss_bytes", "calls", "bytes_in", "bytes_out", "busy_seconds", "errors", "gpu_memory_bytes", "gpu_sm_percent")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    CPU_PERCENT_FIELD_NUMBER: _ClassVar[int]
    RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    BYTES_IN_FIELD_NUMBER: _ClassVar[int]
    BYTES_OUT_FIELD_NUMBER: _ClassVar[int]
    BUSY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    GPU_MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    GPU_SM_PERCENT_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    cpu_percent: float
    rss_bytes: int
    calls: int
    bytes_in: int
    bytes_out: int
    busy_seconds: float
    errors: int
    gpu_memory_bytes: int
    gpu_sm_percent: float
    def __init__(self, lease_id: _Optional[str] = ..., cpu_percent: _Optional[float] = ..., rss_bytes: _Optional[int] = ..., calls: _Optional[int] = ..., bytes_in: _Optional[int] = ..., bytes_out: _Optional[int] = ..., busy_seconds: _Optional[float] = ..., errors: _Optional[int] = ..., gpu_memory_bytes: _Optional[int] = ..., gpu_sm_percent: _Optional[float] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("name", "usage")
    NAME_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    name: str
    usage: _containers.RepeatedCompositeFieldContainer[LeaseUsage]
    def __init__(self, name: _Optional[str] = ..., usage: _Optional[_Iterable[_Union[LeaseUsage, _Mapping]]] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("name", "batches")
    NAME_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    name: str
    batches: bool
    def __init__(self, name: _Optional[str] = ..., batches: _Optional[bool] = ...) -> None: ...

class Assignment(_message.Message):
    __slots__ = ("kind", "lease", "image", "then")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        GRANTED: _ClassVar[Assignment.Kind]
        REVOKED: _ClassVar[Assignment.Kind]
        PULL_IMAGE: _ClassVar[Assignment.Kind]
        REMOVE_IMAGE: _ClassVar[Assignment.Kind]
        PREEMPTED: _ClassVar[Assignment.Kind]
    GRANTED: Assignment.Kind
    REVOKED: Assignment.Kind
    PULL_IMAGE: Assignment.Kind
    REMOVE_IMAGE: Assignment.Kind
    PREEMPTED: Assignment.Kind
    KIND_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    THEN_FIELD_NUMBER: _ClassVar[int]
    kind: Assignment.Kind
    lease: Lease
    image: str
    then: _containers.RepeatedCompositeFieldContainer[Assignment]
    def __init__(self, kind: _Optional[_Union[Assignment.Kind, str]] = ..., lease: _Optional[_Union[Lease, _Mapping]] = ..., image: _Optional[str] = ..., then: _Optional[_Iterable[_Union[Assignment, _Mapping]]] = ...) -> None: ...
