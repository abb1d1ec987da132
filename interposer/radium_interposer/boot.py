"""Activation, run by the ``radium.pth`` line at every Python start in a Radium container.

It must cost next to nothing: it reads two environment variables (and the container's request
when the hook wrote one) and installs the import hook only when something is to be remoted.
"""

import os
import sys

__all__ = ["activate"]


def _requested() -> "tuple[list[str], list[str]]":
    """What to remote (modules and module:function entries), and the environment variables
    remoted functions may see (patterns)."""
    entries = [e for e in os.environ.get("RADIUM_REMOTE", "").split(",") if e.strip()]
    environment: list[str] = []
    split = os.environ.get("RADIUM_SPLIT", "")
    if not entries and not split:
        import json

        from radium_interposer import RUNTIME_DIR

        try:
            with open(os.path.join(RUNTIME_DIR, "info.json"), encoding="utf-8") as f:
                request = json.load(f).get("request", {})
        except (OSError, ValueError, AttributeError):
            return [], []
        entries = [e for e in str(request.get("radium.io/remote", "")).split(",") if e.strip()]
        split = str(request.get("radium.io/split", ""))
    if split:
        from radium_interposer.split_file import read_split

        listed, environment = read_split(split)
        entries.extend(listed)
    return entries, environment


def activate() -> None:
    """Install the remote finder when the process asks for remoting; never break a Python start."""
    try:
        entries, environment = _requested()
        if entries:
            from radium_interposer.finder import install

            install(entries, environment)
    except Exception as exc:  # a broken request must not break every Python start
        sys.stderr.write(f"radium: remoting is off: {exc}\n")


activate()
