"""Loading whole specs: the examples, file-level failures, and the JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from myriad.cli import main
from myriad.spec import SpecError, load_spec, load_spec_text, shipped_catalog

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "inventories").glob("*/cluster.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.parent.name)
def test_every_example_spec_loads(path: Path) -> None:
    loaded = load_spec(path)
    assert loaded.spec.metadata.name == path.parent.name
    for profile in loaded.spec.profiles.values():
        if profile.gpu is not None:
            assert profile.gpu.model in loaded.catalog.gpus


def test_the_catalog_has_the_parts_operators_ask_for() -> None:
    catalog = shipped_catalog()
    for gpu in (
        "A100-SXM4-40GB",
        "A100-SXM4-80GB",
        "A800-SXM4-80GB",
        "H100-SXM5-80GB",
        "H100-PCIe-80GB",
        "H800-SXM5-80GB",
        "H200-SXM-141GB",
        "B200-SXM-180GB",
        "L40S",
    ):
        assert gpu in catalog.gpus
    for nic in (
        "ConnectX-6",
        "ConnectX-6-Dx",
        "ConnectX-6-Lx",
        "ConnectX-7",
        "BlueField-3",
        "ConnectX-8",
    ):
        assert nic in catalog.nics
    assert {"QM8700", "QM9700", "SN5600", "SN3420"} <= set(catalog.switches)
    a800 = catalog.servers["A800-8GPU-4NIC"]
    assert (a800.cpu.sockets, a800.pcie_gen, a800.pcie_switches, a800.nvswitch) == (2, 4, 4, 6)
    assert (a800.compute_nics.count, catalog.nics[a800.compute_nics.model].speed_gbps) == (4, 200)
    # Every server layout refers to parts the catalog has.
    for layout in catalog.servers.values():
        assert layout.gpu_model in catalog.gpus
        assert layout.compute_nics.model in catalog.nics
        # A compute tray's rack holds exactly its trays' GPUs (NVL72: 18 trays x 4 = 72).
        if layout.rack_system is not None:
            rack = catalog.racks[layout.rack_system]
            assert rack.compute_trays * layout.gpu_count == rack.gpus


def test_the_catalog_has_the_current_generation() -> None:
    catalog = shipped_catalog()
    assert {"B300-SXM-288GB", "GB200-186GB", "GB300-288GB"} <= set(catalog.gpus)
    assert "Q3400" in catalog.switches
    # NVIDIA: 18 compute trays and 9 NVLink switch trays, 72 GPUs and 36 Grace CPUs, one
    # 130 TB/s NVLink domain, liquid-cooled (hardware.yaml names where each figure is read).
    for name in ("GB200-NVL72", "GB300-NVL72"):
        rack = catalog.racks[name]
        assert (rack.compute_trays, rack.switch_trays, rack.gpus, rack.cpus) == (18, 9, 72, 36)
        assert (rack.nvlink_domain_tbs, rack.cooling) == (130, "liquid")
    # Quantum-X800: 144 ports of 800 Gb/s (115.2 Tb/s).
    q3400 = catalog.switches["Q3400"]
    assert q3400.ports * q3400.port_speed_gbps == 115_200
    # Every Blackwell GPU has FP4; Hopper has none.
    assert all(catalog.gpus[g].fp4_dense_tflops for g in ("B200-SXM-180GB", "GB300-288GB"))
    assert catalog.gpus["H100-SXM5-80GB"].fp4_dense_tflops is None


def test_a_spec_can_add_and_override_catalog_entries() -> None:
    text = (
        (ROOT / "inventories/local/cluster.yaml").read_text()
        + """
catalog:
  switches:
    SN3420:
      kind: ethernet
      ports: 48
      port_speed_gbps: 10
      power_w: 150
      source: our lab's older ToR
    LAB-TOR:
      kind: ethernet
      ports: 24
      port_speed_gbps: 10
      power_w: 80
      source: a lab switch
"""
    )
    loaded = load_spec_text(text, "lab.yaml")
    assert loaded.catalog.switches["SN3420"].port_speed_gbps == 10
    assert "LAB-TOR" in loaded.catalog.switches
    assert "QM9700" in loaded.catalog.switches


def test_a_spec_may_use_a_model_it_adds_to_the_catalog() -> None:
    text = (ROOT / "inventories/local/cluster.yaml").read_text().replace(
        "switch: SN3420", "switch: LAB-TOR"
    ) + (
        "catalog:\n  switches:\n    LAB-TOR: {kind: ethernet, ports: 24, port_speed_gbps: 10,"
        " power_w: 80, source: a lab switch}\n"
    )
    assert load_spec_text(text, "lab.yaml").spec.network.topology.switch == "LAB-TOR"


def test_missing_file_and_non_utf8_are_spec_errors(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no such file"):
        load_spec(tmp_path / "absent.yaml")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"apiVersion: myriad/v1\nkind: \xff\xfe\n")
    with pytest.raises(SpecError) as caught:
        load_spec(binary)
    assert caught.value.problems[0].line == 2
    assert "not UTF-8" in caught.value.problems[0].message


def test_hostnames_are_zero_padded_to_the_pool_size() -> None:
    spec = load_spec(ROOT / "inventories/roce-10k/cluster.yaml").spec
    gpu = next(p for p in spec.pools if p.name == "gpu")
    assert (gpu.hostname(1), gpu.hostname(1250)) == ("gpu0001", "gpu1250")
    ctl = next(p for p in spec.pools if p.name == "ctl")
    assert ctl.hostnames() == ["ctl01", "ctl02", "ctl03"]


def test_schema_command_prints_a_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["title"] == "Myriad cluster spec"
    assert {"apiVersion", "profiles", "pools", "network", "software"} <= set(schema["properties"])
    assert schema["additionalProperties"] is False
    assert "apiVersion" in schema["required"]


def test_invalid_spec_exits_2_with_every_problem_and_no_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad = Path(__file__).parent / "bad" / "43-several-problems.yaml"
    assert main(["plan", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "3 problems in the spec" in err
    assert "Traceback" not in err
    assert f"{bad}:11:5: profiles.gpu-node.memory_gib" in err


def test_bringup_mode_follows_the_node_count_unless_the_spec_says() -> None:
    from myriad.spec.bringup import IMAGE_MODE_MIN_NODES, Bringup, resolved_mode

    assert resolved_mode(Bringup(), IMAGE_MODE_MIN_NODES - 1) == "push"
    assert resolved_mode(Bringup(), IMAGE_MODE_MIN_NODES) == "image"
    assert resolved_mode(Bringup(mode="image"), 4) == "image"
    assert resolved_mode(Bringup(mode="push"), 12_519) == "push"
