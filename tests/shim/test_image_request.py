"""Only the user asks: the image's own ENV and annotations are dropped (issue 34, hole 2)."""

from __future__ import annotations

from typing import Any

import pytest

from radium.errors import SpecError
from radium.shim.request import NOTHING_SET, ImageSet, from_spec

HOSTILE_ENV = {"RADIUM_GPUS": "2", "RADIUM_PRIORITY": "inference", "RADIUM_WAIT": "3600"}
HOSTILE = ImageSet("docker", HOSTILE_ENV, {})


def spec(env: list[str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"process": {"env": ["PATH=/bin", *(env or [])]}}
    if annotations is not None:
        result["annotations"] = annotations
    return result


def merged(*user: str) -> list[str]:
    """docker's process.env: the image's ENV, each overridden by the user's -e."""
    env = dict(HOSTILE_ENV)
    env.update(item.split("=", 1) for item in user)
    return [f"{k}={v}" for k, v in env.items()]


def test_the_images_env_alone_asks_nothing_and_says_why() -> None:
    notes: list[str] = []
    assert from_spec(spec(merged()), HOSTILE, notes) is None
    assert sorted(notes) == [
        "RADIUM_GPUS=2 is the image's ENV (or equal to it): ignored",
        "RADIUM_PRIORITY=inference is the image's ENV (or equal to it): ignored",
        "RADIUM_WAIT=3600 is the image's ENV (or equal to it): ignored",
    ]


def test_the_same_env_trusted_blindly_would_take_the_pool() -> None:
    """The probe's other side: with every value read as the user's, the image asks."""
    assert from_spec(spec(merged()), NOTHING_SET) == {
        "radium.io/gpus": "2",
        "radium.io/priority": "inference",
        "radium.io/wait": "3600",
    }


def test_what_the_user_changed_asks_and_the_rest_of_the_image_does_not() -> None:
    assert from_spec(spec(merged("RADIUM_GPUS=1")), HOSTILE) == {"radium.io/gpus": "1"}
    assert from_spec(spec(merged("RADIUM_GPUS=1", "RADIUM_PRIORITY=batch")), HOSTILE) == {
        "radium.io/gpus": "1",
        "radium.io/priority": "batch",
    }


def test_a_user_value_equal_to_the_images_is_read_as_the_images() -> None:
    notes: list[str] = []
    assert from_spec(spec(merged("RADIUM_GPUS=2")), HOSTILE, notes) is None
    assert "RADIUM_GPUS=2 is the image's ENV (or equal to it): ignored" in notes


def test_image_annotations_are_dropped_and_the_users_kept() -> None:
    image = ImageSet("podman", {}, {"radium.io/gpus": "2", "radium.io/extra": "x"})
    notes: list[str] = []
    request = from_spec(
        spec([], {"radium.io/gpus": "2", "radium.io/extra": "x", "radium.io/priority": "train"}),
        image,
        notes,
    )
    assert request == {"radium.io/priority": "train"}
    assert "radium.io/gpus=2 is the image's annotation (or equal to it): ignored" in notes
    assert from_spec(spec([], {"radium.io/gpus": "2"}), image) is None
    assert from_spec(spec([], {"radium.io/gpus": "1"}), image) == {"radium.io/gpus": "1"}


def test_without_the_engines_record_the_environment_never_asks() -> None:
    with pytest.raises(SpecError) as info:
        from_spec(spec(["RADIUM_GPUS=1", "RADIUM_WAIT=5"]), None)
    assert info.value.message.startswith(
        "RADIUM_GPUS, RADIUM_WAIT in the container's environment cannot be told from the "
        "image's ENV under this engine"
    )
    assert "radium.io/gpus=..." in info.value.one_line()


def test_without_the_engines_record_annotations_ask_and_the_environment_is_ignored() -> None:
    notes: list[str] = []
    request = from_spec(spec(merged(), {"radium.io/gpus": "1"}), None, notes)
    assert request == {"radium.io/gpus": "1"}
    assert notes == [
        "RADIUM_GPUS, RADIUM_PRIORITY, RADIUM_WAIT ignored: under this engine the environment "
        "may be the image's"
    ]


def test_radium_variables_that_are_not_requests_are_never_refused() -> None:
    assert from_spec(spec(["RADIUM_DEBUG=1", "RADIUM_DP_SOCKET=/x"]), None) is None


def test_the_edited_spec_carries_the_users_request_and_none_of_the_images() -> None:
    """The agent's hook reads the OCI state's annotations: the image's must be gone from it."""
    from radium.shim.modifiers import AddAnnotations

    image = ImageSet("podman", {}, {"radium.io/priority": "inference"})
    edited = spec(["RADIUM_GPUS=1"], {"radium.io/priority": "inference", "org.x": "y"})
    request = from_spec(edited, image)
    assert request == {"radium.io/gpus": "1"}
    AddAnnotations(request)(edited)
    assert edited["annotations"] == {"org.x": "y", "radium.io/gpus": "1"}
    AddAnnotations(request)(edited)  # idempotent
    assert from_spec(edited, image) == request
