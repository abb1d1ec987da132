"""The Grafana dashboard uses only series Radium exports (docs/metrics.md lists them); the
integration test (integration/test_metrics.py) has a real Prometheus evaluate each query."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "packaging" / "grafana" / "radium.json"
SERIES = re.compile(r"\bradium_[a-z_]+")
#: What Prometheus adds to a histogram's name in the exposition.
HISTOGRAM_PARTS = re.compile(r"_(bucket|sum|count)$")


def queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dashboard["panels"] for t in p["targets"]]


def test_every_series_the_dashboard_queries_is_documented() -> None:
    documented = set(SERIES.findall((ROOT / "docs" / "metrics.md").read_text()))
    used = {HISTOGRAM_PARTS.sub("", s) for q in queries() for s in SERIES.findall(q)}
    assert used, "the dashboard queries nothing"
    assert used <= documented, used - documented


def test_the_dashboard_covers_pool_acceptor_and_agent() -> None:
    used = " ".join(queries())
    for prefix in ("radium_pool_", "radium_acceptor_", "radium_agent_"):
        assert prefix in used
