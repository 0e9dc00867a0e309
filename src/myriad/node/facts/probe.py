"""Running probes on the node: a command, a file, a set of files, each as one record.

Every probe (a command, a file, a sysfs tree) is recorded as
    {"rc": int|null, "stdout": str, "stderr": str, "missing": bool, "timed_out": bool}
and nothing is interpreted here: the readers on the Myriad side read the text, so one
reader serves every node and a reader fix needs no redeploy. A tool that is not installed
is `missing`, a tool that hangs is killed after its timeout (with everything it started)
and is `timed_out`.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # One probe's outcome; see the module docstring.
    Record = dict[str, Any]

# Output beyond these sizes is cut: a runaway tool must not flood the control node, and
# no probe we read legitimately prints more (nvidia-smi -q -x for 8 GPUs is ~200 KB).
STDOUT_LIMIT = 4 * 1024 * 1024
STDERR_LIMIT = 8 * 1024


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit]


def record(
    rc: int | None,
    stdout: str = "",
    stderr: str = "",
    missing: bool = False,
    timed_out: bool = False,
) -> Record:
    return {
        "rc": rc,
        "stdout": _cut(stdout, STDOUT_LIMIT),
        "stderr": _cut(stderr, STDERR_LIMIT),
        "missing": missing,
        "timed_out": timed_out,
    }


def as_json(value: Any) -> Record:
    """A probe that reads a structure itself (sysfs, digests) hands it over as JSON text."""
    return record(0, json.dumps(value, sort_keys=True))


def run(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> Record:
    """Run a command in its own session, so a timeout kills it and all it started."""
    if shutil.which(argv[0]) is None:
        return record(None, stderr=f"{argv[0]}: command not found", missing=True)
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=env,
        )
    except OSError as exc:
        return record(None, stderr=f"{argv[0]}: {exc}", missing=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        try:
            out, err = process.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            out, err = b"", b""
        return record(
            None,
            out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace") + f"\nkilled after {timeout:g}s",
            timed_out=True,
        )
    return record(
        process.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    )


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()


def read_text(path: str) -> str | None:
    # Read in small pieces: procfs answers one huge read() with ENOMEM.
    chunks: list[bytes] = []
    size = 0
    try:
        with open(path, "rb") as handle:
            while size <= STDOUT_LIMIT:
                chunk = handle.read(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
    except FileNotFoundError:
        return None
    return b"".join(chunks).decode("utf-8", "replace")


def read_file(path: str) -> Record:
    text = read_text(path)
    if text is None:
        return record(None, stderr=f"{path}: no such file", missing=True)
    return record(0, text)


def at(root: str, path: str) -> str:
    """`path` of the node under `root` (`/` on a node; a fake tree in tests)."""
    return os.path.join(root, path.lstrip("/"))


def read_files(root: str, patterns: list[str]) -> Record:
    """Several files as one probe: stdout is a JSON object of node path -> content."""
    contents: dict[str, str] = {}
    for pattern in patterns:
        for path in sorted(glob.glob(at(root, pattern))):
            if os.path.isfile(path):
                text = read_text(path)
                if text is not None:
                    contents["/" + os.path.relpath(path, root)] = text
    if not contents:
        return record(None, stderr=f"none of {', '.join(patterns)} exists", missing=True)
    return as_json(contents)


def attr(path: str) -> str | None:
    """One sysfs attribute, stripped; None when it cannot be read."""
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
