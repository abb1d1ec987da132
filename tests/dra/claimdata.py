"""ResourceClaims as the API server returns them once the scheduler allocated them (the shape
is checked against the Kubernetes schemas in test_claims.py)."""

from __future__ import annotations

import uuid
from typing import Any

from radium.dra.claims import Claim
from radium.dra.paths import DRIVER


def resource_claim(
    name: str = "gpu-claim",
    *,
    devices: int = 1,
    parameters: dict[str, Any] | None = None,
    driver: str = DRIVER,
    uid: str = "",
    memory: str = "",
    consumed: str | None = None,
) -> tuple[Claim, dict[str, Any]]:
    """(the claim as kubelet names it, the ResourceClaim object). ``memory``: the request asks
    that much of each device's consumable memory; ``consumed``: what the scheduler recorded
    (default: ``memory``; None in the result when "")."""
    uid = uid or str(uuid.uuid4())
    exactly: dict[str, Any] = {"deviceClassName": "gpu.radium.io", "count": devices}
    if memory:
        exactly["capacity"] = {"requests": {"memory": memory}}
    requests = [{"name": "gpu", "exactly": exactly}]
    consumption = memory if consumed is None else consumed
    extra = {"consumedCapacity": {"memory": consumption}} if memory and consumption else {}
    config = (
        [
            {
                "requests": ["gpu"],
                "opaque": {
                    "driver": DRIVER,
                    "parameters": {"apiVersion": "radium.io/v1", "kind": "GpuConfig", **parameters},
                },
            }
        ]
        if parameters is not None
        else []
    )
    obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": uid},
        "spec": {"devices": {"requests": requests, "config": config}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": driver,
                            "pool": "node-a",
                            "device": f"gpu-{i}",
                            **extra,
                        }
                        for i in range(devices)
                    ],
                    "config": [{"source": "FromClaim", **item} for item in config],
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["node-a"]}
                            ]
                        }
                    ]
                },
            }
        },
    }
    return Claim("default", name, uid), obj
