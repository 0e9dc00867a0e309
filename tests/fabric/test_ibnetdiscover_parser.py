"""ibnetdiscover's output read into nodes and links: a capture of the real tool run
against ibsim (tests/samples/ibnetdiscover), and output it cannot read."""

from __future__ import annotations

from pathlib import Path

import pytest

from myriad.node.parsers.common import ParseFailure
from myriad.node.parsers.ibnetdiscover import parse_ibnetdiscover

SAMPLE = (
    Path(__file__).resolve().parents[1]
    / "samples"
    / "ibnetdiscover"
    / "ibsim-0.10_two-leaves-three-hcas_one-1x.txt"
)


def test_the_capture_has_two_switches_three_hcas_and_four_links_once_each() -> None:
    topology = parse_ibnetdiscover(SAMPLE.read_text())
    kinds = sorted((n.kind, n.description) for n in topology.nodes.values())
    assert kinds == [
        ("ca", "gpu01 mlx5_0"),
        ("ca", "gpu02 mlx5_0"),
        ("ca", "gpu03 mlx5_0"),
        ("switch", "is00-leaf001"),
        ("switch", "is00-leaf002"),
    ]
    # Each link is printed from both ends; it is kept once.
    assert len(topology.links) == 4
    by_desc = {n.node_id: n.description for n in topology.nodes.values()}
    rates = {
        frozenset((by_desc[link.a_id], by_desc[link.b_id])): (link.width, link.speed)
        for link in topology.links
    }
    assert rates[frozenset(("is00-leaf001", "gpu02 mlx5_0"))] == ("1x", "SDR")
    assert rates[frozenset(("is00-leaf001", "is00-leaf002"))] == ("4x", "SDR")
    leaf1 = next(i for i, d in by_desc.items() if d == "is00-leaf001")
    inter = next(
        link
        for link in topology.links
        if {link.a_id, link.b_id} == {leaf1, link.b_id}
        and by_desc[link.b_id if link.a_id == leaf1 else link.a_id] == "is00-leaf002"
    )
    assert (inter.a_port, inter.b_port) == (3, 3)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty output"),
        ('[1]\t"S-1"[1]\t# "x" lid 1 4xHDR\n', "a port line before any node"),
        ('Switch\t8 "S-1"\t# "a"\nthis is not ibnetdiscover\n', "neither a node, a port"),
        ('Switch\t8 "S-1"\t# "a"\n[1]\t"H-9"[1]\t# "b" lid 1 4xHDR\n', "has no record"),
        ("vendid=0x2c9\n", "no Switch, Ca or Rt record"),
    ],
)
def test_output_it_cannot_read_is_a_parse_failure(text: str, reason: str) -> None:
    with pytest.raises(ParseFailure, match=reason):
        parse_ibnetdiscover(text)
