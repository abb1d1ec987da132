"""The interposer's upcalls: unbound they fail in words, and the wiring binds every one of them
to the upper layer's function (tests/test_layers.py checks nothing imports upward instead)."""

from __future__ import annotations

import pytest

from radium_interposer import (
    classes,
    client_objects,
    client_serving,
    program_state,
    upcalls,
    wiring,
)


def test_an_upcall_made_before_the_wiring_says_so() -> None:
    fresh = upcalls.Upcalls()
    with pytest.raises(upcalls.NotWired, match="class_named was used before remoting started"):
        fresh.class_named("torch.nn.Module", 0)
    with pytest.raises(upcalls.NotWired, match="serve"):
        fresh.serve(None, None)


def test_the_wiring_binds_every_upcall() -> None:
    wiring.install()
    bound = vars(upcalls.bound)
    unbound = sorted(name for name, f in bound.items() if f.__name__ == "unbound")
    assert unbound == []
    assert set(bound) == set(vars(upcalls.Upcalls()))
    assert upcalls.bound.class_named is classes.local_or_stand_in
    assert upcalls.bound.proxy_class is classes.for_instances
    assert upcalls.bound.serve is client_serving.serve
    assert upcalls.bound.released is client_objects.drop
    assert upcalls.bound.random_states is program_state.after_call


def test_starting_remoting_loads_neither_shipping_nor_importlib_abc() -> None:
    """What every remoted Python pays at start: shipping (and its inspect, textwrap) waits for
    the first class or function to ship; importlib.abc (which loads importlib.resources,
    tempfile, pathlib: tens of milliseconds) is not loaded at all, nor hashlib (the direct
    dial's handshake and a split file's module digest load it when they run), logging, or
    inspect (loaded by the few functions that read source)."""
    code = (
        "import sys\n"
        "from radium_interposer import finder, upcalls\n"
        "finder.install(['numpy'])\n"
        "print(sorted(m for m in ('radium_interposer.shipping', 'importlib.abc', 'tempfile',"
        " 'hashlib', 'logging', 'inspect') if m in sys.modules))\n"
        "upcalls.bound.users_path(len)\n"
        "print('radium_interposer.shipping' in sys.modules)\n"
    )
    assert bare_python(code).splitlines() == ["[]", "True"]


def test_a_worker_starts_without_importlib_abc() -> None:
    """A lease's worker starts at its first connection: its import hooks do without
    importlib.abc too (its start is the first call's latency)."""
    code = "import sys, radium_interposer.worker\nprint('importlib.abc' in sys.modules)\n"
    assert bare_python(code).split() == ["False"]


def bare_python(code: str) -> str:
    """What ``code`` prints in a bare Python that imports the interposer only."""
    import subprocess

    from tests.interposer.harness import BARE_PYTHON, INTERPOSER

    done = subprocess.run(
        [BARE_PYTHON, "-c", code],
        env={"PYTHONPATH": str(INTERPOSER)},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout
