"""mlnx_qos parser against the real capture (tests/samples/mlnx_qos, see SOURCES.md)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from myriad.node.parsers import MlnxQos, ParseFailure, TrafficClass, parse_mlnx_qos
from myriad.node.parsers.common import INTERNAL_ERROR

CAPTURE = "mlnx_qos/connectx-mlx5_2_eth4_trust-dscp_pfc-prio3.txt"


def test_trust_dscp_pfc_on_priority_3(sample):
    qos = parse_mlnx_qos(sample(CAPTURE))
    assert qos.dcbx_mode == "OS controlled"
    assert qos.trust == "dscp"
    assert qos.pfc_enabled == (3,)
    assert qos.pfc_on(3) and not qos.pfc_on(0)
    assert qos.pfc_buffer is None
    assert qos.cable_length == 7
    # The default map: DSCP d goes to priority d // 8, so RoCE data (26) lands on 3 and
    # CNPs (48) on 6.
    assert qos.dscp_to_priority == {dscp: dscp // 8 for dscp in range(64)}
    assert qos.dscp_to_priority[26] == 3
    assert qos.dscp_to_priority[48] == 6
    assert [tc.tc for tc in qos.traffic_classes] == list(range(8))
    assert {tc.tsa for tc in qos.traffic_classes} == {"vendor"}
    assert {tc.rate_limit for tc in qos.traffic_classes} == {"unlimited"}
    # Linux's default prio->tc map swaps priorities 0 and 1.
    assert qos.traffic_classes[0].priorities == (1,)
    assert qos.traffic_classes[1].priorities == (0,)
    assert qos.traffic_classes[3] == TrafficClass(3, "vendor", None, "unlimited", (3,))


# ETS and strict classes, a buffer row, and pcp trust without a DSCP map, in the layout
# of the MLNX_OFED mlnx_qos documentation (Mellanox community DOC-2792).
ETS = """DCBX mode: OS controlled
Priority trust state: pcp
Receive buffer size (bytes): 130944,130944,0,0,0,0,0,0,
Cable len: 10
PFC configuration:
\tpriority    0   1   2   3   4   5   6   7
\tenabled     1   0   1   0   0   0   1   1
\tbuffer      0   0   0   1   0   0   0   0
tc: 0 ratelimit: unlimited, tsa: ets, bw: 10%
\t priority:  1
tc: 1 ratelimit: unlimited, tsa: ets, bw: 50%
\t priority:  0
\t priority:  2
tc: 6 ratelimit: 10.0 Gbps, tsa: strict
\t priority:  6
tc: 7 ratelimit: unlimited, tsa: ets, bw: 40%
"""


def test_ets_strict_buffer_and_pcp_trust():
    qos = parse_mlnx_qos(ETS)
    assert qos.trust == "pcp"
    assert qos.dscp_to_priority == {}
    assert qos.pfc_enabled == (0, 2, 6, 7)
    assert qos.pfc_buffer == (0, 0, 0, 1, 0, 0, 0, 0)
    assert qos.traffic_classes == (
        TrafficClass(0, "ets", 10, "unlimited", (1,)),
        TrafficClass(1, "ets", 50, "unlimited", (0, 2)),
        TrafficClass(6, "strict", None, "10.0 Gbps", (6,)),
        TrafficClass(7, "ets", 40, "unlimited", ()),
    )


def test_older_trust_mode_wording():
    assert parse_mlnx_qos(ETS.replace("trust state", "trust mode")).trust == "pcp"


def test_truncations(sample, check_truncations):
    assert check_truncations(parse_mlnx_qos, sample(CAPTURE)) > 0
    assert check_truncations(parse_mlnx_qos, ETS) > 0


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (("Priority trust state: dscp", "Priority trust state: dsc"), "unknown trust state"),
        (("Priority trust state: dscp", ""), "no 'Priority trust state'"),
        (("PFC configuration:", "PFC:\n"), None),
        (("enabled     0   0   0   1   0   0   0   0", "enabled 0 0 0 1"), "does not match"),
        (("enabled     0   0   0   1", "enabled     0   0   0   2"), "does not match"),
        (
            ("prio:3 dscp:31,30,29,28,27,26,25,24,", "prio:3 dscp:31,30,29,28,27,26,25,24,1,"),
            "DSCP 1 mapped twice",
        ),
        (("tsa: vendor", "tsa: vend"), "malformed traffic class"),
        (("Cable len: 7", "Cable len: "), "cable length"),
    ],
)
def test_malformed_capture_edits(sample, edit, reason):
    text = sample(CAPTURE).replace(*edit, 1)
    if reason is None:
        # A changed section title alone carries no data; the parse still succeeds.
        assert parse_mlnx_qos(text).pfc_enabled == (3,)
        return
    with pytest.raises(ParseFailure, match=reason):
        parse_mlnx_qos(text)


def test_missing_pfc_section(sample):
    text = sample(CAPTURE)
    with pytest.raises(ParseFailure, match="no PFC configuration"):
        parse_mlnx_qos(text[: text.index("PFC configuration")])


def test_priority_line_outside_tc():
    with pytest.raises(ParseFailure, match="outside a traffic class"):
        parse_mlnx_qos("Priority trust state: pcp\npriority:  3\n")


def test_empty_and_garbage(garbage):
    for text in garbage:
        with pytest.raises(ParseFailure):
            parse_mlnx_qos(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("priotcsa:denbl 0123,%\n\t"), max_size=200))
def test_fuzz_never_raises_anything_else(text):
    try:
        assert isinstance(parse_mlnx_qos("Priority trust state: dscp\n" + text), MlnxQos)
    except ParseFailure as failure:
        assert not failure.reason.startswith(INTERNAL_ERROR), failure
