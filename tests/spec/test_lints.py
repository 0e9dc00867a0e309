"""Each hardware-selection lint fires where an experienced builder would object — with the
numbers behind it — and stays quiet where the choice is sound."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from myriad.errors import SpecError
from myriad.plan.lints import Finding
from myriad.plan.pipeline import plan_loaded
from myriad.spec import LoadedSpec, load_spec_text

from spec_builder import cluster, gpu_profile, load_example


def findings(loaded: LoadedSpec, lint_id: str) -> list[Finding]:
    return [f for f in plan_loaded(loaded).findings if f.id == lint_id]


def test_a_400g_nic_in_a_gen4_slot_is_flagged_with_its_numbers() -> None:
    loaded = cluster(profile=gpu_profile(pcie={"gen": 4, "switches": 4}))
    [finding] = findings(loaded, "nic-pcie-bottleneck")
    # ConnectX-7: 400 Gb/s = 50 GB/s; a Gen4 x16 slot carries 31.5 GB/s = 63 % of line rate.
    assert finding.severity == "warning"
    assert finding.numbers == {"nic_gbs": 50.0, "slot_gbs": 31.5, "pcie_gen": 4, "lanes": 16}
    assert "63%" in finding.message
    assert "Gen5" in finding.suggestion and "200 Gb/s" in finding.suggestion
    assert finding.path == ("profiles", "node", "nics", "compute")


def test_no_pcie_warning_where_nic_and_slot_fit() -> None:
    # 200 Gb/s = 25 GB/s fits Gen4 x16 (31.5); 400 Gb/s fits Gen5 x16 (63).
    gen4 = gpu_profile(
        gpu="A800-SXM4-80GB", nic="ConnectX-6", nics=4, pcie={"gen": 4, "switches": 4}
    )
    assert findings(cluster(profile=gen4), "nic-pcie-bottleneck") == []
    assert findings(cluster(profile=gpu_profile()), "nic-pcie-bottleneck") == []


def test_a_narrow_slot_is_flagged_even_at_the_right_generation() -> None:
    profile = gpu_profile(nics=8)
    profile["nics"]["compute"]["slot_lanes"] = 8
    [finding] = findings(cluster(profile=profile), "nic-pcie-bottleneck")
    assert finding.numbers["slot_gbs"] == 31.5  # Gen5 x8 = half of 63.0


def test_too_few_nics_per_gpu_is_flagged_but_one_per_pair_is_fine() -> None:
    [finding] = findings(cluster(profile=gpu_profile(nics=2)), "nics-per-gpu")
    assert "4 GPUs per NIC" in finding.message
    assert findings(cluster(profile=gpu_profile(nics=4)), "nics-per-gpu") == []
    assert findings(cluster(profile=gpu_profile(nics=8)), "nics-per-gpu") == []


def test_nics_that_do_not_split_over_pcie_switches_are_flagged() -> None:
    [finding] = findings(cluster(profile=gpu_profile(nics=6)), "gpu-nic-placement")
    assert finding.numbers == {"gpus": 8, "compute_nics": 6, "pcie_switches": 4}
    no_switches = gpu_profile(pcie={"gen": 5, "switches": 0})
    [flat] = findings(cluster(profile=no_switches), "gpu-nic-placement")
    assert flat.severity == "warning"  # rail-optimized wants GPU and NIC on one switch
    assert findings(cluster(profile=gpu_profile()), "gpu-nic-placement") == []


def test_host_memory_and_cores_in_proportion_to_gpus() -> None:
    # 8 x 80 GB = 640e9 B = 596 GiB of GPU memory; 512 GiB host memory is 0.86x.
    [memory] = findings(cluster(profile=gpu_profile(memory_gib=512)), "host-memory")
    assert memory.severity == "warning"
    assert memory.numbers == {"host_gib": 512, "gpu_gib": 596.0}
    [cores] = findings(
        cluster(profile=gpu_profile(cpu={"sockets": 1, "cores_per_socket": 32})),
        "cpu-cores-per-gpu",
    )
    assert cores.numbers == {"cores": 32, "gpus": 8}
    assert findings(cluster(profile=gpu_profile()), "host-memory") == []


def test_a_server_above_the_rack_limit_is_an_error() -> None:
    # Estimated 8 x 700 W + 2 x 350 W + 8 x 25 W + 250 W = 6.75 kW > 6 kW per rack.
    [finding] = findings(cluster(facility={"rack_kw": 6}), "rack-power")
    assert finding.severity == "error"
    assert finding.numbers["server_kw"] == 6.75


def test_air_cooling_above_40_kw_per_rack_is_flagged() -> None:
    [finding] = findings(cluster(facility={"rack_kw": 60, "cooling": "air"}), "rack-cooling")
    assert finding.severity == "warning"
    assert findings(cluster(facility={"rack_kw": 60, "cooling": "liquid"}), "rack-cooling") == []


def test_facility_power_limit() -> None:
    [finding] = findings(cluster(nodes=64, facility={"power_limit_mw": 0.1}), "facility-power")
    assert finding.severity == "error"


def test_addressing_too_small_for_the_nodes() -> None:
    loaded = load_example("local")
    assert findings(loaded, "addressing") == []
    text = Path(loaded.source.file).read_text().replace("172.31.77.0/24", "172.31.77.0/30")
    [finding] = findings(load_spec_text(text, "small.yaml"), "addressing")
    # A /30 has 4 addresses; 3 go to network, broadcast and gateway; 4 nodes need 4.
    assert finding.numbers == {"needed": 4, "usable": 1}
    assert "/29" in finding.suggestion


def test_pool_names_that_collide_as_hostnames_make_the_spec_invalid() -> None:
    profiles = {"node": gpu_profile()}
    pools = [
        {"name": "gpu", "profile": "node", "count": 100, "role": "compute"},
        {"name": "gpu1", "profile": "node", "count": 2, "role": "compute"},
    ]
    # gpu + "101"? no: gpu pool pads to 3 digits (gpu001..gpu100); gpu1 pads to 2 (gpu101,
    # gpu102) — no clash. With 200 nodes, gpu pool reaches gpu101: a clash, and one host
    # name for two nodes makes the spec meaningless (exit 2), not a lint finding.
    cluster(profiles=profiles, pools=pools)
    pools[0]["count"] = 200
    with pytest.raises(SpecError) as caught:
        cluster(profiles=profiles, pools=pools)
    [problem] = caught.value.problems
    assert problem.path == ("pools", 1, "name") and "gpu101" in problem.message


def test_duplicate_pool_names_make_the_spec_invalid() -> None:
    pools = [
        {"name": "gpu", "profile": "node", "count": 2, "role": "compute"},
        {"name": "gpu", "profile": "node", "count": 2, "role": "compute"},
    ]
    with pytest.raises(SpecError) as caught:
        cluster(pools=pools)
    [problem] = caught.value.problems
    assert problem.path == ("pools", 1, "name") and "already used by pools[0]" in problem.message


def test_switch_and_nic_must_speak_the_fabric() -> None:
    loaded = cluster(fabric="roce", topology={"kind": "fat-tree", "switch": "QM9700"})
    assert [f.severity for f in findings(loaded, "fabric-switch-kind")] == ["error"]
    lx = gpu_profile(nic="ConnectX-6-Lx", nics=8)
    assert findings(cluster(profile=lx), "fabric-nic-kind")[0].severity == "error"


def test_a_slower_port_than_the_nic_is_flagged() -> None:
    loaded = cluster(topology={"kind": "fat-tree", "switch": "QM8700"})
    [finding] = findings(loaded, "nic-switch-speed")
    assert finding.numbers == {"nic_gbps": 400, "port_gbps": 200}


def test_checkpoints_that_cannot_drain_within_their_interval() -> None:
    storage = {
        "kind": "nfs",
        "server": "10.0.0.1",
        "export": "/x",
        "write_gbs": 1,
        "checkpoint": {"params_billion": 70, "interval_minutes": 5},
    }
    profile = gpu_profile()
    profile["nics"]["storage"] = {"model": "ConnectX-6-Dx", "count": 1}
    [finding] = [
        f
        for f in findings(cluster(profile=profile, storage=storage), "storage-checkpoint")
        if f.severity == "error"
    ]
    # 70e9 x 14 B = 980 GB at 1 GB/s = 980 s > 300 s.
    assert finding.numbers == {"write_seconds": 980.0, "interval_seconds": 300.0}


def test_gpus_without_a_driver_branch_is_an_error() -> None:
    assert findings(cluster(), "driver-missing") == []
    document = yaml.safe_load(Path(load_example("starter-64").source.file).read_text())
    del document["software"]["nvidia_driver"]
    [finding] = findings(load_spec_text(yaml.safe_dump(document)), "driver-missing")
    assert finding.severity == "error"


def test_every_example_plans_without_errors() -> None:
    for name in ("local", "starter-64", "roce-10k", "h100-100k"):
        result = plan_loaded(load_example(name))
        assert not result.has_errors, (name, result.findings)


def test_roce_without_a_doca_repository_cannot_get_mlnx_qos() -> None:
    loaded = cluster(fabric="roce", topology={"kind": "rail-optimized", "switch": "SN5600-400G"})
    [finding] = findings(loaded, "roce-tools")
    assert finding.severity == "error"
    assert findings(load_example("roce-10k"), "roce-tools") == []
