"""Writing files on the node so that a reader never sees half of one (node_exporter reading
the health textfile, `myriad health` the state file, the controller a converge result).

The node package's one writer; the controller's is `myriad.fsutil`, which this package may
not import (it runs with the standard library alone, see __init__).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write a temporary file beside `path` (0600 until it is complete), fsync it, then
    rename it into place: whole or not at all, also across a power cut."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str, mode: int = 0o644) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode)
