"""A roll's memory: `roll.json` (where every node stands) and `roll.log` (what happened when),
both in the roll's run folder `<state>/runs/<stamp>-roll/`.

`roll.json` is rewritten whole (write, fsync, rename) after every step, so a roll killed at
any instant (SIGTERM or SIGKILL) leaves the last completed step on disk and `--resume`
continues from there. A node's status only moves forward:

    pending → drained → converged → done
                 ↘ skipped (its jobs outlived --drain-timeout; resumed untouched)
                 ↘ failed  (bring-up or validation failed; stays drained)

`roll.log` has one line per event, `2026-12-01T18:30:02.123Z node03 drained ...`, appended
and flushed as it happens; its timestamps are what proves one batch at a time.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from myriad.errors import OpsError
from myriad.fsutil import atomic_write_text

NodeStatus = Literal["pending", "drained", "converged", "done", "skipped", "failed"]
FINAL: frozenset[str] = frozenset({"done", "skipped", "failed"})
STATE_FILE = "roll.json"
LOG_FILE = "roll.log"
RUN_SUFFIX = "-roll"
VERSION = 1


def stamp(at: float | None = None) -> str:
    moment = time.time() if at is None else at
    return (
        time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment))
        + f".{int(moment * 1000) % 1000:03d}Z"
    )


def read_run_state(path: Path, version: int, kind: str, run: str) -> dict[str, Any]:
    """A day-2 run's state file (`kind`: "roll state", "acceptance state"), for `--resume`:
    its JSON document, or an OpsError saying why `run` cannot resume."""
    article = "an" if kind[0] in "aeiou" else "a"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise OpsError(f"{path}: no {kind} here") from None
    except json.JSONDecodeError as exc:
        raise OpsError(f"{path} is damaged ({exc.msg}); the {run} cannot resume") from None
    if not isinstance(data, dict) or data.get("version") != version:
        raise OpsError(f"{path}: not {article} {kind} of this Myriad (version {version})")
    return data


def write_run_state(path: Path, data: Mapping[str, Any]) -> None:
    """Written whole (atomically), readable by its owner only: a killed run loses nothing."""
    atomic_write_text(path, json.dumps(data, indent=2) + "\n", mode=0o600)


@dataclass
class RollState:
    run_dir: Path
    data: dict[str, Any]

    @property
    def path(self) -> Path:
        return self.run_dir / STATE_FILE

    @property
    def log_path(self) -> Path:
        return self.run_dir / LOG_FILE

    @classmethod
    def create(
        cls,
        run_dir: Path,
        *,
        cluster: str,
        reason: str,
        options: Mapping[str, Any],
        batches: Sequence[Mapping[str, Any]],
        controller: str = "pending",
        take_over: bool = False,
    ) -> RollState:
        nodes = {
            node: {"status": "pending", "batch": batch["index"], "detail": ""}
            for batch in batches
            for node in batch["nodes"]
        }
        state = cls(
            run_dir,
            {
                "version": VERSION,
                "cluster": cluster,
                "reason": reason,
                "options": dict(options),
                "controller": controller,
                # replace: a drain by someone else is taken over (the new machine is the fix).
                "take_over": take_over,
                "batches": [dict(b) for b in batches],
                "nodes": nodes,
                "finished": False,
                "outcome": "",
            },
        )
        state.save()
        return state

    @classmethod
    def load(cls, run_dir: Path) -> RollState:
        return cls(run_dir, read_run_state(run_dir / STATE_FILE, VERSION, "roll state", "roll"))

    def save(self) -> None:
        write_run_state(self.path, self.data)

    def status(self, node: str) -> str:
        return str(self.data["nodes"][node]["status"])

    def set(self, node: str, status: NodeStatus, detail: str = "", **extra: Any) -> None:
        record = self.data["nodes"][node]
        record.update(status=status, detail=detail, **extra)
        self.save()

    def record(self, node: str) -> dict[str, Any]:
        record: dict[str, Any] = self.data["nodes"][node]
        return record

    def count(self, status: str) -> int:
        return sum(1 for r in self.data["nodes"].values() if r["status"] == status)

    def log(self, subject: str, event: str, detail: str = "") -> str:
        line = f"{stamp()} {subject} {event}" + (f" {detail}" if detail else "")
        with self.log_path.open("a") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        return line


def unfinished(runs: Path) -> Path | None:
    """The newest roll run folder whose roll did not finish, if any."""
    if not runs.is_dir():
        return None
    for folder in sorted(runs.glob(f"*{RUN_SUFFIX}*"), reverse=True):
        path = folder / STATE_FILE
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError:
            return folder
        if not data.get("finished"):
            return folder
    return None
