"""Slurm's node state, whole: the base state and every flag, each judged for running jobs.

Slurm keeps a node's state as one base state and a set of flags (`slurm.h`: NODE_STATE_*).
`scontrol show node` prints them as `BASE+FLAG+FLAG` (IDLE+COMPLETING+NOT_RESPONDING);
`sinfo`'s %T prints a lower-case word, compound for some flags (drained = IDLE+DRAIN,
draining = busy+DRAIN, failing = busy+FAIL) and a one-character suffix for others (sinfo(1)
"NODE STATE CODES": `*` not responding, `~` powered off, `#` powering up, `!` pending
power down, `%` powering down, `$` in a maintenance reservation, `@` pending reboot,
`^` reboot issued, `-` planned by the backfill scheduler). Both spellings are read into
the same `NodeState`; `problems()` says, flag by flag, why a job could not start there.
A word this table does not know is a problem too: unknown is never healthy.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["STATE_WORDS", "USABLE_BASES", "NodeState", "parse_node_state"]

# Base states (one per node) and whether a job can start on a node in it.
USABLE_BASES = frozenset({"IDLE", "ALLOCATED", "MIXED"})
_BASES = {
    "IDLE": "",
    "ALLOCATED": "",
    "MIXED": "",
    "DOWN": "down: slurmctld will not start jobs there",
    "ERROR": "in an error state",
    "FUTURE": "FUTURE: defined but not yet in service",
    "UNKNOWN": "state unknown to slurmctld (slurmd never registered)",
}
# Flags; an empty text means harmless for running jobs.
_FLAGS = {
    "COMPLETING": "",  # jobs ending; the node takes new work once they have
    "CLOUD": "",
    "PLANNED": "",
    "DYNAMIC_NORM": "",
    "RESUME": "",
    "UNDRAIN": "",
    "EXTERNAL": "",
    "DRAIN": "drained: slurmctld starts no new jobs there",
    "FAIL": "failed: slurmctld starts no new jobs there",
    "NOT_RESPONDING": "not responding to slurmctld",
    "POWERED_DOWN": "powered down",
    "POWER_DOWN": "about to be powered down",
    "POWERING_DOWN": "powering down",
    "POWERING_UP": "powering up, not yet usable",
    "POWER_UP": "about to be powered up",
    "POWER_DRAIN": "drained for a power down",
    "REBOOT_REQUESTED": "a reboot is pending",
    "REBOOT_ISSUED": "rebooting",
    "CANCEL_REBOOT": "",
    "MAINT": "in a maintenance reservation",
    "RESERVED": "in an advanced reservation: other jobs cannot use it",
    "INVALID_REG": "its registration was refused (slurmd's hardware differs from slurm.conf)",
    "DYNAMIC_FUTURE": "a dynamic node not yet registered",
    "BLOCKED": "blocked by a topology/block allocation",
    "PERFCTRS": "in use for network performance counters",
}
# Other spellings → (base or None, flags).
_ALIASES: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "ALLOC": ("ALLOCATED", ()),
    "MIX": ("MIXED", ()),
    "DRAINED": ("IDLE", ("DRAIN",)),
    "DRAINING": ("ALLOCATED", ("DRAIN",)),
    "DRNG": ("ALLOCATED", ("DRAIN",)),
    "FAILING": ("ALLOCATED", ("FAIL",)),
    "MAINTENANCE": (None, ("MAINT",)),
    "RES": (None, ("RESERVED",)),
    "REBOOT": (None, ("REBOOT_REQUESTED",)),
    "REBOOT^": (None, ("REBOOT_ISSUED",)),
    "INVAL": (None, ("INVALID_REG",)),
    "NO_RESPOND": (None, ("NOT_RESPONDING",)),
    "COMP": (None, ("COMPLETING",)),
}
_SUFFIXES = {
    "*": "NOT_RESPONDING",
    "~": "POWERED_DOWN",
    "#": "POWERING_UP",
    "!": "POWER_DOWN",
    "%": "POWERING_DOWN",
    "$": "MAINT",
    "@": "REBOOT_REQUESTED",
    "^": "REBOOT_ISSUED",
    "-": "PLANNED",
}
STATE_WORDS = frozenset(_BASES) | frozenset(_FLAGS) | frozenset(_ALIASES)


@dataclass(frozen=True, slots=True)
class NodeState:
    """A node's base state and flags, as Slurm names them (upper case)."""

    base: str | None
    flags: frozenset[str]
    unknown: tuple[str, ...] = ()

    def problems(self) -> list[str]:
        """Why no job could start on the node now; empty when one could."""
        found = []
        if self.base is None:
            found.append("no base state (IDLE, ALLOCATED, MIXED, ...)")
        elif _BASES[self.base]:
            found.append(_BASES[self.base])
        found += [_FLAGS[flag] for flag in sorted(self.flags) if _FLAGS[flag]]
        found += [f"state {word!r} is not one Myriad knows" for word in self.unknown]
        return found

    @property
    def usable(self) -> bool:
        return not self.problems()

    def describe(self) -> str:
        """`BASE+FLAG...` in scontrol's spelling, not responding as sinfo's `*`."""
        shown = [f for f in sorted(self.flags) if f != "NOT_RESPONDING"]
        text = "+".join([self.base or "?", *shown, *self.unknown])
        return text + ("*" if "NOT_RESPONDING" in self.flags else "")


def _word(word: str) -> tuple[str | None, set[str], list[str]]:
    flags: set[str] = set()
    while word and word[-1] in _SUFFIXES and word not in _ALIASES:
        flags.add(_SUFFIXES[word[-1]])
        word = word[:-1]
    if word in _BASES:
        return word, flags, []
    if word in _FLAGS:
        return None, flags | {word}, []
    if word in _ALIASES:
        base, more = _ALIASES[word]
        return base, flags | set(more), []
    return None, flags, [word] if word else []


def parse_node_state(text: str) -> NodeState:
    """`IDLE+COMPLETING+NOT_RESPONDING`, `down*`, `drained~`, `mixed-` ... → NodeState.

    Never raises: words it does not know are kept in `unknown` (and judged a problem)."""
    base: str | None = None
    flags: set[str] = set()
    unknown: list[str] = []
    for word in (w for w in text.strip().upper().split("+") if w):
        word_base, word_flags, word_unknown = _word(word)
        # The first base wins: in IDLE+DRAINED the compound word adds only its flag.
        if word_base is not None and base is None:
            base = word_base
        flags |= word_flags
        unknown += word_unknown
    if base is None and "COMPLETING" in flags:
        base = "ALLOCATED"  # sinfo's `completing`: jobs still ending on an otherwise busy node
    return NodeState(base, frozenset(flags), tuple(unknown))
