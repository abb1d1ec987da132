"""Write the package's machine-readable ``copyright``: Radium's header, then one paragraph per
Python distribution installed in the package's environment (run by ``scripts/build-deb``).

Generated rather than written by hand because pip chooses the dependencies' versions (and
pulls transitive ones, such as cffi) at build time: a new dependency whose licence is not
recognised here stops the build instead of shipping unlisted.

    python3 licenses.py HEADER SITE_PACKAGES INSTALLED_SITE_PACKAGES > copyright
"""

from __future__ import annotations

import email.parser
import re
import sys
from pathlib import Path

__all__ = ["ALIASES", "COMMON", "KNOWN", "license_names", "main", "paragraph", "spdx"]

#: Free-text ``License:`` values and classifiers seen on PyPI, as SPDX names.
ALIASES = {
    "3-clause bsd license": "BSD-3-Clause",
    "bsd license": "BSD-3-Clause",
    "new bsd license": "BSD-3-Clause",
    "apache license, version 2.0": "Apache-2.0",
    "apache license 2.0": "Apache-2.0",
    "apache software license": "Apache-2.0",
    "mit license": "MIT",
}
#: Licences whose text Debian ships in /usr/share/common-licenses.
COMMON = {"Apache-2.0": "Apache-2.0", "MPL-2.0": "MPL-2.0"}
KNOWN = {"Apache-2.0", "BSD-2-Clause", "BSD-3-Clause", "MIT", "MIT-0", "PSF-2.0", "MPL-2.0", "ISC"}


def spdx(metadata: email.message.Message) -> str:
    """The distribution's licence as an SPDX expression, or "" when not recognisable."""
    expression = metadata.get("License-Expression", "")
    if expression:
        return str(expression).strip()
    free = str(metadata.get("License", "")).strip()
    if free in KNOWN:
        return free
    if free.lower() in ALIASES:
        return ALIASES[free.lower()]
    for classifier in metadata.get_all("Classifier", []):
        last = str(classifier).rsplit("::", 1)[-1].strip().lower()
        if str(classifier).startswith("License ::") and last in ALIASES:
            return ALIASES[last]
    return ""


def license_names(expression: str) -> list[str]:
    """The licence names an SPDX expression joins."""
    return [n for n in re.split(r"\s+(?:OR|AND|WITH)\s+|[()]", expression) if n.strip()]


def paragraph(dist_info: Path, installed: str) -> tuple[str, list[str]]:
    """The copyright paragraph of one installed distribution, and its files."""
    metadata = email.parser.Parser().parsestr((dist_info / "METADATA").read_text(encoding="utf-8"))
    name, version = metadata["Name"], metadata["Version"]
    expression = spdx(metadata)
    names = license_names(expression)
    unknown = [n for n in names if n not in KNOWN] or ([] if names else ["(none)"])
    if unknown:
        raise SystemExit(
            f"licenses.py: {name} {version}: licence {expression or '(none)'!r} not recognised; "
            "check it and add it to packaging/deb/licenses.py"
        )
    files: set[str] = set()
    for line in (dist_info / "RECORD").read_text(encoding="utf-8").splitlines():
        path = line.rsplit(",", 2)[0]
        if not path or path.startswith(".."):
            continue  # scripts in bin/: Files: * covers them well enough
        top = path.split("/", 1)[0]
        # Top-level modules share site-packages/__pycache__ with other distributions.
        own_dir = top != "__pycache__" and (dist_info.parent / top).is_dir()
        files.add(f"{installed}/{top}/*" if own_dir else f"{installed}/{path}")
    holders: list[str] = []
    texts = sorted(p for p in dist_info.rglob("*") if p.is_file() and "LICEN" in p.name.upper())
    for text in texts:
        for line in text.read_text(encoding="utf-8", errors="replace").splitlines():
            line = line.strip()
            if re.match(r"(?i)copyright\s+(\(c\)\s*)?\d", line) and line not in holders:
                holders.append(line)
    copyright_ = holders or [f"the {name} authors"]
    where = "".join(f"\n /{installed}/{t.relative_to(dist_info.parent)}" for t in texts)
    lines = [
        "Files: " + "\n ".join(sorted(files)),
        "Copyright: " + "\n ".join(copyright_),
        f"License: {expression}",
        f"Comment: {name} {version}, installed from PyPI."
        + (f" Its licence files:{where}" if where else ""),
    ]
    return "\n".join(lines), names


def main(argv: list[str]) -> int:
    """Write the package's copyright file from the installed distributions."""
    header, site, installed = Path(argv[1]), Path(argv[2]), argv[3].strip("/")
    paragraphs = [header.read_text(encoding="utf-8").rstrip("\n")]
    used: set[str] = {"Apache-2.0"}
    for dist_info in sorted(site.glob("*.dist-info"), key=lambda p: p.name.lower()):
        if dist_info.name.lower().startswith("radium-"):
            continue  # covered by the header's "Files: *"
        text, names = paragraph(dist_info, installed)
        paragraphs.append(text)
        used.update(names)
    for name in sorted(used):
        if name in COMMON:
            body = (
                f" On Debian systems, the full text of the {name} licence is in\n"
                f" /usr/share/common-licenses/{COMMON[name]}."
            )
        else:
            body = (
                " The full text ships with each distribution under this licence, in its\n"
                " dist-info directory (see the Comment of its Files paragraph)."
            )
        paragraphs.append(f"License: {name}\n{body}")
    sys.stdout.write("\n\n".join(paragraphs) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
