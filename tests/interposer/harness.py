"""A real worker process and a stand-in for the node agent's container socket.

The stand-in does the agent's part of the hand-off without a lease: each ``connect`` gets one
end of a fresh socketpair (over ``SCM_RIGHTS``) while the worker gets the other end over its
control socket, exactly as the acceptor hands it authenticated connections. Client code runs
in subprocesses (the interposer's state is per process), with or without numpy.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import radium_interposer
from radium_interposer import wire

INTERPOSER = str(Path(radium_interposer.__file__).parent.parent)
#: A Python without numpy: the "image" side of the numpy-absent tests.
BARE_PYTHON = "/usr/bin/python3"
WORKER = [sys.executable, "-m", "radium_interposer.worker", "--lease", "test"]


#: This machine's math-library settings: the worker inherits them from this process, so the
#: program's runs, remoted and local, get them too (a CPU-type override such as
#: ``OPENBLAS_CORETYPE`` picks other kernels, whose float sums differ in the last digits).
MACHINE_SETTINGS = ("OPENBLAS_", "MKL_", "OMP_", "GOTO_", "NVPL_")


def local_env() -> dict[str, str]:
    """The environment of a program's local run: a PATH and this machine's math settings."""
    machine = {k: v for k, v in os.environ.items() if k.startswith(MACHINE_SETTINGS)}
    return {"PATH": os.environ["PATH"], **machine}


class WorkerHarness:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.socket_path = str(root / "dp.sock")
        self.control, child = socket.socketpair()
        workdir = root / "worker"
        workdir.mkdir()
        with child:
            self.worker = subprocess.Popen(
                [*WORKER, "--control-fd", str(child.fileno())],
                pass_fds=[child.fileno()],
                cwd=workdir,
                stdout=open(root / "worker.out", "wb"),  # noqa: SIM115 - the child keeps it
                stderr=subprocess.STDOUT,
            )
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(self.socket_path)
        self.listener.listen(64)
        self.connections = 0
        threading.Thread(target=self._hand_out, daemon=True).start()
        boot = root / "boot"
        boot.mkdir()
        (boot / "sitecustomize.py").write_text("import radium_interposer.boot\n")

    def _hand_out(self) -> None:
        while True:
            try:
                agent_side, _ = self.listener.accept()
            except OSError:
                return
            with agent_side:
                agent_side.recv(1024)
                ours, theirs = self.connection()
                with ours, theirs:
                    try:
                        wire.send_fd(self.control, b"c", ours.fileno())
                    except OSError:  # the worker is gone, as the agent would say
                        agent_side.sendall(b'{"ok": false, "error": "worker gone"}\n')
                        continue
                    wire.send_fd(
                        agent_side, b'{"ok": true, "v": %d}\n' % wire.VERSION, theirs.fileno()
                    )
                self.connections += 1

    def connection(self) -> tuple[socket.socket, socket.socket]:
        """A new connection's two ends: the worker's, and the one the container gets."""
        return socket.socketpair()

    def env(self, remote: str = "", **extra: str) -> dict[str, str]:
        return {
            **local_env(),
            "PYTHONPATH": f"{self.root / 'boot'}{os.pathsep}{INTERPOSER}",
            "RADIUM_DP_SOCKET": self.socket_path,
            "RADIUM_REMOTE": remote,
            **extra,
        }

    def run(
        self,
        code: str,
        remote: str = "numpy",
        python: str = BARE_PYTHON,
        timeout: float = 120,
        **extra: str,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [python, "-c", textwrap.dedent(code)],
            env=self.env(remote, **extra),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,
        )

    def program(
        self, path: Path, remote: str, python: str = BARE_PYTHON, **extra: str
    ) -> subprocess.CompletedProcess[str]:
        """Run the program file at ``path`` remoted (in the root: its files land there)."""
        return subprocess.run(
            [python, str(path)],
            env=self.env(remote, **extra),
            capture_output=True,
            text=True,
            timeout=600,
            cwd=self.root,
        )

    def script(
        self, source: str, remote: str = "torch", **extra: str
    ) -> subprocess.CompletedProcess[str]:
        """Run ``source`` as a program file (``app.py`` in the root): what shipping reads."""
        path = self.root / "app.py"
        path.write_text(textwrap.dedent(source))
        return self.program(path, remote, **extra)

    def same_as_local(
        self, source: str, remote: str = "torch", path: Path | None = None, **extra: str
    ) -> str:
        """The program's output remoted from a Python without the framework, checked equal to
        its output run here with the framework and no remoting at all (``source``, or the
        program file at ``path``)."""
        if path is None:
            path = self.root / "app.py"
            path.write_text(textwrap.dedent(source))
        remoted = self.program(path, remote, **extra)
        assert remoted.returncode == 0, f"stdout:\n{remoted.stdout}\nstderr:\n{remoted.stderr}"
        local = self.local(path)
        assert local.returncode == 0, local.stderr
        assert remoted.stdout == local.stdout
        return remoted.stdout

    def local(self, path: Path) -> subprocess.CompletedProcess[str]:
        """The program file at ``path`` run here with the framework, no remoting (in a folder
        of its own: the files it writes are not the remoted run's)."""
        local_root = self.root / "local"
        local_root.mkdir(exist_ok=True)
        return subprocess.run(
            [sys.executable, str(path)],
            env=local_env(),
            capture_output=True,
            text=True,
            timeout=600,
            cwd=local_root,
        )

    def fails_as_locally(
        self, source: str, remote: str = "torch", **extra: str
    ) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
        """The program ``source`` run here with the framework and remoted: both exit 1 with
        the same output and the same error (the local run's last line); both runs returned."""
        path = self.root / "app.py"
        path.write_text(textwrap.dedent(source))
        local = self.local(path)
        remoted = self.program(path, remote, **extra)
        assert remoted.returncode == local.returncode == 1, (local.stderr, remoted.stderr)
        assert remoted.stdout == local.stdout
        assert local.stderr.strip().splitlines()[-1] in remoted.stderr.splitlines()
        return local, remoted

    def check(self, code: str, **kwargs: str) -> str:
        done = self.run(code, **kwargs)
        assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
        return done.stdout

    def log(self) -> str:
        return (self.root / "worker.out").read_text()

    def close(self) -> None:
        # A close alone does not wake the thread in accept(); a shutdown does (Linux).
        self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.control.close()
        if self.worker.poll() is None:
            self.worker.kill()
        self.worker.wait()


def bare_python_has_no_numpy() -> bool:
    return shutil.which(BARE_PYTHON) is not None and (
        subprocess.run([BARE_PYTHON, "-c", "import numpy"], capture_output=True).returncode != 0
    )
