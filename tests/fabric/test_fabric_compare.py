"""The planned fabric against a discovered one: every fault reported once, with the fix,
and nothing else. Discovery here is built directly from the links (fast); test_ibsim.py
runs the same faults through ibsim and ibnetdiscover."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ibsim_fabric import (
    add_hca,
    discovered_without_sim,
    narrow,
    planned,
    remove,
    swap,
)
from myriad.plan.cabling import Cable
from myriad.plan.ibnet import NetLink, links_from_cables
from myriad.validate.cabling import compare_fabric, describe, fabric_report, planned_speed

ROOT = Path(__file__).resolve().parents[2]
STARTER = ROOT / "inventories" / "starter-64" / "cluster.yaml"
FAT_TREE = ROOT / "tests" / "fabric" / "fat-tree-512.yaml"
STARTER_CABLES, _ = planned(STARTER)
FAT_CABLES, _ = planned(FAT_TREE)


def _found(links: list[NetLink], cables: list = STARTER_CABLES) -> list[tuple[str, str, str]]:
    result = compare_fabric(cables, discovered_without_sim(links), speed_cap="HDR")
    return [(f.kind, f.message, f.fix) for f in result.findings]


# Starter faults: cables 5 and 9 swapped, cable 20 removed and an unplanned HCA in its
# port, cable 33 at 1x. Cable n is gpu0{(n-1)//8+1}'s mlx5_{(n-1)%8} in leaf port n.
STARTER_FAULTS = [
    (
        "unexpected-device",
        "HCA 'intruder mlx5_0' is not in the plan; plugged into is00-leaf001 port 20",
        "unplug it, or add it to the spec",
    ),
    (
        "swapped",
        "cables 5 and 9 are swapped: node gpu01 HCA mlx5_4 is in is00-leaf001 port 9 and "
        "node gpu02 HCA mlx5_0 in is00-leaf001 port 5; plan says is00-leaf001 port 5 and "
        "is00-leaf001 port 9",
        "swap the cables in is00-leaf001 port 5 and is00-leaf001 port 9",
    ),
    (
        "missing-link",
        "cable 20: node gpu03 HCA mlx5_3 to is00-leaf001 port 20 is not connected",
        "reseat or replace the cable and its transceivers; `ibportstate` shows the port",
    ),
    (
        "wrong-width",
        "cable 33 (node gpu05 HCA mlx5_0 to is00-leaf001 port 33) trained at 1xHDR; "
        "plan says 4xHDR",
        "reseat or replace the cable and its transceivers; `ibportstate` shows the port",
    ),
]


def starter_faulty_links() -> list[NetLink]:
    links = links_from_cables(STARTER_CABLES)
    links = narrow(swap(links, 4, 8), 32)
    return add_hca(remove(links, 19), "intruder mlx5_0", "is00-leaf001", 20)


def test_the_planned_fabric_passes() -> None:
    # ibsim's fabric runs at most HDR: the starter's NDR links are judged at that cap.
    for cables in (STARTER_CABLES, FAT_CABLES):
        discovered = discovered_without_sim(links_from_cables(cables))
        result = compare_fabric(cables, discovered, speed_cap="HDR")
        assert result.ok
        assert result.cables_as_planned == result.planned_cables == len(cables)


def test_starter_faults_are_reported_exactly() -> None:
    assert _found(starter_faulty_links()) == STARTER_FAULTS


def test_a_moved_cable_says_where_it_is_and_where_it_goes() -> None:
    # Cable 512: gpu64's mlx5_7 in the last leaf's port 12; ports 13-20 are free.
    links = links_from_cables(FAT_CABLES)
    moved = links[511]
    links[511] = NetLink(moved.a, 1, True, moved.b, 17)
    assert _found(links, FAT_CABLES) == [
        (
            "wrong-port",
            "node gpu64 HCA mlx5_7 is in is00-leaf026 port 17; plan says is00-leaf026 port 12",
            "move the cable from is00-leaf026 port 17 to is00-leaf026 port 12",
        )
    ]


# Issue #31: cable 600 (is00-leaf005 port 28 to is00-spine010 port 7) is taken out and
# cable 700 (is00-leaf010 port 28 to is00-spine006 port 15) is moved into the freed spine
# port. One move for cable 700, one missing link for cable 600: not two contradictory
# moves of the one cable in is00-spine010 port 7.
DELETED_AND_MOVED = [
    (
        "missing-link",
        "cable 600: is00-leaf005 port 28 to is00-spine010 port 7 is not connected; "
        "is00-spine010 port 7 holds cable 700",
        "move cable 700 out of is00-spine010 port 7 (its own finding), then connect "
        "is00-leaf005 port 28 to is00-spine010 port 7",
    ),
    (
        "wrong-port",
        "is00-leaf010 port 28 is in is00-spine010 port 7; plan says is00-spine006 port 15",
        "move the cable from is00-spine010 port 7 to is00-spine006 port 15",
    ),
]


def deleted_and_moved_links() -> list[NetLink]:
    links = links_from_cables(FAT_CABLES)
    links[699] = NetLink("is00-leaf010", 28, False, "is00-spine010", 7)
    return remove(links, 599)


def test_a_deleted_uplink_and_a_cable_moved_into_its_spine_port() -> None:
    assert _found(deleted_and_moved_links(), FAT_CABLES) == DELETED_AND_MOVED


def _moved(link: NetLink, switch: str, port: int) -> NetLink:
    """The link with its upper end (the plug in the switch) in another port."""
    return NetLink(link.a, link.a_port, link.a_hca, switch, port)


def test_two_moves_in_a_chain_are_two_moves() -> None:
    # Cable 600's spine end goes to the free is00-spine007 port 40, and cable 700's into
    # the port that freed (is00-spine010 port 7): each cable one move, nothing missing.
    links = links_from_cables(FAT_CABLES)
    links[599] = _moved(links[599], "is00-spine007", 40)
    links[699] = _moved(links[699], "is00-spine010", 7)
    assert _found(links, FAT_CABLES) == [
        (
            "wrong-port",
            "is00-leaf005 port 28 is in is00-spine007 port 40; plan says is00-spine010 port 7",
            "move the cable from is00-spine007 port 40 to is00-spine010 port 7",
        ),
        (
            "wrong-port",
            "is00-leaf010 port 28 is in is00-spine010 port 7; plan says is00-spine006 port 15",
            "move the cable from is00-spine010 port 7 to is00-spine006 port 15",
        ),
    ]


def test_three_cables_moved_round_are_three_moves() -> None:
    # gpu64's mlx5_5, mlx5_6 and mlx5_7 (cables 510-512, is00-leaf026 ports 10-12) each in
    # the next one's port, the last in the first's.
    links = links_from_cables(FAT_CABLES)
    for i, port in ((509, 11), (510, 12), (511, 10)):
        links[i] = _moved(links[i], "is00-leaf026", port)
    assert _found(links, FAT_CABLES) == [
        (
            "wrong-port",
            f"node gpu64 HCA mlx5_{hca} is in is00-leaf026 port {port}; plan says "
            f"is00-leaf026 port {planned}",
            f"move the cable from is00-leaf026 port {port} to is00-leaf026 port {planned}",
        )
        for hca, port, planned in ((5, 11, 10), (6, 12, 11), (7, 10, 12))
    ]


def test_a_swap_beside_a_missing_cable() -> None:
    # Cables 600 and 700 swap their spine ends; cable 601, on the next leaf port, is out.
    links = remove(swap(links_from_cables(FAT_CABLES), 599, 699), 600)
    assert _found(links, FAT_CABLES) == [
        (
            "swapped",
            "cables 600 and 700 are swapped: is00-leaf005 port 28 is in is00-spine006 port 15 "
            "and is00-leaf010 port 28 in is00-spine010 port 7; plan says is00-spine010 port 7 "
            "and is00-spine006 port 15",
            "swap the cables in is00-spine010 port 7 and is00-spine006 port 15",
        ),
        (
            "missing-link",
            "cable 601: is00-leaf005 port 29 to is00-spine011 port 7 is not connected",
            "reseat or replace the cable and its transceivers; `ibportstate` shows the port",
        ),
    ]


def test_a_spare_cable_in_a_moved_cables_port_is_unplugged() -> None:
    # Cable 600's spine end moved to the free is00-spine007 port 40, and a spare cable from
    # the free is00-leaf026 port 13 into the port it left (is00-spine010 port 7).
    links = links_from_cables(FAT_CABLES)
    links[599] = _moved(links[599], "is00-spine007", 40)
    links.append(NetLink("is00-leaf026", 13, False, "is00-spine010", 7))
    assert _found(links, FAT_CABLES) == [
        (
            "wrong-port",
            "is00-leaf005 port 28 is in is00-spine007 port 40; plan says is00-spine010 port 7",
            "move the cable from is00-spine007 port 40 to is00-spine010 port 7",
        ),
        (
            "unexpected-link",
            "is00-leaf026 port 13 is linked to is00-spine010 port 7; the plan has no cable "
            "between them",
            "unplug the cable",
        ),
    ]


def test_a_switch_that_is_not_there_is_one_finding() -> None:
    links = [link for link in links_from_cables(FAT_CABLES) if link.b != "is00-spine013"]
    assert _found(links, FAT_CABLES) == [
        (
            "missing-switch",
            "switch is00-spine013 was not discovered (the plan gives it 39 cables)",
            "power on is00-spine013 and check its links; its node description must be "
            "'is00-spine013'",
        )
    ]


def test_a_link_between_free_ports_is_unexpected() -> None:
    # Spine 13 has 39 leaf links (ports 1-39); the last leaf uses ports 1-12 and 21-33.
    links = [
        *links_from_cables(FAT_CABLES),
        NetLink("is00-leaf026", 14, False, "is00-spine013", 40),
    ]
    assert _found(links, FAT_CABLES) == [
        (
            "unexpected-link",
            "is00-leaf026 port 14 is linked to is00-spine013 port 40; the plan leaves both "
            "ports free",
            "unplug the cable",
        )
    ]


def test_a_slower_link_is_wrong_speed() -> None:
    links = links_from_cables(FAT_CABLES)
    discovered = discovered_without_sim(links)
    slow = discovered.links[600]
    from dataclasses import replace

    changed = type(discovered)(
        discovered.nodes,
        tuple(replace(link, speed="EDR") if link is slow else link for link in discovered.links),
    )
    (finding,) = compare_fabric(FAT_CABLES, changed).findings
    assert finding.kind == "wrong-speed"
    assert "trained at 4xEDR; plan says 4xHDR" in finding.message


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_any_single_swap_is_found_and_named(data: st.DataObject) -> None:
    links = links_from_cables(FAT_CABLES)
    i = data.draw(st.integers(0, len(links) - 1))
    j = data.draw(st.integers(0, len(links) - 1).filter(lambda n: n != i))
    result = compare_fabric(FAT_CABLES, discovered_without_sim(swap(links, i, j)))
    (finding,) = result.findings
    assert finding.kind == "swapped"
    first, second = sorted((i + 1, j + 1))
    assert finding.cables == (first, second)
    assert finding.fix == (
        f"swap the cables in {links[i].b} port {links[i].b_port} and "
        f"{links[j].b} port {links[j].b_port}"
    ) or finding.fix == (
        f"swap the cables in {links[j].b} port {links[j].b_port} and "
        f"{links[i].b} port {links[i].b_port}"
    )


_FAT_PORTS = planned(FAT_TREE)[1]
_MOVE = re.compile(r"move the cable from (.+) to (.+)")
_SWAP = re.compile(r"swap the cables in (.+) and (.+)")
_LINKED = re.compile(r"(.+) is linked to (.+); the plan")


def _as_built(links: list[NetLink]) -> set[frozenset[tuple[str, int]]]:
    return {frozenset({(link.a, link.a_port), (link.b, link.b_port)}) for link in links}


def _apply_fixes(links: list[NetLink], findings: list[tuple[str, str, str, tuple[int, ...]]]):
    """The fabric after a technician does every fix at once, read from the fixes' words."""
    place = {describe(end, _HCAS): end for cable in FAT_CABLES for end in _cable_ends(cable)}
    place |= {
        f"{switch} port {port}": (switch, port)
        for switch, count in _FAT_PORTS.items()
        for port in range(1, count + 1)
    }
    built = _as_built(links)
    to: dict[tuple[str, int], tuple[str, int]] = {}
    missing: list[frozenset[tuple[str, int]]] = []
    for kind, message, fix, cables in findings:
        if kind == "unexpected-link":
            x, y = _LINKED.match(message).groups()  # type: ignore[union-attr]
            built.remove(frozenset({place[x], place[y]}))
        elif kind == "missing-link":
            missing.append(frozenset(_cable_ends(FAT_CABLES[cables[0] - 1])))
        elif kind == "wrong-port":
            x, y = _MOVE.fullmatch(fix).groups()  # type: ignore[union-attr]
            to[place[x]] = place[y]
        else:
            assert kind == "swapped", kind
            x, y = _SWAP.fullmatch(fix).groups()  # type: ignore[union-attr]
            to[place[x]], to[place[y]] = place[y], place[x]
    moved = [frozenset(to.get(end, end) for end in link) for link in built] + missing
    ends = [end for link in moved for end in link]
    assert len(ends) == len(set(ends)), "two plugs in one port after the fixes"
    return set(moved)


