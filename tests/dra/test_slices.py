"""The driver's ResourceSlices (radium.dra.slices) and claims that ask a share of a device's
consumable memory (radium.dra.capacity); the objects validated against the Kubernetes schemas."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from radium.dra import slices
from radium.dra.capacity import mebibytes
from radium.dra.claims import allocation
from radium.errors import SpecError
from tests.dra.claimdata import resource_claim

DEVICES = [
    slices.PoolDevice("acc-b", "GPU-1", "nvidia", "H100 80GB HBM3", 81559),
    slices.PoolDevice("acc-a", "cpu0", "cpu", "x86_64", 4096),
    slices.PoolDevice("acc-b", "GPU-0", "nvidia", "H100 80GB HBM3", 81559),
]
VALIDATE = Path(sys.executable).with_name("kubernetes-validate")


def validate(objects: list[dict[str, Any]], version: str, tmp_path: Path) -> str:
    files = []
    for i, obj in enumerate(objects):
        files.append(tmp_path / f"object{i}.json")
        files[-1].write_text(json.dumps(obj))
    result = subprocess.run(
        [str(VALIDATE), "--strict", "-k", version, *map(str, files)],
        capture_output=True, text=True, cwd=tmp_path, check=False, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_one_slice_per_acceptor_for_every_node_with_consumable_memory() -> None:
    made = slices.slices(DEVICES, "radium", 7)
    assert [s["metadata"]["name"] for s in made] == [
        "radium.io-radium-acc-a",
        "radium.io-radium-acc-b",
    ]
    spec = made[1]["spec"]
    assert spec["driver"] == "radium.io" and spec["allNodes"] is True
    assert spec["pool"] == {"name": "radium", "generation": 7, "resourceSliceCount": 2}
    first = spec["devices"][0]
    assert first["name"] == "acc-b-gpu-0-" + first["name"].rsplit("-", 1)[1]  # folded: hashed
    assert first["allowMultipleAllocations"] is True
    assert first["capacity"] == {"memory": {"value": "81559Mi"}}
    assert first["attributes"]["model"] == {"string": "H100 80GB HBM3"}
    assert made[0]["metadata"]["labels"] == {"radium.io/pool": "radium"}


@pytest.mark.parametrize("version", ["1.34.0", "1.37.0"])
def test_the_slices_are_valid_resource_slices(version: str, tmp_path: Path) -> None:
    hostile = slices.PoolDevice("-Node_A." + "x" * 80, "gpu/0", "v" * 90, "", 1)
    validate(slices.slices([*DEVICES, hostile], "team.example/pool-1", 1), version, tmp_path)


def test_the_validator_refuses_a_slice_with_a_field_the_api_does_not_have(
    tmp_path: Path,
) -> None:
    made = slices.slices(DEVICES[:1], "radium", 1)
    made[0]["spec"]["devices"][0]["capacity"]["memory"]["amount"] = "1Gi"
    with pytest.raises(AssertionError, match="amount"):
        validate(made, "1.34.0", tmp_path)


# The API server's own name rules, which the JSON schemas do not carry (apimachinery's
# validation): a device's name is a DNS label, a slice's a DNS subdomain, a label value ...
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(rf"^{DNS_LABEL.pattern[1:-1]}(\.{DNS_LABEL.pattern[1:-1]})*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def test_every_name_keeps_the_api_server_s_rules_whatever_the_pool_reports() -> None:
    hostile = [
        slices.PoolDevice("-Node_A." + "x" * 80, "gpu/0", "v" * 90, "", 1),
        slices.PoolDevice("ACC", "..", "nvidia", "m" * 65, 1),
    ]
    for made in slices.slices([*DEVICES, *hostile], "Team_Pool", 1):
        name = made["metadata"]["name"]
        assert DNS_SUBDOMAIN.match(name) and len(name) <= 253, name
        value = made["metadata"]["labels"]["radium.io/pool"]
        assert LABEL_VALUE.match(value) and len(value) <= 63, value
        for device in made["spec"]["devices"]:
            assert DNS_LABEL.match(device["name"]) and len(device["name"]) <= 63, device
            assert all(len(a["string"]) <= 64 for a in device["attributes"].values())


@pytest.mark.parametrize(
    ("text", "label"),
    [("acc-a-gpu0", "acc-a-gpu0"), ("a" * 63, "a" * 63)],
)
def test_a_valid_label_is_kept_as_it_is(text: str, label: str) -> None:
    assert slices.dns_label(text) == label


@pytest.mark.parametrize("text", ["GPU-0", "gpu_0", "-gpu-", "a" * 64, "___", "gpu.0"])
def test_any_other_name_is_folded_into_a_label_that_keeps_names_apart(text: str) -> None:
    label = slices.dns_label(text)
    assert len(label) <= 63 and label == label.strip("-")
    assert set(label) <= set("abcdefghijklmnopqrstuvwxyz0123456789-")
    assert slices.dns_label(text.upper() + "x") != label


@pytest.mark.parametrize(
    ("quantity", "mib"),
    [("20Gi", 20480), ("512Mi", 512), ("1.5G", 1431), ("1048576", 1), ("1", 1), ("1Ki", 1)],
)
def test_memory_quantities_in_mebibytes_rounded_up(quantity: str, mib: int) -> None:
    assert mebibytes(quantity, "claim x") == mib


@pytest.mark.parametrize("quantity", ["20GB", "-1Gi", "0", "1e9", "", 5, None, "0.0Mi"])
def test_what_is_not_a_memory_quantity_is_refused_naming_it(quantity: object) -> None:
    with pytest.raises(SpecError, match="claim x"):
        mebibytes(quantity, "claim x")


@pytest.mark.parametrize(
    ("kwargs", "request_"),
    [
        ({}, {"radium.io/gpus": "1"}),  # no capacity asked: the whole device
        ({"memory": "20Gi"}, {"radium.io/memory": "20480"}),
        ({"memory": "20Gi", "consumed": "24Gi"}, {"radium.io/memory": "24576"}),  # rounded up
    ],
)
def test_a_claim_asking_memory_capacity_leases_what_the_scheduler_consumed(
    kwargs: dict[str, Any], request_: dict[str, str]
) -> None:
    claim, obj = resource_claim(**kwargs)
    assert allocation(obj, claim).request == request_


def test_a_memory_share_the_scheduler_did_not_record_or_of_two_devices_is_refused() -> None:
    claim, obj = resource_claim(memory="20Gi", consumed="")
    with pytest.raises(SpecError, match="did not record"):
        allocation(obj, claim)
    claim, obj = resource_claim(memory="20Gi", devices=2)
    with pytest.raises(SpecError, match="share is of one device, not 2"):
        allocation(obj, claim)


def test_a_share_asked_both_as_capacity_and_in_the_config_is_refused() -> None:
    claim, obj = resource_claim(memory="20Gi", parameters={"fraction": 0.5})
    with pytest.raises(SpecError, match="asks its share twice, as capacity and in its config"):
        allocation(obj, claim)


def test_the_capacity_claims_are_valid_resource_claims(tmp_path: Path) -> None:
    objects = [
        resource_claim(memory="20Gi")[1],
        resource_claim(memory="20Gi", consumed="24Gi")[1],
        resource_claim(memory="20Gi", parameters={"fraction": 0.5})[1],
    ]
    validate(objects, "1.34.0", tmp_path)
