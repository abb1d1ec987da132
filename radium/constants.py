"""Values more than one part of Radium spells: kept here once, for every Python caller.

The shell fronts (``bin/radium-runtime``, ``bin/containerd-shim-radium-v2``) and the C fronts
(``agent/*.c``) cannot import them; ``tests/test_constants.py`` holds their spellings equal.
Nothing is imported here: the container start path imports this module.
"""

__all__ = ["ANNOTATION_PREFIX", "CONFIG_PATH", "CONFIG_VARIABLE", "ENGINES", "WORKER_ENGINES"]

#: The config file every Radium program reads unless ``RADIUM_CONFIG`` names another.
CONFIG_PATH = "/etc/radium/config.toml"
#: The environment variable that names another config file.
CONFIG_VARIABLE = "RADIUM_CONFIG"
#: What a container's OCI annotations that ask Radium for something begin with.
ANNOTATION_PREFIX = "radium.io/"
#: The container engines ``radium setup`` wires the runtime into.
ENGINES = ("docker", "containerd", "crio", "podman")
#: The engines an acceptor pulls images with (and, docker, runs container-mode workers on).
WORKER_ENGINES = ("docker", "containerd")