def _cable_ends(cable: Cable) -> tuple[tuple[str, int], tuple[str, int]]:
    a = f"{cable.a_device} {cable.a_hca}" if cable.tier == "node-leaf" else cable.a_device
    return (a, cable.a_port), (cable.b_device, cable.b_port)


_HCAS = {f"{c.a_device} {c.a_hca}": (c.a_device, c.a_hca) for c in FAT_CABLES if c.a_hca}


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_any_mix_of_moves_swaps_and_missing_cables_is_fixed_by_its_fixes(
    data: st.DataObject,
) -> None:
    # Up to five faults: a cable out, two cables' switch ends swapped (two plugs moved), or
    # one switch end moved into a free port (one the plan leaves free, or one an earlier
    # fault freed). Each cable is named by one finding at most, there are no more findings
    # than cables out and plugs moved, and doing every fix gives the planned fabric.
    links: list[NetLink | None] = list(links_from_cables(FAT_CABLES))
    faults = 0
    for _ in range(data.draw(st.integers(1, 5))):
        present = [i for i, link in enumerate(links) if link is not None]
        what = data.draw(st.sampled_from(["remove", "swap", "move"]))
        i = data.draw(st.sampled_from(present))
        link = links[i]
        assert link is not None
        faults += 2 if what == "swap" else 1
        if what == "remove":
            links[i] = None
        elif what == "swap":
            j = data.draw(st.sampled_from([n for n in present if n != i]))
            swapped = swap([link, links[j]], 0, 1)  # type: ignore[list-item]
            links[i], links[j] = swapped
        else:
            built = [k for k in links if k is not None]
            taken = {end for k in built for end in ((k.a, k.a_port), (k.b, k.b_port))}
            free = sorted(
                (switch, port)
                for switch, count in _FAT_PORTS.items()
                for port in range(1, count + 1)
                if (switch, port) not in taken
            )
            switch, port = data.draw(st.sampled_from(free))
            upper = link.a_hca or data.draw(st.booleans())
            links[i] = (
                NetLink(link.a, link.a_port, link.a_hca, switch, port)
                if upper
                else NetLink(switch, port, False, link.b, link.b_port)
            )
    built = [link for link in links if link is not None]
    result = compare_fabric(FAT_CABLES, discovered_without_sim(built))
    named = [n for f in result.findings for n in f.cables]
    assert len(named) == len(set(named)), result.findings
    assert len(result.findings) <= faults, result.findings
    assert result.cables_as_planned + len(named) == len(FAT_CABLES)
    fixed = _apply_fixes(built, [(f.kind, f.message, f.fix, f.cables) for f in result.findings])
    assert fixed == _as_built(links_from_cables(FAT_CABLES))


