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


def test_the_entry_of_a_config_that_is_gone_is_pruned_at_the_next_write(tmp_path: Path) -> None:
    """Issue 35: every config ever read kept an entry (tests' temporary configs piled up)."""
    cache, parsed = tmp_path / "cache", []
    gone, kept, later = (tmp_path / f"{name}.toml" for name in ("gone", "kept", "later"))
    for path in (gone, kept, later):
        path.write_text("a = 1\n")
    for path in (gone, kept):
        tomlcache.load(str(path), counting_parser(parsed), str(cache))
    assert len(list(cache.iterdir())) == 2
    gone.unlink()
    tomlcache.load(str(later), counting_parser(parsed), str(cache))  # a miss writes, and prunes
    names = sorted(p.name for p in cache.iterdir())
    assert names == sorted(tomlcache.entry_name(str(p)) for p in (kept, later))


def test_the_cache_keeps_at_most_max_entries_the_latest_written(tmp_path: Path) -> None:
    cache, parsed = tmp_path / "cache", []
    paths = []
    for number in range(tomlcache.MAX_ENTRIES + 20):
        path = tmp_path / f"c{number}.toml"
        path.write_text(f"n = {number}\n")
        paths.append(path)
        assert tomlcache.load(str(path), counting_parser(parsed), str(cache)) == {"n": number}
    entries = {p.name for p in cache.iterdir()}
    assert len(entries) == tomlcache.MAX_ENTRIES
    assert tomlcache.entry_name(str(paths[-1])) in entries  # the one just written stays
    parsed.clear()
    newest = tomlcache.load(str(paths[-1]), counting_parser(parsed), str(cache))
    assert newest == {"n": len(paths) - 1}
    assert parsed == []  # still served from the cache
