"""The pod sandbox image: ``pause.c`` built static with the host's gcc, alone in a rootfs tar."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile
import tempfile
from pathlib import Path

from integration.host import need
from integration.images import CACHE_DIR

SOURCE = Path(__file__).with_name("pause.c")
#: The CRI plugin's sandbox_image in the tests' containerd config.
IMAGE = "docker.io/radium-test/pause:3.10"
ENTRYPOINT = ["/pause"]


def pause_tar() -> Path:
    """A rootfs tar holding /pause (static) and the directories runc mounts over; cached by the
    source's content."""
    source = SOURCE.read_bytes()
    dest = CACHE_DIR / f"pause-{hashlib.sha256(source).hexdigest()[:16]}.tar"
    if dest.exists():
        return dest
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE_DIR) as work:
        binary = Path(work) / "pause"
        compiled = subprocess.run(
            [need("gcc", "gcc libc6-dev"), "-static", "-Os", "-s", "-o", str(binary), str(SOURCE)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert compiled.returncode == 0, f"building the pause image failed:\n{compiled.stderr}"
        tmp = Path(work) / "pause.tar"
        with tarfile.open(tmp, "w") as tar:
            for name in ("dev", "proc", "sys", "etc"):
                info = tarfile.TarInfo(name)
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            info = tar.gettarinfo(str(binary), arcname="pause")
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with open(binary, "rb") as fh:
                tar.addfile(info, fh)
            passwd = b"root:x:0:0:root:/:/pause\n"
            info = tarfile.TarInfo("etc/passwd")
            info.size, info.mode = len(passwd), 0o644
            tar.addfile(info, io.BytesIO(passwd))
        os.replace(tmp, dest)
    return dest
