"""Tests that drive the client in this process (a Connection on a socketpair, proxies, stand-in
classes) wire its upcalls first, as ``finder.install`` does in a remoted program."""

from __future__ import annotations

import pytest

from radium_interposer import wiring


@pytest.fixture(autouse=True, scope="session")
def _wired() -> None:
    wiring.install()
