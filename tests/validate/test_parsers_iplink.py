"""`ip -j link` parser.

The fixtures are real output of iproute2 6.1.0, captured on a development machine in a
network namespace holding a bridge br0, a veth pair (veth0 enslaved to br0, MTU 9000)
and a macvlan mv0 on veth1; see fixtures/README.md.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from myriad.node.parsers import Interface, ParseFailure, parse_ip_link
from myriad.node.parsers.common import INTERNAL_ERROR

PLAIN = "ip-j-link_iproute2-6.1.0_bridge-veth.json"
DETAILED = "ip-j-d-link_iproute2-6.1.0_bridge-veth.json"


def test_plain_link_listing(fixture_text):
    links = {i.name: i for i in parse_ip_link(fixture_text(PLAIN))}
    assert list(links) == ["lo", "br0", "veth1", "veth0", "mv0"]
    assert (links["lo"].mtu, links["lo"].operstate, links["lo"].link_type) == (
        65536,
        "UNKNOWN",
        "loopback",
    )
    assert links["veth0"].master == "br0"
    assert links["veth0"].mtu == 9000
    assert links["veth0"].up and links["veth0"].lower_up
    assert links["mv0"].operstate == "DOWN" and not links["mv0"].up
    assert links["br0"].flags == ("BROADCAST", "MULTICAST", "UP", "LOWER_UP")
    # Without -d there is no link kind.
    assert all(i.kind is None and i.slave_kind is None for i in links.values())


def test_detailed_listing_has_kinds(fixture_text):
    links = {i.name: i for i in parse_ip_link(fixture_text(DETAILED))}
    assert links["br0"].kind == "bridge"
    assert (links["veth0"].kind, links["veth0"].slave_kind) == ("veth", "bridge")
    assert links["mv0"].kind == "macvlan"
    assert links["lo"].kind is None
    assert links["veth0"].ifindex == 4


def test_bond_member_entry():
    # Keys as iproute2 prints them for a bond slave with -d (ip-link(8), JSON output).
    entry = {
        "ifindex": 5,
        "ifname": "ens1f0np0",
        "flags": ["BROADCAST", "MULTICAST", "SLAVE", "UP", "LOWER_UP"],
        "mtu": 9000,
        "master": "bond0",
        "operstate": "UP",
        "linkinfo": {"info_slave_kind": "bond", "info_slave_data": {"state": "ACTIVE"}},
    }
    (link,) = parse_ip_link(json.dumps([entry]))
    assert (link.master, link.slave_kind, link.kind, link.mtu) == ("bond0", "bond", None, 9000)


@pytest.mark.parametrize("name", [PLAIN, DETAILED])
def test_truncations(fixture_text, check_truncations, name):
    check_truncations(parse_ip_link, fixture_text(name))


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ('{"ifname": "eth0"}', "JSON array"),
        ('[{"mtu": 1500}]', "no ifname"),
        ('[{"ifname": "eth0", "mtu": "1500"}]', "mtu is not an integer"),
        ('[{"ifname": "eth0", "mtu": true}]', "mtu is not an integer"),
        ('[{"ifname": "eth0", "mtu": 1500, "flags": "UP"}]', "flags"),
        ('[{"ifname": "eth0", "mtu": 1500, "linkinfo": []}]', "linkinfo"),
        ('[{"ifname": "eth0", "mtu": 1500, "master": 3}]', "master"),
        ('[{"ifname": "eth0", "mtu": 1500}, {"ifname": "eth0", "mtu": 9000}]', "twice"),
        ('[{"ifname": "eth0", "mtu": 1500}', "not valid JSON"),
        ("[1]", "not an object"),
        ("[" * 100000, "JSON|nested"),
    ],
)
def test_malformed(document, reason):
    with pytest.raises(ParseFailure, match=reason):
        parse_ip_link(document)


def test_empty_array_is_no_links():
    assert parse_ip_link("[]") == ()


def test_empty_and_garbage(garbage):
    for text in garbage:
        if text.strip() == "[]":
            continue
        with pytest.raises(ParseFailure):
            parse_ip_link(text)


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(
                st.sampled_from(["ifname", "mtu", "flags", "master", "linkinfo", "info_kind"]),
                inner,
                max_size=5,
            )
        ),
        max_leaves=20,
    )
)
def test_fuzz_never_raises_anything_else(document):
    try:
        result = parse_ip_link(json.dumps(document))
    except ParseFailure as failure:
        assert not failure.reason.startswith(INTERNAL_ERROR), failure
    else:
        assert all(isinstance(i, Interface) for i in result)
