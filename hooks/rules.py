"""Bundle selection rules: data (TOML), not code.

See ``packaging/bundle-rules.toml`` for the format. Loading is strict: an unknown key, a bundle
name that is not a plain directory name, or no rule at all is an error naming the file.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from radium import packaging, tomlcache
from radium.errors import ConfigError, NoBundleError
from radium.hooks.detect import Platform

__all__ = ["SHIPPED_RULES", "Rule", "load_rules", "parse_rules", "select"]

_MATCH_KEYS = ("distro", "libc", "arch")
_BUNDLE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Rule:
    """One bundle selection rule: the bundle, and what an image must be for it."""

    bundle: str
    distro: tuple[str, ...] = ()
    libc: tuple[str, ...] = ()
    arch: tuple[str, ...] = ()

    def matches(self, found: Platform) -> bool:
        ids = (found.distro_id, *found.distro_like)
        return (
            (not self.distro or any(i in self.distro for i in ids))
            and (not self.libc or found.libc in self.libc)
            and (not self.arch or found.arch in self.arch)
        )


SHIPPED_RULES = os.path.join(os.path.dirname(packaging.__file__), "bundle-rules.toml")


def load_rules(path: str) -> tuple[Rule, ...]:
    """Rules from ``path``, or the shipped default rules when ``path`` is empty."""
    source = path or SHIPPED_RULES
    try:
        data = tomlcache.load_file(source, f"bundle rules {source}")
    except OSError as exc:
        raise ConfigError(
            f"cannot read bundle rules {source}: {exc.strerror}",
            hint="fix bundles.rules in the Radium config",
        ) from exc
    return parse_rules(data, source)


def parse_rules(data: dict[str, Any], source: str) -> tuple[Rule, ...]:
    """The rules of a parsed rules file; a ``ConfigError`` naming ``source`` for a bad one."""
    extra = set(data) - {"rule"}
    if extra:
        raise ConfigError(f"bundle rules {source}: unknown key {sorted(extra)[0]!r}")
    raw_rules = data.get("rule")
    if not isinstance(raw_rules, list) or not raw_rules:
        raise ConfigError(f"bundle rules {source}: no [[rule]] entries")
    rules = []
    for index, raw in enumerate(raw_rules, 1):
        where = f"bundle rules {source}, rule {index}"
        unknown = set(raw) - {"bundle", *_MATCH_KEYS}
        if unknown:
            raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r}")
        bundle = raw.get("bundle")
        if not isinstance(bundle, str) or not bundle:
            raise ConfigError(f"{where}: 'bundle' must be a non-empty string")
        matchers: dict[str, tuple[str, ...]] = {}
        for key in _MATCH_KEYS:
            value = raw.get(key, [])
            values = [value] if isinstance(value, str) else value
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise ConfigError(f"{where}: {key!r} must be a string or a list of strings")
            matchers[key] = tuple(values)
        rules.append(Rule(bundle=bundle, **matchers))
    return tuple(rules)


def select(rules: tuple[Rule, ...], found: Platform) -> str:
    """The bundle name for ``found``: the first matching rule, placeholders filled in."""
    for rule in rules:
        if rule.matches(found):
            name = rule.bundle.replace("{arch}", found.arch).replace("{libc}", found.libc)
            if not _BUNDLE_NAME.match(name):
                raise NoBundleError(f"bundle rule produced an invalid bundle name {name!r}")
            return name
    raise NoBundleError(
        f"no Radium bundle rule matches this image ({found.distro_id}, {found.libc}, {found.arch})",
        hint="add a rule to the bundle rules file or build a bundle for this platform",
    )
