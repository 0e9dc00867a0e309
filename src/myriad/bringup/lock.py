"""One run per cluster at a time: the cluster's lock.

The lock is `<state root>/run.lock`, taken with `fcntl.flock`. The kernel holds it for the
open file, so it holds across processes and checkouts (the state root does not depend on
the current directory) and it is released the moment its holder dies, even by SIGKILL: a
stale lock cannot block anyone. Who holds it (pid, host, user, verb, since when) is written
beside it, in `run.lock.json`, for the message a second run gives; a holder file left by a
killed run is simply replaced by the next one to take the lock.

Usage, for any verb that changes nodes (`myriad up`, `bringup`, day-2 operations):

    with hold_cluster_lock(state, "bringup"):
        ...

A second run refuses with ClusterBusy naming the holder, or with `wait_s` waits that long
for the lock first. Nothing is imported from the rest of bring-up, so `myriad.ops` can use it.
"""

from __future__ import annotations

import fcntl
import getpass
import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from myriad.errors import ClusterBusy, StateError
from myriad.fsutil import atomic_write_text

log = logging.getLogger(__name__)

LOCK_FILE = "run.lock"
HOLDER_FILE = "run.lock.json"
_POLL_S = 0.5


class HasRoot(Protocol):
    @property
    def root(self) -> Path: ...


@dataclass(frozen=True, slots=True)
class Holder:
    pid: int
    host: str
    user: str
    verb: str
    started_at: str

    def describe(self) -> str:
        return (
            f"`myriad {self.verb}` (pid {self.pid}, {self.user}@{self.host}) "
            f"since {self.started_at}"
        )


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _root(state: HasRoot | Path) -> Path:
    return state if isinstance(state, Path) else state.root


def read_holder(state: HasRoot | Path) -> Holder | None:
    """Who holds (or last held) the lock, if anyone wrote it down; None if unreadable."""
    try:
        data: Any = json.loads((_root(state) / HOLDER_FILE).read_text())
        return Holder(
            pid=int(data["pid"]),
            host=str(data["host"]),
            user=str(data["user"]),
            verb=str(data["verb"]),
            started_at=str(data["started_at"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def is_locked(state: HasRoot | Path) -> bool:
    """Whether a run holds the cluster's lock now (tries it without waiting)."""
    path = _root(state) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def _busy(state: HasRoot | Path, waited_s: float) -> ClusterBusy:
    holder = read_holder(state)
    who = holder.describe() if holder else "another run (its holder file is unreadable)"
    waited = f" (waited {waited_s:.0f} s)" if waited_s else ""
    return ClusterBusy(
        f"the cluster is busy: {who} holds {_root(state) / LOCK_FILE}{waited}; "
        "let it finish, or pass --wait to queue behind it"
    )


@contextmanager
def hold_cluster_lock(state: HasRoot | Path, verb: str, *, wait_s: float = 0.0) -> Iterator[Holder]:
    """Hold the cluster's lock for the block; ClusterBusy if another run holds it."""
    root = _root(state)
    try:
        fd = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise StateError(
            f"cannot open the cluster's lock {root / LOCK_FILE}: {exc.strerror}"
        ) from None
    try:
        deadline = time.monotonic() + wait_s
        started = time.monotonic()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise _busy(state, time.monotonic() - started if wait_s else 0.0) from None
                time.sleep(_POLL_S)
        left = read_holder(state)
        if left is not None:
            # The kernel released its flock when it died; only its note is left.
            log.warning(
                "taking over the lock of %s, which ended without releasing it", left.describe()
            )
        holder = Holder(os.getpid(), socket.gethostname(), _user(), verb, _now())
        try:
            atomic_write_text(root / HOLDER_FILE, json.dumps(asdict(holder)) + "\n", mode=0o600)
        except OSError as exc:
            raise StateError(
                f"cannot write {root / HOLDER_FILE}: {exc.strerror}; nothing was changed"
            ) from None
        try:
            yield holder
        finally:
            (root / HOLDER_FILE).unlink(missing_ok=True)
    finally:
        os.close(fd)  # closing the file releases the flock
