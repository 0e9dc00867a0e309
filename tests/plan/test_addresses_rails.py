"""Rail subnets: the spec's compute network cut into one subnet per RoCE rail."""

from __future__ import annotations

import pytest

from myriad.errors import AddressError
from myriad.plan.addresses import rail_addresses, rail_networks
from myriad.plan.lints import lint
from myriad.plan.pipeline import plan_loaded

from spec_builder import cluster, load_example


def test_rails_split_the_network_in_powers_of_two() -> None:
    # 4 rails: 2 more prefix bits, /18 -> four /20s, 16 x 256 addresses apart.
    assert rail_networks("10.64.0.0/18", 4) == [
        "10.64.0.0/20",
        "10.64.16.0/20",
        "10.64.32.0/20",
        "10.64.48.0/20",
    ]
    # 3 rails still need 2 bits; the fourth quarter stays unused.
    assert rail_networks("10.64.0.0/18", 3) == ["10.64.0.0/20", "10.64.16.0/20", "10.64.32.0/20"]
    # 8 rails: 3 bits, /14 -> /17s.
    assert rail_networks("10.128.0.0/14", 8)[7] == "10.131.128.0/17"
    assert rail_networks("10.0.0.0/24", 1) == ["10.0.0.0/24"]


def test_node_addresses_start_after_the_reserved_ones_on_every_rail() -> None:
    rails = rail_addresses("10.64.0.0/18", 4, 1250)
    assert [r.with_prefix(0) for r in rails] == [
        "10.64.0.10/20",
        "10.64.16.10/20",
        "10.64.32.10/20",
        "10.64.48.10/20",
    ]
    # Node 1249: 10 + 1249 = 1259 = 4 * 256 + 235 -> 10.64.(48 + 4).235.
    assert rails[3].with_prefix(1249) == "10.64.52.235/20"


def test_a_rail_subnet_too_small_for_the_nodes_is_refused_with_the_fix() -> None:
    # /24 cut in 4: a /26 has .10 to .62 for nodes (53), not 60.
    with pytest.raises(AddressError, match=r"rail 0 .*has room for 53 node addresses.*not 60"):
        rail_addresses("10.0.0.0/24", 4, 60)
    with pytest.raises(AddressError, match=r"cannot be cut into 8 rail subnets: use .* /27"):
        rail_networks("10.0.0.0/28", 8)


def test_example_roce_clusters_have_room_on_every_rail() -> None:
    for example in ("roce-10k", "h100-100k"):
        result = plan_loaded(load_example(example))
        assert result.plan is not None
        assert [f for f in lint(result.loaded, result.plan) if f.id == "rail-addresses"] == []


def test_roce_without_a_compute_network_is_an_error_at_the_addressing_field() -> None:
    loaded = cluster(fabric="roce", topology={"kind": "rail-optimized", "switch": "SN5600"})
    result = plan_loaded(loaded)
    assert result.plan is not None
    findings = [f for f in lint(loaded, result.plan) if f.id == "rail-addresses"]
    assert len(findings) == 1
    assert findings[0].severity == "error"
    assert findings[0].path == ("network", "addressing")
    assert "8 RoCE rails" in findings[0].message
    assert "network.addressing.compute" in findings[0].suggestion