def test_planned_speed_names_and_the_simulator_cap() -> None:
    assert planned_speed(400) == "NDR"
    assert planned_speed(400, "HDR") == "HDR"
    assert planned_speed(100, "HDR") == "EDR"


def test_the_report_fails_per_finding_and_exits_1() -> None:
    result = compare_fabric(
        STARTER_CABLES, discovered_without_sim(starter_faulty_links()), speed_cap="HDR"
    )
    report = fabric_report(result, "starter-64", "cluster.yaml")
    assert not report.ok
    assert [r.check for r in report.results if r.status == "fail"] == [
        "fabric.devices",
        "fabric.cabling",
        "fabric.cabling",
        "fabric.link-rate",
    ]
    clean = compare_fabric(
        STARTER_CABLES,
        discovered_without_sim(links_from_cables(STARTER_CABLES)),
        speed_cap="HDR",
    )
    assert fabric_report(clean, "starter-64", "cluster.yaml").ok


ROCE_PLANES = ROOT / "tests" / "fabric" / "roce-planes-48.yaml"


def test_faults_on_a_dual_plane_under_subscribed_fabric_are_found() -> None:
    # Two planes, leaves with more uplinks than downlinks, a core per plane: the check
    # compares cables, so a swap of two uplinks of one leaf and a missing core link are
    # named as on any fabric.
    cables, _ = planned(ROCE_PLANES)
    links = links_from_cables(cables)
    uplinks = [n for n, c in enumerate(cables) if c.tier == "leaf-spine"]
    core = next(n for n, c in enumerate(cables) if c.tier == "spine-core")
    first, second = uplinks[0], uplinks[5]
    result = compare_fabric(
        cables, discovered_without_sim(remove(swap(links, first, second), core))
    )
    kinds = sorted((f.kind, f.cables) for f in result.findings)
    assert kinds == [("missing-link", (core + 1,)), ("swapped", (first + 1, second + 1))]


