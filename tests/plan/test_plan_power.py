"""Power, energy, cost and racks, with the arithmetic written out."""

from __future__ import annotations

import pytest
import yaml

from myriad.errors import SpecError
from myriad.plan import make_plan
from myriad.plan.power import estimated_server_kw, server_kw, server_rack_units
from myriad.spec import LoadedSpec, load_spec_text
from myriad.spec.models import Profile

from spec_builder import cluster, gpu_profile, load_fixture

DGX_H100 = gpu_profile(server="DGX-H100")
FACILITY = {"pue": 1.2, "usd_per_kwh": 0.078, "rack_kw": 40, "cooling": "liquid"}


def test_dgx_h100_cluster_power_and_cost() -> None:
    loaded = cluster(nodes=32, profile=DGX_H100, facility=FACILITY)
    power = make_plan(loaded.spec, loaded.catalog).power
    # Fabric: 32 nodes x 8 rails = 256 endpoints on QM9700 (k = 64): 8 rail leaves,
    # 8 x 32 = 256 uplinks, 4 spines; 12 switches x 1.1 kW = 13.2 kW.
    assert power.switch_kw == pytest.approx(13.2)
    # Servers: the DGX H100 layout's 10.2 kW x 32 = 326.4 kW; GPUs 32 x 8 x 0.7 = 179.2 kW.
    assert power.server_kw == pytest.approx(326.4)
    assert power.gpu_kw == pytest.approx(179.2)
    # IT 326.4 + 13.2 = 339.6 kW; facility x 1.2 = 407.52 kW.
    assert power.it_kw == pytest.approx(339.6)
    assert power.facility_kw == pytest.approx(407.52)
    # Energy 407.52 kW x 8,760 h = 3,569,875.2 kWh = 3,569.8752 MWh;
    # cost 3,569,875.2 kWh x $0.078 = $278,450.27.
    assert power.energy_mwh_per_year == pytest.approx(3569.8752)
    assert power.cost_usd_per_year == pytest.approx(278_450.2656)
    # Racks: by power floor(40 / 10.2) = 3 per rack -> ceil(32 / 3) = 11;
    # by space floor(42 U / 8 U) = 5 per rack -> ceil(32 / 5) = 7; 11 racks of 3.
    # The 12 switches (1 U each, 13.2 kW) fill a rack of their own: 12 racks in all.
    assert (power.racks_by_power, power.racks_by_space, power.server_racks) == (11, 7, 11)
    assert (power.switch_racks, power.storage_racks, power.racks) == (1, 0, 12)
    assert power.servers_per_rack == 3
    assert power.max_server_kw == pytest.approx(10.2)


def _dgx_and_controllers() -> LoadedSpec:
    """32 DGX H100 and 3 small controllers (0.5 kW, the 2 U CPU server default)."""
    profiles = {
        "dgx": DGX_H100,
        "ctl": {"cpu": {"sockets": 1, "cores_per_socket": 16}, "memory_gib": 64, "power_kw": 0.5},
    }
    pools = [
        {"name": "gpu", "profile": "dgx", "count": 32, "role": "compute"},
        {"name": "ctl", "profile": "ctl", "count": 3, "role": "controller"},
    ]
    return cluster(profiles=profiles, pools=pools, facility=FACILITY)


def test_racks_are_counted_per_profile_and_summed() -> None:
    loaded = _dgx_and_controllers()
    power = make_plan(loaded.spec, loaded.catalog).power
    # DGX: 11 racks (above). Controllers: 0.5 kW -> 80 per rack by power, 2 U (the CPU
    # server default) -> 21 by space: 1 rack. 11 + 1 = 12; by space 7 + 1 = 8; with the
    # switch rack 13.
    assert (power.racks_by_power, power.racks_by_space, power.server_racks) == (12, 8, 12)
    assert power.racks == 13
    # The tightest profile sets servers per rack: min(3, 21) = 3.
    assert power.servers_per_rack == 3
    # 326.4 + 3 x 0.5 = 327.9 kW of servers.
    assert power.server_kw == pytest.approx(327.9)


def test_a_server_beyond_the_rack_budget_gets_a_rack_of_its_own() -> None:
    facility = {**FACILITY, "rack_kw": 10}
    loaded = cluster(nodes=5, profile=DGX_H100, facility=facility)
    power = make_plan(loaded.spec, loaded.catalog).power
    # 10.2 kW > 10 kW: none fit by power; each of the 5 still takes one rack. The one
    # QM9700 (40 endpoints fit its 64 ports) takes a sixth.
    assert power.servers_per_rack == 0
    assert (power.racks_by_power, power.server_racks, power.racks) == (5, 5, 6)
    # By space floor(42 / 8) = 5 fit one rack.
    assert power.racks_by_space == 1


def test_server_power_comes_from_the_profile_then_the_layout_then_an_estimate() -> None:
    loaded = load_fixture("a800-rail-1250.yaml")
    catalog = loaded.catalog
    # A800-8GPU-4NIC layout: 6.5 kW, 6 U.
    a800 = loaded.spec.profiles["a800-node"]
    assert server_kw(a800, catalog) == 6.5
    assert server_rack_units(a800, catalog) == 6
    # The controller profile says 0.8 kW and 1 U itself.
    ctl = loaded.spec.profiles["cpu-server"]
    assert (server_kw(ctl, catalog), server_rack_units(ctl, catalog)) == (0.8, 1)
    # No figure anywhere: 4 x L40S 350 W + 2 sockets x 350 W + 2 x ConnectX-7 25 W
    # + 1 x ConnectX-6-Lx 10 W + 250 W base = 1,400 + 700 + 50 + 10 + 250 = 2,410 W.
    profile = Profile.model_validate(
        gpu_profile("L40S", gpus=4)
        | {
            "nics": {
                "compute": {"model": "ConnectX-7", "count": 2},
                "management": {"model": "ConnectX-6-Lx", "count": 1},
            }
        }
    )
    assert estimated_server_kw(profile, catalog) == pytest.approx(2.41)
    assert server_kw(profile, catalog) == pytest.approx(2.41)
    # 4 GPUs -> 4 U by the documented default (4 U per four GPUs).
    assert server_rack_units(profile, catalog) == 4


