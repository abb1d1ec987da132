"""Smoke runs of the benchmarks that need root or daemons: each, at tiny sizes, exits 0 and
prints its table with figures that parse. No figure is compared with a threshold (see
tests/test_benchmarks_smoke.py for the others)."""

from __future__ import annotations

import os
import re

from integration.host import need_root
from tests.test_benchmarks_smoke import NUMBER, check_dataplane, run_benchmark


def ratios(out: str) -> list[float]:
    return [float(r) for r in re.findall(rf"ratio\s+({NUMBER})x", out)]


def test_sandbox() -> None:
    need_root()
    out = run_benchmark("sandbox", "--starts", "2", "--calls", "40", "--mib", "2")
    found = ratios(out)
    assert len(found) == 5 and all(r > 0 for r in found), out  # start, p50, p99, in, out
    assert re.search(rf"argument throughput\s+confined\s+{NUMBER} MiB/s", out), out


def test_container_start() -> None:
    need_root()
    out = run_benchmark("container_start", "--runs", "1")
    for title, baseline in (
        ("docker run --rm", "runc"),
        ("ctr run --rm", "runc.v2"),
        ("CRI: pod sandbox + container start", "runc"),
    ):
        table = out.split(title + "\n", 1)[1].splitlines()[1:4]
        assert [line.split()[0] for line in table] == [baseline, "radium-pass", "radium-leased"]
        for line in table:
            median, p90, _added, ratio = map(float, line.split()[1:])
            assert median > 0 and p90 > 0 and ratio > 0, out


def test_dataplane_in_a_namespace() -> None:
    """Its own bridge and namespace (not ``rdm-*``): the other tests' networks are untouched."""
    need_root()
    before = sorted(os.listdir("/var/run/netns")) if os.path.isdir("/var/run/netns") else []
    check_dataplane(run_benchmark("dataplane", "--smoke", "--calls", "60"))
    after = sorted(os.listdir("/var/run/netns")) if os.path.isdir("/var/run/netns") else []
    assert set(before) <= set(after) and "rdmbench-dp" not in after, (before, after)


def test_workflow() -> None:
    """Without pulls (pushing and pulling an image twice would double this file's time)."""
    need_root()
    out = run_benchmark("workflow", "--runs", "1", "--pulls", "0")
    medians = [float(m) for m in re.findall(rf"median\s+({NUMBER}) ms", out)]
    assert len(medians) == 3 and all(m > 0 for m in medians), out
    assert len(ratios(out)) == 2 and all(r > 0 for r in ratios(out)), out


def test_dra_prepare() -> None:
    need_root()
    out = run_benchmark("dra_prepare", "--runs", "2")
    table = out.split("own lease\n", 1)[1].splitlines()[1:3]
    assert [line.split()[0] for line in table] == ["agent-acquire", "claim-prepare"]
    for line in table:
        median, p90, _added, ratio = map(float, line.split()[1:])
        assert median > 0 and p90 > 0 and ratio > 0, out
