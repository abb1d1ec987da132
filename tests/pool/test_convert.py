"""Leases to their messages: every usage figure reaches the Lease message."""

from __future__ import annotations

import dataclasses

from radium.pool.core import convert
from radium.pool.model import Lease, Usage
from radium.proto import pool_pb2 as pb


def test_every_usage_field_reaches_the_lease_message_and_back() -> None:
    usage = Usage(*(i + 1 for i in range(len(dataclasses.fields(Usage)))))
    lease = Lease("L", "a", "a:1", {"0": 100}, 0.5, "n/c", "q", "secret", 30, 9.0, 2.0)
    lease.usage = usage
    message = convert.lease_to_pb(lease)
    assert message.created_at == 2.0
    figures = {f.name: getattr(message, f.name) for f in dataclasses.fields(Usage)}
    assert figures == dataclasses.asdict(usage)
    assert convert.usage_from_pb(pb.LeaseUsage(lease_id="L", **figures)) == usage
