"""numpy scalars and 0-d arrays keep their type on the way, in both directions: by value to and
from a side that has numpy (an ``np.float64`` stays one, a 0-d array stays 0-d), as remote
objects to a program without numpy, which prints and converts them as numpy would
(docs/remoting.md, "numpy scalars")."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from radium_interposer import arrays, codec, proxy, scalars
from tests.interposer.harness import WorkerHarness, local_env

#: One value of each dtype that crosses: (constructor source, as the program writes it).
SCALARS = [
    "np.bool_(True)",
    "np.int8(-8)",
    "np.int16(-16)",
    "np.int32(-32)",
    "np.int64(-64)",
    "np.uint8(8)",
    "np.uint16(16)",
    "np.uint32(32)",
    "np.uint64(2**64 - 1)",
    "np.float16(0.1)",
    "np.float32(0.1)",
    "np.float64(0.1)",
    "np.longdouble(1) / 3",
    "np.complex64(1 + 2j)",
    "np.complex128(3 - 4j)",
    "np.clongdouble(1 + 1j) / 3",
    "np.datetime64('2020-01-02T03:04')",
    "np.timedelta64(5, 's')",
    "np.str_('héllo')",
    "np.bytes_(b'ab')",
]

#: How a program shows a value: everything a type change would alter.
SHOW = """
def show(x):
    parts = [type(x).__name__, type(x).__module__, str(x.dtype), repr(x), str(x), f"{x}"]
    parts += [isinstance(x, np.generic), isinstance(x, np.number), isinstance(x, np.floating)]
    parts += [isinstance(x, t) for t in (bool, int, float, complex, str, bytes)]  # float64: float
    if x.dtype.kind in "biuf":
        parts += [float(x), int(x), bool(x), f"{x:.3f}", repr(x + 1), x > 0]
        parts += [hash(x) == hash(x.item())]
    if x.dtype.kind == "f":
        parts += [repr(round(x, 2)), round(x), repr(-x)]
    if x.dtype.kind == "c":
        parts += [complex(x), repr(x * 2), repr(x.real)]
    parts += [repr(x.item()), x.ndim, x.shape]
    print(*parts)
"""

PROGRAM = f"""
import numpy as np
{SHOW}
for x in [{", ".join(SCALARS)}]:
    show(x)
a = np.arange(6.0)
show(a.sum())
show(a[2])
q, r = divmod(a.sum(), np.float64(4))  # a remote tuple of scalars, unpacked
print(repr(q), repr(r))
m, e = np.frexp(np.float64(8))
print(repr(m), repr(e), type(e) is np.int32, [repr(v) for v in np.frexp(np.float32(3))])
print({{"héllo": 1, 0.5: 2}}.get(np.str_("héllo")), {{0.5: 2}}[np.float64(0.5)])  # same hash
z = np.array(2.5)
print(repr(z), z.shape, z.ndim, repr(z[()]), repr(z + 1), type(z[()]) is np.float64)
"""


def test_numpy_scalars_print_and_convert_as_locally_without_numpy(harness: WorkerHarness) -> None:
    out = harness.same_as_local(PROGRAM, remote="numpy")
    assert "float64 numpy float64 np.float64(0.1) 0.1 0.1 True True True" in out


#: Every scalar type numpy names, its aliases (``long``, ``double``, ``intp``) and abstract
#: types (``floating``) included.
SCALAR_TYPES = sorted(
    name
    for name, value in vars(np).items()
    if isinstance(value, type) and issubclass(value, np.generic)
)

#: One class per remote class, whichever way the program reaches it: the module's attribute, an
#: alias, ``dtype.type`` (a class attribute of the remote dtype's class), an element's type.
SCALAR_TYPES_PROGRAM = f"""
import numpy as np

ABSTRACT = [np.generic, np.number, np.integer, np.signedinteger, np.unsignedinteger, np.inexact,
            np.floating, np.complexfloating, np.flexible, np.character]
