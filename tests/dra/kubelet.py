"""kubelet's side of a DRA plugin, as a test drives it: its plugin watcher's registration
calls on the registration socket, then ``dra.v1`` calls on the endpoint the plugin named."""

from __future__ import annotations

from pathlib import Path

import grpc

from radium.dra.claims import Claim
from radium.proto import dra_v1_pb2 as pb
from radium.proto import dra_v1_pb2_grpc as pb_grpc
from radium.proto import pluginregistration_v1_pb2 as reg
from radium.proto import pluginregistration_v1_pb2_grpc as reg_grpc

DEADLINE = 60.0


class Kubelet:
    def __init__(self, registration: Path) -> None:
        self.registration = registration

    def register(self) -> reg.PluginInfo:
        """GetInfo, then NotifyRegistrationStatus(registered) as kubelet does when it accepts."""
        with grpc.insecure_channel(f"unix:{self.registration}") as channel:
            stub = reg_grpc.RegistrationStub(channel)
            info = stub.GetInfo(reg.InfoRequest(), timeout=DEADLINE)
            stub.NotifyRegistrationStatus(
                reg.RegistrationStatus(plugin_registered=True), timeout=DEADLINE
            )
        self.endpoint = info.endpoint
        return info

    def prepare(self, *claims: Claim) -> dict[str, pb.NodePrepareResourceResponse]:
        with grpc.insecure_channel(f"unix:{self.endpoint}") as channel:
            reply = pb_grpc.DRAPluginStub(channel).NodePrepareResources(
                pb.NodePrepareResourcesRequest(claims=[_message(c) for c in claims]),
                timeout=DEADLINE,
            )
        return dict(reply.claims)

    def unprepare(self, *claims: Claim) -> dict[str, str]:
        """Each claim's error ("" when it went well)."""
        with grpc.insecure_channel(f"unix:{self.endpoint}") as channel:
            reply = pb_grpc.DRAPluginStub(channel).NodeUnprepareResources(
                pb.NodeUnprepareResourcesRequest(claims=[_message(c) for c in claims]),
                timeout=DEADLINE,
            )
        return {uid: answer.error for uid, answer in reply.claims.items()}


def _message(claim: Claim) -> pb.Claim:
    return pb.Claim(namespace=claim.namespace, name=claim.name, uid=claim.uid)
