"""The node package as one file, `myriad-node.pyz`: what every node is given.

A zipapp of `myriad.node` (with `myriad/__init__.py`, the version) and a top-level
`__main__.py`: `python3 -I -S myriad-node.pyz COMMAND ...` runs a command of the package
(`myriad.node.__main__`: gather, health, converge, hardware), and zipimport imports from
it. The health role installs it for myriad-health, the rdma role for hardware discovery (the
nccl role runs that copy too), the facts playbook copies it to each node for a gathering,
and an image-mode image carries it for myriad-converge: one artefact, made here.

The same tree gives the same bytes: members in sorted order, each with zip's earliest date,
one mode and one compression level, and nothing of the build host (no times, owners or
`__pycache__`), so copying it again changes nothing and a digest of it names the code.

    python3 -m myriad.node.artefact DEST    write it (the Molecule scenarios do)
"""

from __future__ import annotations

import hashlib
import io
import sys
import zipfile
from pathlib import Path

from myriad.node.files import atomic_write_bytes

NAME = "myriad-node.pyz"
# The earliest date a zip member can carry: members say nothing of when they were built.
EPOCH = (1980, 1, 1, 0, 0, 0)
MODE = 0o644
LEVEL = 9
MAIN = b'''"""python3 myriad-node.pyz COMMAND [ARGS]: a command of myriad.node (its __main__)."""

import sys

from myriad.node.__main__ import main

sys.exit(main())
'''


def package_dir() -> Path:
    return Path(__file__).resolve().parent


def members(node_dir: Path | None = None) -> list[tuple[str, Path]]:
    """(name in the archive, file) for every module of the package, sorted by name."""
    node = package_dir() if node_dir is None else node_dir
    found = [("myriad/__init__.py", node.parent / "__init__.py")]
    for path in node.rglob("*.py"):
        if "__pycache__" not in path.relative_to(node).parts:
            found.append((f"myriad/node/{path.relative_to(node).as_posix()}", path))
    return sorted(found)


def _add(archive: zipfile.ZipFile, name: str, content: bytes) -> None:
    info = zipfile.ZipInfo(name, EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.create_system = 3  # Unix: what the mode bits below mean
    info.external_attr = MODE << 16
    archive.writestr(info, content, compresslevel=LEVEL)


def build(node_dir: Path | None = None) -> bytes:
    """The artefact's bytes, from the package this module is in (or `node_dir`)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        _add(archive, "__main__.py", MAIN)
        for name, path in members(node_dir):
            _add(archive, name, path.read_bytes())
    return buffer.getvalue()


def digest(content: bytes | None = None) -> str:
    return hashlib.sha256(build() if content is None else content).hexdigest()


def write(dest: Path, content: bytes | None = None) -> Path:
    """The artefact at `dest`, whole or not at all."""
    atomic_write_bytes(dest, build() if content is None else content, mode=MODE)
    return dest


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python3 -m myriad.node.artefact DEST\n")
        return 2
    write(Path(args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
