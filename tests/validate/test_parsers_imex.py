"""`nvidia-imex-ctl -N` against a real capture (tests/samples/nvidia-imex-ctl, SOURCES.md).

The capture is an 18-node GB200 domain (one AWS P6e-GB200 UltraServer) with every daemon
READY, every connection C and the domain UP. The failing cases are that capture with one
node's status, one connection code or the domain state changed, as the legend the capture
itself prints defines those codes; no public capture of a degraded domain was found.
"""

from __future__ import annotations

import pytest

from myriad.node.parsers import ImexDomain, ParseFailure, parse_imex_nodes
from myriad.node.parsers.common import INTERNAL_ERROR

GB200_UP = (
    "nvidia-imex-ctl/p6e-gb200-ultraserver_18-nodes_imex-570.172_domain-up_nvidia-imex-ctl-N.txt"
)


def test_gb200_domain_of_18_nodes_up(sample):
    domain = parse_imex_nodes(sample(GB200_UP))
    assert domain.state == "UP"
    assert len(domain.nodes) == 18
    assert [n.index for n in domain.nodes] == list(range(18))
    assert domain.nodes[0].address == "172.31.48.81"
    assert domain.nodes[17].address == "172.31.56.47"
    assert {n.status for n in domain.nodes} == {"READY"}
    assert {n.version for n in domain.nodes} == {"570.172"}
    assert len(domain.links) == 18 and all(len(row) == 18 for row in domain.links)
    assert domain.broken_links() == []


def test_one_link_not_connected_is_named(sample):
    lines = sample(GB200_UP).splitlines(keepends=True)
    row = next(i for i, line in enumerate(lines) if line.startswith("       3        C"))
    # Row 3, column 5: from node 3 (172.31.49.228) to node 5 (172.31.50.44).
    cells = lines[row].split("C")
    lines[row] = "C".join(cells[:6]) + "D" + "C".join(cells[6:])
    domain = parse_imex_nodes("".join(lines))
    assert domain.broken_links() == ["172.31.49.228->172.31.50.44: D"]


def test_version_mismatch_code_is_one_cell(sample):
    text = sample(GB200_UP).replace("      17        C   C", "      17        !V! C", 1)
    domain = parse_imex_nodes(text)
    assert domain.broken_links() == ["172.31.56.47->172.31.48.81: !V!"]


def test_cut_output_is_refused(sample):
    text = sample(GB200_UP)
    with pytest.raises(ParseFailure, match="truncated"):
        parse_imex_nodes(text[: text.index("      12        C")])
    with pytest.raises(ParseFailure, match="no node list"):
        parse_imex_nodes(text[: text.index("Nodes:")])


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("      12        C", "row 13 where row 12 was due"),
        (" Nodes From", "does not name the 18 nodes"),
        ("Node #4 ", "not numbered 0.. in order"),
    ],
)
def test_a_line_lost_in_the_middle_is_refused(sample, line, reason):
    lines = sample(GB200_UP).splitlines(keepends=True)
    kept = [text for text in lines if not text.startswith(line)]
    assert len(kept) == len(lines) - 1
    with pytest.raises(ParseFailure, match=reason):
        parse_imex_nodes("".join(kept))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n",
        "Failed to connect to the IMEX daemon\n",
        "nvidia-imex-ctl: command not found\n",
    ],
)
def test_not_imex_output(text):
    with pytest.raises(ParseFailure):
        parse_imex_nodes(text)


def test_a_dataclass_result(sample):
    assert isinstance(parse_imex_nodes(sample(GB200_UP)), ImexDomain)


def test_every_cut_is_refused_or_never_reads_up(sample):
    # Output cut anywhere is refused, except within the last line: there the state read is
    # "U", a state that is not UP (the check fails it), or the whole state.
    text = sample(GB200_UP)
    full = parse_imex_nodes(text)
    last = text.index("Domain State: UP")
    parsed = 0
    for end in range(len(text)):
        try:
            part = parse_imex_nodes(text[:end])
        except ParseFailure as failure:
            assert INTERNAL_ERROR not in failure.reason
            continue
        parsed += 1
        assert end > last
        assert part == full or part.state == "U"
    assert parsed == 2  # "...: U" and "...: UP" without its newline
