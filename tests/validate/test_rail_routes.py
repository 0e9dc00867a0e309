"""roce.route: each RoCE rail behind a routed leaf reaches the rail's other leaves through
its leaf gateway, in the rail's own table and in main, as the roce role's networkd and
netplan files route it.

Real: the route tables are `ip -j -4 route show table all` from iproute2 6.1.0 and the
kernel, captured in network namespaces holding what the roce role configures for two
rails (tests/validate/fixtures/README.md): the good one as the role leaves it, the broken
one with rail0's main-table route absent and rail1's rail-table route through the wrong
gateway. The expectations come from planning the roce-10k example. Standing in: the
captures' addresses are the hardware-in-a-box scenario's (roles/netnames/molecule), not
a roce-10k node's, so the good/broken tests give the expectation that scenario's
inventory gives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from myriad.node.checks.model import ClusterView
from myriad.node.checks.roce import ROCE_ROUTE
from myriad.node.facts import NOT_GATHERED, NodeFacts, node_facts
from myriad.node.parsers import ParseFailure, Route, parse_ip_route
from myriad.plan.pipeline import plan_loaded
from myriad.render.inventory import build_inventory
from myriad.spec import LoadedSpec, load_spec_text
from myriad.validate.expectations import expect, load_role_defaults

from spec_builder import ROOT

FIXTURES = Path(__file__).resolve().parent / "fixtures"
GOOD = FIXTURES / "ip-j-4-route-table-all_iproute2-6.1.0_rails-good.json"
BROKEN = FIXTURES / "ip-j-4-route-table-all_iproute2-6.1.0_rails-broken.json"
NO_VIEW = ClusterView(None, NOT_GATHERED, NOT_GATHERED, NOT_GATHERED)
# The hardware-in-a-box scenario's two rails (roles/netnames/molecule/default/molecule.yml),
# the routes the captures hold, as the check derives them from its roce_nics.
BOX = [
    {"netdev": "rail0", "network": "10.64.0.0/20", "gateway": "10.64.0.1", "table": "100"},
    {"netdev": "rail1", "network": "10.64.16.0/20", "gateway": "10.64.17.1", "table": "101"},
]


def roce_10k(**addressing: Any) -> LoadedSpec:
    document = yaml.safe_load((ROOT / "inventories/roce-10k/cluster.yaml").read_text())
    document["network"]["addressing"].update(addressing)
    return load_spec_text(yaml.safe_dump(document, sort_keys=False))


def route_expectation(loaded: LoadedSpec, node: str) -> Any:
    result = plan_loaded(loaded)
    assert result.plan is not None
    inventory = build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)
    expectations = expect(
        result.loaded.spec, result.loaded.catalog, result.plan, inventory, load_role_defaults()
    )
    return next(e for e in expectations.node(node).expectations if e.check == "roce.route")


def facts(probe: dict[str, Any] | None) -> NodeFacts:
    probes = {} if probe is None else {"ip_route": probe}
    return node_facts("gpu0001", {"schema": 1, "args": {}, "seconds": 0.1, "probes": probes})


def stdout(text: str) -> dict[str, Any]:
    return {"rc": 0, "stdout": text, "stderr": "", "missing": False, "timed_out": False}


def test_parser_reads_every_table_and_names_main() -> None:
    routes = parse_ip_route(GOOD.read_text())
    # iproute2 leaves `table` out for main; the kernel's local table is listed too.
    assert Route("main", "10.64.0.0/20", "10.64.0.1", "rail0", "10.64.0.11", "unicast") in routes
    assert Route("100", "10.64.0.0/20", "10.64.0.1", "rail0", "10.64.0.11", "unicast") in routes
    assert {r.table for r in routes} == {"main", "local", "100", "101"}
    assert any(r.kind == "local" and r.dst == "10.64.0.11" for r in routes)
    with pytest.raises(ParseFailure, match="no dst"):
        parse_ip_route('[{"table": "main", "dev": "rail0"}]')
    with pytest.raises(ParseFailure, match="JSON array"):
        parse_ip_route('{"dst": "default"}')


def test_each_node_expects_its_own_leaf_as_gateway_per_rail() -> None:
    # gpu0001 sits on island 0's leaves; island 1's first node on the next leaf of each rail.
    first = route_expectation(roce_10k(), "gpu0001")
    assert first.applies
    assert first.expected[:2] == [
        {"netdev": "rail0", "network": "10.64.0.0/20", "gateway": "10.64.0.1", "table": "100"},
        {"netdev": "rail1", "network": "10.64.16.0/20", "gateway": "10.64.16.1", "table": "101"},
    ]
    assert first.spec_field == "network.addressing.rail_subnets"
    assert "myriad bringup --tags roce" in first.fix


def test_stretched_rail_subnets_have_no_gateway_to_check() -> None:
    stretched = route_expectation(roce_10k(rail_subnets="stretched"), "gpu0001")
    assert not stretched.applies
    assert "no rail has a leaf gateway" in stretched.reason


def test_the_role_s_routes_pass_and_missing_or_wrong_ones_are_named() -> None:
    good = ROCE_ROUTE.evaluate(BOX, facts(stdout(GOOD.read_text())), NO_VIEW, "gpu0001")
    assert good.status == "pass", good.actual
    assert "2 rail network(s) via their leaf" in good.actual
    bad = ROCE_ROUTE.evaluate(BOX, facts(stdout(BROKEN.read_text())), NO_VIEW, "gpu0001")
    assert bad.status == "fail"
    assert "10.64.0.0/20 via 10.64.0.1 dev rail0 table main: missing" in bad.actual
    assert (
        "10.64.16.0/20 via 10.64.17.1 dev rail1 table 101: routed via 10.64.17.254 dev rail1"
        " instead" in bad.actual
    )
    # What the broken capture does hold is not reported.
    assert "table 100" not in bad.actual and "rail1 table main" not in bad.actual


def test_routes_not_gathered_or_unreadable_are_never_a_pass() -> None:
    # An older gatherer: unknown.
    assert ROCE_ROUTE.evaluate(BOX, facts(None), NO_VIEW, "gpu0001").status == "error"
    # ip is missing: the node cannot show its routes, a fail.
    no_ip = {"rc": None, "stdout": "", "stderr": "ip: not found", "missing": True}
    no_ip["timed_out"] = False
    assert ROCE_ROUTE.evaluate(BOX, facts(no_ip), NO_VIEW, "gpu0001").status == "fail"
    garbage = ROCE_ROUTE.evaluate(BOX, facts(stdout("not json")), NO_VIEW, "gpu0001")
    assert garbage.status != "pass"
