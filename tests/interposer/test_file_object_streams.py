"""The worker's view of the program's file objects, against the client's real service: lines
and small reads come in read-aheads, writes are gathered, and after any mix of reads, seeks and
tells the program's file is where the same operations leave a local twin
(docs/remoting.md, "Your files and array objects, passed by reference")."""

from __future__ import annotations

import io
from typing import Any

import pytest

from radium_interposer import client_file_objects, client_objects, client_streams


class FakeClient:
    """The connection: serves ``fo`` requests with the client's real service, and counts them."""

    def __init__(self, handle: Any) -> None:
        self.node = client_objects.reference(handle)
        assert self.node is not None
        self.requests: list[str] = []

    def __call__(self, meta: dict[str, Any], buffers: list[Any]) -> tuple[dict[str, Any], list]:
        from radium_interposer import codec

        self.requests.append(meta["m"])
        out: list[Any] = []
        result = client_objects.use_file(meta, buffers)
        return {"v": codec.encode(result, out, lambda _: None)}, out

    def stream(self) -> Any:
        kind = client_file_objects.ClientTextFile if self.node["f"]["text"] else None
        kind = kind or client_file_objects.ClientBinaryFile
        return kind(self.node["id"], self.node["f"], lambda _: None)


@pytest.mark.parametrize("text", [False, True])
def test_lines_come_in_read_aheads_and_the_position_is_stepped_back(
    monkeypatch: pytest.MonkeyPatch, text: bool
) -> None:
    from radium_interposer import client_files

    data = "".join(f"line {i}\n" for i in range(5000))
    handle: Any = io.StringIO(data) if text else io.BytesIO(data.encode())
    fake = FakeClient(handle)
    monkeypatch.setattr(client_files, "_call", fake)
    stream = fake.stream()
    got = [stream.readline() for _ in range(3000)]
    first = [str(line, "ascii") if not text else line for line in got[:2]]
    assert first == ["line 0\n", "line 1\n"]
    assert len(fake.requests) < 20  # lines come many at a time
    client_streams.settle()
    expected = len("".join(f"line {i}\n" for i in range(3000)))
    assert handle.tell() == expected  # the program's file is just after what was used
    assert stream.read(7) == ("line 30" if text else b"line 30")
    client_streams.settle()
    assert handle.tell() == expected + 7
    client_objects.drop([fake.node["id"]])


def test_writes_are_gathered_and_sent_before_the_call_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from radium_interposer import client_files

    handle = io.BytesIO()
    fake = FakeClient(handle)
    monkeypatch.setattr(client_files, "_call", fake)
    stream = fake.stream()
    for i in range(1000):
        stream.write(b"%d," % i)
    assert fake.requests.count("write") <= 2
    client_streams.settle()
    assert handle.getvalue() == b"".join(b"%d," % i for i in range(1000))
    assert stream.tell() == handle.tell()
    stream.close()
    assert not handle.closed  # closing the worker's object leaves the program's file open
    with pytest.raises(TypeError, match="bytes-like object is required"):
        stream.write("text")
    client_objects.drop([fake.node["id"]])


def test_only_passed_files_and_listed_methods_are_served() -> None:
    handle = io.BytesIO(b"abc")
    node = client_objects.reference(handle)
    assert node is not None
    with pytest.raises(LookupError):
        client_objects.use_file({"f": node["id"] + 1, "m": "read", "a": [1]}, [])
    for method in ("close", "fileno", "__del__", "detach"):
        with pytest.raises(ValueError, match="not a method"):
            client_objects.use_file({"f": node["id"], "m": method, "a": []}, [])
    with pytest.raises(ValueError, match="integers"):
        client_objects.use_file({"f": node["id"], "m": "seek", "a": ["0"]}, [])
    assert client_objects.use_file({"f": node["id"], "m": "read", "a": [1 << 40]}, []) == b"abc"
    client_objects.drop([node["id"]])
    assert not handle.closed
    with pytest.raises(LookupError):
        client_objects.use_file({"f": node["id"], "m": "read", "a": [1]}, [])


@pytest.mark.parametrize("kind", ["bytes", "string", "text file"])
def test_any_mix_of_reads_moves_like_the_local_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, kind: str
) -> None:
    """Random reads, lines, seeks and tells through the worker's object, and the same on a
    twin file here: every answer and, after each settle, the position are the same."""
    import random

    from radium_interposer import client_files

    rng = random.Random(7)
    data = "".join(
        "x" * rng.randrange(0, 300) + rng.choice(["\n", "\r\n", ""]) for _ in range(3000)
    )
    (tmp_path / "f.txt").write_bytes(data.encode())
    make: Any = {
        "bytes": lambda: io.BytesIO(data.encode()),
        "string": lambda: io.StringIO(data),
        "text file": lambda: open(tmp_path / "f.txt", encoding="ascii"),  # noqa: SIM115
    }[kind]
    handle, twin = make(), make()
    cookies = [0]
    fake = FakeClient(handle)
    monkeypatch.setattr(client_files, "_call", fake)
    stream = fake.stream()
    for step in range(2000):
        op = rng.choice(["read", "readline", "line", "tell", "seek", "settle"])
        n = rng.choice([0, 1, 7, 100, 5000, 70000])
        if op == "read":
            assert stream.read(n) == twin.read(n), step
        elif op == "readline":
            assert stream.readline(n) == twin.readline(n), step
        elif op == "line":
            assert stream.readline() == twin.readline(), step
        elif op == "tell":
            cookies.append(twin.tell())
            assert stream.tell() == cookies[-1], step
        elif op == "seek":  # text files seek to what tell said; the others anywhere
            position = rng.choice(cookies) if kind == "text file" else rng.randrange(len(data))
            assert stream.seek(position) == twin.seek(position)
        else:
            client_streams.settle()
            assert handle.tell() == twin.tell(), step
    client_streams.settle()
    assert handle.tell() == twin.tell()
    client_objects.drop([fake.node["id"]])
    handle.close()
    twin.close()
