"""A benchmark's own bridge and namespaces, beside anything else on the machine.

``integration.netns.Network`` removes every ``rdm-*`` namespace when it opens and closes (the
leftovers of a crashed test run): a benchmark with one would take down the namespaces of
integration tests running beside it. This one removes only the namespaces it names.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from pyroute2 import IPRoute

from integration.netns import Network, in_namespace


@dataclass
class OwnNetwork(Network):
    #: The namespaces this network makes (none of them ``rdm-*``), the only ones it removes.
    names: tuple[str, ...] = ()

    def add_host(self, name: str) -> str:
        if name not in self.names:
            raise ValueError(f"{name!r} is not one of this network's namespaces {self.names}")
        return super().add_host(name)

    def close(self) -> None:
        with IPRoute() as ipr:  # the pairs now, not when the kernel tears the namespaces down
            for link in ipr.get_links():
                if link.get_attr("IFLA_IFNAME").startswith(f"{self.bridge}v"):
                    ipr.link("del", index=link["index"])
        for name in self.names:
            if in_namespace(name):
                subprocess.run(["ip", "netns", "del", name], check=True, timeout=30)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, timeout=30)
        self.hosts.clear()
