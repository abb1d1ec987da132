"""What runs on every container start must stay light: no gRPC, no protobuf, no asyncio."""

from __future__ import annotations

import json
import subprocess
import sys

HOT_MODULES = [
    "radium.shim.runtime_main",
    "radium.shim.runtime",
    "radium.shim.passthrough",
    "radium.shim.containerd",
    "radium.shim.specedit",
    "radium.shim.modifiers",
    "radium.agentclient",
    "radium.hooks.main",
    "radium.hooks.inject",
    "radium.hooks.cleanup",
    "radium.hooks.stages",
]
HEAVY = ("grpc", "google.protobuf", "asyncio", "psutil", "tomlkit")


def _isolated(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by this Python in isolated mode (no user site, no environment)."""
    return subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True
    )


PROBE = """
import importlib, json, sys
for name in {hot!r}:
    importlib.import_module(name)
heavy = {heavy!r}
loaded = [m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in heavy)]
print(json.dumps(sorted(loaded)))
"""


def test_start_path_never_imports_heavy_modules() -> None:
    code = PROBE.format(hot=HOT_MODULES, heavy=HEAVY)
    result = _isolated(code)
    assert json.loads(result.stdout) == []


def test_the_probe_sees_heavy_imports() -> None:
    code = PROBE.format(hot=["radium.poolclient"], heavy=HEAVY)
    result = _isolated(code)
    assert "grpc" in json.loads(result.stdout)


def test_the_agent_imports_no_metrics_library_unless_it_serves_metrics() -> None:
    # The hook may start the agent (autostart) and wait for it; prometheus-client alone
    # takes some 60 ms to import, and agent.metrics is off by default.
    code = "import sys, radium.agent.process; print('prometheus_client' in sys.modules)"
    result = _isolated(code)
    assert result.stdout.strip() == "False"


def test_the_poststop_hook_imports_none_of_radium_but_itself() -> None:
    # It runs as every container ends (without the agent): the start's modules stay unloaded.
    code = "import json, sys, radium.hooks.cleanup; print(json.dumps(sorted(sys.modules)))"
    result = _isolated(code)
    ours = [m for m in json.loads(result.stdout) if m.startswith("radium")]
    assert ours == ["radium", "radium.hooks", "radium.hooks.cleanup"]
