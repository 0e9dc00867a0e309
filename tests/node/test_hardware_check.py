"""hardware.map: the node's hardware now against the map the rdma role recorded.

The gatherer (myriad.node.gather, as facts.yml and myriad-health run it) reads the record
and discovers the map again; the check (the same code on the controller and on the node)
names each port that moved, failed, was renumbered or swapped. The node here is the DGX
H100 tree of tests/samples/sysfs-tree, built from NVIDIA's Table 6.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import hardware_trees as trees
from myriad.node import gather
from myriad.node.checks.hardware import HARDWARE_MAP
from myriad.node.checks.model import ClusterView, Skip
from myriad.node.facts import NOT_GATHERED, node_facts
from myriad.node.hardware.compare import differences
from myriad.node.hardware.discover import discover
from myriad.node.hardware.sysfs import Sysfs
from myriad.node.hardware.tree import materialise

VIEW = ClusterView(None, NOT_GATHERED, NOT_GATHERED, NOT_GATHERED)
EXPECTED = {"record": "/etc/myriad/hardware.json"}


def map_of(tmp_path: Path, tree: trees.Tree) -> dict[str, object]:
    root = tmp_path / "sys"
    materialise(tree.text(), str(root))
    return json.loads(json.dumps(discover(Sysfs(str(root))).to_json()))


def test_the_same_hardware_has_no_differences(tmp_path: Path) -> None:
    assert (
        differences(
            map_of(tmp_path / "a", trees.dgx_h100()), map_of(tmp_path / "b", trees.dgx_h100())
        )
        == []
    )


def test_a_failed_a_renumbered_and_a_swapped_card_are_each_named(tmp_path: Path) -> None:
    recorded = map_of(tmp_path / "before", trees.dgx_h100())
    after = trees.dgx_h100()
    # mlx5_5's card is gone (failed, or not enumerated after a reboot).
    gone = after.where["0000:5e:00.0"]
    after.files = {p: v for p, v in after.files.items() if not p.startswith(gone)}
    after.links = {
        p: t
        for p, t in after.links.items()
        if not (p.startswith(gone) or t.endswith(gone) or "mlx5_5" in p or "ibp94s0" in p)
    }
    # The card beside GPU 1 was swapped: same slot and model, another GUID.
    after.files[f"{after.where['0000:40:00.0']}/infiniband/mlx5_3/node_guid"] = (
        "b83f:d203:0011:2233"
    )
    problems = differences(recorded, map_of(tmp_path / "after", after))
    assert problems == [
        "port mlx5_5 at PCI 0000:5e:00.0 port 1 is gone",
        "port mlx5_3 at PCI 0000:40:00.0 port 1: guid '0xa088c20300dd4000' -> '0xb83fd20300112233'",
    ]


def test_the_gathered_node_is_checked_end_to_end(tmp_path: Path) -> None:
    root = tmp_path / "node"
    materialise(trees.dgx_h100().text(), str(root / "sys"))
    (root / "etc/myriad").mkdir(parents=True)
    record = root / "etc/myriad/hardware.json"
    record.write_text(json.dumps(discover(Sysfs(str(root / "sys"))).to_json()))

    def check() -> tuple[str, str]:
        document = gather.gather(gather.parse_args(["--root", str(root), "--units", "none"]))
        facts = node_facts("gpu01", document)
        outcome = HARDWARE_MAP.evaluate(EXPECTED, facts, VIEW, "gpu01")
        return outcome[0], outcome[1]

    assert check() == ("pass", "8 GPUs and 12 ports where they were recorded")
    # Renumbered: the record says the device beside GPU 5 was mlx5_9; now it is mlx5_12.
    changed = json.loads(record.read_text())
    for port in changed["ports"]:
        if port["rdma_device"] == "mlx5_9":
            port["rdma_device"] = "mlx5_12"
    record.write_text(json.dumps(changed))
    assert check() == (
        "fail",
        "port mlx5_12 at PCI 0000:c0:00.0 port 1: rdma_device 'mlx5_12' -> 'mlx5_9'",
    )
    record.unlink()
    assert check() == (
        "fail",
        "no /etc/myriad/hardware.json: the rdma role has not recorded this node's map",
    )


def test_a_damaged_record_is_unknown_not_healthy(tmp_path: Path) -> None:
    root = tmp_path / "node"
    materialise(trees.dgx_h100().text(), str(root / "sys"))
    (root / "etc/myriad").mkdir(parents=True)
    (root / "etc/myriad/hardware.json").write_text("{not json")
    document = gather.gather(gather.parse_args(["--root", str(root), "--units", "none"]))
    outcome = HARDWARE_MAP.evaluate(EXPECTED, node_facts("gpu01", document), VIEW, "gpu01")
    assert outcome[0] == "error"


def test_only_servers_with_a_hardware_expectation_are_checked() -> None:
    # derive reads only the node's inventory variables.
    local = SimpleNamespace(variables={})
    assert isinstance(HARDWARE_MAP.derive(local), Skip)  # type: ignore[arg-type]
    server = SimpleNamespace(variables={"rdma_hardware_expectation": {"compute": {}}})
    assert HARDWARE_MAP.derive(server).value == EXPECTED  # type: ignore[arg-type,union-attr]
