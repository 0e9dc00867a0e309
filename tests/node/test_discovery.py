"""Hardware discovery on trees built from NVIDIA's DGX H100 table and a real HGX H200 `lspci -tv`.

No public sysfs capture of a DGX or HGX node exists (tests/samples/SOURCES.md, files 25-26):
the DGX H100 tree is built from the DGX H100/H200 User Guide's "Network Modules" Table 6, the
HGX H200 tree from the PCI tree a rented HGX H200 VM printed (openfabric-systems/simllm). What
these tests prove is that discovery reads the PCI ancestry, class/infiniband and class/net as
the kernel lays them out and derives the vendor's published mapping from them; what a real
DGX adds is `python3 -m myriad.node.hardware capture` on one node, compared once.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import hardware_trees as trees
from myriad.node.hardware.discover import HardwareMap, discover
from myriad.node.hardware.profile import assign
from myriad.node.hardware.sysfs import Sysfs
from myriad.node.hardware.tree import TreeError, capture, materialise
from myriad.spec.loader import shipped_catalog

SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "sysfs-tree"
DGX_FILE = SAMPLES / "dgx-h100_table6_constructed.tree"
HGX_FILE = SAMPLES / "hgx-h200_vastai-vm_simllm-lspci.tree"
# Table 6, in GPU order: the compute RDMA devices; the rest are storage / in-band.
TABLE6_COMPUTE = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
TABLE6_STORAGE = ["mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"]


def models() -> dict[str, str]:
    catalog = shipped_catalog()
    names = {pid: name for name, nic in catalog.nics.items() for pid in nic.pci_ids}
    names.update({pid: name for name, gpu in catalog.gpus.items() for pid in gpu.pci_ids})
    return names


def discovered(tmp_path: Path, text: str) -> HardwareMap:
    root = tmp_path / "sys"
    materialise(text, str(root))
    return discover(Sysfs(str(root)), models())


def dgx_expectation(**changes: object) -> dict[str, object]:
    expected: dict[str, object] = {
        "where": "profiles.dgx-h100.nics",
        "gpus": 8,
        "compute": {"model": "ConnectX-7", "count": 8, "speed_gbps": 400, "devices": []},
        "storage": {"model": "ConnectX-7", "count": 4, "speed_gbps": 400, "devices": []},
    }
    for key, value in changes.items():
        expected[key] = {**expected[key], **value}  # type: ignore[dict-item]
    return expected


def test_the_sample_trees_are_what_the_published_tables_build() -> None:
    assert DGX_FILE.read_text() == trees.dgx_h100().text()
    assert HGX_FILE.read_text() == trees.hgx_h200_vastai().text()


def test_dgx_h100_discovery_gives_nvidias_table_6(tmp_path: Path) -> None:
    hw = discovered(tmp_path, DGX_FILE.read_text())
    assert [g.model for g in hw.gpus] == ["H100-SXM5-80GB"] * 8
    result = assign(hw, dgx_expectation())
    assert result.problems == ()
    assert [a.rdma_device for a in result.compute] == TABLE6_COMPUTE
    assert [a.rdma_device for a in result.storage] == TABLE6_STORAGE
    by_device = {p.rdma_device: p for p in hw.ports}
    gpus = [g.bdf for g in hw.gpus]
    for gpu, cpu, netdev, rdma in trees.DGX_H100_TABLE6:
        port = by_device[rdma]
        # The GPU Table 6 pairs it with shares its PCIe switch; the CPU is its NUMA node.
        assert port.gpus == (gpus[gpu],), rdma
        assert (port.numa_node, port.netdev, port.model) == (cpu, netdev, "ConnectX-7")
        assert (port.link_layer, port.rate_gbps, port.state) == ("infiniband", 400.0, "ACTIVE")
        assert port.firmware == "28.41.1000"
    assert all(by_device[d].gpus == () and by_device[d].switch is None for d in TABLE6_STORAGE)
    json.dumps(hw.to_json())
    json.dumps(result.to_json())


def test_the_old_mlx5_0_to_7_assumption_is_refused_naming_the_storage_port(tmp_path: Path) -> None:
    hw = discovered(tmp_path, DGX_FILE.read_text())
    assumed = [f"mlx5_{i}" for i in range(8)]
    problems = assign(hw, dgx_expectation(compute={"devices": assumed})).problems
    assert len(problems) == 7  # every rail after rail 0
    assert problems[0].startswith(
        "profiles.dgx-h100.nics.compute.devices[1] names mlx5_1, but the compute port 1 found "
        "is mlx5_3 (PCI 0000:40:00.0, ConnectX-7) beside GPU 0000:43:00.0; mlx5_1 is at PCI "
        "0000:29:00.0, which shares no PCIe switch with a GPU. Fix: set "
        "profiles.dgx-h100.nics.compute.devices to ['mlx5_0', 'mlx5_3', 'mlx5_4',"
    )


def test_a_storage_port_named_on_a_compute_hca_is_refused(tmp_path: Path) -> None:
    # What `stor1: mlx5_9` did on a DGX H100: mlx5_9 is the HCA beside GPU 5.
    hw = discovered(tmp_path, DGX_FILE.read_text())
    storage = {"count": 2, "devices": ["mlx5_8", "mlx5_9"]}
    problems = assign(hw, dgx_expectation(storage=storage)).problems
    assert any(
        "storage.devices[1] names mlx5_9" in p
        and "mlx5_9 is at PCI 0000:c0:00.0, beside GPU 0000:c3:00.0 (a compute port)" in p
        for p in problems
    ), problems


def test_a_swapped_card_is_named_with_its_slot_and_model(tmp_path: Path) -> None:
    tree = trees.dgx_h100()
    tree.files[f"{tree.where['0000:4f:00.0']}/device"] = trees.CX6
    problems = assign(discovered(tmp_path, tree.text()), dgx_expectation()).problems
    assert problems[0] == (
        "profiles.dgx-h100.nics.compute: mlx5_4 (PCI 0000:4f:00.0, ConnectX-6) shares a PCIe "
        "switch with GPU 0000:52:00.0 but is not a ConnectX-7: put a ConnectX-7 in that slot, "
        "or set profiles.dgx-h100.nics.compute.model to the card the node has"
    )
    assert "GPUs with no ConnectX-7 beside them: 0000:52:00.0" in problems[1]


def test_a_missing_port_names_the_gpu_left_without_one(tmp_path: Path) -> None:
    tree = trees.dgx_h100()
    gone = tree.where["0000:5e:00.0"]
    tree.files = {p: v for p, v in tree.files.items() if not p.startswith(gone)}
    tree.links = {
        p: t
        for p, t in tree.links.items()
        if not (p.startswith(gone) or t.endswith(gone) or "mlx5_5" in p or "ibp94s0" in p)
    }
    problems = assign(discovered(tmp_path, tree.text()), dgx_expectation()).problems
    assert problems == (
        "profiles.dgx-h100.nics.compute: the profile has 8 compute ports (ConnectX-7), the node "
        "has 7 sharing a PCIe switch with a GPU; GPUs with no ConnectX-7 beside them: "
        "0000:61:00.0. Fix: seat or replace the card in the slot beside each such GPU "
        "(lspci -s <slot>), or correct profiles.dgx-h100.nics.compute.count",
    )


def test_a_port_up_at_the_wrong_rate_is_named(tmp_path: Path) -> None:
    tree = trees.dgx_h100()
    tree.files[f"{tree.where['0000:40:00.0']}/infiniband/mlx5_3/ports/1/rate"] = (
        "200 Gb/sec (2X NDR)"
    )
    problems = assign(discovered(tmp_path, tree.text()), dgx_expectation()).problems
    assert problems == (
        "profiles.dgx-h100.nics.compute: mlx5_3 (PCI 0000:40:00.0, ConnectX-7) is up at 200 "
        "Gb/s, not 400: check the cable and the switch port's speed, or the spec's NIC model",
    )


def test_a_gpu_behind_a_connectx8s_own_switch_is_its_rail(tmp_path: Path) -> None:
    # ConnectX-8 carries a PCIe switch: the root port leads to the NIC's upstream port and the
    # GPU hangs off one of its downstream ports, beside the NIC's own function (synthetic).
    tree = trees.Tree(comments=["synthetic: ConnectX-8 with a GPU behind its internal switch"])
    for i, bus in enumerate((0x10, 0x90)):
        root, up = trees.bdf(bus, 1), trees.bdf(bus + 1)
        chain_nic = [root, up, trees.bdf(bus + 2), trees.bdf(bus + 3)]
        tree.pci(chain_nic, trees.MELLANOX, trees.CX8, trees.IB_CLASS, i)
        tree.pci(
            [root, up, trees.bdf(bus + 2, 1), trees.bdf(bus + 4)],
            trees.NVIDIA,
            trees.H200,
            trees.GPU_CLASS,
            i,
        )
        tree.rdma(
            trees.bdf(bus + 3),
            f"mlx5_{i}",
            layer="InfiniBand",
            rate="800 Gb/sec (4X XDR)",
            state="4: ACTIVE",
            guid=f"0000:0000:0000:00{i}0",
            fw="40.44.1036",
            netdev=None,
        )
    hw = discovered(tmp_path, tree.text())
    expected = {
        "where": "profiles.b300.nics",
        "compute": {"model": "ConnectX-8", "count": 2, "speed_gbps": 800},
    }
    result = assign(hw, expected)
    assert result.problems == ()
    assert [(a.rdma_device, a.gpu) for a in result.compute] == [
        ("mlx5_0", "0000:14:00.0"),
        ("mlx5_1", "0000:94:00.0"),
    ]
    assert hw.ports[0].switch == "0000:11:00.0"


def test_hgx_h200_vm_capture_gives_one_nic_beside_each_gpu(tmp_path: Path) -> None:
    hw = discovered(tmp_path, HGX_FILE.read_text())
    assert [g.bdf for g in hw.gpus] == [f"0000:{0x83 + 8 * i:02x}:00.0" for i in range(8)]
    assert [g.model for g in hw.gpus] == ["H200-SXM-141GB"] * 8
    assert [g.numa_node for g in hw.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    # nvidia-smi topo -m there: NIC i (mlx5_i) is PIX to GPU i.
    assert [(p.rdma_device, p.gpus) for p in hw.ports] == [
        (f"mlx5_{i}", (hw.gpus[i].bdf,)) for i in range(8)
    ]
    # The capture has no RDMA stack: no rate, state, firmware or GUID, and none made up.
    assert {(p.rate_gbps, p.state, p.firmware, p.guid) for p in hw.ports} == {(None,) * 4}
    result = assign(hw, {"compute": {"model": "ConnectX-7", "count": 8, "speed_gbps": 400}})
    assert result.problems == ()
    assert [a.rdma_device for a in result.compute] == [f"mlx5_{i}" for i in range(8)]


def test_without_pcie_switches_pci_order_decides(tmp_path: Path) -> None:
    # A profile with pcie.switches 0: NICs on CPU root ports; rails are the model's ports in
    # PCI order, and a shared switch is neither needed nor looked for.
    hw = discovered(tmp_path, DGX_FILE.read_text())
    expected = dgx_expectation(compute={"beside_gpu": False, "count": 4}, storage={"count": 2})
    result = assign(hw, expected)
    assert result.problems == ()
    assert [a.rdma_device for a in result.compute] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert [a.rdma_device for a in result.storage] == ["mlx5_4", "mlx5_5"]


def test_a_capture_of_a_tree_replays_to_the_same_map(tmp_path: Path) -> None:
    live = tmp_path / "live"
    materialise(DGX_FILE.read_text(), str(live))
    text = capture(str(live), ("taken in a test",))
    assert text.startswith("# taken in a test\n")
    replayed = tmp_path / "replayed"
    materialise(text, str(replayed))
    assert discover(Sysfs(str(replayed)), models()) == discover(Sysfs(str(live)), models())


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("file a/b 12", "the value is not a JSON string"),
        ("link a/b /sys/devices", "a link needs a relative target"),
        ('file ../etc/x "1"', "path '../etc/x' must stay inside the tree"),
        ('fil a/b "1"', "expected dir, link or file, got 'fil'"),
    ],
)
def test_a_bad_tree_line_is_refused_with_its_line(tmp_path: Path, line: str, message: str) -> None:
    with pytest.raises(TreeError, match="^" + re.escape(f"bad.tree:2: {message}")):
        materialise(f"# header\n{line}\n", str(tmp_path), "bad.tree")


def test_check_on_the_node_exits_2_naming_each_port(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from myriad.node.hardware.__main__ import main

    root = tmp_path / "sys"
    materialise(DGX_FILE.read_text(), str(root))
    expect = tmp_path / "expect.json"
    assumed = {"devices": [f"mlx5_{i}" for i in range(8)]}
    expect.write_text(json.dumps({**dgx_expectation(compute=assumed), "models": models()}))
    assert main(["check", "--sysfs", str(root), "--expect", str(expect)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 7 and lines[0].startswith("profiles.dgx-h100.nics.compute.devices[1]")
    expect.write_text(json.dumps({**dgx_expectation(), "models": models()}))
    assert main(["check", "--sysfs", str(root), "--expect", str(expect)]) == 0
    assert main(["map", "--sysfs", str(root), "--expect", str(expect)]) == 0
    record = json.loads(capsys.readouterr().out)
    assert [a["rdma_device"] for a in record["assignment"]["compute"]] == TABLE6_COMPUTE


def test_the_hgx_tree_places_each_gpu_where_nccls_own_dump_does(tmp_path: Path) -> None:
    # NCCL's topology dump from the same machine (file 27), read independently of lspci:
    # every GPU under the same PCIe switch and on the same NUMA node as discovery finds it.
    import xml.etree.ElementTree as ET

    dump = ET.parse(SAMPLES.parent / "nccl-topo" / "hgx-h200_vastai-vm_nccl-topo-dump.xml")
    nccl = {
        gpu_pci.get("busid"): (switch.get("busid"), int(cpu.get("numaid", "-1")))
        for cpu in dump.getroot().iter("cpu")
        for switch in cpu.findall("pci")
        for gpu_pci in switch.findall("pci")
        if gpu_pci.find("gpu") is not None
    }
    hw = discovered(tmp_path, HGX_FILE.read_text())
    assert {g.bdf: (g.switch, g.numa_node) for g in hw.gpus} == nccl
    assert len(nccl) == 8


def test_the_topology_from_the_map_matches_nccls_dump_of_that_machine(tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    from myriad.node.hardware.topology import nccl_topology

    hw = discovered(tmp_path, HGX_FILE.read_text())
    expected = {"compute": {"model": "ConnectX-7", "count": 8}, "sm": 90, "pcie_gen": 5}
    topology = nccl_topology(hw, assign(hw, expected).compute, expected)
    mine = {
        (cpu["numa_id"], switch["busid"], gpu["busid"], gpu["dev"], gpu["sm"])
        for cpu in topology["cpus"]
        for switch in cpu["pcie_switches"]
        for gpu in switch["gpus"]
    }
    dump = ET.parse(SAMPLES.parent / "nccl-topo" / "hgx-h200_vastai-vm_nccl-topo-dump.xml")
    nccls = {
        (int(cpu.get("numaid", "-1")), switch.get("busid"), pci.get("busid"),
         int(pci.find("gpu").get("dev", "-1")), int(pci.find("gpu").get("sm", "0")))  # type: ignore[union-attr]
        for cpu in dump.getroot().iter("cpu")
        for switch in cpu.findall("pci")
        for pci in switch.findall("pci")
        if pci.find("gpu") is not None
    }  # fmt: skip
    assert mine == nccls
    # The rail NICs go under their GPU's switch (NCCL listed none there: it ran on sockets).
    first = topology["cpus"][0]["pcie_switches"][0]
    assert first["nics"] == [{"busid": "0000:84:00.0", "name": "mlx5_0", "port": 1}]
    assert topology["pcie_gen"] == 5
