"""What a slurm.conf change needs on the controller: `scontrol reconfigure` or a restart.

scontrol(1) of Slurm 22.05 (`reconfigure`): slurmctld re-reads slurm.conf in place and tells
every slurmd to do the same, except that it must be restarted when nodes are added to or
removed from the cluster, or when AuthType, ControlMachine, PluginDir, StateSaveLocation,
SlurmctldHost, SlurmctldPort or SlurmdPort change; slurm.conf(5) adds SelectType ("can only
be changed by restarting slurmctld"). Running jobs survive both: slurmctld restores them
from StateSaveLocation on restart, with the DRAIN state and reason of every node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

Reload = Literal["none", "reconfigure", "restart"]

RESTART_KEYS = frozenset(
    key.lower()
    for key in (
        "AuthType",
        "ControlMachine",
        "PluginDir",
        "StateSaveLocation",
        "SlurmctldHost",
        "SlurmctldPort",
        "SlurmdPort",
        "SelectType",
    )
)
# Lines that describe one object each, keyed by their name (NodeName=gpu[001-008] ...).
OBJECT_KEYS = ("nodename", "partitionname", "nodeset", "downnodes")


def settings(text: str) -> dict[str, str]:
    """slurm.conf as {key: line}: `Key=Value` lines by key (SlurmctldHost may repeat, so
    its lines are joined), object lines (NodeName=..., PartitionName=...) by key and name."""
    found: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if "=" not in line:
            continue
        key, _, rest = line.partition("=")
        key = key.strip().lower()
        if key in OBJECT_KEYS:
            name = rest.split()[0] if rest.split() else ""
            found[f"{key}={name}"] = line
        else:
            found[key] = f"{found[key]}\n{line}" if key in found else line
    return found


def changed_keys(before: str, after: str) -> list[str]:
    """Keys (lower case; objects as `nodename=<names>`) added, removed or changed."""
    old, new = settings(before), settings(after)
    return sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))


def reload_for(keys: Iterable[str]) -> Reload:
    """The least the controller needs for these changed keys."""
    keys = list(keys)
    if not keys:
        return "none"
    for key in keys:
        name = key.split("=", 1)[0]
        # A node added or removed (its NodeName line appears or goes) needs a restart; a
        # changed NodeName line for the same names does not.
        if name in RESTART_KEYS or name in ("nodename", "nodeset"):
            return "restart"
    return "reconfigure"


def node_line_change(before: str, after: str) -> bool:
    """True when the set of NodeName lines differs (nodes added or removed)."""
    old = {k for k in settings(before) if k.startswith("nodename=")}
    new = {k for k in settings(after) if k.startswith("nodename=")}
    return old != new


def reload_for_texts(before: str, after: str) -> tuple[Reload, list[str]]:
    """The reload a slurm.conf change from `before` to `after` needs, and the keys."""
    keys = changed_keys(before, after)
    shape_only = [k for k in keys if not k.startswith(("nodename=", "nodeset="))]
    reload = reload_for(shape_only)
    if node_line_change(before, after):
        reload = "restart"
    elif reload == "none" and keys:
        # Same node names, other attributes (CPUs, memory, features): re-read in place.
        reload = "reconfigure"
    return reload, keys


def diff_texts(diff: object) -> tuple[str, str] | None:
    """(before, after) from an Ansible result's `diff` (a dict, or a list of them)."""
    items = diff if isinstance(diff, list) else [diff]
    for item in items:
        if isinstance(item, Mapping) and "before" in item and "after" in item:
            return str(item.get("before") or ""), str(item.get("after") or "")
    return None
