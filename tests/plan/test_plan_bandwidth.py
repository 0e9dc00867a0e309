"""Expected per-node bandwidth: NIC line, PCIe slot, RDMA per NIC, busbw inside and between."""

from __future__ import annotations

import pytest

from myriad.plan.bandwidth import node_bandwidth, pcie_slot_gbs, plan_bandwidth
from myriad.plan.model import NodeBandwidth
from myriad.spec import LoadedSpec
from myriad.spec.models import Profile

from spec_builder import cluster, gpu_profile, load_fixture


def _row(loaded: LoadedSpec) -> NodeBandwidth:
    (row,) = plan_bandwidth(loaded.spec, loaded.catalog)
    return row


@pytest.mark.parametrize(
    ("gen", "lanes", "gbs"),
    [(3, 16, 15.75), (4, 16, 31.5), (5, 16, 63.0), (6, 16, 126.0), (4, 8, 15.75), (5, 4, 15.75)],
)
def test_pcie_slot_figures(gen: int, lanes: int, gbs: float) -> None:
    assert pcie_slot_gbs(gen, lanes) == gbs


def test_a_400g_nic_in_a_gen4_slot_is_capped_by_pcie() -> None:
    # ConnectX-7 (400G, Gen5) in a Gen4 x16 slot: line 400 / 8 = 50 GB/s, slot 31.5 GB/s.
    # RDMA per NIC = min(0.94 x 50, 0.85 x 31.5) = min(47, 26.775) = 26.775.
    # 8 NICs: 8 x 26.775 = 214.2 < H100 8-GPU NVSwitch busbw 370: the NICs' PCIe binds.
    profile = gpu_profile(pcie={"gen": 4, "switches": 4})
    row = _row(cluster(profile=profile))
    assert (row.nic_line_gbs, row.pcie_slot_gbs) == (50.0, 31.5)
    assert row.per_nic_rdma_gbs == pytest.approx(26.775)
    assert row.inter_node_busbw_gbs == pytest.approx(214.2)
    assert row.intra_node_busbw_gbs == 370
    assert row.limited_by == "pcie"


def test_the_nic_groups_slot_generation_overrides_the_profiles() -> None:
    profile = gpu_profile()
    profile["nics"]["compute"]["slot_gen"] = 4
    row = _row(cluster(profile=profile))
    assert row.pcie_slot_gbs == 31.5
    assert row.per_nic_rdma_gbs == pytest.approx(26.775)


def test_dgx_h100_is_capped_by_the_nvlink_ring() -> None:
    # ConnectX-7 in Gen5: min(0.94 x 50, 0.85 x 63) = min(47, 53.55) = 47 per NIC;
    # 8 x 47 = 376 > 370, the H100 ring busbw: inter-node = 370, limited by NVLink.
    row = _row(cluster(profile=gpu_profile(server="DGX-H100")))
    assert row.per_nic_rdma_gbs == pytest.approx(47.0)
    assert row.inter_node_busbw_gbs == 370
    assert row.limited_by == "nvlink"


def test_a800_nodes_are_bound_by_their_four_nics() -> None:
    # ConnectX-6 200G in Gen4: min(0.94 x 25, 0.85 x 31.5) = min(23.5, 26.775) = 23.5;
    # 4 x 23.5 = 94 < A800 busbw 160: the NICs bind.
    row = _row(load_fixture("a800-rail-1250.yaml"))
    assert (row.profile, row.nic_model) == ("a800-node", "ConnectX-6")
    assert (row.nic_line_gbs, row.pcie_slot_gbs) == (25.0, 31.5)
    assert row.per_nic_rdma_gbs == pytest.approx(23.5)
    assert row.intra_node_busbw_gbs == 160
    assert row.inter_node_busbw_gbs == pytest.approx(94.0)
    assert row.limited_by == "nic"


def test_intra_node_busbw_without_a_measured_figure() -> None:
    loaded = cluster()
    catalog = loaded.catalog
    # B200 x 8 on NVSwitch, no catalog busbw: 0.8 x 1,800 / 2 = 720 GB/s over NVLink.
    b200 = node_bandwidth("b", Profile.model_validate(gpu_profile("B200-SXM-180GB")), catalog)
    assert b200.intra_node_busbw_gbs == pytest.approx(720.0)
    # L40S x 4, no NVLink, Gen4 card in a Gen5 server: 0.8 x 31.5 = 25.2 over PCIe;
    # 2 ConnectX-7 = 2 x 47 = 94 > 25.2, so PCIe binds the job too.
    l40s = node_bandwidth("l", Profile.model_validate(gpu_profile("L40S", gpus=4, nics=2)), catalog)
    assert l40s.intra_node_busbw_gbs == pytest.approx(25.2)
    assert (l40s.inter_node_busbw_gbs, l40s.limited_by) == (pytest.approx(25.2), "pcie")
    # H100 PCIe x 8 without NVSwitch: bridges join pairs only, the ring crosses PCIe Gen5:
    # 0.8 x 63 = 50.4. A bridged pair rides NVLink: 0.8 x 600 / 2 = 240.
    pcie8 = node_bandwidth(
        "p", Profile.model_validate(gpu_profile("H100-PCIe-80GB", nvswitch=0)), catalog
    )
    assert pcie8.intra_node_busbw_gbs == pytest.approx(50.4)
    pair = node_bandwidth(
        "q", Profile.model_validate(gpu_profile("H100-PCIe-80GB", gpus=2, nics=2)), catalog
    )
    assert pair.intra_node_busbw_gbs == pytest.approx(240.0)


def test_one_gpu_has_no_intra_node_figure_and_no_cap() -> None:
    # One H100, two 400G NICs: 2 x 47 = 94 GB/s between nodes, nothing inside.
    row = _row(cluster(profile=gpu_profile(gpus=1, nics=2)))
    assert row.intra_node_busbw_gbs is None
    assert row.inter_node_busbw_gbs == pytest.approx(94.0)
    assert row.limited_by == "nic"


def test_no_compute_nics_means_no_inter_node_figure() -> None:
    row = _row(
        cluster(
            profile=gpu_profile(nic=None),
            fabric="ethernet",
            topology={"kind": "fat-tree", "switch": "SN4600C"},
        )
    )
    assert row.nic_model is None
    assert (row.nic_line_gbs, row.pcie_slot_gbs, row.per_nic_rdma_gbs) == (0.0, 0.0, 0.0)
    assert row.inter_node_busbw_gbs is None
    assert row.intra_node_busbw_gbs == 370
    assert row.limited_by == "nic"


def test_one_row_per_compute_profile_in_pool_order() -> None:
    profiles = {
        "h100": gpu_profile(),
        "a100": gpu_profile("A100-SXM4-80GB", nic="ConnectX-6"),
        "cpu": {"cpu": {"sockets": 1, "cores_per_socket": 8}, "memory_gib": 32},
    }
    pools = [
        {"name": "b", "profile": "a100", "count": 2, "role": "compute"},
        {"name": "a", "profile": "h100", "count": 2, "role": "compute"},
        {"name": "c", "profile": "a100", "count": 2, "role": "compute"},
        {"name": "ctl", "profile": "cpu", "count": 1, "role": "controller"},
    ]
    loaded = cluster(profiles=profiles, pools=pools)
    rows = plan_bandwidth(loaded.spec, loaded.catalog)
    assert [row.profile for row in rows] == ["a100", "h100"]
