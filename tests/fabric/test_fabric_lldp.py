"""LLDP expectations from the cabling plan, checked on a real `lldpcli show neighbors`
capture (tests/samples/lldpcli: a GPU node whose four RoCE rails reach SONiC leaves
LEAF01-04, port Ethernet184 on each, and whose storage port reaches StorageSW)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from myriad.node.parsers.common import ParseFailure
from myriad.node.parsers.lldpcli import parse_lldp_neighbors
from myriad.plan.cabling import iter_cables
from myriad.plan.pipeline import plan_spec
from myriad.validate.lldp import compare_lldp, lldp_expectations, port_namer

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "tests/samples/lldpcli/sonic-ds730-leaf01-04_gpu-node-rails_json0.json"
SPEC = ROOT / "tests" / "fabric" / "roce-rails-32.yaml"
# The site's names: planned leaf n is LEAFn; SONiC numbers 8-lane ports by first lane.
LEAVES = {f"is00-leaf00{n}": f"LEAF0{n}" for n in range(1, 5)}
SONIC = port_namer("Ethernet{lane}", lanes=8)


def _expected() -> dict[str, Any]:
    result = plan_spec(SPEC)
    assert result.plan is not None and result.plan.fabric is not None
    spec, catalog = result.loaded.spec, result.loaded.catalog
    return lldp_expectations(spec, catalog, iter_cables(spec, catalog, result.plan.fabric))


def test_the_capture_reads_as_five_neighbours() -> None:
    neighbours = parse_lldp_neighbors(CAPTURE.read_text())
    assert [(n.interface, n.chassis_name, n.port_id) for n in neighbours] == [
        ("ens1np0", "StorageSW", "Ethernet120"),
        ("ens841np0", "LEAF03", "Ethernet184"),
        ("ens842np0", "LEAF04", "Ethernet184"),
        ("ens110np0", "LEAF02", "Ethernet184"),
        ("ens108np0", "LEAF01", "Ethernet184"),
    ]
    assert neighbours[4].chassis_id == "70:06:92:6e:33:18"


def test_the_same_neighbours_from_json_instead_of_json0() -> None:
    # `-f json` drops one-element lists and keys interfaces and chassis by name.
    json0 = json.loads(CAPTURE.read_text())
    interfaces = []
    for item in json0["lldp"][0]["interface"]:
        chassis = item["chassis"][0]
        port = item["port"][0]
        interfaces.append(
            {
                item["name"]: {
                    "via": item["via"],
                    "chassis": {
                        chassis["name"][0]["value"]: {"id": chassis["id"][0]},
                    },
                    "port": {"id": port["id"][0], "descr": port["descr"][0]["value"]},
                }
            }
        )
    compact = json.dumps({"lldp": {"interface": interfaces}})
    assert parse_lldp_neighbors(compact) == parse_lldp_neighbors(CAPTURE.read_text())


def test_gpu24_of_the_plan_is_where_the_capture_says() -> None:
    # Rail r of gpu24 is in port 24 of leaf r+1; port 24's first lane is (24-1) x 8 = 184.
    expected = _expected()
    assert [(e.interface, e.switch, e.port) for e in expected["gpu24"]] == [
        ("ens108np0", "is00-leaf001", 24),
        ("ens110np0", "is00-leaf002", 24),
        ("ens841np0", "is00-leaf003", 24),
        ("ens842np0", "is00-leaf004", 24),
    ]
    neighbours = parse_lldp_neighbors(CAPTURE.read_text())
    assert (
        compare_lldp("gpu24", expected["gpu24"], neighbours, switch_name=LEAVES, port_name=SONIC)
        == []
    )


def test_for_gpu23_every_rail_is_one_port_off() -> None:
    neighbours = parse_lldp_neighbors(CAPTURE.read_text())
    findings = compare_lldp(
        "gpu23", _expected()["gpu23"], neighbours, switch_name=LEAVES, port_name=SONIC
    )
    assert [f.message for f in findings] == [
        f"node gpu23 {iface} is in LEAF0{n} Ethernet184; plan says LEAF0{n} Ethernet176 "
        f"(cable {89 + n - 1})"
        for n, iface in enumerate(["ens108np0", "ens110np0", "ens841np0", "ens842np0"], 1)
    ]
    assert findings[0].fix == "move the cable from LEAF01 Ethernet184 to LEAF01 Ethernet176"


def test_swapped_rails_and_a_silent_port_are_found() -> None:
    captured = json.loads(CAPTURE.read_text())
    interfaces = captured["lldp"][0]["interface"]
    # ens108np0 and ens110np0 trade leaves; ens842np0 hears nobody.
    by_name = {i["name"]: i for i in interfaces}
    by_name["ens108np0"]["chassis"], by_name["ens110np0"]["chassis"] = (
        by_name["ens110np0"]["chassis"],
        by_name["ens108np0"]["chassis"],
    )
    captured["lldp"][0]["interface"] = [i for i in interfaces if i["name"] != "ens842np0"]
    findings = compare_lldp(
        "gpu24",
        _expected()["gpu24"],
        parse_lldp_neighbors(json.dumps(captured)),
        switch_name=LEAVES,
        port_name=SONIC,
    )
    assert [f.message for f in findings] == [
        "node gpu24 ens108np0 is in LEAF02 Ethernet184; plan says LEAF01 Ethernet184 (cable 93)",
        "node gpu24 ens110np0 is in LEAF01 Ethernet184; plan says LEAF02 Ethernet184 (cable 94)",
        "node gpu24 ens842np0 has no LLDP neighbour; plan says LEAF04 Ethernet184",
    ]


@pytest.mark.parametrize(
    ("text", "reason"),
    [("", "empty output"), ("[]", 'no "lldp" object'), ('{"lldp": 3}', "neither an object")],
)
def test_output_it_cannot_read_is_a_parse_failure(text: str, reason: str) -> None:
    with pytest.raises(ParseFailure, match=reason):
        parse_lldp_neighbors(text)


def test_no_neighbours_at_all_is_an_empty_answer() -> None:
    assert parse_lldp_neighbors('{"lldp": [{}]}') == ()
