"""The values of radium/constants.py as the fronts that cannot import them spell them: the shell
fronts in bin/ and the native front in C (docs/runtime-front.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from radium import config, constants
from radium.shim import passthrough

ROOT = Path(__file__).resolve().parent.parent
FRONTS = [ROOT / "bin" / "radium-runtime", ROOT / "bin" / "containerd-shim-radium-v2"]
NATIVE = ROOT / "agent" / "runtime_front.c"


@pytest.mark.parametrize("front", FRONTS, ids=lambda p: p.name)
def test_a_shell_front_spells_the_config_path_and_the_annotation_prefix(front: Path) -> None:
    text = front.read_text()
    assert f"config=${{{constants.CONFIG_VARIABLE}:-{constants.CONFIG_PATH}}}" in text
    assert f"-e RADIUM_ -e {constants.ANNOTATION_PREFIX} --" in text


def test_the_native_front_spells_them_too() -> None:
    text = NATIVE.read_text()
    assert f'"{constants.CONFIG_PATH}"' in text
    prefix = re.search(r'"(radium[^"]*/)", (\d+)\)', text)
    assert prefix is not None
    assert prefix.group(1) == constants.ANNOTATION_PREFIX
    assert int(prefix.group(2)) == len(constants.ANNOTATION_PREFIX)
    assert f'getenv("{constants.CONFIG_VARIABLE}")' in text


def test_python_reads_them_from_one_place() -> None:
    assert config.DEFAULT_PATH == passthrough.DEFAULT_CONFIG == constants.CONFIG_PATH
    assert config.ENV_VAR == constants.CONFIG_VARIABLE
