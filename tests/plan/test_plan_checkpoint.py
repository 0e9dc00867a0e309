"""Checkpoint size and how long each strategy blocks training."""

from __future__ import annotations

import math
from typing import Any

import pytest

from myriad.plan.checkpoint import plan_checkpoint
from myriad.plan.model import Checkpoint
from myriad.spec import LoadedSpec

from spec_builder import cluster, gpu_profile, load_fixture

NFS = {"kind": "nfs", "server": "nas01", "export": "/srv/data"}


def _checkpoint(loaded: LoadedSpec) -> Checkpoint:
    checkpoint = plan_checkpoint(loaded.spec, loaded.catalog)
    assert checkpoint is not None
    return checkpoint


def _stalls(checkpoint: Checkpoint) -> dict[str, tuple[float, str]]:
    return {s.strategy: (s.seconds, s.limited_by) for s in checkpoint.stalls}


def test_a800_example_checkpoint() -> None:
    checkpoint = _checkpoint(load_fixture("a800-rail-1250.yaml"))
    # 7B params x 14 bytes (bf16 weights + fp32 master + two Adam moments) = 98 GB.
    assert checkpoint.size_gb == pytest.approx(98.0)
    stalls = _stalls(checkpoint)
    # Storage: 2 x ConnectX-6-Lx, each 2 x 25G. One link at 90 %: 0.9 x 25 / 8 = 2.8125 GB/s,
    # single-node 98 / 2.8125 = 34.84 s.
    assert stalls["single-node"] == (pytest.approx(98 / 2.8125), "nic")
    # Bonded: 4 links x 2.8125 = 11.25 GB/s -> 8.71 s.
    assert stalls["bonded"] == (pytest.approx(98 / 11.25), "nic")
    # Distributed: 1,250 nodes x 11.25 = 14,062.5 GB/s, but storage takes 100 GB/s: 0.98 s.
    assert stalls["distributed"] == (pytest.approx(0.98), "storage")
    # Async: 98 GB over 10,000 GPUs = 9.8 MB each, copied at 0.8 x 31.5 = 25.2 GB/s
    # (A800 is PCIe Gen4): 0.0098 / 25.2 = 0.000389 s of blocking.
    assert stalls["distributed-async"] == (pytest.approx(0.0098 / 25.2), "pcie")
    assert checkpoint.chosen == "distributed-async"
    # Every 30 minutes: 0.000389 / 1,800 s.
    assert checkpoint.overhead_fraction == pytest.approx(0.0098 / 25.2 / 1800)
    assert checkpoint.burst_gbs == pytest.approx(14_062.5)
    assert checkpoint.storage_write_gbs == 100
    assert [s.strategy for s in checkpoint.stalls] == [
        "single-node",
        "bonded",
        "distributed",
        "distributed-async",
    ]


def test_management_nics_carry_checkpoints_without_storage_nics() -> None:
    # 4 H100 nodes, management 1 x ConnectX-6-Dx (2 x 100G); 70B x 14 = 980 GB;
    # no write_gbs, so nothing caps the NICs.
    profile = gpu_profile(nics=8) | {
        "nics": {
            "compute": {"model": "ConnectX-7", "count": 8},
            "management": {"model": "ConnectX-6-Dx", "count": 1},
        }
    }
    storage: dict[str, Any] = {
        **NFS,
        "checkpoint": {"params_billion": 70, "strategy": "single-node", "interval_minutes": 60},
    }
    checkpoint = _checkpoint(cluster(nodes=4, profile=profile, storage=storage))
    stalls = _stalls(checkpoint)
    # One 100G link at 90 %: 11.25 GB/s -> 980 / 11.25 = 87.1 s.
    assert stalls["single-node"] == (pytest.approx(980 / 11.25), "nic")
    # The two ports are not bonded: a node's traffic leaves by one of them, so "bonded"
    # is the single-port time, and 4 nodes write 4 x 11.25 = 45 GB/s -> 21.8 s.
    assert stalls["bonded"] == (pytest.approx(980 / 11.25), "nic")
    assert stalls["distributed"] == (pytest.approx(980 / 45), "nic")
    # Async: 980 GB / 32 GPUs = 30.625 GB each at 0.8 x 63 = 50.4 GB/s (H100 Gen5).
    assert stalls["distributed-async"] == (pytest.approx(30.625 / 50.4), "pcie")
    # single-node was chosen: 87.1 s every hour.
    assert checkpoint.overhead_fraction == pytest.approx(980 / 11.25 / 3600)
    assert checkpoint.burst_gbs == pytest.approx(45.0)
    assert checkpoint.storage_write_gbs is None


@pytest.mark.parametrize(
    ("bond", "links"),
    [("802.3ad", 2), ("active-backup", 1), (None, 1)],
)
def test_the_bonded_figure_follows_the_bond_mode(bond: str | None, links: int) -> None:
    # 1 x ConnectX-6-Dx, 2 x 100G, 90 % of each: 11.25 GB/s a link. 70B x 14 = 980 GB.
    # Only LACP (802.3ad) spreads a node's streams over both links; active-backup keeps
    # one link idle, and unbonded ports send the node's traffic out of one interface.
    group: dict[str, Any] = {"model": "ConnectX-6-Dx", "count": 1}
    if bond is not None:
        group["bond"] = bond
    profile = gpu_profile() | {
        "nics": {"compute": {"model": "ConnectX-7", "count": 8}, "storage": group}
    }
    storage = {**NFS, "checkpoint": {"params_billion": 70, "strategy": "bonded"}}
    stalls = _stalls(_checkpoint(cluster(nodes=2, profile=profile, storage=storage)))
    assert stalls["single-node"] == (pytest.approx(980 / 11.25), "nic")
    assert stalls["bonded"] == (pytest.approx(980 / (11.25 * links)), "nic")
    # Two nodes write with every link they may use at once.
    assert stalls["distributed"] == (pytest.approx(980 / (2 * 11.25 * links)), "nic")


def test_without_a_storage_path_checkpoints_never_finish() -> None:
    storage = {**NFS, "checkpoint": {"params_billion": 7, "strategy": "bonded"}}
    checkpoint = _checkpoint(cluster(nodes=2, storage=storage))
    for strategy, (seconds, limited_by) in _stalls(checkpoint).items():
        assert math.isinf(seconds), strategy
        assert limited_by == "no storage path"
    assert math.isinf(checkpoint.overhead_fraction)
    assert checkpoint.burst_gbs == 0


def test_cpu_only_nodes_write_async_checkpoints_as_distributed() -> None:
    profile = {
        "cpu": {"sockets": 1, "cores_per_socket": 8},
        "memory_gib": 64,
        "nics": {"storage": {"model": "ConnectX-6-Lx", "count": 1}},
    }
    storage = {**NFS, "write_gbs": 4, "checkpoint": {"params_billion": 1}}
    checkpoint = _checkpoint(
        cluster(
            nodes=3,
            profile=profile,
            storage=storage,
            fabric="ethernet",
            topology={"kind": "fat-tree", "switch": "SN3420"},
        )
    )
    stalls = _stalls(checkpoint)
    # 14 GB; 3 nodes x 1 link (no bond) x 2.8125 = 8.4375 GB/s, capped by storage at 4:
    # 3.5 s.
    assert stalls["distributed"] == (pytest.approx(3.5), "storage")
    assert stalls["distributed-async"] == stalls["distributed"]


def test_no_checkpoint_section_no_checkpoint_plan() -> None:
    loaded = cluster()
    assert plan_checkpoint(loaded.spec, loaded.catalog) is None
