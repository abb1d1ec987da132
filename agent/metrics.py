"""The node agent's Prometheus series (docs/metrics.md): leases held, container starts by
outcome, and how long the agent takes to answer the hook (and the other callers of its
socket). Off unless ``agent.metrics`` names an address (``radium up`` turns it on)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["BUCKETS", "OPERATIONS", "AgentMetrics"]

#: Operations of the agent's socket (``Agent.handle``); any other is counted as "unknown".
OPERATIONS = frozenset({"ping", "acquire", "release", "list"})
#: A start takes a lease from the pool (milliseconds), or waits for capacity (minutes).
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60, 600, 3600)


class AgentMetrics:
    """The node agent's Prometheus series (docs/metrics.md)."""

    def __init__(self, registry: CollectorRegistry, held: Callable[[], int]) -> None:
        self.leases = Gauge(
            "radium_agent_leases", "Leases the agent holds for containers", registry=registry
        )
        self.leases.set_function(held)
        self.starts = Counter(
            "radium_agent_container_starts",
            "Container starts that asked for a lease, by outcome (granted, or the error's kind)",
            ["outcome"],
            registry=registry,
        )
        self.latency = Histogram(
            "radium_agent_request_duration_seconds",
            "Time the agent takes to answer a request on its socket (acquire: the hook's wait)",
            ["op"],
            buckets=BUCKETS,
            registry=registry,
        )

    def request(self, op: str, error_kind: str, seconds: float) -> None:
        """A request answered: ``error_kind`` is "" when it succeeded."""
        known = op if op in OPERATIONS else "unknown"
        self.latency.labels(known).observe(seconds)
        if known == "acquire":
            self.starts.labels(error_kind.replace(" ", "_") if error_kind else "granted").inc()
