"""The machine beside every figure: CPU model, cores, load average and steal over the run.

A figure measured on a virtual machine whose hypervisor ran other guests meanwhile (steal), or
beside other work (load), is not the same figure: each benchmark prints :class:`Machine` at its
start and, with the steal over the run, at its end.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field
from pathlib import Path


def cpu_ticks() -> tuple[int, int]:
    """(ticks stolen, all ticks) of this machine's CPUs so far: steal is the time a virtual
    machine's hypervisor ran other guests while this one had work (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return fields[7], sum(fields)


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), or the platform's processor when it has none."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


@dataclass
class Machine:
    """A snapshot taken when a benchmark starts; :meth:`line` reports since then."""

    model: str = field(default_factory=cpu_model)
    cores: int = field(default_factory=lambda: os.cpu_count() or 1)
    ticks: tuple[int, int] = field(default_factory=cpu_ticks)

    def steal(self) -> float:
        """% of all CPUs' time stolen since the snapshot."""
        stolen, total = (now - then for then, now in zip(self.ticks, cpu_ticks()))
        return 100 * stolen / max(total, 1)

    def line(self, when: str) -> str:
        """``machine (WHEN): MODEL, N cores, load a b c, steal S % since start``."""
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        return (
            f"machine ({when}): {self.model}, {self.cores} cores, load {load}, "
            f"steal {self.steal():.1f} % since start"
        )
