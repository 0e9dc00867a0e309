"""The planned fabric against a discovered one: every fault reported once, with the fix,
and nothing else. Discovery here is built directly from the links (fast); test_ibsim.py
runs the same faults through ibsim and ibnetdiscover."""

from __future__ import annotations

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
from myriad.plan.ibnet import NetLink, links_from_cables
from myriad.validate.cabling import compare_fabric, fabric_report, planned_speed

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
