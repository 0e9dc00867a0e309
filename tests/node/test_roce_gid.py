"""roce.gid_index: one index holds each rail's RoCEv2 IPv4 GID, as NCCL before 2.21 needs.

The GID tables are built as the kernel writes them (Documentation/ABI/testing/
sysfs-class-infiniband; ports/1/gids/N printed with %pI6 in full, gid_attrs/types/N "RoCE v2"
or "IB/RoCE v1"): a link-local RoCE v1/v2 pair at 0 and 1, the IPv4 address's pair after it.
The gatherer reads them under a fake root, the check (the same code on the controller and in
myriad-health) judges them.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from myriad.node import gather
from myriad.node.checks.model import Skip
from myriad.node.checks.roce import ROCE_GID
from myriad.node.facts import node_facts
from myriad.node.hardware.gids import ipv4_gid

LINK_LOCAL = "fe80:0000:0000:0000:0ac0:ebff:fe12:3456"


def port(root: Path, device: str, entries: list[tuple[int, str, str]]) -> None:
    base = root / "sys/class/infiniband" / device / "ports/1"
    (base / "gids").mkdir(parents=True)
    (base / "gid_attrs/types").mkdir(parents=True)
    (base / "link_layer").write_text("Ethernet\n")
    for index in range(8):
        gid, kind = next(((g, k) for i, g, k in entries if i == index), (None, None))
        (base / f"gids/{index}").write_text((gid or "0000:" * 7 + "0000") + "\n")
        if kind is not None:  # an unused entry's type cannot be read: no file here
            (base / f"gid_attrs/types/{index}").write_text(kind + "\n")


def rail(ip: str, first: int) -> list[tuple[int, str, str]]:
    return [
        (0, LINK_LOCAL, "IB/RoCE v1"),
        (1, LINK_LOCAL, "RoCE v2"),
        (first, ipv4_gid(ip), "IB/RoCE v1"),
        (first + 1, ipv4_gid(ip), "RoCE v2"),
    ]


def evaluate(root: Path, pinned: int | None = None) -> tuple[str, str]:
    document = gather.gather(gather.parse_args(["--root", str(root), "--units", "none"]))
    expected: dict[str, Any] = {
        "rails": {"mlx5_0": "10.64.0.11/20", "mlx5_3": "10.64.16.11/20"},
        "pinned": pinned,
    }
    outcome = ROCE_GID.evaluate(expected, node_facts("gpu01", document), None, "gpu01")
    return outcome[0], outcome[1]


def test_the_ipv4_gid_is_written_as_sysfs_writes_it() -> None:
    assert ipv4_gid("10.64.0.11/20") == "0000:0000:0000:0000:0000:ffff:0a40:000b"


def test_one_index_on_every_rail_passes_and_a_pin_is_compared(tmp_path: Path) -> None:
    port(tmp_path, "mlx5_0", rail("10.64.0.11", 2))
    port(tmp_path, "mlx5_3", rail("10.64.16.11", 2))
    assert evaluate(tmp_path) == ("pass", "RoCEv2 IPv4 GID at index 3 on every rail")
    assert evaluate(tmp_path, pinned=3)[0] == "pass"
    assert evaluate(tmp_path, pinned=0) == (
        "fail",
        "the rails' RoCEv2 IPv4 GID is at index 3, the spec pins 0",
    )


def test_indices_that_differ_between_rails_are_named(tmp_path: Path) -> None:
    # mlx5_3's netdev had an IPv6 address first: its IPv4 pair came two entries later.
    port(tmp_path, "mlx5_0", rail("10.64.0.11", 2))
    port(tmp_path, "mlx5_3", rail("10.64.16.11", 4))
    status, actual = evaluate(tmp_path)
    assert status == "fail"
    assert "the RoCEv2 IPv4 GID index differs between rails (mlx5_0 3, mlx5_3 5)" in actual


def test_a_rail_without_its_address_gid_fails(tmp_path: Path) -> None:
    port(tmp_path, "mlx5_0", rail("10.64.0.11", 2))
    port(tmp_path, "mlx5_3", rail("10.64.16.99", 2))  # another address than planned
    assert evaluate(tmp_path) == ("fail", "mlx5_3: no RoCEv2 GID for 10.64.16.11")


def test_no_gid_tables_is_unknown_or_a_fault_never_a_pass(tmp_path: Path) -> None:
    assert evaluate(tmp_path)[0] != "pass"


def test_only_roce_rails_with_addresses_are_checked() -> None:
    def context(fabric: str, nics: list[dict[str, str]]) -> Any:
        network = SimpleNamespace(fabric=fabric, roce_qos=SimpleNamespace(gid_index=None))
        return SimpleNamespace(
            spec=SimpleNamespace(network=network),
            variables={"roce_nics": nics},
            p="profiles.node",
            pool=SimpleNamespace(profile="node"),
        )

    nic = {"netdev": "rail0", "device": "mlx5_0", "address": "10.64.0.11/20"}
    assert isinstance(ROCE_GID.derive(context("infiniband", [nic])), Skip)
    assert isinstance(ROCE_GID.derive(context("roce", [{"netdev": "rail0"}])), Skip)
    expected = ROCE_GID.derive(context("roce", [nic]))
    assert expected.value == {"rails": {"mlx5_0": "10.64.0.11/20"}, "pinned": None}
