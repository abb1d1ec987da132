"""Functions the data-plane benchmark remotes (shipped to the worker as user code)."""

from __future__ import annotations

from typing import Any


def noop(payload: bytes) -> None:
    """The smallest useful remote call: small arguments in, nothing out."""


def consume(array: Any) -> int:
    """An array argument crosses the wire; only its size comes back."""
    return int(array.nbytes)


def make(nbytes: int) -> Any:
    """An array of ``nbytes`` made on the worker (it stays there as a handle)."""
    import numpy

    return numpy.ones(nbytes // 8)


def rss_peak_reset() -> int:
    """The worker's resident memory now, after resetting its peak (``clear_refs`` 5)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status("VmRSS")


def rss_peak() -> int:
    return _status("VmHWM")


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0
