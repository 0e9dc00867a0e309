"""NVIDIA DGX SuperPOD reference architectures: their compute fabric tables, reproduced.

Sources, each named in its spec's header (tests/plan/specs/dgx-superpod-*.yaml):
- DGX B200 RA, "DGX SuperPOD Architecture", the table of larger DGX SuperPOD component counts
  (SU count, node count, GPU count, leaf / spine / core switches, node-leaf / leaf-spine /
  spine-core cables);
- DGX H100 RA, "Network Fabrics", Table 4 "Compute fabric component count" (SU, nodes, GPUs,
  leaf / spine switches, "Compute and UFM" / spine-leaf cables).
"""

from __future__ import annotations

import pytest

from myriad.plan import FabricError, fabric_limits, plan_fabric
from myriad.plan.model import Fabric
from myriad.plan.pipeline import plan_loaded
from myriad.spec import LoadedSpec, load_spec_text

from spec_builder import SPECS

B200 = "dgx-superpod-b200.yaml"


def _b200(nodes: int) -> LoadedSpec:
    text = (SPECS / B200).read_text()
    old = "{name: dgx, profile: dgx-b200, count: 256, role: compute}"
    assert old in text
    return load_spec_text(
        text.replace(old, f"{{name: dgx, profile: dgx-b200, count: {nodes}, role: compute}}"),
        file=B200,
    )


def _fabric(loaded: LoadedSpec) -> Fabric:
    fabric = plan_fabric(loaded.spec, loaded.catalog)
    assert fabric is not None
    return fabric


# (SU, nodes, GPUs, leaf, spine, core, node-leaf, leaf-spine, spine-core) as the B200 RA's
# table prints them ("-": no core, 0 here).
B200_TABLE = [
    (2, 64, 512, 16, 8, 0, 512, 512, 0),
    (4, 128, 1_024, 32, 16, 0, 1_024, 1_024, 0),
    (8, 256, 2_048, 64, 32, 0, 2_048, 2_048, 0),
    (16, 512, 4_096, 128, 128, 64, 4_096, 4_096, 4_096),
    (32, 1_024, 8_192, 256, 256, 128, 8_192, 8_192, 8_192),
    (64, 2_048, 16_384, 512, 512, 256, 16_384, 16_384, 16_384),
]


@pytest.mark.parametrize("row", B200_TABLE, ids=lambda row: f"{row[0]}SU")
def test_b200_superpod_compute_fabric_table(row: tuple[int, ...]) -> None:
    su, nodes, gpus, leaves, spines, core, node_leaf, leaf_spine, spine_core = row
    # 32 DGX B200 an SU.
    assert nodes == 32 * su
    loaded = _b200(nodes)
    fabric = _fabric(loaded)
    assert fabric.endpoints == gpus
    assert (fabric.leaves, fabric.spines, fabric.core_switches) == (leaves, spines, core)
    assert (fabric.node_links, fabric.leaf_spine_links, fabric.spine_core_links) == (
        node_leaf,
        leaf_spine,
        spine_core,
    )
    # Up to 8 SU (2,048 GPUs = 64²/2) two tiers; past it, pods of 32 leaves under a core.
    assert fabric.tiers == (2 if gpus <= 2_048 else 3)
    assert fabric_limits(loaded.spec, loaded.catalog) == ()


H100 = "dgx-superpod-h100.yaml"


def _h100(nodes: int, *replacements: tuple[str, str]) -> LoadedSpec:
    text = (SPECS / H100).read_text()
    old = "{name: dgx, profile: dgx-h100, count: 127, role: compute}"
    assert old in text
    text = text.replace(old, f"{{name: dgx, profile: dgx-h100, count: {nodes}, role: compute}}")
    for before, after in replacements:
        assert before in text
        text = text.replace(before, after, 1)
    return load_spec_text(text, file=H100)


# (SU, nodes, GPUs, leaf, spine, "Compute and UFM" cables, spine-leaf cables), Table 4.
H100_TABLE = [
    (1, 31, 248, 8, 4, 252, 256),
    (2, 63, 504, 16, 8, 508, 512),
    (3, 95, 760, 24, 16, 764, 768),
    (4, 127, 1_016, 32, 16, 1_020, 1_024),
]


@pytest.mark.parametrize("row", H100_TABLE, ids=lambda row: f"{row[0]}SU")
def test_h100_superpod_compute_fabric_table(row: tuple[int, ...]) -> None:
    su, nodes, gpus, leaves, spines, compute_and_ufm, spine_leaf = row
    # 32 DGX an SU, one left out for the UFM.
    assert nodes == 32 * su - 1
    loaded = _h100(nodes)
    fabric = _fabric(loaded)
    assert fabric.endpoints == gpus
    assert (fabric.leaves, fabric.spines, fabric.core_switches) == (leaves, spines, 0)
    # Compute and UFM: 8 a node and the UFM's 4 (31 x 8 + 4 = 252 for one SU).
    assert fabric.node_links + fabric.management_links == compute_and_ufm
    # Spine-leaf: every leaf's 32 uplinks, the missing node's rail ports included: 8 x SU
    # leaves x 32 (8 x 32 = 256 for one SU).
    assert fabric.leaf_spine_links == spine_leaf == leaves * 32
    assert fabric.tiers == 2
    assert fabric_limits(loaded.spec, loaded.catalog) == ()


def test_h100_superpod_spines_split_every_leaf_evenly() -> None:
    # 3 SU: 768 leaf-spine links fill ceil(768 / 64) = 12 spines, but a leaf's 32 uplinks do
    # not split evenly over 12; the fewest spines at or above 12 that divide 32 are 16, the
    # RA's count (2 links from every leaf to every spine).
    assert _fabric(_h100(95)).spines == 16
    # Uplinks that follow the nodes instead: 8 rails x (32 + 32 + 31) = 760 links, 12 spines,
    # the RA's 768 and 16 are the full SU's.
    used = _fabric(_h100(95, ("leaf_uplinks: full", "leaf_uplinks: used")))
    assert (used.leaf_spine_links, used.spines) == (760, 12)


def test_the_ufm_needs_a_free_leaf_port() -> None:
    # 4 full SU of 32 DGX: 32 leaves x 32 ports = 1,024 taken by 128 x 8 node ports, none
    # left for the UFM's 4: refused, saying a node must make room.
    loaded = _h100(128)
    with pytest.raises(
        FabricError, match=r"management_ports 4: .* leaving 0 free: leave nodes out"
    ):
        plan_fabric(loaded.spec, loaded.catalog)
    result = plan_loaded(loaded)
    assert [(f.id, f.path) for f in result.findings] == [("fabric-shape", ("network", "topology"))]
