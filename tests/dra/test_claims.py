"""A claim's allocation read as Radium's lease request."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from radium.dra.claims import Claim, allocation
from radium.errors import SpecError
from tests.dra.claimdata import resource_claim


def test_whole_devices_ask_for_that_many_gpus() -> None:
    claim, obj = resource_claim(devices=2)
    found = allocation(obj, claim)
    assert found.request == {"radium.io/gpus": "2"}
    assert [(r.request, r.pool, r.device) for r in found.results] == [
        ("gpu", "node-a", "gpu-0"),
        ("gpu", "node-a", "gpu-1"),
    ]


@pytest.mark.parametrize(
    ("parameters", "asked"),
    [
        ({"fraction": 0.25}, {"radium.io/fraction": "0.25"}),
        ({"fraction": 1}, {"radium.io/fraction": "1.0"}),
        ({"memory": 8192}, {"radium.io/memory": "8192"}),
    ],
)
def test_a_share_of_one_device(parameters: dict[str, Any], asked: dict[str, str]) -> None:
    claim, obj = resource_claim(parameters=parameters)
    assert allocation(obj, claim).request == asked


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"fraction": 2}, "fraction must be in (0, 1], got 2"),
        ({"fraction": 0}, "fraction must be in (0, 1], got 0"),
        ({"fraction": "half"}, "fraction must be a number in (0, 1], got 'half'"),
        ({"memory": -1}, "memory must be a positive number of MiB, got -1"),
        ({"gpus": 3}, "unknown parameter 'gpus' (known: fraction, memory)"),
    ],
)
def test_bad_parameters_are_one_line_naming_the_claim(
    parameters: dict[str, Any], message: str
) -> None:
    claim, obj = resource_claim(parameters=parameters)
    with pytest.raises(SpecError) as failed:
        allocation(obj, claim)
    assert failed.value.one_line() == f"claim default/gpu-claim: {message}"


def test_claims_radium_cannot_serve() -> None:
    claim, obj = resource_claim(driver="gpu.nvidia.com")
    with pytest.raises(SpecError, match=r"has no radium\.io device allocated"):
        allocation(obj, claim)
    claim, obj = resource_claim()
    del obj["status"]
    with pytest.raises(SpecError, match="is not allocated"):
        allocation(obj, claim)
    with pytest.raises(SpecError, match="it was replaced"):
        allocation(obj, Claim("default", "gpu-claim", "another-uid"))
    claim, obj = resource_claim(devices=2, parameters={"fraction": 0.5})
    with pytest.raises(SpecError, match="a fraction or memory share is of one device, not 2"):
        allocation(obj, claim)


def test_the_test_claims_are_valid_resource_claims(tmp_path: Path) -> None:
    """What the tests' API server stand-in serves has the real schema (kubernetes 1.34)."""
    files = []
    for i, kwargs in enumerate([{}, {"devices": 2}, {"parameters": {"fraction": 0.5}}]):
        _, obj = resource_claim(**kwargs)  # type: ignore[arg-type]
        files.append(tmp_path / f"claim{i}.json")
        files[-1].write_text(json.dumps(obj))
    validate = Path(sys.executable).with_name("kubernetes-validate")
    result = subprocess.run(
        [str(validate), "--strict", "-k", "1.34.0", *map(str, files)],
        capture_output=True, text=True, cwd=tmp_path, check=False, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
