"""`radium dra serve` for real: its sockets, the node agent and a pool with namespaced acceptors.

kubelet is a stand-in speaking the real registration and ``dra.v1`` gRPC APIs over the plugin's
unix sockets (tests/dra/kubelet.py); the API server is a stand-in too (kube-apiserver cannot run
here), serving ResourceClaims of the real schema (tests/dra/test_claims.py checks them) over
HTTP with a bearer token, read by the plugin's real client.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.dra_node import NODE, RADIUM, TOKEN, Node, dra_node
from integration.pool import PoolCluster
from integration.radium_env import RadiumEnv
from integration.test_leases import stop_agent
from radium.dra import cdi
from radium.dra.claims import Claim
from tests import cdi_schema
from tests.dra.kubelet import Kubelet
from tests.dra.test_slices import validate


@pytest.fixture(scope="module")
def node(
    radium: RadiumEnv, cluster: PoolCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Node]:
    root = tmp_path_factory.mktemp("dra")
    config = radium.client_config("dra.toml", cluster.client_table(), root / "agent", node=NODE)
    with dra_node(root, config) as node:
        yield node


def claim_leases(cluster: PoolCluster) -> dict[str, Any]:
    """The pool's active leases held for claims, by claim uid."""
    prefix = f"{NODE}/claim/"
    return {
        lease.holder.removeprefix(prefix): lease
        for lease in cluster.client().leases()
        if lease.holder.startswith(prefix)
    }


def test_claims_lease_from_the_pool_share_a_device_and_are_released(
    node: Node, cluster: PoolCluster
) -> None:
    whole = node.api.add(name="whole")
    halves = [node.api.add(name=f"half-{i}", parameters={"fraction": 0.5}) for i in range(2)]
    answers = node.kubelet.prepare(whole, *halves)
    assert {uid: a.error for uid, a in answers.items()} == {c.uid: "" for c in (whole, *halves)}
    leases = claim_leases(cluster)
    assert sorted(leases) == sorted(c.uid for c in (whole, *halves))
    assert leases[whole.uid].fraction == 1 and len(leases[whole.uid].device_ids) == 1
    first, second = (leases[c.uid] for c in halves)
    assert first.fraction == second.fraction == 0.5
    # Two halves on one device: the pool packs shares (docs/scheduling.md).
    assert (first.acceptor, list(first.device_ids)) == (second.acceptor, list(second.device_ids))
    for claim in (whole, *halves):
        spec = json.loads(Path(cdi.path(str(node.cdi_dir), claim.uid)).read_text())
        cdi_schema.validate(spec)
        assert list(answers[claim.uid].devices[0].cdi_device_ids) == [cdi.device_id(claim.uid)]
    assert node.kubelet.unprepare(whole, *halves) == {c.uid: "" for c in (whole, *halves)}
    assert claim_leases(cluster) == {}
    assert os.listdir(node.cdi_dir) == []


def test_a_plugin_killed_after_leasing_leaves_no_lease_behind(
    node: Node, cluster: PoolCluster
) -> None:
    """kubelet never heard back: it asks the restarted plugin again (the same lease, not a
    second one), and unprepares it when the pod is gone."""
    claim = node.api.add(name="killed")
    assert node.kubelet.prepare(claim)[claim.uid].error == ""
    lease_id = claim_leases(cluster)[claim.uid].id
    node.stop_plugin(signal.SIGKILL)
    node.start_plugin()
    node.kubelet.register()
    assert node.kubelet.prepare(claim)[claim.uid].error == ""
    assert [lease.id for lease in claim_leases(cluster).values()] == [lease_id]
    assert node.kubelet.unprepare(claim) == {claim.uid: ""}
    assert claim_leases(cluster) == {}


