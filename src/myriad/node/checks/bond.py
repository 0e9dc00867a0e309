"""Storage bond checks: the bond the storage_net role builds from the storage NICs
(/proc/net/bonding, ip link)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from myriad.node.checks.model import (
    Check,
    ClusterView,
    Context,
    Expect,
    Outcome,
    Skip,
    bringup_fix,
    failed,
    link_mtu,
    passed,
    unavailable,
    verdict,
)
from myriad.node.facts import NodeFacts

CABLE_FIX = "check the cables and the switch's port-channel (LACP) for the down members"


def _bond(c: Context) -> dict[str, Any] | Skip:
    """The bond the storage_net role is asked to build, or why there is none."""
    v = c.variables
    interfaces = v.get("storage_net_bond_interfaces") or []
    if not interfaces or not c.storage_ports:
        return Skip(
            f"{c.p}.nics.storage.bond", f"profile {c.pool.profile} has no bonded storage NICs"
        )
    return {
        "name": str(v.get("storage_net_bond_name", "bond0")),
        "mode": str(v.get("storage_net_bond_mode", "802.3ad")),
        "slaves": [str(name) for name in interfaces],
        "speed_mbps": c.storage_ports[0].speed_gbps * 1000,
        "mtu": int(v.get("storage_net_mtu", 9000)),
    }


def _derive(spec_field: str, fix: str) -> Callable[[Context], Expect | Skip]:
    """The four bond checks share one expected bond; each names its own field and fix."""

    def derive(c: Context) -> Expect | Skip:
        bond = _bond(c)
        if isinstance(bond, Skip):
            return bond
        return Expect(bond, spec_field.format(p=c.p), fix)

    return derive


def _read_bond(expected: dict[str, Any], facts: NodeFacts) -> tuple[Any, Outcome | None]:
    """The node's bond of that name, or the outcome when there is none to judge."""
    name = expected["name"]
    if not facts.bonds.ok:
        if facts.bonds.state == "missing":
            return None, failed(f"{name} does not exist (bonding not loaded)")
        return None, unavailable(facts.bonds)
    bond = facts.bonds.get().get(name)
    if bond is None:
        return None, failed(f"{name} does not exist")
    return bond, None


# --- bond.mode -------------------------------------------------------------------------------


def _evaluate_mode(
    expected: dict[str, Any], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    bond, problem = _read_bond(expected, facts)
    if problem is not None:
        return problem
    return passed(bond.mode) if bond.mode == expected["mode"] else failed(bond.mode)


BOND_MODE = Check(
    id="bond.mode",
    title="storage bond mode",
    spec_fields=("profiles.*.nics.storage.bond",),
    derive=_derive("{p}.nics.storage.bond", bringup_fix("storage_net")),
    evaluate=_evaluate_mode,
    explain=lambda expected: f"{expected['name']} {expected['mode']}",
)


# --- bond.slaves -----------------------------------------------------------------------------


def _evaluate_slaves(
    expected: dict[str, Any], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    bond, problem = _read_bond(expected, facts)
    if problem is not None:
        return problem
    want = expected["slaves"]
    slaves = {slave.name: slave for slave in bond.slaves}
    problems = [f"{name} not in the bond" for name in want if name not in slaves]
    problems += [f"{s.name} {s.mii_status}" for s in bond.slaves if not s.up]
    problems += [f"{name} not expected" for name in slaves if name not in want]
    return verdict(problems, f"{len(want)} members up")


BOND_SLAVES = Check(
    id="bond.slaves",
    title="storage bond members up",
    spec_fields=("profiles.*.nics.storage",),
    derive=_derive("{p}.nics.storage", CABLE_FIX),
    evaluate=_evaluate_slaves,
    explain=lambda expected: f"{expected['name']}: {', '.join(expected['slaves'])} up",
)


# --- bond.speed ------------------------------------------------------------------------------


def _evaluate_speed(
    expected: dict[str, Any], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    bond, problem = _read_bond(expected, facts)
    if problem is not None:
        return problem
    want = expected["speed_mbps"]
    slow = [
        f"{s.name} {s.speed_mbps} Mb/s"
        for s in bond.slaves
        if s.speed_mbps is not None and s.speed_mbps != want
    ]
    # A member whose speed the kernel does not know (a down link says "Unknown").
    unread = [f"{s.name} speed unknown" for s in bond.slaves if s.speed_mbps is None]
    return verdict(slow, f"{want} Mb/s each", unread)


BOND_SPEED = Check(
    id="bond.speed",
    title="storage bond member speed",
    spec_fields=("profiles.*.nics.storage.model",),
    derive=_derive("{p}.nics.storage.model", CABLE_FIX),
    evaluate=_evaluate_speed,
    explain=lambda expected: f"{expected['speed_mbps']} Mb/s per member",
)


# --- bond.mtu --------------------------------------------------------------------------------


BOND_MTU = Check(
    id="bond.mtu",
    title="storage bond MTU",
    spec_fields=("profiles.*.nics.storage.bond",),
    derive=_derive("{p}.nics.storage.bond", bringup_fix("storage_net")),
    evaluate=lambda expected, facts, view, node: link_mtu(
        [expected["name"]], expected["mtu"], facts
    ),
    explain=lambda expected: f"{expected['name']} MTU {expected['mtu']}",
)