ROCE_TOR_RACKS = ROOT / "tests" / "fabric" / "roce-tor-racks-24.yaml"


def test_faults_on_a_tor_per_rack_fabric_are_found() -> None:
    # A ToR per rack of two nodes (8 ports down), 10 uplinks each to 10 spines a zone, two
    # zones under a core: 24 x 4 = 96 node cables, 2 x 6 x 10 = 120 ToR-spine cables, and
    # 2 x ceil(12 x 4 x 200 / 2 / 200) = 48 core cables.
    cables, _ = planned(ROCE_TOR_RACKS)
    assert [sum(c.tier == tier for c in cables) for tier in ("node-leaf", "leaf-spine")] == [
        96,
        120,
    ]
    assert sum(c.tier == "spine-core" for c in cables) == 48
    # Rack-mates' cables swapped in their ToR (cable 2: gpu01 rail1 in is00-leaf001 port 2;
    # cable 8: gpu02 rail3 in port 8), cable 107 (is00-leaf002 port 9 to is00-spine001
    # port 2) moved to the spine's free port 20, and the first core cable (217) missing.
    links = swap(links_from_cables(cables), 1, 7)
    links[106] = _moved(links[106], "is00-spine001", 20)
    result = compare_fabric(cables, discovered_without_sim(remove(links, 216)))
    assert sorted((f.kind, f.cables) for f in result.findings) == [
        ("missing-link", (217,)),
        ("swapped", (2, 8)),
        ("wrong-port", (107,)),
    ]
    moved = next(f for f in result.findings if f.kind == "wrong-port")
    assert moved.fix == "move the cable from is00-spine001 port 20 to is00-spine001 port 2"
