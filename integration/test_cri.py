"""Pods through containerd's CRI plugin, driven as kubelet drives it, after `radium setup
containerd`: ``RunPodSandbox`` with ``runtime_handler: radium`` and ``radium.io/*`` pod
annotations, containers of an image without numpy that remote numpy through the node agent to a
namespaced acceptor, and every lease released however the pod ends."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from integration import images, test_dataplane
from integration.containerd import Containerd
from integration.cri import api_pb2 as pb
from integration.cri.client import Cri, Pod
from integration.cri.node import cri_node
from integration.dra_node import Node, dra_node
from integration.host import mount_table
from integration.pool import PoolCluster, wait_until
from integration.radium_env import RadiumEnv
from integration.test_leases import holders

remoting = test_dataplane.remoting  # the fixture: a config whose agent leases from `cluster`
IMAGE = "docker.io/radium-test/bookworm:cri"
#: numpy from the acceptor (the image has none), then alive until the pod is stopped.
COMPUTE = """
import numpy as np
a = np.random.default_rng(0).random((300, 300)) + 300 * np.eye(300)
print(type(np).__name__, np.allclose(np.linalg.inv(a) @ a, np.eye(300)), flush=True)
"""
LOOP = """
import numpy as np
a = np.random.default_rng(0).random((200, 200)) + 200 * np.eye(200)
while True:
    np.linalg.inv(a)
    print("step", flush=True)
"""


def python(program: str) -> list[str]:
    """``program`` run by the image's python3, then the container idles until stopped."""
    return ["sh", "-c", 'python3 -c "$0" && exec sleep 600', program]


@pytest.fixture(scope="module")
def node(
    radium: RadiumEnv, remoting: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cri, Containerd]]:
    """A node whose agent leases from ``cluster``, the bookworm image (no numpy) imported."""
    with cri_node(
        radium, remoting, tmp_path_factory.mktemp("cri"), {IMAGE: images.debian_tar("bookworm")}
    ) as node:
        yield node


def leased(cluster: PoolCluster, pod: Pod) -> set[str]:
    """The names of the pod's containers that hold a lease now."""
    held = holders(cluster)
    return {
        name for name, cid in pod.containers.items() if any(h.endswith(f"/{cid}") for h in held)
    }


def wait_output(
    cri: Cri, pod: Pod, name: str, text: str, stream: str = "stdout", timeout: float = 120
) -> None:
    """Until container ``name`` wrote ``text``; fails at once if it exited without."""
    container = pod.containers[name]

    def seen() -> bool:
        exited = cri.status(container).state == pb.CONTAINER_EXITED
        found = text in cri.output(pod, name, stream)
        if exited and not found:
            raise AssertionError(f"{name} exited without writing {text!r}")
        return found

    try:
        wait_until(seen, timeout, f"{text!r} from {name}")
    except AssertionError as exc:
        status = cri.status(container)
        raise AssertionError(
            f"{exc}\nexit code {status.exit_code} ({status.reason})\n"
            f"stdout: {cri.output(pod, name)}\nstderr: {cri.output(pod, name, 'stderr')}"
        ) from None


def assert_nothing_left(
    cluster: PoolCluster, radium: RadiumEnv, daemon: Containerd, pod: Pod, mounts: list[str]
) -> None:
    ids = set(pod.containers.values())
    wait_until(
        lambda: not any(h.rsplit("/", 1)[-1] in ids for h in holders(cluster)),
        10,
        "the pod's leases to be released",
    )
    assert list(radium.state_dir.iterdir()) == []
    assert mount_table() == mounts
    assert daemon.shim_pids() == []


def test_a_pod_remotes_numpy_from_an_image_without_it(
    node: tuple[Cri, Containerd], cluster: PoolCluster, radium: RadiumEnv
) -> None:
    cri, daemon = node
    assert cri.version().runtime_api_version == "v1"
    mounts = mount_table()
    pod = cri.run_pod("compute", {"radium.io/gpus": "1", "radium.io/remote": "numpy"})
    app = cri.create(pod, "app", IMAGE, python(COMPUTE))
    cri.start(app)
    wait_output(cri, pod, "app", "\n")
    assert cri.output(pod, "app") == "RemoteModule True\n", cri.output(pod, "app", "stderr")
    # The app holds a lease; the pod's sandbox (pause) was never touched.
    assert leased(cluster, pod) == {"app"}
    assert not any(h.endswith(f"/{pod.id}") for h in holders(cluster))
    cri.stop_pod(pod)
    cri.remove_pod(pod)
    assert_nothing_left(cluster, radium, daemon, pod, mounts)


def test_only_the_containers_a_pod_names_lease(
    node: tuple[Cri, Containerd], cluster: PoolCluster, radium: RadiumEnv
) -> None:
    cri, daemon = node
    mounts = mount_table()
    pod = cri.run_pod("two", {"radium.io/remote": "numpy", "radium.io/containers": "app"})
    for name, command in (
        ("app", python(COMPUTE)),
        ("sidecar", ["sh", "-c", "ls /run/radium; python3 -c 'import numpy'; exec sleep 600"]),
    ):
        cri.start(cri.create(pod, name, IMAGE, command))
    wait_output(cri, pod, "app", "\n")
    assert cri.output(pod, "app") == "RemoteModule True\n", cri.output(pod, "app", "stderr")
    wait_output(cri, pod, "sidecar", "No module named 'numpy'", "stderr", timeout=30)
    assert "/run/radium" in cri.output(pod, "sidecar", "stderr")  # no such directory
    assert leased(cluster, pod) == {"app"}
    cri.stop_pod(pod)
    cri.remove_pod(pod)
    assert_nothing_left(cluster, radium, daemon, pod, mounts)


