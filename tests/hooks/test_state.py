from __future__ import annotations

import json

import pytest

from radium.errors import SpecError
from radium.hooks.state import parse_state, rootfs_path


def state_bytes(**fields: object) -> bytes:
    base: dict[str, object] = {
        "ociVersion": "1.0.2",
        "id": "c1",
        "pid": 42,
        "bundle": "/b",
        "status": "created",
    }
    base.update(fields)
    return json.dumps(base).encode()


def test_parses_runc_state() -> None:
    state = parse_state(state_bytes(annotations={"radium.io/gpus": "1", "other": "x"}))
    assert (state.container_id, state.pid, state.bundle) == ("c1", 42, "/b")
    assert state.wants_radium
    assert state.radium_annotations == {"radium.io/gpus": "1"}


def test_no_annotations_means_not_wanted() -> None:
    assert not parse_state(state_bytes()).wants_radium


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "not valid JSON"),
        (b"\xff\x00", "not valid JSON"),
        (b"[1]", "not a JSON object"),
        (state_bytes(id="../../etc"), "invalid container id"),
        (state_bytes(id=""), "invalid container id"),
        (state_bytes(bundle="relative"), "absolute 'bundle'"),
        (state_bytes(pid=-1), "invalid pid"),
        (state_bytes(pid="1"), "invalid pid"),
        (state_bytes(annotations=["x"]), "annotations"),
        (b"{" * 2_000_000, "larger than 1 MiB"),
    ],
)
def test_malformed_state(raw: bytes, message: str) -> None:
    with pytest.raises(SpecError, match=None) as info:
        parse_state(raw)
    assert message in info.value.message


def test_rootfs_relative_to_bundle_and_crun_root() -> None:
    state = parse_state(state_bytes())
    assert rootfs_path(state, {"root": {"path": "rootfs"}}) == "/b/rootfs"
    assert rootfs_path(state, {"root": {"path": "/abs/root"}}) == "/abs/root"
    crun = parse_state(state_bytes(root="/run/crun/root"))
    assert rootfs_path(crun, {"root": {"path": "rootfs"}}) == "/run/crun/root"
    with pytest.raises(SpecError, match=r"no root\.path"):
        rootfs_path(state, {})


def test_a_container_the_pod_leaves_out_is_not_wanted() -> None:
    pod = {"radium.io/gpus": "1", "radium.io/containers": "app"}
    for name, wanted in (("app", True), ("sidecar", False)):
        annotations = {**pod, "io.kubernetes.container.name": name}
        assert parse_state(state_bytes(annotations=annotations)).wants_radium is wanted
