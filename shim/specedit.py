"""The one spec-editing step that radium-runtime and containerd-shim-radium-v2 share.

Reading config.json and deciding whether the container asks for Radium is cheap; the config,
logging and the modifiers are imported only for containers that ask.
"""

from __future__ import annotations

from radium import ocispec
from radium.shim import request as request_module

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping, Sequence

    from radium.config import Config


#: containerd's CRI plugin marks a pod's sandbox (pause) container with this annotation.
SANDBOX_ANNOTATION = "io.kubernetes.cri.container-type"


def is_pod_sandbox(spec: Mapping[str, Any]) -> bool:
    """A pod's sandbox is never touched: its containers ask, not the pause process."""
    annotations = spec.get("annotations")
    return isinstance(annotations, dict) and annotations.get(SANDBOX_ANNOTATION) == "sandbox"


def add_radium(
    bundle: str,
    spec: dict[str, Any],
    request: Mapping[str, str],
    config: Config,
    environ: Mapping[str, str],
    agent_hook: Sequence[str] = (),
) -> None:
    """Write ``spec`` back to the bundle with Radium's annotations and hooks for ``request``
    (the node agent's thin hooks with ``agent_hook``: :func:`modifiers.for_request`)."""
    import logging

    from radium.shim import modifiers

    edits = modifiers.for_request(request, config, environ, agent_hook)
    ocispec.write(bundle, modifiers.apply(spec, edits))
    logging.getLogger(__name__).info("bundle %s: Radium hooks and annotations added", bundle)


def edit_bundle(
    bundle: str,
    environ: Mapping[str, str],
    program: str,
    log_file: Callable[[Config], str],
    spec: dict[str, Any] | None = None,
) -> Config | None:
    """Add Radium's hooks and annotations to the bundle when its container asks for Radium.

    Returns the loaded config, or None (and leaves the file untouched) when it asks nothing.
    """
    spec = ocispec.read(bundle) if spec is None else spec
    request = request_module.from_spec(spec)
    if request is None:
        return None
    import logging

    from radium import config as config_module
    from radium import logs

    config = config_module.load(environ=environ)
    # Files only: stdout and stderr belong to runc's or containerd's caller.
    logs.setup(program, log_file(config), stderr_level=logging.CRITICAL + 1)
    add_radium(bundle, spec, request, config, environ)
    return config
