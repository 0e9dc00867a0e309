"""Fake tools for the gatherer's tests: small shell scripts on a PATH that holds nothing else,
so every tool not faked is genuinely missing; they call real ones by absolute path."""

from __future__ import annotations

import shutil
from pathlib import Path

SH = shutil.which("sh") or "/bin/sh"
CAT = shutil.which("cat") or "/bin/cat"
SLEEP = shutil.which("sleep") or "/bin/sleep"


def tool(bin_dir: Path, name: str, body: str) -> None:
    """bin_dir/name: a shell script running `body`."""
    path = bin_dir / name
    path.write_text(f"#!{SH}\n{body}\n", encoding="utf-8")
    path.chmod(0o755)


def printing(bin_dir: Path, name: str, source: Path, rc: int = 0) -> None:
    """bin_dir/name: a tool that prints `source` (a capture) and exits `rc`."""
    tool(bin_dir, name, f"{CAT} '{source}'\nexit {rc}")
