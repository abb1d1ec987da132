from __future__ import annotations

import re
from typing import Any

import pytest

from radium.errors import SpecError
from radium.shim.request import NOTHING_SET, from_spec


def spec(env: list[str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"process": {"env": ["PATH=/bin", *(env or [])]}}
    if annotations is not None:
        result["annotations"] = annotations
    return result


def test_nothing_asked() -> None:
    assert from_spec(spec(), NOTHING_SET) is None
    assert from_spec(spec(annotations={"io.kubernetes.x": "y"}), NOTHING_SET) is None
    assert from_spec({}, NOTHING_SET) is None


def test_env_request_becomes_annotations() -> None:
    request = from_spec(
        spec(["RADIUM_GPUS=2", "RADIUM_REMOTE=torch,numpy.linalg", "RADIUM_FRACTION=0.5"]),
        NOTHING_SET,
    )
    assert request == {
        "radium.io/gpus": "2",
        "radium.io/remote": "torch,numpy.linalg",
        "radium.io/fraction": "0.5",
    }


def test_annotation_wins_over_env_and_unknown_radium_annotations_are_kept() -> None:
    request = from_spec(
        spec(["RADIUM_GPUS=2"], {"radium.io/gpus": "1", "radium.io/extra": "x"}), NOTHING_SET
    )
    assert request == {"radium.io/gpus": "1", "radium.io/extra": "x"}


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ("RADIUM_GPUS=-1", "RADIUM_GPUS must be a whole number"),
        ("RADIUM_GPUS=two", "RADIUM_GPUS must be a whole number"),
        ("RADIUM_FRACTION=0", "RADIUM_FRACTION must be a GPU fraction in (0, 1]"),
        ("RADIUM_FRACTION=1.5", "RADIUM_FRACTION must be a GPU fraction"),
        ("RADIUM_FRACTION=nan", "RADIUM_FRACTION must be a GPU fraction"),
        ("RADIUM_MEMORY=0", "RADIUM_MEMORY must be GPU memory in MiB"),
        ("RADIUM_WAIT=-1", "RADIUM_WAIT must be seconds to wait for capacity, 0 to 3600"),
        ("RADIUM_WAIT=nan", "RADIUM_WAIT must be seconds to wait"),
        ("RADIUM_PRIORITY=urgent", "RADIUM_PRIORITY must be a priority class: inference or"),
    ],
)
def test_bad_values_are_named(env: str, message: str) -> None:
    with pytest.raises(SpecError) as info:
        from_spec(spec([env]), NOTHING_SET)
    assert message in info.value.message


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({"radium.io/gpus": "2"}, {"gpus": 2}),
        ({"radium.io/fraction": "0.25", "radium.io/queue": "q"}, {"fraction": 0.25, "queue": "q"}),
        ({"radium.io/memory": "512"}, {"memory_mib": 512}),
        ({"radium.io/remote": "torch"}, {"gpus": 1}),
        ({"radium.io/gpus": "0", "radium.io/remote": "torch"}, None),
        (
            {"radium.io/gpus": "1", "radium.io/image": "reg/img:1", "radium.io/worker": "process"},
            {"gpus": 1, "image": "reg/img:1", "worker": "process"},
        ),
        (
            {"radium.io/fraction": "0.5", "radium.io/queue": "a", "radium.io/priority": "build"},
            {"fraction": 0.5, "queue": "a", "priority": "build"},
        ),
        ({"radium.io/gpus": "1", "radium.io/wait": "90"}, {"gpus": 1, "wait_seconds": 90.0}),
    ],
)
def test_allocation_from_annotations(
    annotations: dict[str, str], expected: dict[str, object] | None
) -> None:
    from radium.shim.request import allocation

    defaults = {"gpus": 0, "fraction": 0.0, "memory_mib": 0, "queue": "", "priority": ""}
    defaults.update(wait_seconds=0.0, image="", worker="")
    assert allocation(annotations) == (None if expected is None else {**defaults, **expected})


def test_allocation_checks_like_the_wrapper() -> None:
    from radium.shim.request import allocation

    with pytest.raises(
        SpecError, match=r"radium.io/fraction must be a GPU fraction in \(0, 1\], got '3'"
    ):
        allocation({"radium.io/fraction": "3"})


