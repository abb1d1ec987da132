"""A 3-member etcd cluster with each member on a host of its own: a network namespace on a
:class:`~integration.netns.Network` bridge, so its traffic really crosses interfaces."""

from __future__ import annotations

from pathlib import Path

from integration.netns import Network
from tests.etcd_server import EtcdCluster, EtcdMember


def etcd_on_hosts(network: Network, root: Path) -> EtcdCluster:
    """Members m0..m2 on hosts rdm-etcd0..2 of ``network``, not started (stop them by pid
    before the network closes)."""
    members = []
    for n in range(3):
        name = f"rdm-etcd{n}"
        address = network.add_host(name)
        members.append(
            EtcdMember(
                f"m{n}", root / f"m{n}", host=address, client_port=2379, peer_port=2380,
                wrapper=network.exec_prefix(name),
            )
        )  # fmt: skip
    return EtcdCluster(members)
