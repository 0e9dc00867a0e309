"""/proc/net/bonding parser against real captures (tests/samples/proc-net-bonding)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from myriad.node.parsers import Bond, BondSlave, ParseFailure, parse_bonding
from myriad.node.parsers.common import INTERNAL_ERROR

LACP = "proc-net-bonding/bond0_802.3ad-lacp-fast_layer3+4_one-slave-down_lacp-pdu-details.txt"
ACTIVE_BACKUP = "proc-net-bonding/bond_active-backup_primary-eth2_one-slave-down.txt"


def test_lacp_bond_with_one_slave_down(sample):
    bond = parse_bonding(sample(LACP))
    assert bond.driver_version == "v3.7.1"
    assert bond.mode == "802.3ad"
    assert bond.mode_description == "IEEE 802.3ad Dynamic link aggregation"
    assert bond.xmit_hash_policy == "layer3+4"
    assert bond.mii_status == "up"
    assert (bond.miimon_ms, bond.up_delay_ms, bond.down_delay_ms) == (100, 0, 0)
    assert bond.lacp_rate == "fast"
    assert bond.active_aggregator_id == 2
    assert bond.slaves == (
        BondSlave("enp1s0f0", "down", None, None, 2, "00:25:90:85:81:f2", 1),
        BondSlave("enp1s0f1", "up", 1000, "full", 2, "00:25:90:85:81:f3", 2),
    )
    down = [s.name for s in bond.slaves if not s.up]
    assert down == ["enp1s0f0"]
    # The down slave sits in another aggregator than the active one: not carrying traffic.
    assert [s.name for s in bond.slaves if s.aggregator_id == bond.active_aggregator_id] == [
        "enp1s0f1"
    ]


def test_active_backup_with_primary(sample):
    bond = parse_bonding(sample(ACTIVE_BACKUP))
    assert bond.driver_version == "v3.6.0"
    assert bond.mode == "active-backup"
    assert bond.xmit_hash_policy is None
    assert bond.lacp_rate is None
    assert bond.active_aggregator_id is None
    assert (bond.primary_slave, bond.active_slave) == ("eth2", "eth2")
    eth3, eth2 = bond.slaves
    assert (eth3.name, eth3.up, eth3.speed_mbps, eth3.duplex) == ("eth3", False, 1000, "full")
    assert (eth2.name, eth2.up, eth2.speed_mbps, eth2.duplex) == ("eth2", True, 100, "full")
    # "Permanent HW addr:" is blank in this capture.
    assert eth3.permanent_hw_addr is None and eth2.permanent_hw_addr is None
    assert (eth3.link_failure_count, eth2.link_failure_count) == (2, 0)


@pytest.mark.parametrize(
    ("description", "mode"),
    [
        ("load balancing (round-robin)", "balance-rr"),
        ("load balancing (xor)", "balance-xor"),
        ("fault-tolerance (broadcast)", "broadcast"),
        ("transmit load balancing", "balance-tlb"),
        ("adaptive load balancing", "balance-alb"),
    ],
)
def test_every_kernel_mode_name(sample, description, mode):
    text = sample(ACTIVE_BACKUP).replace("fault-tolerance (active-backup)", description)
    assert parse_bonding(text).mode == mode


@pytest.mark.parametrize("name", [LACP, ACTIVE_BACKUP])
def test_truncations(sample, check_truncations, name):
    assert check_truncations(parse_bonding, sample(name)) > 0


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (("Bonding Mode: IEEE 802.3ad Dynamic link aggregation\n", ""), "no 'Bonding Mode'"),
        (("Down Delay (ms): 0\n", ""), "Down Delay"),
        (("Speed: 1000 Mbps", "Speed: 1000"), "unexpected speed"),
        (("Duplex: full", "Duplex: fu"), "unexpected duplex"),
        (("MII Status: down", "MII Status: dow"), "unknown MII status"),
        (("LACP rate: fast", "LACP rate: fa"), "LACP rate"),
        (("layer3+4 (1)", "layer3+4"), "hash policy"),
        (("00:25:90:85:81:f3", "00:25:90:85:81"), "hardware address"),
        (("Aggregator ID: 1", "Aggregator ID: one"), "integer"),
        (("802.3ad info", "802.3ad information block"), "unexpected line"),
    ],
)
def test_malformed_capture_edits(sample, edit, reason):
    with pytest.raises(ParseFailure, match=reason):
        parse_bonding(sample(LACP).replace(*edit, 1))


def test_slave_without_status_is_truncation(sample):
    text = sample(LACP)
    cut = text.index("Slave Interface: enp1s0f1") + len("Slave Interface: enp1s0f1\n")
    with pytest.raises(ParseFailure, match=r"enp1s0f1.*truncated"):
        parse_bonding(text[:cut])


def test_empty_and_garbage(garbage):
    for text in garbage:
        with pytest.raises(ParseFailure):
            parse_bonding(text)


@settings(max_examples=200, deadline=None)
@given(drop=st.sets(st.integers(min_value=0, max_value=70), max_size=6), text=st.text())
def test_fuzz_never_raises_anything_else(sample, drop, text):
    lines = sample(LACP).splitlines(keepends=True)
    for candidate in ("".join(line for i, line in enumerate(lines) if i not in drop), text):
        try:
            assert isinstance(parse_bonding(candidate), Bond)
        except ParseFailure as failure:
            assert not failure.reason.startswith(INTERNAL_ERROR), failure
