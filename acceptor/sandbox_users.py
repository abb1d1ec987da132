"""The user files a sandbox shows its worker: ``/etc/passwd``, ``/etc/group`` and the
``nsswitch.conf`` that makes glibc read them (acceptor/sandbox.py binds them, 0644)."""

from __future__ import annotations

__all__ = ["NSSWITCH", "group", "passwd"]

#: Users and groups from the files below only, whatever the host's glibc defaults.
NSSWITCH = b"passwd: files\ngroup: files\nshadow: files\n"


def passwd(uid: int, home: str) -> bytes:
    """``/etc/passwd`` of the sandbox: libraries that look the user up (getpass) find one."""
    return (
        "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
        f"worker:x:{uid}:{uid}:radium lease worker:{home}:/usr/sbin/nologin\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    ).encode()


def group(uid: int) -> bytes:
    """The ``/etc/group`` a worker of ``uid`` sees."""
    return f"root:x:0:\nworker:x:{uid}:\nnogroup:x:65534:\n".encode()
