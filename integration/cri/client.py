"""A CRI client doing what kubelet does for a pod: sandbox, containers, logs, stop, removal.

Pods run in the node's network namespace (``hostNetwork``), so no CNI plugin is needed; every
call has a deadline. Container logs are read from the files containerd writes in the CRI log
format (``<time> <stream> <P|F> <text>``), as kubelet does.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from integration.cri import api_pb2 as pb
from integration.cri import api_pb2_grpc as pb_grpc
from integration.pool import wait_until

#: The deadline of one CRI call, in seconds (a container start includes Radium's lease).
DEADLINE = 120.0


@dataclass
class Pod:
    id: str
    config: pb.PodSandboxConfig
    log_dir: Path
    containers: dict[str, str] = field(default_factory=dict)  # name -> container id


def _host_network() -> pb.NamespaceOption:
    return pb.NamespaceOption(network=pb.NODE, pid=pb.CONTAINER, ipc=pb.POD)


class Cri:
    def __init__(self, socket: Path, logs: Path) -> None:
        self.channel = grpc.insecure_channel(f"unix://{socket}")
        self.runtime = pb_grpc.RuntimeServiceStub(self.channel)
        self.images = pb_grpc.ImageServiceStub(self.channel)
        self.logs = logs

    def close(self) -> None:
        self.channel.close()

    def version(self) -> pb.VersionResponse:
        return self.runtime.Version(pb.VersionRequest(version="v1"), timeout=DEADLINE)

    def run_pod(self, name: str, annotations: dict[str, str], handler: str = "radium") -> Pod:
        uid = uuid.uuid4().hex
        log_dir = self.logs / f"{name}-{uid[:8]}"
        log_dir.mkdir(parents=True)
        config = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, uid=uid, namespace="default"),
            log_directory=str(log_dir),
            annotations=annotations,
            labels={"io.kubernetes.pod.name": name, "io.kubernetes.pod.uid": uid},
            linux=pb.LinuxPodSandboxConfig(
                security_context=pb.LinuxSandboxSecurityContext(namespace_options=_host_network())
            ),
        )
        reply = self.runtime.RunPodSandbox(
            pb.RunPodSandboxRequest(config=config, runtime_handler=handler), timeout=DEADLINE
        )
        return Pod(reply.pod_sandbox_id, config, log_dir)

    def create(
        self,
        pod: Pod,
        name: str,
        image: str,
        command: list[str],
        annotations: dict[str, str] | None = None,
    ) -> str:
        """The container's id; ``annotations`` are what kubelet adds (a DRA claim's CDI ids)."""
        config = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=name),
            annotations=annotations or {},
            image=pb.ImageSpec(image=image),
            command=command,
            log_path=f"{name}.log",
            linux=pb.LinuxContainerConfig(
                security_context=pb.LinuxContainerSecurityContext(namespace_options=_host_network())
            ),
        )
        reply = self.runtime.CreateContainer(
            pb.CreateContainerRequest(
                pod_sandbox_id=pod.id, config=config, sandbox_config=pod.config
            ),
            timeout=DEADLINE,
        )
        pod.containers[name] = reply.container_id
        return str(reply.container_id)

    def start(self, container_id: str) -> None:
        self.runtime.StartContainer(
            pb.StartContainerRequest(container_id=container_id), timeout=DEADLINE
        )

    def status(self, container_id: str) -> pb.ContainerStatus:
        reply = self.runtime.ContainerStatus(
            pb.ContainerStatusRequest(container_id=container_id), timeout=DEADLINE
        )
        return reply.status

    def wait_exited(self, container_id: str, timeout: float = 180) -> int:
        """The container's exit code, once it has exited."""

        def exited() -> bool:
            return bool(self.status(container_id).state == pb.CONTAINER_EXITED)

        wait_until(exited, timeout, f"container {container_id} to exit")
        return int(self.status(container_id).exit_code)

    def output(self, pod: Pod, name: str, stream: str = "stdout") -> str:
        """What container ``name`` wrote to ``stream``, from its CRI log file."""
        path = pod.log_dir / f"{name}.log"
        text = path.read_text() if path.exists() else ""
        parts = []
        for line in text.splitlines():
            _, line_stream, tag, content = [*line.split(" ", 3), "", "", ""][:4]
            if line_stream == stream:
                parts.append(content + ("\n" if tag == "F" else ""))
        return "".join(parts)

    def stop_pod(self, pod: Pod) -> None:
        self.runtime.StopPodSandbox(
            pb.StopPodSandboxRequest(pod_sandbox_id=pod.id), timeout=DEADLINE
        )

    def remove_pod(self, pod: Pod) -> None:
        self.runtime.RemovePodSandbox(
            pb.RemovePodSandboxRequest(pod_sandbox_id=pod.id), timeout=DEADLINE
        )

    def stop_container(self, container_id: str, grace: int) -> None:
        self.runtime.StopContainer(
            pb.StopContainerRequest(container_id=container_id, timeout=grace), timeout=DEADLINE
        )

    def pod_ids(self) -> list[str]:
        reply = self.runtime.ListPodSandbox(pb.ListPodSandboxRequest(), timeout=DEADLINE)
        return [item.id for item in reply.items]

    def remove_every_pod(self) -> None:
        """What kubelet does to a node it drains: every pod stopped and removed."""
        for pod_id in self.pod_ids():
            request = pb.StopPodSandboxRequest(pod_sandbox_id=pod_id)
            self.runtime.StopPodSandbox(request, timeout=DEADLINE)
            self.runtime.RemovePodSandbox(
                pb.RemovePodSandboxRequest(pod_sandbox_id=pod_id), timeout=DEADLINE
            )
