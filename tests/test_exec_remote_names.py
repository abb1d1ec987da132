"""What ``radium exec`` and ``radium run`` accept as ``--remote`` and ``--split``: the
interposer's own grammar, checked before anything is leased (issue 35, item 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from radium import remotenames
from radium.errors import UsageError


def test_modules_are_checked_functions_are_the_users_own() -> None:
    remote = ["numpy,torch.nn", " app.model:train_step ", "numpy.linalg"]
    assert remotenames.entries(remote) == ["numpy", "numpy.linalg", "torch.nn"]


@pytest.mark.parametrize("entry", ["1bad", "numpy.", ".numpy", "a-b", "mod:1f", "mod:f:g", "é x"])
def test_a_malformed_remote_entry_is_one_line_naming_it(entry: str) -> None:
    with pytest.raises(UsageError) as raised:
        remotenames.entries(["numpy", entry])
    assert raised.value.message == (
        f"--remote {entry.strip()!r} is neither a module nor module:function "
        f"({remotenames.GRAMMAR})"
    )


def test_the_split_file_s_modules_are_checked_too(tmp_path: Path) -> None:
    split = tmp_path / "split.toml"
    split.write_text('modules = ["torch"]\nfunctions = ["train:step"]\n')
    assert remotenames.entries(["numpy"], str(split)) == ["numpy", "torch"]
    split.write_text('modules = ["1bad"]\n')
    with pytest.raises(UsageError, match="neither a module nor module:function"):
        remotenames.entries([], str(split))
    split.write_text("modules = [\n")
    with pytest.raises(UsageError, match=f"--split {split}: split file {split}"):
        remotenames.entries([], str(split))


def test_a_split_file_that_is_missing_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(UsageError) as raised:
        remotenames.entries([], str(missing))
    assert raised.value.message == f"--split {missing}: No such file or directory"


def test_radium_run_refuses_a_malformed_split_file_before_docker(tmp_path: Path) -> None:
    from radium.dockerrun import parse

    split = tmp_path / "split.toml"
    split.write_text('modules = ["torch", "2fast"]\n')
    with pytest.raises(UsageError, match="'2fast' is neither a module nor module:function"):
        parse(["--split", str(split), "img"])
    with pytest.raises(UsageError, match="'1bad' is neither a module nor module:function"):
        parse(["--remote", "numpy", "--remote", "1bad", "img"])
