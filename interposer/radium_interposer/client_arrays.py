"""``np.fromfile`` and ``ndarray.tofile`` with a file object of the client program, on the
worker: numpy's own want an OS descriptor, which a client file has none of here, so these read
and write through the file object with numpy's semantics (docs/remoting.md, "Your files and
array objects, passed by reference"): the same array, the same bytes, the same position after.
"""

from __future__ import annotations

import functools
import io
from typing import Any

from radium_interposer.client_file_objects import ClientBinaryFile, ClientTextFile

__all__ = ["fromfile_adapted", "tofile"]

_CLIENT = (ClientBinaryFile, ClientTextFile)


def fromfile_adapted(real: Any) -> Any:
    """numpy's ``fromfile``, which reads a client file object through it."""

    @functools.wraps(real)
    def fromfile(file: Any, dtype: Any = float, count: int = -1, sep: str = "", offset: int = 0,
                 **kwargs: Any) -> Any:  # fmt: skip
        if not isinstance(file, _CLIENT):
            return real(file, dtype, count, sep, offset, **kwargs)
        import numpy as np

        kind = np.dtype(dtype)
        if sep:
            if offset:
                raise TypeError("'offset' argument only permitted for binary files")
            # Text: parsed from here to the end (which is where the file is left).
            text = file.read()
            text = text.decode("latin-1") if isinstance(text, bytes) else text
            return np.fromstring(text, kind, count, sep)  # type: ignore[call-overload]
        if isinstance(file, ClientTextFile):  # its bytes are not this side's to read
            raise io.UnsupportedOperation(
                "np.fromfile of binary data needs the program's file opened in binary mode"
            )
        if offset:
            file.seek(offset, 1)
        data = file.read(-1 if count < 0 else count * kind.itemsize)
        whole = len(data) - len(data) % kind.itemsize
        if whole < len(data):  # numpy reads whole items only: the rest stays unread
            file.seek(whole - len(data), 1)
        return np.frombuffer(data[:whole], kind).copy()  # writable, as numpy's is

    return fromfile


def tofile(array: Any, fid: Any, sep: str = "", format: str = "%s") -> None:
    """``array.tofile(fid, sep, format)`` into a client file object: raw bytes in C order, or
    each item (a Python scalar) formatted and joined by ``sep``, as numpy writes them."""
    if not sep:
        data: Any = array.tobytes("C")
    else:
        data = sep.join(format % (item,) for item in array.ravel().tolist())
        if isinstance(fid, ClientBinaryFile):
            data = data.encode("latin-1")
    if isinstance(fid, ClientTextFile) and isinstance(data, bytes):
        data = data.decode("latin-1")
    fid.write(data)
