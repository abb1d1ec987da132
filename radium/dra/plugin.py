"""The DRA kubelet plugin: kubelet's ``dra.v1.DRAPlugin`` calls, and its registration.

``NodePrepareResources`` reads each claim's allocation, takes its lease through the node agent
(holder ``<node>/claim/<uid>``: held until unprepare, tied to no process) and writes its CDI
spec; ``NodeUnprepareResources`` undoes both. Both are idempotent, per claim (a claim's failure
is its error line, the others go on), and safe across a restart of this plugin: the agent keeps
the lease in its state file, so a prepare asked again finds it and an unprepare releases it.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import grpc

from radium.agentprotocol import claim_key
from radium.dra import cdi
from radium.dra.claims import Claim, ClaimSource, allocation
from radium.dra.paths import DRIVER
from radium.errors import RadiumError, SpecError
from radium.proto import dra_v1_pb2 as pb
from radium.proto import dra_v1_pb2_grpc as pb_grpc
from radium.proto import pluginregistration_v1_pb2 as reg
from radium.proto import pluginregistration_v1_pb2_grpc as reg_grpc

__all__ = ["DRA_SERVICE", "DraPlugin", "Leaser", "Registration"]

log = logging.getLogger(__name__)
#: The service version kubelet is told this plugin serves (k8s.io/kubelet dra/v1 types.go).
DRA_SERVICE = "v1.DRAPlugin"


class Leaser(Protocol):
    """The node agent's lease calls, by key (the agent's "container")."""

    def acquire(self, key: str, request: dict[str, str]) -> dict[str, Any] | None: ...

    def release(self, key: str) -> None: ...


def _claim(message: pb.Claim) -> Claim:
    if not (message.uid and message.namespace and message.name):
        raise SpecError("kubelet named a claim without namespace, name or uid")
    return Claim(message.namespace, message.name, cdi.check_uid(message.uid))


class DraPlugin(pb_grpc.DRAPluginServicer):
    def __init__(self, source: ClaimSource, leaser: Leaser, cdi_dir: str) -> None:
        self.source, self.leaser, self.cdi_dir = source, leaser, cdi_dir

    def NodePrepareResources(
        self, request: pb.NodePrepareResourcesRequest, context: grpc.ServicerContext
    ) -> pb.NodePrepareResourcesResponse:
        reply = pb.NodePrepareResourcesResponse()
        for message in request.claims:
            reply.claims[message.uid].CopyFrom(self.prepare(message))
        return reply

    def NodeUnprepareResources(
        self, request: pb.NodeUnprepareResourcesRequest, context: grpc.ServicerContext
    ) -> pb.NodeUnprepareResourcesResponse:
        reply = pb.NodeUnprepareResourcesResponse()
        for message in request.claims:
            reply.claims[message.uid].CopyFrom(self.unprepare(message))
        return reply

    def prepare(self, message: pb.Claim) -> pb.NodePrepareResourceResponse:
        try:
            claim = _claim(message)
            found = allocation(self.source.read(claim), claim)
            self.leaser.acquire(claim_key(claim.uid), found.request)
            try:
                cdi.write(self.cdi_dir, claim.uid)
            except OSError as exc:
                self.leaser.release(claim_key(claim.uid))
                raise SpecError(f"cannot write the CDI spec in {self.cdi_dir}: {exc}") from exc
        except RadiumError as exc:
            log.warning("preparing claim %s/%s: %s", message.namespace, message.name,
                        exc.one_line())  # fmt: skip
            return pb.NodePrepareResourceResponse(error=exc.one_line())
        log.info("claim %s/%s prepared: %s", claim.namespace, claim.name, found.request)
        device = cdi.device_id(claim.uid)
        return pb.NodePrepareResourceResponse(
            devices=[
                pb.Device(
                    request_names=[result.request],
                    pool_name=result.pool,
                    device_name=result.device,
                    cdi_device_ids=[device],
                )
                for result in found.results
            ]
        )

    def unprepare(self, message: pb.Claim) -> pb.NodeUnprepareResourceResponse:
        try:
            claim = _claim(message)
            self.leaser.release(claim_key(claim.uid))
            cdi.remove(self.cdi_dir, claim.uid)
        except (RadiumError, OSError) as exc:
            line = exc.one_line() if isinstance(exc, RadiumError) else str(exc)
            return pb.NodeUnprepareResourceResponse(error=line)
        log.info("claim %s/%s unprepared", claim.namespace, claim.name)
        return pb.NodeUnprepareResourceResponse()


class Registration(reg_grpc.RegistrationServicer):
    """What kubelet's plugin watcher asks on the registration socket."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        #: None until kubelet said; then whether it registered the plugin.
        self.registered: bool | None = None

    def GetInfo(self, request: reg.InfoRequest, context: grpc.ServicerContext) -> reg.PluginInfo:
        return reg.PluginInfo(
            type="DRAPlugin", name=DRIVER, endpoint=self.endpoint, supported_versions=[DRA_SERVICE]
        )

    def NotifyRegistrationStatus(
        self, request: reg.RegistrationStatus, context: grpc.ServicerContext
    ) -> reg.RegistrationStatusResponse:
        self.registered = request.plugin_registered
        if request.plugin_registered:
            log.info("kubelet registered the %s DRA plugin", DRIVER)
        else:
            log.error("kubelet refused the %s DRA plugin: %s", DRIVER, request.error)
        return reg.RegistrationStatusResponse()
