"""The parsed-TOML cache: served while a file is unchanged, one entry per path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from radium import tomlcache


def counting_parser(parsed: list[bytes]) -> Any:
    def parse(raw: bytes) -> dict[str, Any]:
        parsed.append(raw)
        return tomlcache.parse(raw, "test")

    return parse


def test_a_file_is_parsed_again_only_when_it_changes(tmp_path: Path) -> None:
    config, parsed = tmp_path / "c.toml", []
    config.write_text("a = 1\n")
    cache = str(tmp_path / "cache")
    assert tomlcache.load(str(config), counting_parser(parsed), cache) == {"a": 1}
    assert tomlcache.load(str(config), counting_parser(parsed), cache) == {"a": 1}
    assert len(parsed) == 1
    config.write_text("a = 22\n")
    assert tomlcache.load(str(config), counting_parser(parsed), cache) == {"a": 22}
    assert len(parsed) == 2


def test_paths_that_quote_alike_keep_entries_of_their_own(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    cache, parsed = str(tmp_path / "cache"), []
    files = [tmp_path / "x" / "25", tmp_path / "x%"]  # once one cache file: "…%x%25"
    for number, path in enumerate(files):
        path.write_text(f"n = {number}\n")
    for _ in range(2):
        for number, path in enumerate(files):
            assert tomlcache.load(str(path), counting_parser(parsed), cache) == {"n": number}
    assert len(parsed) == 2  # each parsed once, then served from its own entry
