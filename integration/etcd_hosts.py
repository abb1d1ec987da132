"""A 3-member etcd cluster with each member on a host of its own: a network namespace on a
:class:`~integration.netns.Network` bridge, so its traffic really crosses interfaces."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from integration.netns import Network
from tests.etcd_server import EtcdCluster, EtcdMember


@contextlib.contextmanager
def etcd_on_hosts(network: Network, root: Path) -> Iterator[EtcdCluster]:
    """Members m0..m2 on hosts rdm-etcd0..2 of ``network``, started; stopped by pid after."""
    members = []
    for n in range(3):
        name = f"rdm-etcd{n}"
        members.append(
            EtcdMember(
                f"m{n}", root / f"m{n}", host=network.add_host(name), client_port=2379,
                peer_port=2380, wrapper=network.exec_prefix(name),
            )
        )  # fmt: skip
    cluster = EtcdCluster(members)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
