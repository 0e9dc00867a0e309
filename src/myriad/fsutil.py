"""Writing files so that a reader never sees half of one: the controller's one writer.

What runs on the nodes has its own, `myriad.node.files` (that package imports nothing of the
controller, and this layer sits below it).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


def atomic_write_text(path: Path, text: str, mode: int = 0o644, *, durable: bool = True) -> None:
    """Write to a temporary file beside `path`, fsync it, then rename it into place."""
    atomic_write_bytes(path, text.encode("utf-8"), mode, durable=durable)


def atomic_write_bytes(path: Path, data: bytes, mode: int = 0o644, *, durable: bool = True) -> None:
    """As atomic_write_text; the temporary file is 0600 until it is complete, so a secret
    is never readable by others on the way. `durable=False` skips the fsync, for files
    rewritten on every run where thousands of fsyncs would cost more than a lost file (a
    reader still never sees half of one)."""
    _atomic_write(path, (data,), mode, durable)


def atomic_write_lines(
    path: Path, chunks: Iterable[str], mode: int = 0o644, *, durable: bool = True
) -> None:
    """As atomic_write_text for text made piece by piece (a 1M-GPU cabling sheet): the
    pieces go to the temporary file as they come, so the text is never held whole; an
    error on the way leaves no file and the old one as it was."""
    _atomic_write(path, (chunk.encode("utf-8") for chunk in chunks), mode, durable)


def _atomic_write(path: Path, pieces: Iterable[bytes], mode: int, durable: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.writelines(pieces)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
