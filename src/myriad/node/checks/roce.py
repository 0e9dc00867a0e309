"""RoCE checks: the lossless-Ethernet QoS the roce role sets on every RoCE NIC (mlnx_qos)
and the NICs' MTU (ip link)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from myriad.node.checks.model import (
    Check,
    Context,
    Expect,
    Outcome,
    Skip,
    bringup_fix,
    each,
    link_mtu,
    listed,
    unavailable,
    unknown,
    verdict,
)
from myriad.node.facts import NodeFacts
from myriad.node.hardware.gids import gid_problems
from myriad.node.parsers import MlnxQos

FIX = bringup_fix("roce", "or restart myriad-roce-qos.service")


def _netdevs(c: Context) -> list[str] | Skip:
    """The RoCE NICs' interfaces, or why the RoCE checks do not apply."""
    if c.spec.network.fabric != "roce":
        return Skip("network.fabric", "fabric is not RoCE")
    nics = c.variables.get("roce_nics") or []
    if not nics:
        return Skip(f"{c.p}.nics.compute", f"profile {c.pool.profile} has no RoCE NICs")
    return [str(nic["netdev"]) for nic in nics]


def _qos_each(
    expected: dict[str, Any],
    facts: NodeFacts,
    read: Callable[[MlnxQos, Any], Any],
    show: Callable[[Any], str],
) -> Outcome:
    """Compare `read(qos, expected value)` with the expected value on every RoCE NIC; a
    value the NIC did not report (None in what `read` gives) is unknown, not a pass."""
    want = expected["value"]
    problems, unread = [], []
    for netdev in expected["names"]:
        qos = facts.qos.get(netdev)
        if qos is None:
            return unknown(f"mlnx_qos -i {netdev} was not gathered")
        if not qos.ok:
            outcome = unavailable(qos)
            if outcome.status == "error":
                return outcome
            problems.append(f"{netdev}: {qos.detail}")
            continue
        value = read(qos.get(), want)
        if value == want:
            continue
        if _differs(value, want):
            problems.append(f"{netdev}: {show(value)}")
        elif _has_unknown(value):
            unread.append(f"{netdev}: not reported ({show(value)})")
        else:
            problems.append(f"{netdev}: {show(value)}")
    return verdict(problems, f"{show(want)} on {len(expected['names'])}", unread)


def _differs(value: Any, want: Any) -> bool:
    """A difference the NIC did report: parts it left out (None) are unknown, not wrong."""
    if isinstance(value, list) and isinstance(want, list) and len(value) == len(want):
        return any(_differs(v, w) for v, w in zip(value, want, strict=True))
    return value is not None and value != want


def _has_unknown(value: Any) -> bool:
    if isinstance(value, list):
        return any(_has_unknown(v) for v in value)
    return value is None


# --- roce.trust ------------------------------------------------------------------------------


def _derive_trust(c: Context) -> Expect | Skip:
    netdevs = _netdevs(c)
    return (
        netdevs if isinstance(netdevs, Skip) else Expect(each(netdevs, "dscp"), "network.roce", FIX)
    )


ROCE_TRUST = Check(
    id="roce.trust",
    title="RoCE trust dscp",
    spec_fields=("network.roce",),
    derive=_derive_trust,
    evaluate=lambda expected, facts, view, node: _qos_each(
        expected, facts, lambda qos, _: qos.trust or None, lambda value: f"trust {value}"
    ),
    explain=lambda expected: f"{expected['value']} on {listed(expected['names'])}",
)


# --- roce.pfc --------------------------------------------------------------------------------


def _derive_pfc(c: Context) -> Expect | Skip:
    netdevs = _netdevs(c)
    if isinstance(netdevs, Skip):
        return netdevs
    return Expect(
        each(netdevs, int(c.variables["roce_priority"])), "network.roce.pfc_priority", FIX
    )


def _pfc_value(qos: MlnxQos, want: Any) -> Any:
    enabled = qos.pfc_enabled
    return enabled[0] if len(enabled) == 1 else list(enabled)


def _show_pfc(value: Any) -> str:
    return f"PFC on {value}" if isinstance(value, int) else f"PFC on {list(value) or 'none'}"


