"""The two kinds of the client program's file objects on the worker, binary and text: what
``io`` expects of each, over :class:`client_streams.Stream` (docs/remoting.md, "Your files and
array objects, passed by reference")."""

from __future__ import annotations

import io
from typing import Any, Dict, Optional

from radium_interposer.client_streams import Stream

__all__ = ["ClientBinaryFile", "ClientTextFile"]


class ClientBinaryFile(Stream, io.BufferedIOBase):
    """A binary file object of the client program (``open(path, "rb")``, ``io.BytesIO``)."""

    def __init__(self, object_id: int, description: Dict[str, Any], release: Any) -> None:
        io.BufferedIOBase.__init__(self)
        self._setup(object_id, description, release)

    def read(self, size: Optional[int] = -1) -> bytes:
        return bytes(self._read(size))

    read1 = read

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    readinto1 = readinto

    def readline(self, size: Optional[int] = -1) -> bytes:
        return bytes(self._readline(size))

    def write(self, data: Any) -> int:
        if isinstance(data, str):
            raise TypeError(f"a bytes-like object is required, not '{type(data).__name__}'")
        return self._write(bytes(memoryview(data).cast("B")))


class ClientTextFile(Stream, io.TextIOBase):
    """A text file object of the client program (``open(path)``, ``io.StringIO``)."""

    _empty = ""

    def __init__(self, object_id: int, description: Dict[str, Any], release: Any) -> None:
        io.TextIOBase.__init__(self)
        self._setup(object_id, description, release)

    @property
    def encoding(self) -> Any:  # type: ignore[override]  # the program's file's, read-only
        return self._about.get("enc")

    def read(self, size: Optional[int] = -1) -> str:
        return str(self._read(size))

    def readline(self, size: Optional[int] = -1) -> str:  # type: ignore[override]
        return str(self._readline(size))

    def write(self, text: Any) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        return self._write(text)