for name in {SCALAR_TYPES!r}:
    t = getattr(np, name)
    row = [name, t.__name__, t is getattr(np, t.__name__), isinstance(t, type)]
    row += [issubclass(t, kind) for kind in ABSTRACT]
    try:
        d = np.dtype(t)
    except TypeError as e:  # an abstract type
        row.append(f"TypeError {{e}}")
    else:
        row += [d.type is t, np.zeros(2, dtype=t).dtype.type is t, str(d)]
        if d.kind in "biufcmM":
            row.append(type(np.zeros(2, dtype=t)[0]) is t)
    print(*row)
a = np.zeros(3, dtype=np.int64)
print(a.dtype.type is np.int64, issubclass(np.ones(2).dtype.type, np.floating))
print([p.dtype.type is np.int64 for p in np.array_split(np.arange(6).reshape(2, 3), 2)])
print(repr(a.dtype.type(5)), type(a.dtype) is np.dtypes.Int64DType, np.dtype("f4").type.__name__)
try:
    print(np.zeros(1, dtype=np.datetime64)[0])
except ValueError as e:  # it cannot be printed: raised where the program prints it, as here
    print("ValueError", e)
"""


def test_a_remote_scalar_type_is_one_class_whichever_path_reaches_it(
    harness: WorkerHarness,
) -> None:
    out = harness.same_as_local(SCALAR_TYPES_PROGRAM, remote="numpy")
    assert "int64 int64 True True True True True True False False False False False False " in out
    assert "\nTrue True\n[True, True]\nnp.int64(5) True float32\n" in out


def _local_and_remote(
    harness: WorkerHarness, source: str, remote: str
) -> subprocess.CompletedProcess[str]:
    """The program run by the Python that has numpy, remoted and locally: the same output."""
    path = harness.root / "app.py"
    path.write_text(textwrap.dedent(source))
    remoted = harness.program(path, remote, python=sys.executable)
    assert remoted.returncode == 0, remoted.stderr
    local = subprocess.run(
        [sys.executable, str(path)],
        env=local_env(),
        capture_output=True,
        text=True,
        cwd=harness.root,
    )
    assert local.returncode == 0, local.stderr
    assert remoted.stdout == local.stdout
    return remoted


FUNCTIONS = f"""
import os
import sys
import numpy as np
{SHOW}


def seen(x):
    '''What the worker received: computed there.'''
    return type(x).__name__, str(x.dtype), repr(x), x.shape, os.getpid()


def scalar(source):
    return eval(source, {{"np": np}})


def zero_d(source):
    return np.asarray(eval(source, {{"np": np}}))


if __name__ == "__main__":
    for source in [{", ".join(repr(s) for s in SCALARS)}]:
        x = eval(source)
        *what, pid = seen(x)
        print(*what)
        *what, pid = seen(np.asarray(x))  # a 0-d array stays 0-d
        print(*what)
        show(scalar(source))
        z = np.asarray(zero_d(source))
        print(repr(z), z.shape, type(z).__name__)
    print("det", repr(np.linalg.det(np.eye(3) * 2)), repr(np.linalg.norm(np.ones(4))))
    print("remote", pid != os.getpid(), file=sys.stderr)  # differs from the local run