ROCE_PFC = Check(
    id="roce.pfc",
    title="PFC on the RoCE priority only",
    spec_fields=("network.roce.pfc_priority",),
    derive=_derive_pfc,
    evaluate=lambda expected, facts, view, node: _qos_each(expected, facts, _pfc_value, _show_pfc),
    explain=lambda expected: f"{_show_pfc(expected['value'])} on {listed(expected['names'])}",
)


# --- roce.dscp -------------------------------------------------------------------------------


def _derive_dscp(c: Context) -> Expect | Skip:
    netdevs = _netdevs(c)
    if isinstance(netdevs, Skip):
        return netdevs
    v = c.variables
    pairs = [
        [int(v["roce_dscp"]), int(v["roce_priority"])],
        [int(v["roce_cnp_dscp"]), int(v["roce_cnp_priority"])],
    ]
    return Expect(each(netdevs, pairs), "network.roce.dscp, cnp_dscp", FIX)


def _dscp_pairs(qos: MlnxQos, want: Sequence[Sequence[int]]) -> list[list[Any]]:
    """The NIC's priority for each DSCP the spec maps, in the spec's order."""
    return [[dscp, qos.dscp_to_priority.get(dscp)] for dscp, _ in want]


def _show_dscp(pairs: Iterable[Sequence[Any]]) -> str:
    return ", ".join(f"{dscp}→{priority}" for dscp, priority in pairs)


ROCE_DSCP = Check(
    id="roce.dscp",
    title="DSCP to priority mapping",
    spec_fields=("network.roce.dscp", "network.roce.cnp_dscp"),
    derive=_derive_dscp,
    evaluate=lambda expected, facts, view, node: _qos_each(
        expected, facts, _dscp_pairs, _show_dscp
    ),
    explain=lambda expected: f"{_show_dscp(expected['value'])} on {listed(expected['names'])}",
)


# --- roce.mtu --------------------------------------------------------------------------------


def _derive_mtu(c: Context) -> Expect | Skip:
    netdevs = _netdevs(c)
    if isinstance(netdevs, Skip):
        return netdevs
    mtu = int(c.variables.get("roce_mtu", 9000))
    if not mtu:
        return Skip("network.roce.mtu", "roce_mtu 0 leaves the MTU alone")
    return Expect(each(netdevs, mtu), "network.roce.mtu", FIX)


ROCE_MTU = Check(
    id="roce.mtu",
    title="RoCE interface MTU",
    spec_fields=("network.roce.mtu",),
    derive=_derive_mtu,
    evaluate=lambda expected, facts, view, node: link_mtu(
        expected["names"], expected["value"], facts
    ),
    explain=lambda expected: f"{expected['value']} on {listed(expected['names'])}",
)


# --- roce.address --------------------------------------------------------------------------------


def _derive_addresses(c: Context) -> Expect | Skip:
    netdevs = _netdevs(c)
    if isinstance(netdevs, Skip):
        return netdevs
    # The node's own roce_nics (host variables) carry its rail addresses.
    wanted = {
        str(nic["netdev"]): str(nic["address"])
        for nic in c.variables.get("roce_nics") or []
        if nic.get("address")
    }
    if not wanted:
        return Skip("network.addressing.compute", "no rail addresses are planned for this node")
    return Expect(wanted, "network.addressing.compute", bringup_fix("roce"))


def _evaluate_addresses(
    expected: dict[str, str], facts: NodeFacts, view: object, node: str
) -> Outcome:
    if not facts.addresses.ok:
        return unavailable(facts.addresses)
    held = facts.addresses.get()
    problems = []
    for netdev, address in expected.items():
        if netdev not in held:
            problems.append(f"{netdev}: no such interface")
        elif address not in held[netdev]:
            have = listed(list(held[netdev])) or "no IPv4 address"
            problems.append(f"{netdev}: {have}, not {address}")
    return verdict(problems, f"{len(expected)} rail(s) hold their addresses")


ROCE_ADDRESS = Check(
    id="roce.address",
    title="RoCE rail IPv4 address (the RoCEv2 GID comes from it)",
    spec_fields=("network.addressing.compute",),
    derive=_derive_addresses,
    evaluate=_evaluate_addresses,
    explain=lambda expected: listed([f"{k} {v}" for k, v in expected.items()]),
    per_node=True,
)


# --- roce.gid_index ------------------------------------------------------------------------------