def test_the_hook_knows_the_pool_s_priority_classes() -> None:
    from radium.pool.model import PRIORITY_CLASSES
    from radium.shim.request import PRIORITIES

    assert sorted(PRIORITIES) == sorted(PRIORITY_CLASSES)


@pytest.mark.parametrize(
    ("annotations", "seconds"),
    [({"radium.io/wait": "90"}, 90.0), ({}, 0.0), ({"radium.io/wait": "soon"}, 0.0),
     ({"radium.io/wait": "7200"}, 0.0)],
)  # fmt: skip
def test_the_wait_the_hook_and_wrapper_allow_for(
    annotations: dict[str, str], seconds: float
) -> None:
    from radium.shim import modifiers
    from radium.shim.request import wait_seconds

    assert wait_seconds(annotations) == seconds
    hooks = modifiers.for_request(annotations, modifiers.config_module.Config(), {})[1]
    assert isinstance(hooks, modifiers.AddHooks)
    assert hooks.timeout == modifiers.HOOK_TIMEOUT_SECONDS + seconds


@pytest.mark.parametrize(
    "name_key", ["io.kubernetes.cri.container-name", "io.kubernetes.container.name"]
)
def test_a_pod_names_the_containers_that_ask(name_key: str) -> None:
    pod = {"radium.io/gpus": "1", "radium.io/containers": "app, trainer"}
    for name, asks in (("app", True), ("trainer", True), ("sidecar", False), ("ap", False)):
        request = from_spec(spec(annotations={**pod, name_key: name}), NOTHING_SET)
        assert (request is not None) is asks, name
    # Outside a CRI pod there is no container name to match: the request stands.
    assert from_spec(spec(annotations=pod), NOTHING_SET) == pod


@pytest.mark.parametrize(
    "marks",
    [
        {"io.kubernetes.cri.container-type": "sandbox"},
        {"io.kubernetes.cri-o.ContainerType": "sandbox"},
    ],
)
def test_a_pod_sandbox_never_asks(marks: dict[str, str]) -> None:
    # Pod annotations reach the pause container too (containerd's pod_annotations, CRI-O).
    pod = {"radium.io/gpus": "1", "radium.io/remote": "numpy"}
    assert from_spec(spec(annotations={**pod, **marks}), NOTHING_SET) is None
    container = {"io.kubernetes.cri.container-type": "container"}
    assert from_spec(spec(annotations={**pod, **container}), NOTHING_SET) == pod


UID = "5b0f1d1c-39a3-4f3e-9d5e-2a4c7c0b6a11"
CDI = {f"cdi.k8s.io/radium.io_{UID}": f"radium.io/claim={UID}"}


def test_a_containers_dra_claim_comes_from_kubelets_cdi_annotation() -> None:
    pod = {"radium.io/remote": "numpy"}
    assert from_spec(spec(annotations={**pod, **CDI}), NOTHING_SET) == {
        "radium.io/remote": "numpy",
        "radium.io/claim": UID,
    }
    # Another vendor's CDI device is none of Radium's business.
    other = {"cdi.k8s.io/gpu.nvidia.com_x": "nvidia.com/gpu=0"}
    assert from_spec(spec(annotations=other), NOTHING_SET) is None
    # The request the runtime wrote back (radium.io/claim beside the CDI annotation) reads the same.
    written = {**pod, **CDI, "radium.io/claim": UID}
    assert from_spec(spec(annotations=written), NOTHING_SET) == {**pod, "radium.io/claim": UID}


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({"radium.io/claim": UID}, "is not the container's claim: a pod uses a claim through"),
        ({**CDI, "radium.io/claim": "another"}, "radium.io/claim=another is not the container's"),
        (
            {**CDI, "cdi.k8s.io/radium.io_b": "radium.io/claim=b"},
            "the container has 2 radium.io claims; it may use one",
        ),
        ({"cdi.k8s.io/radium.io_x": "radium.io/claim=../x"}, "names a bad claim uid '../x'"),
        ({**CDI, "radium.io/gpus": "1"}, "radium.io/gpus and the container's DRA claim both ask"),
    ],
)
def test_a_claim_no_kubelet_gave_is_refused(annotations: dict[str, str], message: str) -> None:
    with pytest.raises(SpecError, match=re.escape(message)):
        from_spec(spec(annotations=annotations), NOTHING_SET)
