"""The planned fabric built in ibsim (Debian's ibsim-utils) and discovered by the real
`ibnetdiscover`: unchanged it passes; with faults built in, exactly those are reported.

Each test runs its own simulator (its own socket name) and stops it at the end. Without
ibsim-utils and infiniband-diags the tests skip, except in CI, where scripts/bootstrap
installs them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_fabric_compare import (
    DELETED_AND_MOVED,
    FAT_TREE,
    STARTER,
    STARTER_FAULTS,
    deleted_and_moved_links,
    starter_faulty_links,
)

from ibsim_fabric import Simulator, add_hca, available, narrow, planned, remove, swap
from myriad.node.parsers.ibnetdiscover import parse_ibnetdiscover
from myriad.plan.ibnet import SIM_SPEED_CAP, NetLink, ibsim_net, links_from_cables
from myriad.validate.cabling import compare_fabric

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not available() and not os.environ.get("CI"),
        reason="needs ibsim-utils and infiniband-diags (scripts/bootstrap installs them)",
    ),
]


def _discover(tmp_path: Path, links: list[NetLink], ports: dict[str, int]) -> str:
    net = tmp_path / "fabric.net"
    net.write_text(ibsim_net(links, ports))
    with Simulator(net) as sim:
        return sim.ibnetdiscover()


def _findings(
    spec: Path, tmp_path: Path, links: list[NetLink] | None = None
) -> list[tuple[str, str, str]]:
    cables, ports = planned(spec)
    text = _discover(tmp_path, links_from_cables(cables) if links is None else links, ports)
    result = compare_fabric(cables, parse_ibnetdiscover(text), speed_cap=SIM_SPEED_CAP)
    assert result.discovered_links > 0
    return [(f.kind, f.message, f.fix) for f in result.findings]


def test_starter_as_planned_passes_and_carries_the_planned_names(tmp_path: Path) -> None:
    cables, ports = planned(STARTER)
    text = _discover(tmp_path, links_from_cables(cables), ports)
    assert '# "gpu08 mlx5_7"' in text and '# "is00-leaf001"' in text
    result = compare_fabric(cables, parse_ibnetdiscover(text), speed_cap=SIM_SPEED_CAP)
    assert result.ok and result.cables_as_planned == 64
    assert (result.discovered_nodes, result.discovered_links) == (65, 64)


def test_starter_faults_through_ibnetdiscover(tmp_path: Path) -> None:
    assert _findings(STARTER, tmp_path, starter_faulty_links()) == STARTER_FAULTS


def test_fat_tree_512_as_planned_passes(tmp_path: Path) -> None:
    assert _findings(FAT_TREE, tmp_path) == []


def test_fat_tree_512_faults_through_ibnetdiscover(tmp_path: Path) -> None:
    # Cables: 1-512 node links, 513-1025 leaf-spine. Swap two uplinks' spine ends (cables
    # 600 and 700), remove node cable 100, train leaf-spine cable 900 at 1x, and put an
    # unplanned HCA in the last leaf's free port 13.
    cables, _ = planned(FAT_TREE)
    links = links_from_cables(cables)
    faulty = add_hca(
        remove(narrow(swap(links, 599, 699), 899), 99), "stray mlx5_0", "is00-leaf026", 13
    )
    c600, c700, c100, c900 = cables[599], cables[699], cables[99], cables[899]

    def at(device: str, port: int) -> str:
        return f"{device} port {port}"

    assert _findings(FAT_TREE, tmp_path, faulty) == [
        (
            "unexpected-device",
            "HCA 'stray mlx5_0' is not in the plan; plugged into is00-leaf026 port 13",
            "unplug it, or add it to the spec",
        ),
        (
            "missing-link",
            f"cable 100: node {c100.a_device} HCA {c100.a_hca} to "
            f"{at(c100.b_device, c100.b_port)} is not connected",
            "reseat or replace the cable and its transceivers; `ibportstate` shows the port",
        ),
        (
            "swapped",
            f"cables 600 and 700 are swapped: {at(c600.a_device, c600.a_port)} is in "
            f"{at(c700.b_device, c700.b_port)} and {at(c700.a_device, c700.a_port)} in "
            f"{at(c600.b_device, c600.b_port)}; plan says {at(c600.b_device, c600.b_port)} "
            f"and {at(c700.b_device, c700.b_port)}",
            f"swap the cables in {at(c600.b_device, c600.b_port)} and "
            f"{at(c700.b_device, c700.b_port)}",
        ),
        (
            "wrong-width",
            f"cable 900 ({at(c900.a_device, c900.a_port)} to {at(c900.b_device, c900.b_port)}) "
            "trained at 1xHDR; plan says 4xHDR",
            "reseat or replace the cable and its transceivers; `ibportstate` shows the port",
        ),
    ]


def test_a_deleted_uplink_and_a_cable_in_its_port_through_ibnetdiscover(tmp_path: Path) -> None:
    assert _findings(FAT_TREE, tmp_path, deleted_and_moved_links()) == DELETED_AND_MOVED


def test_the_committed_miswired_capture_is_what_ibsim_discovers(tmp_path: Path) -> None:
    # tests/fabric/starter-64-miswired.ibnetdiscover feeds the README's miswire report.
    _, ports = planned(STARTER)
    text = _discover(tmp_path, starter_faulty_links(), ports)
    committed = (Path(__file__).parent / "starter-64-miswired.ibnetdiscover").read_text()

    def body(t: str) -> list[str]:
        return [line for line in t.splitlines() if "generated on" not in line]

    assert body(text) == body(committed)
