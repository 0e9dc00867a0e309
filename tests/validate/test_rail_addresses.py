"""roce.address: each RoCE rail holds the IPv4 address the inventory planned for this node.

The `ip -j -4 addr` text below follows iproute2's JSON output (one object per link with
`addr_info`), written for this test: tests/samples holds no capture of it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from myriad.node.checks.model import ClusterView
from myriad.node.checks.roce import ROCE_ADDRESS
from myriad.node.facts import NOT_GATHERED, NodeFacts, node_facts
from myriad.node.parsers import ParseFailure, parse_ip_addr
from myriad.plan.pipeline import plan_loaded
from myriad.render.inventory import build_inventory
from myriad.validate.expectations import expect, load_role_defaults

from spec_builder import load_example


def ip_addr(held: dict[str, list[str]]) -> str:
    return json.dumps(
        [
            {
                "ifindex": index,
                "ifname": name,
                "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"],
                "mtu": 9000,
                "operstate": "UP",
                "addr_info": [
                    {
                        "family": "inet",
                        "local": address.split("/")[0],
                        "prefixlen": int(address.split("/")[1]),
                        "scope": "global",
                        "label": name,
                    }
                    for address in addresses
                ],
            }
            for index, (name, addresses) in enumerate(held.items(), start=2)
        ]
    )


def test_parser_keeps_ipv4_addresses_with_their_prefix_per_interface() -> None:
    text = ip_addr(
        {"rail0": ["10.64.0.10/20"], "rail1": [], "eth0": ["10.0.0.17/20", "10.0.9.1/32"]}
    )
    assert parse_ip_addr(text) == {
        "rail0": ("10.64.0.10/20",),
        "rail1": (),
        "eth0": ("10.0.0.17/20", "10.0.9.1/32"),
    }
    with pytest.raises(ParseFailure, match="ifname"):
        parse_ip_addr('[{"addr_info": []}]')


def _roce_10k_first_gpu() -> tuple[str, Any]:
    result = plan_loaded(load_example("roce-10k"))
    assert result.plan is not None
    inventory = build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)
    expectations = expect(
        result.loaded.spec, result.loaded.catalog, result.plan, inventory, load_role_defaults()
    )
    node = inventory.groups["pool_gpu"][1]
    found = next(e for e in expectations.node(node).expectations if e.check == "roce.address")
    return node, found


def facts(node: str, ip_addr_probe: dict[str, Any] | None) -> NodeFacts:
    """The node's facts as the gatherer reports them, with only `ip -j -4 addr` gathered."""
    probes = {} if ip_addr_probe is None else {"ip_addr": ip_addr_probe}
    return node_facts(node, {"schema": 1, "args": {}, "seconds": 0.1, "probes": probes})


# roce.address reads only the node's own facts, never the orchestrator's view.
NO_VIEW = ClusterView(None, NOT_GATHERED, NOT_GATHERED, NOT_GATHERED)


def stdout(text: str) -> dict[str, Any]:
    return {"rc": 0, "stdout": text, "stderr": "", "missing": False, "timed_out": False}


def test_each_node_expects_its_own_rail_addresses() -> None:
    _, expectation = _roce_10k_first_gpu()
    # The second GPU node (index 1) is .11 on its island's leaf subnet, a /24, of each rail's
    # /20 of 10.64.0.0/18: the prefix is part of what the node must hold.
    assert expectation.applies
    assert expectation.expected == {
        "rail0": "10.64.0.11/24",
        "rail1": "10.64.16.11/24",
        "rail2": "10.64.32.11/24",
        "rail3": "10.64.48.11/24",
    }


def test_a_rail_without_its_address_fails_and_names_what_it_holds() -> None:
    node, expectation = _roce_10k_first_gpu()
    expected = expectation.expected
    good = ip_addr({name: [address] for name, address in expected.items()} | {"eth0": []})
    outcome = ROCE_ADDRESS.evaluate(expected, facts(node, stdout(good)), NO_VIEW, node)
    assert outcome.status == "pass"
    bad = ip_addr(
        {"rail0": [expected["rail0"]], "rail2": [], "rail3": ["10.64.48.11/20", "10.64.48.98/24"]}
    )
    outcome = ROCE_ADDRESS.evaluate(expected, facts(node, stdout(bad)), NO_VIEW, node)
    assert outcome.status == "fail"
    assert "rail1: no such interface" in outcome.actual
    assert "rail2: no IPv4 address, not 10.64.32.11/24" in outcome.actual
    # The right address with the stretched subnet's prefix is not the leaf's subnet.
    assert "rail3: 10.64.48.11/20, 10.64.48.98/24, not 10.64.48.11/24" in outcome.actual
    # Not gathered (an older gatherer): unknown, never a pass.
    outcome = ROCE_ADDRESS.evaluate(expected, facts(node, None), NO_VIEW, node)
    assert outcome.status == "error"
    # ip is missing: the node cannot show its addresses, a fail.
    no_ip = {
        "rc": None,
        "stdout": "",
        "stderr": "ip: not found",
        "missing": True,
        "timed_out": False,
    }
    assert ROCE_ADDRESS.evaluate(expected, facts(node, no_ip), NO_VIEW, node).status == "fail"
