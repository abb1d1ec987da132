"""The agent's start socket (docs/agent-agentprotocol.md, section 2) with an in-memory pool.

The start service runs against a fake mounter here; integration/test_leases.py starts real
containers through it (docker, runc, the mount helper, the fallback to the full hook).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from radium import agentprotocol
from radium.agent.starts import ConfigSource, StartService
from radium.configstart import HookConfig, RuntimeConfig
from radium.configtree import AgentConfig, Config
from radium.errors import InvalidRequestError, MountError, SpecError
from radium.shim import modifiers
from tests.agent.test_agent import MemoryPool, Processes, make_agent

AGENT_HOOK = ("/venv/bin/python", "-I", "-S", "/venv/bin/radium-agent-call", "--socket", "/s")
FULL_HOOK = ("/usr/bin/python3", "-I", "/usr/local/bin/radium-hook")
ASK = {"radium.io/gpus": "1"}  # a hand-written spec has no image record: annotations ask


class FakeMounter:
    """Records what it mounted; fails with ``error`` when set."""

    def __init__(self) -> None:
        self.mounted: list[tuple[dict[str, Any], str]] = []
        self.error: Exception | None = None

    async def mount_bundle(self, state: bytes, runtime_dir: str) -> None:
        if self.error is not None:
            raise self.error
        self.mounted.append((json.loads(state), runtime_dir))


class Setup:
    def __init__(self, tmp_path: Path) -> None:
        self.config_file = tmp_path / "radium.toml"
        self.config_file.write_text("# the agent's config\n")
        self.state_dir = tmp_path / "containers"
        self.config = Config(
            hook=HookConfig(state_dir=str(self.state_dir)),
            agent=AgentConfig(enabled=True),
        )
        self.pool, self.processes = MemoryPool(), Processes()
        self.processes.started[4242] = 1000.0
        self.agent = make_agent(tmp_path, self.pool, self.processes)
        self.mounter = FakeMounter()
        self.service = StartService(
            self.config, ConfigSource(str(self.config_file)), self.agent, self.mounter,
            AGENT_HOOK, {"RADIUM_CONFIG": str(self.config_file)},
        )  # fmt: skip
        self.bundle = tmp_path / "bundle"
        self.bundle.mkdir()
        self.write_spec([])

    def write_spec(self, env: list[str], annotations: dict[str, str] | None = None) -> None:
        spec: dict[str, Any] = {
            "ociVersion": "1.0.2",
            "process": {"env": env},
            "root": {"path": "rootfs"},
        }
        if annotations:
            spec["annotations"] = annotations
        (self.bundle / "config.json").write_text(json.dumps(spec))

    def spec(self) -> dict[str, Any]:
        return dict(json.loads((self.bundle / "config.json").read_text()))

    def state(self, container: str = "c1") -> bytes:
        return json.dumps({
            "ociVersion": "1.0.2", "id": container, "pid": 4242, "bundle": str(self.bundle),
            "annotations": {"radium.io/gpus": "1"}, "status": "creating",
        }).encode()  # fmt: skip

    def create(self, config_path: Path | str | None = None) -> bytes:
        path = str(self.config_file if config_path is None else config_path)
        return asyncio.run(
            self.service.handle(b"\0".join([b"create", path.encode(), str(self.bundle).encode()]))
        )


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def test_create_puts_the_agents_hook_with_the_full_hook_as_fallback(setup: Setup) -> None:
    setup.write_spec(["PATH=/bin"], {"radium.io/gpus": "1"})
    assert setup.create() == agentprotocol.REPLY_OK
    spec = setup.spec()
    assert spec["annotations"] == {"radium.io/gpus": "1"}
    for stage in ("prestart", "poststop"):
        (hook,) = spec["hooks"][stage]
        assert hook["path"] == AGENT_HOOK[0]
        assert hook["args"][: len(AGENT_HOOK) + 2] == [*AGENT_HOOK, stage, "--"]
        assert hook["args"][len(AGENT_HOOK) + 2 :] == [*modifiers.hook_command(setup.config), stage]
        assert f"RADIUM_CONFIG={setup.config_file}" in hook["env"]
    assert setup.create() == agentprotocol.REPLY_OK  # again: still one hook per stage
    assert setup.spec() == spec


def test_a_spec_edited_by_either_path_gets_one_radium_hook_per_stage(setup: Setup) -> None:
    setup.write_spec([], ASK)
    setup.create()
    full = modifiers.for_spec(setup.spec(), setup.config, {})
    assert full is not None
    twice = modifiers.apply(setup.spec(), full)
    assert [len(twice["hooks"][s]) for s in ("prestart", "poststop")] == [1, 1]
    setup.write_spec([], ASK)  # the other way round: full wrapper first, then agent
    (setup.bundle / "config.json").write_text(json.dumps(modifiers.apply(setup.spec(), full)))
    setup.create()
    assert [len(setup.spec()["hooks"][s]) for s in ("prestart", "poststop")] == [1, 1]


@pytest.mark.parametrize(
    "env, annotations",
    [
        (["PATH=/bin"], None),  # asks nothing
        (["RADIUM_GPUS=1"], {"io.kubernetes.cri.container-type": "sandbox"}),  # a pod's sandbox
    ],
)
def test_create_leaves_other_specs_byte_identical(
    setup: Setup, env: list[str], annotations: dict[str, str] | None
) -> None:
    setup.write_spec(env, annotations)
    before = (setup.bundle / "config.json").read_bytes()
    assert setup.create() == agentprotocol.REPLY_OK
    assert (setup.bundle / "config.json").read_bytes() == before


def test_create_under_another_or_a_changed_config_is_passed_to_the_full_path(
    setup: Setup, tmp_path: Path
) -> None:
    setup.write_spec([], ASK)
    before = (setup.bundle / "config.json").read_bytes()
    assert setup.create(tmp_path / "other.toml") == agentprotocol.REPLY_PASS
    assert setup.create("relative.toml") == agentprotocol.REPLY_PASS
    setup.config_file.write_text("# edited since the agent started\n[hook]\n")
    assert setup.create() == agentprotocol.REPLY_PASS
    assert (setup.bundle / "config.json").read_bytes() == before


def test_a_configured_hook_command_is_left_to_the_full_path(tmp_path: Path) -> None:
    setup = Setup(tmp_path)
    setup.service.config = Config(
        runtime=RuntimeConfig(hook_command=FULL_HOOK), agent=AgentConfig(enabled=True)
    )
    setup.write_spec([], ASK)
    assert setup.create() == agentprotocol.REPLY_PASS


def test_create_of_a_broken_bundle_is_an_error(setup: Setup) -> None:
    (setup.bundle / "config.json").write_text("{not json")
    with pytest.raises(SpecError):
        setup.create()


def test_prestart_takes_the_lease_and_mounts(setup: Setup) -> None:
    async def scenario() -> None:
        assert await setup.service.handle(b"prestart\0" + setup.state()) == agentprotocol.REPLY_OK
        runtime_dir = setup.state_dir / "c1"
        assert setup.mounter.mounted == [(json.loads(setup.state()), str(runtime_dir))]
        held = setup.agent.book.get("c1")
        assert held is not None and held.pid == 4242 and held.runtime_dir == str(runtime_dir)
        assert json.loads((runtime_dir / "lease.json").read_text())["id"] == held.lease_id
        # No other host user reaches the lease's socket (docs/security.md).
        modes = [p.stat().st_mode & 0o7777 for p in (setup.state_dir, runtime_dir)]
        assert modes == [0o700, 0o750]
        assert (runtime_dir / "dp.sock").stat().st_mode & 0o777 == 0o660
        assert await setup.service.handle(b"poststop\0" + setup.state()) == agentprotocol.REPLY_OK
        assert setup.agent.book.get("c1") is None and not setup.pool.leases
        assert not runtime_dir.exists()
        setup.agent.broker.close_all()

    asyncio.run(scenario())


def test_a_failed_mount_gives_the_lease_back_and_keeps_nothing(setup: Setup) -> None:
    setup.mounter.error = MountError("cannot bind-mount /x: Permission denied")

    async def scenario() -> None:
        with pytest.raises(MountError):
            await setup.service.handle(b"prestart\0" + setup.state())
        assert setup.pool.allocations == 1 and not setup.pool.leases
        assert setup.agent.book.get("c1") is None
        assert list(setup.state_dir.iterdir()) == []

    asyncio.run(scenario())


def test_a_container_that_asks_nothing_is_not_leased(setup: Setup) -> None:
    state = json.loads(setup.state())
    state["annotations"] = {}
    reply = asyncio.run(setup.service.handle(b"prestart\0" + json.dumps(state).encode()))
    assert reply == agentprotocol.REPLY_OK
    assert setup.pool.allocations == 0 and not setup.mounter.mounted


def test_delete_checks_the_container_id_and_is_idempotent(setup: Setup) -> None:
    config = str(setup.config_file).encode()
    with pytest.raises(InvalidRequestError):
        asyncio.run(setup.service.handle(b"delete\0" + config + b"\0../../etc"))
    (setup.state_dir / "c2").mkdir(parents=True)
    for _ in range(2):
        assert (
            asyncio.run(setup.service.handle(b"delete\0" + config + b"\0c2"))
            == agentprotocol.REPLY_OK
        )
    assert not (setup.state_dir / "c2").exists()


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"",
        b"launch\0x",
        b"create\0only-one",
        b"prestart\0{not json",
        b"prestart\0[1]",
        b"\xff\xfe\0\0",
    ],
)
def test_malformed_requests_are_refused(setup: Setup, request_bytes: bytes) -> None:
    with pytest.raises((InvalidRequestError, SpecError)):
        asyncio.run(setup.service.handle(request_bytes))


def test_garbage_on_the_start_socket_gets_one_line_and_the_socket_keeps_serving(
    setup: Setup, tmp_path: Path
) -> None:
    path = str(tmp_path / "start.sock")

    async def talk(payload: bytes) -> bytes:
        reader, writer = await asyncio.open_unix_connection(path)
        writer.write(payload)
        writer.write_eof()
        reply = await reader.read()
        writer.close()
        return reply

    async def scenario() -> None:
        server = await asyncio.start_unix_server(setup.service.serve_client, path=path)
        try:
            for payload in (
                b"\x00\xff" * 100,
                b"x" * (agentprotocol.MAX_START_REQUEST + 8192),
                b"prestart\0{",
            ):
                reply = await talk(payload)
                assert reply.startswith(agentprotocol.REPLY_ERROR) and reply.endswith(b"\n")
                assert reply.count(b"\n") == 1
            setup.write_spec([], ASK)
            ok = b"\0".join(
                [b"create", str(setup.config_file).encode(), str(setup.bundle).encode()]
            )
            assert await talk(ok) == agentprotocol.REPLY_OK
        finally:
            server.close()

    asyncio.run(scenario())


def test_a_peer_that_never_ends_its_request_is_cut_off(
    setup: Setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agentprotocol, "REQUEST_TIMEOUT", 0.2)
    path = str(tmp_path / "start.sock")

    async def scenario() -> None:
        server = await asyncio.start_unix_server(setup.service.serve_client, path=path)
        try:
            reader, writer = await asyncio.open_unix_connection(path)
            writer.write(b"prestart\0")  # and never the end of writing
            reply = await asyncio.wait_for(reader.read(), 5)
            assert reply == b"error bad request: TimeoutError\n"
            writer.close()
        finally:
            server.close()

    asyncio.run(scenario())


def test_create_through_the_agent_drops_what_the_image_set(setup: Setup, tmp_path: Path) -> None:
    """The agent's create (the fronts' fast path) reads docker's record like the wrapper."""
    from tests.shim.test_image_record import CID, docker_root, docker_spec

    root = docker_root(tmp_path, ["RADIUM_GPUS=2", "RADIUM_PRIORITY=inference"])
    setup.bundle = tmp_path / CID
    setup.bundle.mkdir()
    spec = {**docker_spec(root), "process": {"env": ["RADIUM_GPUS=2", "RADIUM_PRIORITY=inference"]}}
    (setup.bundle / "config.json").write_text(json.dumps(spec))
    before = (setup.bundle / "config.json").read_bytes()
    assert setup.create() == agentprotocol.REPLY_OK
    assert (setup.bundle / "config.json").read_bytes() == before
    spec["process"]["env"][0] = "RADIUM_GPUS=1"  # the user's -e
    (setup.bundle / "config.json").write_text(json.dumps(spec))
    assert setup.create() == agentprotocol.REPLY_OK
    assert setup.spec()["annotations"] == {"radium.io/gpus": "1"}