def _derive_gid(c: Context) -> Expect | Skip:
    netdevs = _netdevs(c)
    if isinstance(netdevs, Skip):
        return netdevs
    rails = {
        str(nic["device"]): str(nic["address"])
        for nic in c.variables.get("roce_nics") or []
        if nic.get("address") and nic.get("device")
    }
    if not rails:
        return Skip("network.addressing.compute", "no rail addresses are planned for this node")
    pinned = c.spec.network.roce_qos.gid_index
    fix = (
        "check that each rail's address is on its netdev (`ip -4 addr`; the kernel adds the "
        "GID with it); where the index differs between rails or from the spec, rebuild the "
        "images with NCCL 2.21 or later (it picks the RoCEv2 GID itself) or give every rail "
        "the same address layout and set network.roce_qos.gid_index to the index found"
    )
    return Expect({"rails": rails, "pinned": pinned}, "network.roce_qos.gid_index", fix)


def _evaluate_gid(expected: dict[str, Any], facts: NodeFacts, view: object, node: str) -> Outcome:
    if not facts.roce_gids.ok:
        return unavailable(facts.roce_gids)
    problems, found = gid_problems(facts.roce_gids.get(), expected["rails"], expected["pinned"])
    indices = sorted(set(found.values()))
    good = f"RoCEv2 IPv4 GID at index {indices[0]} on every rail" if indices else ""
    return verdict(problems, good)


ROCE_GID = Check(
    id="roce.gid_index",
    title="each rail's RoCEv2 IPv4 GID sits at one index (what NCCL before 2.21 needs)",
    spec_fields=("network.roce_qos.gid_index",),
    derive=_derive_gid,
    evaluate=_evaluate_gid,
    explain=lambda expected: (
        f"one RoCEv2 IPv4 GID index on {len(expected['rails'])} rail(s)"
        + (f", index {expected['pinned']}" if expected["pinned"] is not None else "")
    ),
    per_node=True,
)


# --- roce.route ----------------------------------------------------------------------------------


def _derive_routes(c: Context) -> Expect | Skip:
    netdevs = _netdevs(c)
    if isinstance(netdevs, Skip):
        return netdevs
    # As roles/roce/vars/main.yml numbers them: rail i's table is the base + i, in
    # roce_nics order; a rail with a gateway routes its rail network via the leaf there and
    # in main.
    base = int(c.variables.get("roce_route_table_base", 100))
    rails = [
        {
            "netdev": str(nic["netdev"]),
            "network": str(nic["rail_network"]),
            "gateway": str(nic["gateway"]),
            "table": str(base + index),
        }
        for index, nic in enumerate(c.variables.get("roce_nics") or [])
        if nic.get("gateway") and nic.get("rail_network")
    ]
    if not rails:
        return Skip(
            "network.addressing.rail_subnets",
            "no rail has a leaf gateway (stretched rail subnets, or no rail addresses)",
        )
    return Expect(rails, "network.addressing.rail_subnets", bringup_fix("roce"))


def _evaluate_routes(
    expected: list[dict[str, str]], facts: NodeFacts, view: object, node: str
) -> Outcome:
    if not facts.routes.ok:
        return unavailable(facts.routes)
    routes = facts.routes.get()
    problems = []
    for rail in expected:
        for table in (rail["table"], "main"):
            held = [r for r in routes if r.table == table and r.dst == rail["network"]]
            good = [r for r in held if r.gateway == rail["gateway"] and r.dev == rail["netdev"]]
            if good:
                continue
            want = f"{rail['network']} via {rail['gateway']} dev {rail['netdev']} table {table}"
            have = listed([f"via {r.gateway or 'no gateway'} dev {r.dev}" for r in held])
            problems.append(f"{want}: " + (f"routed {have} instead" if held else "missing"))
    return verdict(problems, f"{len(expected)} rail network(s) via their leaf, in both tables")


ROCE_ROUTE = Check(
    id="roce.route",
    title="each rail's network routed via its leaf gateway (rail table and main)",
    spec_fields=("network.addressing.rail_subnets",),
    derive=_derive_routes,
    evaluate=_evaluate_routes,
    explain=lambda expected: listed(
        [f"{r['network']} via {r['gateway']} dev {r['netdev']}" for r in expected]
    ),
    per_node=True,
)
