"""``radium run``: ``docker run --runtime=radium`` with the request attached.

Radium's own options come first; everything from the first other argument on (docker's options,
the image, the command) goes to ``docker run`` unchanged. ``-v`` prints the lease the container
got (from the node agent) on stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from radium import remotenames
from radium.configtree import Config
from radium.errors import RadiumError, SpecError, UnavailableError, UsageError
from radium.shim.request import FIELDS, checked, env_map

__all__ = [
    "DOCKER_FAILED",
    "HELP",
    "SPLIT_TARGET",
    "USAGE",
    "RunRequest",
    "check_docker",
    "docker_argv",
    "image_env",
    "image_of",
    "parse",
    "run",
    "unlike_the_image",
]

#: docker run's exit code when the docker daemon itself failed (not the container).
DOCKER_FAILED = 125
#: Where ``--split FILE`` is mounted inside the container.
SPLIT_TARGET = "/etc/radium/split.toml"
HELP = "see radium run -h"
USAGE = (
    "radium run [--gpus N] [--fraction F | --memory MiB] [--queue Q] [--priority CLASS] "
    "[--wait S] [--remote MOD]... [--split FILE] [--worker process|container] [-v] "
    "[docker run options] IMAGE [CMD...]"
)
#: docker run flags that take no value (every other flag takes one, unless written --flag=value)
_DOCKER_FLAGS = {
    "--detach", "--interactive", "--tty", "--rm", "--init", "--privileged", "--read-only",
    "--sig-proxy", "--no-healthcheck", "--oom-kill-disable", "--publish-all",
    "--disable-content-trust", "--quiet", "--help",
}  # fmt: skip
_DOCKER_SHORT_FLAGS = set("ditPq")


@dataclass
class RunRequest:
    """What ``radium run`` was asked: Radium's own options, and docker's arguments untouched."""

    env: dict[str, str] = field(default_factory=dict)
    remote: list[str] = field(default_factory=list)
    split: str = ""
    verbose: bool = False
    docker_args: list[str] = field(default_factory=list)


_VALUED = {
    "--gpus": "gpus",
    "--fraction": "fraction",
    "--memory": "memory",
    "--queue": "queue",
    "--priority": "priority",
    "--wait": "wait",
    "--worker": "worker",
}


def parse(argv: Sequence[str]) -> RunRequest:
    """Radium's options up to the first other argument (a lone ``--`` ends them too)."""
    request = RunRequest()
    args = list(argv)
    while args:
        arg = args[0]
        name, _, inline = arg.partition("=")
        if arg in ("-v", "--verbose"):
            request.verbose = True
            args.pop(0)
            continue
        if name not in (*_VALUED, "--remote", "--split"):
            break
        args.pop(0)
        if not inline:
            if not args:
                raise UsageError(f"{name} needs a value", hint=HELP)
            inline = args.pop(0)
        if name == "--remote":
            remotenames.entries([inline])  # a malformed name is refused before docker runs
            request.remote.append(inline)
        elif name == "--split":
            if Path(inline).is_file():  # a missing one is said where it is mounted
                remotenames.entries([], inline)  # malformed: refused before docker runs
            request.split = inline
        else:
            key = _VALUED[name]
            try:
                request.env[FIELDS[key][0]] = checked(key, inline, name)
            except SpecError as exc:
                raise UsageError(exc.message, hint=HELP) from None
    if args[:1] == ["--"]:
        args.pop(0)
    if not args:
        raise UsageError("an image is missing", hint=HELP)
    if "RADIUM_FRACTION" in request.env and "RADIUM_MEMORY" in request.env:
        raise UsageError("--fraction and --memory exclude each other", hint=HELP)
    request.docker_args = args
    if not any(k in request.env for k in ("RADIUM_GPUS", "RADIUM_FRACTION", "RADIUM_MEMORY")):
        request.env["RADIUM_GPUS"] = "1"
    return request


