"""The kubelet plugin over its real sockets, kubelet's calls made by a stand-in; the claims and
the node agent are fakes here (integration/test_dra.py has the real agent and pool)."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from radium.dra import cdi
from radium.dra.claims import Claim
from radium.dra.paths import Paths
from radium.dra.serve import start
from radium.errors import SpecError, UnavailableError, UnsafeStateDirError
from tests.dra.claimdata import resource_claim
from tests.dra.kubelet import Kubelet


class Claims:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}

    def add(self, **kwargs: Any) -> Claim:
        claim, obj = resource_claim(**kwargs)
        self.objects[claim.name] = obj
        return claim

    def read(self, claim: Claim) -> dict[str, Any]:
        if claim.name not in self.objects:
            raise SpecError(f"claim {claim.namespace}/{claim.name} does not exist")
        return self.objects[claim.name]


class Agent:
    def __init__(self) -> None:
        self.held: dict[str, dict[str, str]] = {}
        self.down = False

    def acquire(self, key: str, request: dict[str, str]) -> dict[str, Any] | None:
        if self.down:
            raise UnavailableError("node agent at /run/radium/agent.sock: pool unreachable")
        self.held.setdefault(key, request)
        return {"id": "l-1"}

    def release(self, key: str) -> None:
        self.held.pop(key, None)


@pytest.fixture
def plugin(tmp_path: Path) -> Iterator[tuple[Kubelet, Claims, Agent, Paths]]:
    claims, agent = Claims(), Agent()
    paths = Paths(str(tmp_path / "plugins" / "radium.io"), str(tmp_path / "registry"),
                  str(tmp_path / "cdi"))  # fmt: skip
    servers = start(claims, agent, paths)
    try:
        yield Kubelet(Path(paths.registration)), claims, agent, paths
    finally:
        for server in servers:
            server.stop(grace=None).wait()


def test_registration_names_the_driver_and_its_endpoint(plugin: Any) -> None:
    kubelet, _, _, paths = plugin
    info = kubelet.register()
    assert (info.type, info.name, list(info.supported_versions)) == (
        "DRAPlugin", "radium.io", ["v1.DRAPlugin"],
    )  # fmt: skip
    assert info.endpoint == paths.endpoint
    for path in (paths.endpoint, paths.registration):
        mode = os.stat(path).st_mode
        assert stat.S_ISSOCK(mode) and mode & 0o077 == 0, oct(mode)  # root's alone


def test_prepare_leases_writes_the_cdi_spec_and_unprepare_undoes_it(plugin: Any) -> None:
    kubelet, claims, agent, paths = plugin
    kubelet.register()
    whole, half = claims.add(name="whole", devices=2), claims.add(parameters={"fraction": 0.5})
    answers = kubelet.prepare(whole, half)
    assert {uid: answer.error for uid, answer in answers.items()} == {whole.uid: "", half.uid: ""}
    devices = answers[whole.uid].devices
    assert [(d.request_names[0], d.pool_name, d.device_name) for d in devices] == [
        ("gpu", "node-a", "gpu-0"), ("gpu", "node-a", "gpu-1"),
    ]  # fmt: skip
    assert list(devices[0].cdi_device_ids) == [f"radium.io/claim={whole.uid}"]
    assert agent.held == {
        f"claim/{whole.uid}": {"radium.io/gpus": "2"},
        f"claim/{half.uid}": {"radium.io/fraction": "0.5"},
    }
    assert sorted(os.listdir(paths.cdi_dir)) == sorted(
        os.path.basename(cdi.path(paths.cdi_dir, c.uid)) for c in (whole, half)
    )
    assert kubelet.prepare(whole)[whole.uid].error == ""  # again: idempotent
    assert len(agent.held) == 2
    assert kubelet.unprepare(whole, half) == {whole.uid: "", half.uid: ""}
    assert kubelet.unprepare(whole) == {whole.uid: ""}  # again: idempotent
    assert agent.held == {} and os.listdir(paths.cdi_dir) == []


def test_a_bad_claim_gets_one_line_and_nothing_while_the_others_are_prepared(
    plugin: Any,
) -> None:
    kubelet, claims, agent, paths = plugin
    kubelet.register()
    good, bad = claims.add(name="good"), claims.add(name="bad", parameters={"fraction": 2})
    missing = Claim("default", "missing", "9d1c")
    answers = kubelet.prepare(good, bad, missing)
    assert answers[good.uid].error == ""
    assert answers[bad.uid].error == "claim default/bad: fraction must be in (0, 1], got 2"
    assert answers[bad.uid].devices == []
    assert answers[missing.uid].error == "claim default/missing does not exist"
    assert list(agent.held) == [f"claim/{good.uid}"]
    assert os.listdir(paths.cdi_dir) == [os.path.basename(cdi.path(paths.cdi_dir, good.uid))]


def test_a_pool_that_cannot_be_reached_leaves_nothing(plugin: Any) -> None:
    kubelet, claims, agent, paths = plugin
    kubelet.register()
    agent.down = True
    claim = claims.add()
    error = kubelet.prepare(claim)[claim.uid].error
    assert error == "node agent at /run/radium/agent.sock: pool unreachable"
    assert agent.held == {} and not os.path.exists(paths.cdi_dir)


def test_a_stale_socket_is_replaced_and_anything_else_refused(tmp_path: Path) -> None:
    paths = Paths(str(tmp_path / "p"), str(tmp_path / "r"), str(tmp_path / "cdi"))
    os.makedirs(paths.registry_dir)
    with socket.socket(socket.AF_UNIX) as stale:  # what a plugin killed by SIGKILL leaves
        stale.bind(paths.registration)
    servers = start(Claims(), Agent(), paths)
    kubelet = Kubelet(Path(paths.registration))
    assert kubelet.register().name == "radium.io"
    for server in servers:
        server.stop(grace=None).wait()
    os.symlink("/etc/passwd", paths.registration)
    with pytest.raises(UnsafeStateDirError, match="is not a socket"):
        start(Claims(), Agent(), paths)
    assert os.readlink(paths.registration) == "/etc/passwd"
    assert not os.path.exists(paths.endpoint)  # the service started first was stopped


def test_a_claim_uid_radium_does_not_take_is_refused_before_anything(plugin: Any) -> None:
    kubelet, claims, agent, paths = plugin
    kubelet.register()
    claim = claims.add(uid="../../etc/cron.d/x")
    error = kubelet.prepare(claim)[claim.uid].error
    assert error == "claim uid '../../etc/cron.d/x' is not a Kubernetes uid"
    assert agent.held == {} and not os.path.exists(paths.cdi_dir)