"""


def test_scalars_and_0d_arrays_cross_both_ways_to_a_client_with_numpy(
    harness: WorkerHarness,
) -> None:
    remote = "numpy.linalg,app:seen,app:scalar,app:zero_d"
    remoted = _local_and_remote(harness, FUNCTIONS, remote)
    assert "float64 float64 np.float64(0.1) ()" in remoted.stdout
    assert "det np.float64(7.999999999999998) np.float64(2.0)" in remoted.stdout
    assert "remote True" in remoted.stderr


@pytest.mark.parametrize("source", [*SCALARS, "np.array(3.5)", "np.array([[1, 2], [3, 4]]).T"])
def test_the_codec_keeps_scalars_scalars_and_0d_arrays_0d(source: str) -> None:
    value = eval(source)
    buffers: list[object] = []
    tree = codec.encode(value, buffers, lambda _: None)
    back = codec.decode(tree, [bytes(b) for b in buffers], lambda _: None, codec.importing)
    assert type(back) is type(value)
    assert back.dtype == value.dtype
    assert np.shape(back) == np.shape(value)
    assert repr(back) == repr(value)


@pytest.mark.parametrize(
    "value",
    [
        np.array([[0.1, 2], [3, 4]], "f2"),
        np.array([1 + 2j, 3j], "c8"),
        np.array([[1 - 1j]], "c16"),
        np.array(["ab", "c", ""]),
        np.array([b"x\x00y", b""]),
        np.array("only"),
        np.float16(0.5),
        np.complex128(2j),
        np.zeros((2, 0), "U3"),
    ],
)
def test_a_side_without_numpy_reads_half_floats_complex_and_strings_as_item_gives(
    value: np.ndarray,
) -> None:
    array = np.asarray(value)
    got = arrays.without_numpy(
        array.dtype.str, array.shape, array.tobytes(), isinstance(value, np.generic)
    )
    assert got == array.tolist()


def test_what_cannot_cross_is_refused_naming_its_dtype() -> None:
    with pytest.raises(codec.EncodeError, match="dtype object"):
        codec.encode(np.array(None, dtype=object), [], lambda _: None)
    with pytest.raises(codec.EncodeError, match=r"dtype \[\('a', '<i4'\)\]"):
        codec.encode(np.zeros((), [("a", "<i4")])[()], [], lambda _: None)
    with pytest.raises(codec.DecodeError, match="<M8"):
        arrays.without_numpy("<M8[D]", (), b"\0" * 8, True)


def test_a_scalar_proxy_takes_only_text_and_numbers_from_the_worker() -> None:
    from radium_interposer import scalar_proxies

    proxy = object.__new__(scalar_proxies.ScalarProxy)
    object.__setattr__(proxy, "_rd_ref", {"$": "h", "id": 1, "sv": {"r": 5, "v": [1], "c": [1]}})
    assert scalar_proxies._text(proxy, "r") is None
    assert scalar_proxies._number(proxy) is None
    object.__setattr__(proxy, "_rd_ref", {"$": "h", "id": 1, "sv": {"s": "0.5", "c": [1.0, 2]}})
    assert str(proxy) == "0.5"
    assert scalar_proxies._number(proxy) == 1 + 2j


@pytest.mark.parametrize(
    "node",
    [
        {"$": "sv", "dt": "<f8", "b": "00" * 100_000, "t": "numpy.float64"},
        {"$": "sv", "dt": ["<f8"], "b": "00" * 8, "t": "numpy.float64"},
        {"$": "sv", "dt": "<f8", "t": "numpy.float64"},
    ],
    ids=["huge", "not-a-dtype", "no-bytes"],
)
def test_a_numpy_scalar_from_the_worker_is_a_dtype_and_a_few_bytes_or_refused(
    node: dict[str, object],
) -> None:
    """The client holds a scalar's node only to send it back: it never reads the bytes, and a
    node that is not a short dtype and a few bytes is refused at once."""
    with pytest.raises(codec.DecodeError, match="not a dtype and its bytes"):
        proxy.decode(node, [])


def test_the_worker_loads_a_numpy_scalar_only_as_one_value_of_its_dtype() -> None:
    assert scalars.load({"dt": "<f4", "b": np.float32(0.1).tobytes().hex()}) == np.float32(0.1)
    for bad in ({"dt": "|O", "b": "00" * 8}, {"dt": "<f8", "b": "00" * 4}, {"dt": "<f8"}):
        with pytest.raises(ValueError, match="sv:"):
            scalars.load(bad)
