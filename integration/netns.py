"""Simulated hosts: network namespaces on a private bridge, built with pyroute2 and `ip`.

The bridge lives in the test's own namespace with the first address of a /24; each host is a
namespace with a veth pair into the bridge. Traffic between them really crosses interfaces.
Only addresses inside this bridge's /24 are ever used; everything is removed on close.

A namespace is made, and configured inside, by `ip`, not by pyroute2: pyroute2 does both in a
child it makes with ``os.fork()``, and a fork runs gRPC's fork handlers, which wait for every
gRPC thread of the test process to reach a safe point. One CI run hung there for good, in
``netns.create``. `ip` is started as every subprocess is (``vfork``), and runs no handler.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field

from pyroute2 import IPRoute, netns

from integration.host import need, need_root


@dataclass
class Network:
    prefix: str = "10.213.7"
    bridge: str = "rdmbr0"
    hosts: dict[str, str] = field(default_factory=dict)

    @property
    def gateway(self) -> str:
        return f"{self.prefix}.1"

    def open(self) -> Network:
        need_root()
        self.close()  # leftovers of a crashed run
        with IPRoute() as ipr:
            ipr.link("add", ifname=self.bridge, kind="bridge")
            index = ipr.link_lookup(ifname=self.bridge)[0]
            ipr.addr("add", index=index, address=self.gateway, prefixlen=24)
            ipr.link("set", index=index, state="up")
        return self

    def add_host(self, name: str) -> str:
        """A namespace named ``name`` joined to the bridge; its address."""
        number = len(self.hosts) + 10
        address = f"{self.prefix}.{number}"
        outside, inside = self._veth(number)
        _ip("netns", "add", name)
        with IPRoute() as ipr:
            ipr.link("add", ifname=outside, kind="veth", peer=inside)
            ipr.link("set", index=ipr.link_lookup(ifname=inside)[0], net_ns_fd=name)
            out_index = ipr.link_lookup(ifname=outside)[0]
            ipr.link("set", index=out_index, master=ipr.link_lookup(ifname=self.bridge)[0])
            ipr.link("set", index=out_index, state="up")
        _ip("-n", name, "link", "set", "lo", "up")
        _ip("-n", name, "addr", "add", f"{address}/24", "dev", inside)
        _ip("-n", name, "link", "set", inside, "up")
        self.hosts[name] = address
        return address

    def set_link(self, name: str, up: bool) -> None:
        """Cut host ``name`` off the bridge (its veth down), or join it again."""
        outside, _ = self._veth(int(self.hosts[name].rsplit(".", 1)[1]))
        with IPRoute() as ipr:
            ipr.link("set", index=ipr.link_lookup(ifname=outside)[0], state="up" if up else "down")

    def _veth(self, number: int) -> tuple[str, str]:
        """The pair of host ``number``: named after this bridge, so two networks never share a
        name (a namespace's veth outlives ``netns.remove`` for a while: the kernel tears
        namespaces down asynchronously)."""
        return f"{self.bridge}v{number}", f"{self.bridge}p{number}"

    def exec_prefix(self, name: str) -> list[str]:
        """Argv prefix that runs a command on host ``name``: in its network namespace only.
        Not ``ip netns exec``, which also remounts /sys and so hides the cgroup tree that
        dockerd and the acceptor's lease limits need."""
        return ["nsenter", f"--net=/var/run/netns/{name}"]

    def close(self) -> None:
        with IPRoute() as ipr:  # deleting one end removes the pair now, not when netns cleanup runs
            for link in ipr.get_links():
                if link.get_attr("IFLA_IFNAME").startswith(f"{self.bridge}v"):
                    ipr.link("del", index=link["index"])
        for name in list(self.hosts) + [n for n in netns.listnetns() if n.startswith("rdm-")]:
            if name in netns.listnetns():
                netns.remove(name)
        self.hosts.clear()
        with IPRoute() as ipr:
            for index in ipr.link_lookup(ifname=self.bridge):
                ipr.link("del", index=index)


def _ip(*args: str) -> None:
    done = subprocess.run(
        [need("ip", "iproute2"), *args], capture_output=True, text=True, timeout=30
    )
    if done.returncode:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def in_namespace(name: str) -> bool:
    return os.path.exists(f"/var/run/netns/{name}")
