"""The ``radium`` command line."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Optional, Sequence

from radium import __version__, logs
from radium import config as config_module
from radium.errors import RadiumError

log = logging.getLogger("radium.cli")


def _bundles_build(args: argparse.Namespace) -> int:
    from radium.packaging import bundles

    out = Path(args.out or config_module.load().bundles.dir)
    for manifest in bundles.build(out, libcs=args.libc or bundles.DEFAULT_LIBCS, arch=args.arch):
        if args.json:
            print(manifest.to_json())
        else:
            digest = manifest.content_sha256[:12]
            print(f"built {out / manifest.name}  ({digest}, {len(manifest.files)} files)")
    return 0


def _bundles_verify(args: argparse.Namespace) -> int:
    from radium.packaging import bundles
    from radium.packaging.manifest import MANIFEST

    root = Path(args.dir or config_module.load().bundles.dir)
    names = (
        sorted(p.name for p in root.iterdir() if (p / MANIFEST).exists()) if root.is_dir() else []
    )
    if not names:
        raise RadiumError(f"no Radium bundles in {root}", hint="run 'radium bundles build'")
    results = [bundles.verify(root / name) for name in names]
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for manifest in results:
            print(
                f"ok  {manifest['name']}  {manifest['version']}  {manifest['content_sha256'][:12]}"
            )
    return 0


def _setup(args: argparse.Namespace) -> int:
    from radium.engines import setup

    return setup.run(
        args.engine,
        remove=args.remove,
        dry_run=args.dry_run,
        set_as_default=args.set_as_default,
        path=args.config,
        dropin=args.dropin,
        restart_daemon=args.restart,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="radium", description="Remote, pooled GPUs for unmodified containers."
    )
    parser.add_argument("--version", action="version", version=f"radium {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    bundles_parser = commands.add_parser("bundles", help="build and check the client bundles")
    bundle_commands = bundles_parser.add_subparsers(
        dest="bundles_command", required=True, metavar="ACTION"
    )
    build = bundle_commands.add_parser(
        "build", help="build the client bundles from this installation"
    )
    build.add_argument("--out", help="output directory (default: bundles.dir from the config)")
    build.add_argument(
        "--libc", action="append", choices=("glibc", "musl"), help="only this libc (repeatable)"
    )
    build.add_argument("--arch", default="", help="architecture name (default: this machine's)")
    build.add_argument("--json", action="store_true", help="print the manifests as JSON")
    build.set_defaults(func=_bundles_build)
    verify = bundle_commands.add_parser(
        "verify", help="check installed bundles against their manifests"
    )
    verify.add_argument("--dir", help="bundles directory (default: bundles.dir from the config)")
    verify.add_argument("--json", action="store_true", help="print the manifests as JSON")
    verify.set_defaults(func=_bundles_verify)

    setup = commands.add_parser(
        "setup",
        help="configure a container engine for Radium",
        description="Write the engine's configuration for Radium, idempotently, with a backup.",
    )
    setup.add_argument("engine", choices=("docker", "containerd", "crio", "podman"))
    setup.add_argument(
        "--remove", action="store_true", help="take Radium's configuration out again"
    )
    setup.add_argument(
        "--dry-run", action="store_true", help="print the resulting files, change nothing"
    )
    setup.add_argument(
        "--set-as-default", action="store_true", help="make radium the default runtime"
    )
    setup.add_argument(
        "--config",
        type=Path,
        help="docker: daemon.json; containerd: config.toml; podman: the hooks.d directory",
    )
    setup.add_argument("--dropin", type=Path, help="containerd, crio: the drop-in file to write")
    setup.add_argument("--restart", action="store_true", help="restart the daemon through systemd")
    setup.set_defaults(func=_setup)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    logs.setup("radium", "", stderr_level=logging.WARNING)
    try:
        return int(args.func(args))
    except RadiumError as exc:
        log.error("%s", exc.one_line())
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
