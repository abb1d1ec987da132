"""The one exception tree, and its one table of kinds to leaves, both directions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from radium import agentprotocol, errors
from radium.errors import ConfigError, Kind, RadiumError, UnsafePathError


def test_one_line_joins_message_and_hint() -> None:
    err = ConfigError("bad key\nin file", hint="fix it")
    assert err.one_line() == "bad key in file; fix it"
    assert err.kind == Kind.INVALID_ARGUMENT


def test_leaves_share_one_root() -> None:
    assert issubclass(UnsafePathError, RadiumError)
    assert UnsafePathError("x").kind == Kind.PERMISSION_DENIED


# -- one table, both directions (issue 38: errors mapped once at the edge) ---------------------
KINDS = {v for k, v in vars(Kind).items() if not k.startswith("_")}


def test_every_kind_has_a_leaf_of_that_kind() -> None:
    assert set(errors.KIND_TO_CLASS) == KINDS
    for kind, leaf in errors.KIND_TO_CLASS.items():
        assert leaf is not RadiumError and leaf.kind == kind


@pytest.mark.parametrize("leaf", sorted(errors.LEAVES_BY_NAME.values(), key=lambda c: c.__name__))
def test_an_agent_reply_raises_the_very_leaf_again(leaf: type[RadiumError]) -> None:
    # What crosses the agent's socket is JSON: the hook catches the leaf the agent raised.
    reply = json.loads(json.dumps(agentprotocol.error_reply(leaf("it failed", hint="do this"))))
    again = agentprotocol.error_from_reply(reply)
    assert type(again) is leaf and again.one_line() == "it failed; do this"


@pytest.mark.parametrize(
    ("kind", "name", "leaf"),
    [
        (Kind.NOT_FOUND, "", errors.LeaseNotFoundError),  # an older agent: its kind only
        (Kind.NOT_FOUND, "ConfigError", errors.LeaseNotFoundError),  # a leaf of another kind
        (Kind.INTERNAL, "RadiumError", errors.InternalError),  # never the bare root
        (Kind.INTERNAL, "Exception", errors.InternalError),
        (Kind.UNAVAILABLE, "os.system", errors.UnavailableError),  # a name, never a path
        ("on fire", "", errors.InternalError),  # a kind we do not know
    ],
)
def test_a_reply_names_only_a_leaf_of_its_own_kind(kind: str, name: str, leaf: type) -> None:
    reply = {"ok": False, "error": "x", "hint": "", "kind": kind, "class": name}
    assert type(agentprotocol.error_from_reply(reply)) is leaf


#: Where a user's fault must raise a leaf a caller can act on: the product's packages.
PRODUCT = ("radium", "acceptor", "pool", "shim", "agent", "hooks")
BARE = re.compile(r"raise\s+(?:errors\.)?RadiumError\(")


def bare_raises(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if BARE.search(line)]


def test_no_product_code_raises_the_bare_root() -> None:
    # The check finds what it looks for (a planted line), then finds none in the product.
    assert bare_raises('x = 1\n    raise RadiumError(f"bad {x}")\n') == [
        'raise RadiumError(f"bad {x}")'
    ]
    root = Path(__file__).resolve().parents[1]
    found = {
        str(path.relative_to(root)): bare_raises(path.read_text())
        for package in PRODUCT
        for path in (root / package).rglob("*.py")
    }
    assert {path: lines for path, lines in found.items() if lines} == {}