def test_a_pod_killed_mid_run_leaves_no_lease(
    node: tuple[Cri, Containerd], cluster: PoolCluster, radium: RadiumEnv
) -> None:
    cri, daemon = node
    mounts = mount_table()
    pod = cri.run_pod("killed", {"radium.io/gpus": "1", "radium.io/remote": "numpy"})
    app = cri.create(pod, "app", IMAGE, ["python3", "-c", LOOP])
    cri.start(app)
    wait_output(cri, pod, "app", "step\nstep\n")
    assert leased(cluster, pod) == {"app"}
    os.kill(init_pid(daemon, app), signal.SIGKILL)
    assert cri.wait_exited(app, timeout=30) == 137
    # kubelet's garbage collection: the sandbox removed without a stop first.
    cri.remove_pod(pod)
    assert_nothing_left(cluster, radium, daemon, pod, mounts)


def init_pid(daemon: Containerd, container_id: str) -> int:
    """The container's init process, from runc's state under the daemon's runc root."""
    state = daemon.root / "runc" / "k8s.io" / container_id / "state.json"
    return int(json.loads(state.read_text())["init_process_pid"])


def test_a_bad_request_fails_the_start_with_one_line_and_leases_nothing(
    node: tuple[Cri, Containerd], cluster: PoolCluster, radium: RadiumEnv
) -> None:
    cri, daemon = node
    mounts = mount_table()
    pod = cri.run_pod("bad", {"radium.io/fraction": "2"})
    app = cri.create(pod, "app", IMAGE, ["true"])
    with pytest.raises(grpc.RpcError) as failed:
        cri.start(app)
    assert "radium.io/fraction must be a GPU fraction in (0, 1], got '2'" in str(
        failed.value.details()
    )
    assert leased(cluster, pod) == set()
    cri.stop_pod(pod)
    cri.remove_pod(pod)
    assert_nothing_left(cluster, radium, daemon, pod, mounts)


@pytest.fixture(scope="module")
def dra(
    node: tuple[Cri, Containerd], remoting: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Node]:
    """`radium dra serve` on the same node: the same agent leases for claims and containers."""
    with dra_node(tmp_path_factory.mktemp("cri-dra"), remoting) as plugin:
        yield plugin


def claim_holders(cluster: PoolCluster, uid: str) -> list[str]:
    return [h for h in holders(cluster) if h.endswith(f"/claim/{uid}")]


def test_a_container_computes_on_its_pods_dra_claim(
    node: tuple[Cri, Containerd], dra: Node, cluster: PoolCluster, radium: RadiumEnv
) -> None:
    """kubelet's path: prepare the claim, start the container with its CDI annotation; the
    container uses the claim's lease (no lease of its own), which outlives the pod until
    unprepare."""
    cri, daemon = node
    mounts = mount_table()
    claim = dra.api.add(name="half", parameters={"fraction": 0.5})
    answer = dra.kubelet.prepare(claim)[claim.uid]
    assert answer.error == "", answer.error
    cdi_ids = ",".join(answer.devices[0].cdi_device_ids)
    before = holders(cluster)
    pod = cri.run_pod("claimed", {"radium.io/remote": "numpy"})
    kubelet_annotations = {f"cdi.k8s.io/radium.io_{claim.uid}": cdi_ids}
    cri.start(cri.create(pod, "app", IMAGE, python(COMPUTE), kubelet_annotations))
    wait_output(cri, pod, "app", "\n")
    assert cri.output(pod, "app") == "RemoteModule True\n", cri.output(pod, "app", "stderr")
    assert holders(cluster) == before  # the claim's lease, no other
    assert len(claim_holders(cluster, claim.uid)) == 1
    cri.stop_pod(pod)
    cri.remove_pod(pod)
    assert len(claim_holders(cluster, claim.uid)) == 1  # the claim outlives the pod
    assert list(radium.state_dir.iterdir()) == []
    assert mount_table() == mounts
    assert daemon.shim_pids() == []
    assert dra.kubelet.unprepare(claim) == {claim.uid: ""}
    assert claim_holders(cluster, claim.uid) == []


def test_a_pod_cannot_take_another_pods_claim_by_naming_it(
    node: tuple[Cri, Containerd], dra: Node, cluster: PoolCluster, radium: RadiumEnv
) -> None:
    cri, daemon = node
    mounts = mount_table()
    claim = dra.api.add(name="someone-elses")
    assert dra.kubelet.prepare(claim)[claim.uid].error == ""
    try:
        pod = cri.run_pod("thief", {"radium.io/claim": claim.uid, "radium.io/remote": "numpy"})
        app = cri.create(pod, "app", IMAGE, python(COMPUTE))
        with pytest.raises(grpc.RpcError) as failed:
            cri.start(app)
        assert f"radium.io/claim={claim.uid} is not the container's claim" in str(
            failed.value.details()
        )
        cri.stop_pod(pod)
        cri.remove_pod(pod)
        assert_nothing_left(cluster, radium, daemon, pod, mounts)
    finally:
        assert dra.kubelet.unprepare(claim) == {claim.uid: ""}
