"""The two atomic writers: the controller's (myriad.fsutil) and the node's (myriad.node.files)
behave alike — the file appears whole with its mode, a failed write leaves the old content
and no temporary file, and the durable write reaches the disk with fsync."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from myriad import fsutil
from myriad.node import files

Writer = Callable[..., None]
WRITERS = [fsutil.atomic_write_bytes, files.atomic_write_bytes]


@pytest.mark.parametrize("write", WRITERS, ids=["fsutil", "node"])
def test_the_file_appears_whole_with_its_mode(write: Writer, tmp_path: Path) -> None:
    path = tmp_path / "deep" / "state.json"
    write(path, b"{}\n", 0o600)
    assert path.read_bytes() == b"{}\n"
    assert path.stat().st_mode & 0o777 == 0o600
    write(path, b"[]\n", 0o644)
    assert path.read_bytes() == b"[]\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["state.json"]


@pytest.mark.parametrize("write", WRITERS, ids=["fsutil", "node"])
def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    write: Writer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "metrics.prom"
    path.write_bytes(b"old\n")

    def refuse(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", refuse)
    with pytest.raises(OSError, match="No space"):
        write(path, b"new\n")
    assert path.read_bytes() == b"old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.prom"]


@pytest.mark.parametrize("write", WRITERS, ids=["fsutil", "node"])
def test_the_write_is_fsynced_before_the_rename(
    write: Writer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real(fd))
    write(tmp_path / "result.json", b"{}")
    assert len(synced) == 1


def test_the_controller_may_skip_the_fsync_for_files_rewritten_every_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", synced.append)
    fsutil.atomic_write_bytes(tmp_path / "node01.tar.gz", b"seed", 0o600, durable=False)
    assert synced == []
    assert (tmp_path / "node01.tar.gz").read_bytes() == b"seed"
