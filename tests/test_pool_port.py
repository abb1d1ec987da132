"""A second pool on a port a pool serves is refused, not let to share it.

gRPC listens with SO_REUSEPORT unless told not to: two pools on one address then both ran, and
the kernel split the calls between them (two databases, two sets of leases and tokens). It
happened as soon as a second ``radium up`` (or a pool of a config copied from another) was
started with the first's ``listen``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.ports import free_port

RADIUM = str(Path(sys.executable).parent / "radium")


def serve(config: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [RADIUM, "pool", "serve"],
            env={"PATH": os.environ["PATH"], "RADIUM_CONFIG": str(config)},
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_a_second_pool_on_the_same_address_exits_with_one_line(tmp_path: Path) -> None:
    port = free_port()
    configs = []
    for name in ("first", "second"):
        config = tmp_path / f"{name}.toml"
        config.write_text(
            f'[pool]\nlisten = "127.0.0.1:{port}"\nmetrics = ""\ndb = "{tmp_path / name}.db"\n'
            'agent_tokens = ["a"]\nacceptor_tokens = ["b"]\n'
        )
        configs.append(config)
    first = serve(configs[0], tmp_path / "first.log")
    second = None
    try:
        deadline = time.monotonic() + 30
        while not listening(port):
            assert first.poll() is None, (tmp_path / "first.log").read_text()
            assert time.monotonic() < deadline, "the first pool did not listen within 30 s"
            time.sleep(0.1)
        second = serve(configs[1], tmp_path / "second.log")
        try:
            code = second.wait(timeout=30)
        except subprocess.TimeoutExpired:
            code = None  # still serving: it shares the port
        log = (tmp_path / "second.log").read_text()
        assert code == 1, f"the second pool serves on 127.0.0.1:{port} beside the first: {log}"
        last = log.splitlines()[-1]  # what follows the address is gRPC's own words
        assert last.startswith(f"radium pool: cannot listen on 127.0.0.1:{port}: "), log
        assert last.endswith("; is another pool running?"), log
        assert first.poll() is None  # the first serves on
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
