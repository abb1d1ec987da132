"""What a lease's worker uses of the host, for the pool's heartbeats: CPU and RSS via psutil."""

from __future__ import annotations

import psutil


class Meter:
    """Measures worker process trees; keeps their psutil objects, which measure CPU between two
    calls on the same object."""

    def __init__(self) -> None:
        self._processes: dict[int, psutil.Process] = {}

    def measure(self, pid: int | None) -> tuple[float, int]:
        """(CPU percent, RSS bytes) of ``pid`` and its descendants; zeros when it is gone."""
        cpu, rss = 0.0, 0
        if pid is None:
            return cpu, rss
        try:
            process = self._processes.get(pid) or self._processes.setdefault(
                pid, psutil.Process(pid)
            )
            for p in [process, *process.children(recursive=True)]:
                with p.oneshot():
                    cpu += p.cpu_percent(interval=None)
                    rss += p.memory_info().rss
        except psutil.Error:
            self._processes.pop(pid, None)
        return cpu, rss
