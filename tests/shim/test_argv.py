from __future__ import annotations

import pytest

from radium.shim.argv import parse


@pytest.mark.parametrize(
    ("argv", "bundle"),
    [
        (["create", "--bundle", "/b", "id"], "/b"),
        (["create", "-b", "/b", "id"], "/b"),
        (["create", "--bundle=/b", "id"], "/b"),
        (["create", "-b=/b", "id"], "/b"),
        (["create", "-bundle", "/b", "id"], "/b"),
        (["create", "--pid-file", "/p", "--console-socket", "/s", "--bundle", "/b", "id"], "/b"),
        (["create", "--pid-file", "-b", "id"], "/cwd"),  # "-b" is the pid file's name here
        (["create", "id"], "/cwd"),
        (["create", "--bundle", "rel", "id"], "/cwd/rel"),
        (["run", "-d", "--bundle", "/b", "id"], "/b"),
        (
            [
                "--root",
                "/run/docker/runtime-runc/moby",
                "--log",
                "/l.json",
                "--log-format",
                "json",
                "--systemd-cgroup",
                "create",
                "--bundle",
                "/b",
                "--pid-file",
                "/p",
                "id",
            ],
            "/b",
        ),
        (["--debug", "--root=/r", "create", "--no-pivot", "-b", "/b", "id"], "/b"),
    ],
)
def test_bundle_is_found(argv: list[str], bundle: str) -> None:
    parsed = parse(argv, cwd="/cwd")
    assert parsed.edits_spec
    assert parsed.bundle == bundle


def test_global_log_flags() -> None:
    parsed = parse(["--log", "/l.json", "--log-format=json", "create", "id"], cwd="/")
    assert (parsed.log_file, parsed.log_format, parsed.subcommand) == ("/l.json", "json", "create")


@pytest.mark.parametrize(
    ("argv", "subcommand"),
    [
        (["start", "id"], "start"),
        (["--root", "create", "delete", "id"], "delete"),  # "create" is --root's value
        (["--version"], ""),
        (["features"], "features"),
        (["--log", "/x", "state", "id"], "state"),
        ([], ""),
    ],
)
def test_other_subcommands_pass_through(argv: list[str], subcommand: str) -> None:
    parsed = parse(argv, cwd="/")
    assert parsed.subcommand == subcommand
    assert not parsed.edits_spec
    assert parsed.bundle is None
