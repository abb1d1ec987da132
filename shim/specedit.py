"""The one spec-editing step that radium-runtime and containerd-shim-radium-v2 share.

Reading config.json and deciding whether the container asks for Radium is cheap; the config,
logging and the modifiers are imported only for containers that ask.
"""

from __future__ import annotations

import os

from radium import ocispec
from radium.shim import request as request_module

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping, Optional, Sequence

    from radium.configtree import Config


__all__ = [
    "add_radium",
    "edit_bundle",
    "log_notes",
    "logged_request",
    "user_request",
]


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


def user_request(
    bundle: str, spec: Mapping[str, Any], notes: list[str], container_id: str = ""
) -> Optional[dict[str, str]]:
    """What the user (not the image) asked of Radium for the container in ``bundle``.

    A spec that mentions no request costs nothing more; one that does has its engine's record
    of the image read (:mod:`radium.shim.image_record`) so that the image's own ``ENV`` and
    annotations are dropped; ``container_id`` defaults to the bundle's name (docker's, and
    containerd's, bundles are named by the container id). Why anything was dropped goes to
    ``notes``. Raises SpecError when only an untrusted environment asks.
    """
    if request_module.from_spec(spec, request_module.NOTHING_SET) is None:
        return None
    from radium.shim import image_record

    container_id = container_id or os.path.basename(os.path.normpath(bundle))
    image = image_record.lookup(bundle, spec, container_id, notes)
    return request_module.from_spec(spec, image, notes)


def logged_request(bundle: str, spec: Mapping[str, Any]) -> Optional[dict[str, str]]:
    """:func:`user_request`, its notes logged (for a caller whose logging is set up)."""
    notes: list[str] = []
    try:
        return user_request(bundle, spec, notes)
    finally:
        log_notes(bundle, notes)


def log_notes(bundle: str, notes: Sequence[str]) -> None:
    """Why a request was read as it was: one info line each."""
    if notes:
        import logging

        for note in notes:
            logging.getLogger(__name__).info("bundle %s: %s", bundle, note)


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
    notes: list[str] = []
    request = user_request(bundle, spec, notes)
    if request is None and not notes:
        return None
    import logging

    from radium import config as config_module
    from radium import logs

    config = config_module.load(environ=environ)
    # Files only: stdout and stderr belong to runc's or containerd's caller.
    logs.setup(program, log_file(config), stderr_level=logging.CRITICAL + 1)
    log_notes(bundle, notes)
    if request is None:
        return None
    add_radium(bundle, spec, request, config, environ)
    return config
