"""``radium bundles build|verify``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from radium import config as config_module
from radium.errors import NoBundleError

__all__ = ["register"]


def _build(args: argparse.Namespace) -> int:
    from radium.packaging import bundles

    out = Path(args.out or config_module.load().bundles.dir)
    for manifest in bundles.build(out, libcs=args.libc or bundles.DEFAULT_LIBCS, arch=args.arch):
        if args.json:
            print(manifest.to_json())
        else:
            digest = manifest.content_sha256[:12]
            print(f"built {out / manifest.name}  ({digest}, {len(manifest.files)} files)")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from radium.packaging import bundles
    from radium.packaging.manifest import MANIFEST

    root = Path(args.dir or config_module.load().bundles.dir)
    names = (
        sorted(p.name for p in root.iterdir() if (p / MANIFEST).exists()) if root.is_dir() else []
    )
    if not names:
        raise NoBundleError(f"no Radium bundles in {root}", hint="run 'radium bundles build'")
    results = [bundles.verify(root / name) for name in names]
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for manifest in results:
            print(
                f"ok  {manifest['name']}  {manifest['version']}  {manifest['content_sha256'][:12]}"
            )
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add this module's subcommands and their options to the ``radium`` command line."""
    parser = commands.add_parser("bundles", help="build and check the client bundles")
    actions = parser.add_subparsers(dest="bundles_command", required=True, metavar="ACTION")
    build = actions.add_parser("build", help="build the client bundles from this installation")
    build.add_argument("--out", help="output directory (default: bundles.dir from the config)")
    build.add_argument(
        "--libc", action="append", choices=("glibc", "musl"), help="only this libc (repeatable)"
    )
    build.add_argument("--arch", default="", help="architecture name (default: this machine's)")
    build.add_argument("--json", action="store_true", help="print the manifests as JSON")
    build.set_defaults(func=_build)
    verify = actions.add_parser("verify", help="check installed bundles against their manifests")
    verify.add_argument("--dir", help="bundles directory (default: bundles.dir from the config)")
    verify.add_argument("--json", action="store_true", help="print the manifests as JSON")
    verify.set_defaults(func=_verify)
