"""Publishing the driver's ResourceSlices (radium.dra.publish) into a store kept in a dictionary
as the API server keeps them (resource versions, other drivers' slices beside ours)."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest

from radium.dra import publish
from radium.dra.slices import PoolDevice
from radium.errors import AlreadyExistsError, UnavailableError

A0 = PoolDevice("acc-a", "gpu0", "nvidia", "H100", 81559)
A1 = PoolDevice("acc-a", "gpu1", "nvidia", "H100", 81559)
B0 = PoolDevice("acc-b", "gpu0", "nvidia", "L4", 22491)
THEIRS = {
    "metadata": {"name": "gpu.example.com-node-a", "labels": {"radium.io/pool": "radium"}},
    "spec": {"driver": "gpu.example.com", "pool": {"name": "x", "generation": 9}},
}


class Store:
    """Slices by name, each write a new resource version; a replace of another version is a
    conflict, as the API server's optimistic concurrency makes it."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.versions = itertools.count(1)
        self.writes: list[tuple[str, str]] = []

    def list(self, selector: str) -> list[dict[str, Any]]:
        key, _, value = selector.partition("=")
        return [
            copy.deepcopy(o)
            for o in self.objects.values()
            if o["metadata"].get("labels", {}).get(key) == value
        ]

    def create(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if name in self.objects:
            raise AlreadyExistsError(f"slice {name} exists")
        self._keep("create", obj)

    def replace(self, obj: dict[str, Any]) -> None:
        current = self.objects[obj["metadata"]["name"]]["metadata"]["resourceVersion"]
        if obj["metadata"].get("resourceVersion") != current:
            raise AlreadyExistsError("conflict")
        self._keep("replace", obj)

    def delete(self, name: str) -> None:
        del self.objects[name]
        self.writes.append(("delete", name))

    def _keep(self, how: str, obj: dict[str, Any]) -> None:
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(next(self.versions))
        self.objects[obj["metadata"]["name"]] = obj
        self.writes.append((how, obj["metadata"]["name"]))

    def generations(self) -> set[int]:
        return {
            o["spec"]["pool"]["generation"]
            for o in self.objects.values()
            if o["spec"]["driver"] == "radium.io"
        }


@pytest.fixture
def store() -> Store:
    s = Store()
    s.objects[THEIRS["metadata"]["name"]] = copy.deepcopy(THEIRS)  # type: ignore[index]
    return s


def test_the_first_round_creates_one_slice_per_acceptor_at_generation_one(store: Store) -> None:
    done = publish.publish(store, [A0, A1, B0], "radium")
    assert done == publish.Published(1, created=2)
    assert store.generations() == {1}
    assert sorted(n for _, n in store.writes) == [
        "radium.io-radium-acc-a",
        "radium.io-radium-acc-b",
    ]


def test_a_round_with_nothing_changed_writes_nothing_and_keeps_the_generation(
    store: Store,
) -> None:
    publish.publish(store, [A0, B0], "radium")
    store.writes.clear()
    assert publish.publish(store, [B0, A0], "radium") == publish.Published(1)
    assert store.writes == []


def test_a_change_rewrites_every_slice_at_the_next_generation_then_deletes_the_gone(
    store: Store,
) -> None:
    publish.publish(store, [A0, B0], "radium")
    store.writes.clear()
    done = publish.publish(store, [A0, A1], "radium")  # acc-a grew a GPU, acc-b went away
    assert done == publish.Published(2, replaced=1, deleted=1)
    assert store.writes == [
        ("replace", "radium.io-radium-acc-a"),
        ("delete", "radium.io-radium-acc-b"),
    ]
    assert store.generations() == {2}
    kept = store.objects["radium.io-radium-acc-a"]["spec"]
    assert kept["pool"]["resourceSliceCount"] == 1 and len(kept["devices"]) == 2


def test_another_driver_s_slice_is_never_touched(store: Store) -> None:
    publish.publish(store, [A0], "radium")
    publish.publish(store, [], "radium")
    assert store.objects[THEIRS["metadata"]["name"]] == THEIRS  # type: ignore[index]
    assert store.generations() == set()  # ours all deleted


def test_a_slice_changed_by_someone_else_meanwhile_fails_the_round_with_its_conflict(
    store: Store,
) -> None:
    publish.publish(store, [A0], "radium")
    stale = store.list("radium.io/pool=radium")
    store.list = lambda selector: stale  # type: ignore[method-assign]
    store.objects["radium.io-radium-acc-a"]["metadata"]["resourceVersion"] = "99"
    with pytest.raises(AlreadyExistsError):
        publish.publish(store, [A0, A1], "radium")


def test_every_keeps_going_after_a_failed_round() -> None:
    rounds: list[str] = []
    sleeps: list[float] = []

    def round_() -> publish.Published:
        rounds.append("x")
        if len(rounds) == 1:
            raise UnavailableError("pool at 127.0.0.1:1 unavailable")
        return publish.Published(1)

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        publish.every(30, round_, sleep)
    assert (len(rounds), sleeps) == (3, [30, 30, 30])
