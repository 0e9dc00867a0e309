"""Expected acceptance figures of the examples, derived by hand from the catalog."""

from __future__ import annotations

from pathlib import Path

import pytest

from myriad.plan.acceptance import DEFAULT_MARGIN, Expected, alltoall_busbw, profile_figures
from myriad.plan.pipeline import plan_loaded
from myriad.spec.loader import LoadedSpec, load_spec

ROOT = Path(__file__).resolve().parents[2]


def _loaded(name: str) -> LoadedSpec:
    return load_spec(ROOT / "inventories" / name / "cluster.yaml")


def test_roce_10k_a800_with_four_connectx6() -> None:
    loaded = _loaded("roce-10k")
    figures = profile_figures("a800-node", loaded.spec.profiles["a800-node"], loaded.catalog)
    assert (figures.gpus, figures.nic_ports) == (8, 4)
    # NVLink: the catalog's measured 8-GPU busbw of the A800 (REFERENCE.md ≈ 160 GB/s).
    assert figures.nvlink is not None and figures.nvlink.gbs == 160.0
    # One ConnectX-6 port: 200 Gb/s / 8 = 25 GB/s line; x 0.94 = 23.5 GB/s = 188 Gb/s. Its
    # Gen4 x16 slot (31.5 GB/s x 0.85 = 26.8) does not bind.
    port = figures.rdma_port
    assert port is not None and port.gbs == pytest.approx(23.5)
    assert port.gbps == pytest.approx(188.0)
    # Ring over nodes: 4 ports x 23.5 = 94 GB/s, under the 160 GB/s NVLink ring.
    assert figures.allreduce is not None and figures.allreduce.gbs == pytest.approx(94.0)
    assert "4 ports x 23.5 = 94" in figures.allreduce.derivation
    # alltoall: one port per rank, 4 ports for 8 GPUs: 23.5 x 4/8 = 11.75 GB/s.
    assert figures.alltoall is not None and figures.alltoall.gbs == pytest.approx(11.75)
    assert figures.multi_node("all_gather") == figures.allreduce


def test_h100_100k_ring_capped_by_nvlink() -> None:
    loaded = _loaded("h100-100k")
    figures = profile_figures("h100-node", loaded.spec.profiles["h100-node"], loaded.catalog)
    # ConnectX-7 400 Gb/s: 50 GB/s x 0.94 = 47 GB/s a port; 8 ports = 376 GB/s, more than the
    # H100 board's 370 GB/s NVLink ring (catalog, REFERENCE.md ≈ 370 ring): 370 binds.
    assert figures.rdma_port is not None and figures.rdma_port.gbs == pytest.approx(47.0)
    assert figures.allreduce is not None and figures.allreduce.gbs == pytest.approx(370.0)
    assert "NVLink ring 370" in figures.allreduce.derivation


def test_alltoall_by_node_count_and_oversubscription() -> None:
    loaded = _loaded("h100-100k")
    fabric = plan_loaded(loaded).plan.fabric
    assert fabric is not None and fabric.inter_island_oversubscription == 2
    figures = profile_figures("h100-node", loaded.spec.profiles["h100-node"], loaded.catalog)
    # One island, 2 nodes: busbw ≈ N/(N-1) x 47 = 2 x 47 = 94 GB/s (nccl-tests #130).
    assert alltoall_busbw(figures, fabric, 2).gbs == pytest.approx(94.0)
    # 64 nodes: 47 x 64/63 = 47.746 GB/s.
    assert alltoall_busbw(figures, fabric, 64).gbs == pytest.approx(47.746, abs=0.001)
    # Two islands of 64: half of each rank's traffic leaves its island and the core carries
    # half of what nodes inject: min(1, 0.5 / 0.5) = 1, so 47 x 128/127 = 47.370 GB/s.
    assert alltoall_busbw(figures, fabric, 128, 2).gbs == pytest.approx(47.370, abs=0.001)
    # All 12,500 nodes over 25 islands: 24/25 leaves, the core carries 1/2:
    # 47 x 12500/12499 x 0.5 / 0.96 = 24.481 GB/s.
    whole = alltoall_busbw(figures, fabric, 12500, 25)
    assert whole.gbs == pytest.approx(24.481, abs=0.001)
    assert "min(1, (1/2) / (24/25))" in whole.derivation
    with pytest.raises(ValueError, match="two nodes"):
        alltoall_busbw(figures, fabric, 1)


def test_margin_gate_and_ratio() -> None:
    # Proposed default: 0.10 (the gate validate --perf uses, REFERENCE.md's 0.90-0.95).
    assert DEFAULT_MARGIN == 0.10
    figure = Expected("t", 94.0, DEFAULT_MARGIN, "s", "d")
    assert figure.gate_gbs == pytest.approx(84.6)  # 94 x 0.9
    assert figure.passes(84.61) and not figure.passes(84.59)
    assert figure.ratio(47.0) == pytest.approx(0.5)
    loaded = _loaded("roce-10k")
    strict = profile_figures(
        "a800-node", loaded.spec.profiles["a800-node"], loaded.catalog, margin=0.05
    )
    assert strict.allreduce is not None and strict.allreduce.gate_gbs == pytest.approx(89.3)
    with pytest.raises(ValueError, match="margin"):
        Expected("t", 1.0, 1.5, "s", "d")


def test_every_figure_names_its_source() -> None:
    for name in ("roce-10k", "h100-100k", "starter-64", "aws-dev"):
        loaded = _loaded(name)
        for profile_name, profile in loaded.spec.profiles.items():
            if profile.gpu is None:
                continue
            figures = profile_figures(profile_name, profile, loaded.catalog)
            for figure in (figures.nvlink, figures.rdma_port, figures.allreduce, figures.alltoall):
                assert figure is not None
                assert figure.gbs > 0 and figure.source and figure.derivation
