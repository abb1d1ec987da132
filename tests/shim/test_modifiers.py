from __future__ import annotations

import copy
import os
import sys
import sysconfig
from typing import Any

from radium.configstart import RuntimeConfig
from radium.configtree import Config
from radium.shim import modifiers
from tests import oci_schema


def test_untouched_when_nothing_asked(runc_spec: dict[str, Any]) -> None:
    assert modifiers.for_spec(runc_spec, Config(), {}) is None


def test_adds_hooks_and_annotations_and_stays_valid(runc_spec: dict[str, Any]) -> None:
    runc_spec["process"]["env"] += ["RADIUM_GPUS=1", "LD_PRELOAD=/evil.so", "PYTHONPATH=/evil"]
    edits = modifiers.for_spec(
        runc_spec, Config(), {"RADIUM_CONFIG": "/etc/r.toml", "LD_PRELOAD": "x"}
    )
    assert edits is not None
    spec = modifiers.apply(runc_spec, edits)
    oci_schema.validate(spec)
    assert spec["annotations"] == {"radium.io/gpus": "1"}
    assert spec["x-future-field"] == {"kept": True}
    (prestart,) = spec["hooks"]["prestart"]
    (poststop,) = spec["hooks"]["poststop"]
    assert prestart["path"] == sys.executable
    hook_script = os.path.join(sysconfig.get_path("scripts"), "radium-hook")
    assert prestart["args"] == [sys.executable, "-I", hook_script, "prestart"]
    assert os.access(hook_script, os.X_OK)
    assert poststop["args"][-1] == "poststop"
    # The hook's environment is ours alone: nothing from the container or the engine's LD_*.
    assert prestart["env"] == [modifiers.HOOK_PATH_ENV, "RADIUM_CONFIG=/etc/r.toml"]


def test_idempotent_and_keeps_existing_hooks(runc_spec: dict[str, Any]) -> None:
    runc_spec["hooks"] = {"prestart": [{"path": "/usr/bin/other-hook"}]}
    runc_spec["annotations"] = {"radium.io/gpus": "1", "keep": "me"}
    edits = modifiers.for_spec(runc_spec, Config(), {})
    assert edits is not None
    once = modifiers.apply(runc_spec, edits)
    twice = modifiers.apply(copy.deepcopy(once), edits)
    assert once == twice
    assert [h["path"] for h in once["hooks"]["prestart"]] == ["/usr/bin/other-hook", sys.executable]
    assert once["annotations"]["keep"] == "me"
    oci_schema.validate(once)


def test_configured_hook_command() -> None:
    config = Config(runtime=RuntimeConfig(hook_command=("/usr/bin/radium-hook",)))
    spec: dict[str, Any] = {"ociVersion": "1.0.2", "annotations": {"radium.io/gpus": "1"}}
    edits = modifiers.for_spec(spec, config, {})
    assert edits is not None
    modifiers.apply(spec, edits)
    assert spec["hooks"]["prestart"][0]["args"] == ["/usr/bin/radium-hook", "prestart"]


def test_schema_check_can_fail(runc_spec: dict[str, Any]) -> None:
    import jsonschema
    import pytest

    runc_spec["hooks"] = {"prestart": [{"args": ["no path"]}]}
    with pytest.raises(jsonschema.ValidationError):
        oci_schema.validate(runc_spec)
