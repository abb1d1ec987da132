"""A stand-in for NVIDIA's ``nvidia-cuda-mps-control`` (the tests have no GPU), run as a script.

- ``-d``: forks away, writes ``nvidia-cuda-mps-control.pid`` and the ``control`` socket into
  ``$CUDA_MPS_PIPE_DIRECTORY`` and ``control.log`` into ``$CUDA_MPS_LOG_DIRECTORY``, as the
  real daemon does, and serves its control language on the socket until ``quit``;
- without arguments: a client that sends each line of stdin to the daemon and prints what it
  answers (exit status 1, like the real one, when there is no daemon).

The daemon records each start and every command it receives, one a line, in
``$CUDA_MPS_LOG_DIRECTORY/commands``. It answers ``get_server_list`` with its servers' pids;
``start_server -uid N`` starts a server (a child process that sleeps, as an MPS server idles);
``shutdown_server PID`` ends one; ``quit`` ends them all, removes its socket and pid file and
exits.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

PID_FILE = "nvidia-cuda-mps-control.pid"


def _record(line: str) -> None:
    with open(Path(os.environ["CUDA_MPS_LOG_DIRECTORY"]) / "commands", "a") as f:
        f.write(line + "\n")


def _server() -> int:
    """A server: a child that idles until it is told to end."""
    pid = os.fork()
    if pid == 0:
        os.closerange(3, 1024)  # the daemon's socket and the client's connection are not its
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        while True:
            time.sleep(3600)
    return pid


def _answer(command: str, servers: list[int]) -> tuple[str, bool]:
    """The reply to one command, and whether the daemon is to exit."""
    words = command.split()
    if not words:
        return "", False
    if words[0] == "get_server_list":
        return "".join(f"{pid}\n" for pid in servers), False
    if words[0] == "start_server" and words[1:2] == ["-uid"]:
        servers.append(_server())
        return f"{servers[-1]}\n", False
    if words[0] == "shutdown_server" and len(words) > 1 and int(words[1]) in servers:
        os.kill(int(words[1]), signal.SIGTERM)
        servers.remove(int(words[1]))
        return "", False
    if words[0] == "quit":
        for pid in servers:
            os.kill(pid, signal.SIGTERM)
        return "", True
    return f"unknown command {command!r}\n", False


def daemon() -> None:
    pipe = Path(os.environ["CUDA_MPS_PIPE_DIRECTORY"])
    logs = Path(os.environ["CUDA_MPS_LOG_DIRECTORY"])
    if os.fork():  # the starter returns at once, as the real -d does
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    null = os.open(os.devnull, os.O_RDWR)  # a daemon keeps no terminal or pipe of its starter
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # servers reap themselves
    listener = socket.socket(socket.AF_UNIX)
    (pipe / "control").unlink(missing_ok=True)
    listener.bind(str(pipe / "control"))
    listener.listen()
    (logs / "control.log").write_text("fake MPS control daemon\n")
    _record(f"start CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')}")
    (pipe / PID_FILE).write_text(f"{os.getpid()}\n")
    servers: list[int] = []
    done = False
    while not done:
        connection, _ = listener.accept()
        with connection, connection.makefile("rw") as stream:
            for line in stream:
                _record(line.strip())
                reply, done = _answer(line, servers)
                stream.write(reply)
                stream.flush()
                if done:
                    break
    (pipe / "control").unlink(missing_ok=True)
    (pipe / PID_FILE).unlink(missing_ok=True)
    os._exit(0)


def client() -> int:
    pipe = Path(os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"))
    connection = socket.socket(socket.AF_UNIX)
    try:
        connection.connect(str(pipe / "control"))
    except OSError:
        print("Cannot find MPS control daemon process", file=sys.stderr)
        return 1
    with connection, connection.makefile("rw") as stream:
        for line in sys.stdin:
            stream.write(line if line.endswith("\n") else line + "\n")
            stream.flush()
        connection.shutdown(socket.SHUT_WR)
        sys.stdout.write(stream.read())
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["-d"]:
        daemon()
        sys.exit(0)
    sys.exit(client())
