"""Locked-memory limits: what a login session gets (`ulimit -l` through `su -`), what the
node was started with (PID 1), and the limits.d files that set them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from myriad.node.facts.declare import Declared, Probe, Reading, fact, file, files, text_files
from myriad.node.facts.fact import Fact, ok
from myriad.node.facts.probe import run
from myriad.node.parsers import ParseFailure


@dataclass(frozen=True, slots=True)
class Memlock:
    """`ulimit -l` (soft, hard) in a PAM login session, in KiB or "unlimited" as the shell
    prints them, and PID 1's hard limit (`ceiling`), which a container cannot exceed."""

    soft: str
    hard: str
    ceiling: str | None = None


def init_memlock(text: str) -> str | None:
    """PID 1's hard memlock limit from /proc/1/limits, in ulimit's words (KiB/unlimited)."""
    for line in text.splitlines():
        if line.startswith("Max locked memory"):
            columns = line.split()
            hard = columns[4] if len(columns) >= 5 else ""
            if hard == "unlimited":
                return hard
            if hard.isdigit():
                return str(int(hard) // 1024)
    return None


def _memlock(text: str) -> Memlock:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # A login shell may print a banner (motd) first; the limits are the last two lines.
    if len(lines) < 2 or not all(re.fullmatch(r"unlimited|\d+", v) for v in lines[-2:]):
        raise ParseFailure("ulimit -l", f"expected two limits, got {text.strip()[:80]!r}")
    return Memlock(soft=lines[-2], hard=lines[-1])


# pam_limits applies limits.d in a PAM session (su -, sshd), not in the session Ansible
# runs the gatherer from, so the limit a user's job gets is read through `su -`.
SESSION = Probe(
    "memlock_session",
    lambda o: run(["su", "-", "root", "-c", "ulimit -S -l; ulimit -H -l"], o.timeout),
)
# What the node was started with: in a container, the most its sessions can get.
INIT = file("init_limits", "/proc/1/limits")


def _read(r: Reading) -> Fact[Memlock]:
    memlock = r.read(SESSION.name, "ulimit -l in su -", _memlock)
    ceiling = r.read(INIT.name, "/proc/1/limits", init_memlock)
    if not memlock.ok or not ceiling.ok:
        return memlock
    value = memlock.get()
    return ok(Memlock(value.soft, value.hard, ceiling.get()))


MEMLOCK: Declared[Fact[Memlock]] = Declared("memlock", (SESSION, INIT), _read)
LIMITS = fact(
    "limits",
    files("limits", "/etc/security/limits.conf", "/etc/security/limits.d/*.conf"),
    "limits.d",
    text_files("limits.d"),
)