def test_a800_example_power() -> None:
    loaded = load_fixture("a800-rail-1250.yaml")
    power = make_plan(loaded.spec, loaded.catalog).power
    # 1,250 x 6.5 + 3 x 0.8 = 8,127.4 kW servers; switches 80 x 1.7 = 136 kW.
    assert power.server_kw == pytest.approx(8127.4)
    assert power.it_kw == pytest.approx(8263.4)
    # x PUE 1.2 = 9,916.08 kW.
    assert power.facility_kw == pytest.approx(9916.08)
    # A800: floor(40 / 6.5) = 6 per rack -> 209 racks, controllers 1 rack: 210.
    # Switches: 80 SN5600 x 2 U = 160 U -> ceil(160 / 42) = 4 racks; 136 kW / 40 kW -> 4.
    assert (power.server_racks, power.switch_racks, power.racks) == (210, 4, 214)


def test_power_says_what_it_counts_and_counts_declared_storage_and_switches() -> None:
    loaded = cluster(nodes=32, profile=DGX_H100, facility=FACILITY)
    base = make_plan(loaded.spec, loaded.catalog).power
    assert "server maximum" in base.basis and "upper bound" in base.basis
    assert base.not_counted == (
        "storage systems (storage.systems)",
        "front-end and storage switches (network.switches)",
    )
    document = yaml.safe_load(DGX_SPEC)
    document["storage"] = {
        "kind": "weka",
        "systems": [{"name": "weka", "count": 8, "power_kw": 1.5, "rack_units": 1}],
    }
    document["network"]["switches"] = [
        {"purpose": "frontend", "model": "SN4600C", "count": 4},
        {"purpose": "storage", "model": "SN5600", "count": 2},
    ]
    loaded = load_spec_text(yaml.safe_dump(document))
    power = make_plan(loaded.spec, loaded.catalog).power
    # Storage: 8 x 1.5 kW = 12 kW in 8 U -> one rack (12 kW < 40 kW).
    assert power.storage_kw == pytest.approx(12.0)
    assert power.storage_racks == 1
    # Other switches: 4 x SN4600C 0.5 kW + 2 x SN5600 1.7 kW = 5.4 kW.
    assert power.other_switch_kw == pytest.approx(5.4)
    # IT: 326.4 servers + 13.2 fabric + 5.4 + 12 = 357.0 kW.
    assert power.it_kw == pytest.approx(357.0)
    # Switch racks: fabric 12 x 1 U + 4 x 2 U + 2 x 2 U = 24 U, 18.6 kW -> 1 rack.
    assert power.switch_racks == 1
    assert power.racks == 11 + 1 + 1
    assert power.not_counted == ()


def test_an_unknown_declared_switch_is_refused_where_it_is_named() -> None:
    document = yaml.safe_load(DGX_SPEC)
    document["network"]["switches"] = [{"purpose": "frontend", "model": "SN4600", "count": 4}]
    with pytest.raises(SpecError) as caught:
        load_spec_text(yaml.safe_dump(document))
    [problem] = caught.value.problems
    assert problem.path == ("network", "switches", 0, "model")
    assert problem.hint == "did you mean 'SN4600C'?"


DGX_SPEC = """
apiVersion: myriad/v1
kind: Cluster
metadata: {name: dgx}
provider: {kind: local}
profiles:
  dgx:
    server: DGX-H100
    gpu: {model: H100-SXM5-80GB, count: 8}
    cpu: {sockets: 2, cores_per_socket: 56}
    memory_gib: 2048
    pcie: {gen: 5, switches: 4}
    nvswitch: 4
    nics: {compute: {model: ConnectX-7, count: 8}}
pools: [{name: gpu, profile: dgx, count: 32, role: compute}]
network:
  fabric: infiniband
  topology: {kind: rail-optimized, switch: QM9700}
software: {os: ubuntu-22.04, nvidia_driver: "550"}
facility: {pue: 1.2, usd_per_kwh: 0.078, rack_kw: 40, cooling: liquid}
"""


def test_each_profile_fills_its_racks_in_order() -> None:
    """The racks behind the count, for the report's rack picture: per profile, full racks
    and the one left part-full."""
    loaded = _dgx_and_controllers()
    power = make_plan(loaded.spec, loaded.catalog).power
    fills = {f.profile: f for f in power.rack_fills}
    # 32 DGX at 3 a rack: 10 full racks and one with 2; the 3 controllers share one rack.
    dgx, ctl = fills["dgx"], fills["ctl"]
    assert (dgx.per_rack, dgx.full, dgx.rest, dgx.racks) == (3, 10, 2, 11)
    assert (ctl.per_rack, ctl.full, ctl.rest, ctl.racks) == (21, 0, 3, 1)
    assert (dgx.units_each, dgx.roles) == (8, ("compute",))
    assert sum(f.racks for f in power.rack_fills) == power.server_racks


def test_a_server_over_the_rack_budget_fills_a_rack_alone() -> None:
    facility = {**FACILITY, "rack_kw": 10}
    loaded = cluster(nodes=5, profile=DGX_H100, facility=facility)
    [fill] = make_plan(loaded.spec, loaded.catalog).power.rack_fills
    assert (fill.per_rack, fill.full, fill.rest, fill.over_budget) == (1, 5, 0, True)
    assert fill.racks == 5