def image_env(image: str | None) -> dict[str, str]:
    """The image's own ENV, where docker already has the image (else nothing: it pulls it)."""
    if not image:
        return {}
    try:
        done = subprocess.run(
            ["docker", "image", "inspect", "--format", "{{json .Config.Env}}", image],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return env_map(json.loads(done.stdout)) if done.returncode == 0 else {}
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return {}


def unlike_the_image(env: dict[str, str], image: Mapping[str, str]) -> dict[str, str]:
    """``env`` with each value equal to the image's own made to differ by a leading space.

    The runtime reads a ``RADIUM_*`` value equal to the image's ENV as the image's (it cannot
    tell who typed it) and strips spaces from what it keeps: so ``radium run --gpus 2`` of an
    image that bakes ``RADIUM_GPUS=2`` still asks for 2. RADIUM_SPLIT, a path the container
    reads itself, is left as it is.
    """
    return {k: f" {v}" if image.get(k) == v and k != "RADIUM_SPLIT" else v for k, v in env.items()}


def docker_argv(
    request: RunRequest, cidfile: str, image_values: Mapping[str, str] | None = None
) -> list[str]:
    """``docker run`` for ``request``; ``image_values``: the image's own ENV (:func:`image_env`)."""
    argv = ["docker", "run", "--runtime=radium", "--cidfile", cidfile]
    env = dict(request.env)
    image = image_of(request.docker_args)
    if image:  # lets the acceptor run the worker inside the same image (container mode)
        env["RADIUM_IMAGE"] = image
    if request.remote:
        env["RADIUM_REMOTE"] = ",".join(request.remote)
    if request.split:
        split = Path(request.split).resolve()
        if not split.is_file():
            raise UsageError(f"split file {request.split} does not exist")
        argv += ["-v", f"{split}:{SPLIT_TARGET}:ro"]
        env["RADIUM_SPLIT"] = SPLIT_TARGET
    for key, value in unlike_the_image(env, image_values or {}).items():
        argv += ["-e", f"{key}={value}"]
    return argv + request.docker_args


def image_of(docker_args: Sequence[str]) -> str | None:
    """The image in ``docker run`` arguments: the first argument that no flag takes."""
    i = 0
    while i < len(docker_args):
        arg = docker_args[i]
        if arg == "--":
            return docker_args[i + 1] if i + 1 < len(docker_args) else None
        if not arg.startswith("-") or arg == "-":
            return arg
        if arg.startswith("--"):
            i += 1 if "=" in arg or arg in _DOCKER_FLAGS else 2
            continue
        letters = arg[1:]
        step = 1
        for position, letter in enumerate(letters):
            if letter not in _DOCKER_SHORT_FLAGS:  # takes a value: the rest, or the next arg
                step = 2 if position == len(letters) - 1 else 1
                break
        i += step
    return None


def check_docker() -> None:
    """docker answers and knows the ``radium`` runtime; else say what to do."""
    try:
        done = subprocess.run(
            ["docker", "info", "--format", "{{json .Runtimes}}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except FileNotFoundError:
        raise UsageError("docker is not installed", hint="apt-get install docker.io") from None
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no answer"])[-1]
        raise UnavailableError(f"docker is not answering: {reason}")
    try:
        runtimes = json.loads(done.stdout or "{}")
    except ValueError:
        runtimes = {}
    if "radium" not in runtimes:
        raise UsageError(
            "docker has no 'radium' runtime",
            hint="run: sudo radium setup docker --restart",
        )


def run(config: Config, argv: Sequence[str]) -> int:
    """``radium run``: ``docker run`` with the radium runtime and the request; docker's exit code.
    ``radium run``: ``docker run`` with the radium runtime and the request; docker's exit code."""
    request = parse(argv)
    with tempfile.TemporaryDirectory(prefix="radium-run-") as scratch:
        cidfile = os.path.join(scratch, "cid")
        try:
            image = image_env(image_of(request.docker_args))
            child = subprocess.Popen(docker_argv(request, cidfile, image))
        except FileNotFoundError:
            raise UsageError("docker is not installed", hint="apt-get install docker.io") from None
        if request.verbose:
            threading.Thread(
                target=_report_lease, args=(config, cidfile, child), daemon=True
            ).start()
        code = child.wait()
    if code == DOCKER_FAILED and not os.path.exists(cidfile):
        check_docker()  # the container never started: explain when Radium is the reason
    return code


def _report_lease(config: Config, cidfile: str, child: subprocess.Popen[bytes]) -> None:
    """Print the container's lease once the agent holds it (``-v``)."""
    from radium import agentclient

    while child.poll() is None:
        try:
            container = Path(cidfile).read_text().strip()
            held = agentclient.call(config.agent.socket, {"op": "list"}, timeout=5)["held"]
        except (OSError, RadiumError, KeyError):
            container, held = "", []
        for entry in held:
            if container and entry.get("container") == container:
                lease = entry.get("lease", {})
                sys.stderr.write(
                    f"radium: lease {lease.get('id')} on acceptor {lease.get('acceptor')} "
                    f"devices {','.join(lease.get('devices', []))} "
                    f"fraction {lease.get('fraction') or 1:g}\n"
                )
                sys.stderr.flush()
                return
        time.sleep(0.1)