def test_bad_claims_get_one_line_and_lease_nothing(node: Node, cluster: PoolCluster) -> None:
    too_much = node.api.add(name="too-much", parameters={"fraction": 2})
    not_ours = node.api.add(name="not-ours", driver="gpu.nvidia.com")
    answers = node.kubelet.prepare(too_much, not_ours, Claim("default", "gone", "c0ffee"))
    assert answers[too_much.uid].error == (
        "claim default/too-much: fraction must be in (0, 1], got 2"
    )
    assert answers[not_ours.uid].error == (
        "claim default/not-ours has no radium.io device allocated"
    )
    assert answers["c0ffee"].error == "claim default/gone does not exist in the API server"
    assert claim_leases(cluster) == {}
    assert os.listdir(node.cdi_dir) == []


def test_a_pool_that_is_down_fails_the_claim_with_one_line(
    node: Node, radium: RadiumEnv, tmp_path: Path
) -> None:
    dead = radium.client_config(
        "dra-dead.toml", '[client]\npool = "127.0.0.1:9"\ntimeout = 2.0\n', tmp_path / "agent"
    )
    plugin = Node(tmp_path, dead, node.api, Kubelet(tmp_path / "registry" / "radium.io-reg.sock"))
    plugin.start_plugin()
    try:
        plugin.kubelet.register()
        claim = node.api.add(name="no-pool")
        error = plugin.kubelet.prepare(claim)[claim.uid].error
        assert "127.0.0.1:9" in error and "\n" not in error, error
        assert not plugin.cdi_dir.exists()
    finally:
        plugin.stop_plugin()
        stop_agent(dead)


def test_slices_list_the_pool_s_serving_devices(
    node: Node, cluster: PoolCluster, tmp_path: Path
) -> None:
    done = subprocess.run(
        [RADIUM, "dra", "slices"], capture_output=True, text=True, timeout=60,
        env={"PATH": os.environ["PATH"], "RADIUM_CONFIG": str(node.config)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    items = json.loads(done.stdout)["items"]
    devices = [d for s in items for d in s["spec"]["devices"]]
    found = sorted(
        (d["attributes"]["acceptor"]["string"], d["capacity"]["memory"]["value"]) for d in devices
    )
    status = cluster.client().status()
    expected = sorted((d.acceptor, f"{d.device.memory_mib}Mi") for d in status.devices if d.up)
    assert found == expected and len({a for a, _ in expected}) == len(items) >= 2
    validate(items, "1.34.0", tmp_path)


def test_a_claim_for_a_share_of_memory_capacity_leases_that_memory(
    node: Node, cluster: PoolCluster
) -> None:
    share = node.api.add(name="memory-share", memory="512Mi", consumed="1Gi")
    answers = node.kubelet.prepare(share)
    assert answers[share.uid].error == ""
    lease = claim_leases(cluster)[share.uid]
    assert lease.memory_mib == 1024  # what the scheduler consumed, rounded up by its policy
    assert node.kubelet.unprepare(share) == {share.uid: ""}
    assert claim_leases(cluster) == {}


def test_published_slices_follow_the_pool_and_a_bad_token_is_one_line(
    node: Node, cluster: PoolCluster, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    api = ["--api-server", f"http://127.0.0.1:{node.api.server_port}", "--token-file", str(token)]
    env = {"PATH": os.environ["PATH"], "RADIUM_CONFIG": str(node.config)}

    def publish() -> subprocess.CompletedProcess[str]:
        return subprocess.run([RADIUM, "dra", "slices", "--publish", *api],
                              capture_output=True, text=True, timeout=60, env=env)  # fmt: skip

    for generation in (1, 1):  # the second round finds nothing changed
        done = publish()
        assert (done.returncode, done.stdout) == (0, ""), done.stderr
        stored = list(node.api.slices.values())
        assert {s["spec"]["pool"]["generation"] for s in stored} == {generation}
    status = cluster.client().status()
    up = sorted(d.acceptor for d in status.devices if d.up)
    found = [d["attributes"]["acceptor"]["string"] for s in stored for d in s["spec"]["devices"]]
    assert sorted(found) == up and len(stored) == len(set(up)) >= 2
    validate(stored, "1.34.0", tmp_path)
    token.write_text("not-the-token")
    done = publish()
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "refused" in done.stderr, done.stderr
