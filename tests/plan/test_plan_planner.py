"""make_plan as a whole: pool summaries, totals, and a plan that stays small at 100k GPUs."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest

from myriad.plan import iter_placements, make_plan
from myriad.plan.model import Plan, PoolSummary

from spec_builder import load_example, load_fixture


def test_pool_summaries_and_totals() -> None:
    loaded = load_fixture("a800-rail-1250.yaml")
    plan = make_plan(loaded.spec, loaded.catalog)
    assert plan.cluster == "zhinao-a"
    # gpus counts the whole pool; server_kw is one server's.
    assert plan.pools == (
        PoolSummary("gpu", "compute", "a800-node", 1250, 10_000, "A800-SXM4-80GB", 4, 6.5),
        PoolSummary("ctl", "controller", "cpu-server", 3, 0, None, 0, 0.8),
    )
    assert (plan.nodes, plan.gpus) == (1253, 10_000)
    assert plan.fabric is not None and plan.checkpoint is not None
    assert [row.profile for row in plan.bandwidth] == ["a800-node"]
    # 10,000 x 312 TFLOP/s = 3,120 PFLOP/s.
    assert plan.compute.peak_bf16_pflops == pytest.approx(3120.0)


def test_the_local_example_plans() -> None:
    loaded = load_example("local")
    plan = make_plan(loaded.spec, loaded.catalog)
    assert (plan.nodes, plan.gpus) == (4, 0)
    assert plan.checkpoint is None
    json.dumps(plan.to_dict())


def _collections(value: Any, path: str = "plan") -> Iterator[tuple[str, int]]:
    if dataclasses.is_dataclass(value):
        for field in dataclasses.fields(value):
            yield from _collections(getattr(value, field.name), f"{path}.{field.name}")
    elif isinstance(value, (tuple, list, dict, set, frozenset)):
        yield path, len(value)
        for item in value.values() if isinstance(value, dict) else value:
            yield from _collections(item, f"{path}[]")


def test_a_100k_gpu_plan_holds_nothing_per_node() -> None:
    loaded = load_fixture("h100-100k.yaml")
    plan = make_plan(loaded.spec, loaded.catalog)
    assert isinstance(plan, Plan)
    assert (plan.nodes, plan.gpus) == (12_507, 100_000)
    # Per-pool, per-profile and per-island collections only: 3 pools, 25 islands.
    sizes = dict(_collections(plan))
    assert sizes["plan.fabric.islands"] == 25
    assert max(sizes.values()) <= 25
    # The per-endpoint view is there on demand, lazily.
    assert plan.fabric is not None
    first = next(iter_placements(loaded.spec, plan.fabric, loaded.catalog))
    assert first[:2] == ("gpu00001", 0)


def test_a_100k_gpu_fabric_by_hand() -> None:
    loaded = load_fixture("h100-100k.yaml")
    fabric = make_plan(loaded.spec, loaded.catalog).fabric
    assert fabric is not None
    # SN5600-400G: k = 128 ports of 400G (k/2 = 64), 1,700 W. 8 x ConnectX-7 -> 8 rails.
    # Islands: ceil(12,500 / 512) = 25; 24 of 512 and the last of 12,500 - 12,288 = 212.
    # Full island: 8 rails x (512 / 64) = 64 leaves, 64 x 64 = 4,096 leaf links,
    #   core 512 x 8 x 400 / 2 / 400 = 2,048 links, spines ceil(6,144 / 128) = 48 (<= 64).
    # Last island: 8 x ceil(212 / 64) = 32 leaves; per rail three full leaves and one of
    #   212 - 192 = 20 endpoints, whose uplinks follow its endpoints: 8 x (3 x 64 + 20) =
    #   1,696 leaf links; core 212 x 8 / 2 = 848 links, spines ceil(2,544 / 128) = 20 (the
    #   part-filled leaves' 20 uplinks reach all 20).
    assert (fabric.tiers, len(fabric.islands)) == (3, 25)
    # Leaves 24 x 64 + 32 = 1,568; spines 24 x 48 + 20 = 1,172;
    # core links 24 x 2,048 + 848 = 50,000 -> ceil(50,000 / 128) = 391 core switches.
    assert (fabric.leaves, fabric.spines, fabric.core_switches) == (1568, 1172, 391)
    # Leaf links 24 x 4,096 + 1,696 = 100,000; cables 100,000 + 100,000 + 50,000 = 250,000.
    assert (fabric.node_links, fabric.leaf_spine_links, fabric.spine_core_links) == (
        100_000,
        100_000,
        50_000,
    )
    # Transceivers: 100,000 at the NICs; SN5600 split to 2 x 400G carries two ports per
    # OSFP cage: leaf down 50,000, leaf up 50,000, spine down 50,000, spine up 25,000,
    # core 25,000: 300,000 (not two per cable, 500,000).
    assert (fabric.cables, fabric.transceivers) == (250_000, 300_000)
    # (1,568 + 1,172 + 391) x 1.7 kW = 3,131 x 1.7 = 5,322.7 kW.
    assert fabric.switch_kw == pytest.approx(5322.7)
    # Bisection 100,000 x 400 / 2 / 2 = 10 Pb/s; an island 4,096 x 400 / 2 = 819.2 Tb/s.
    assert fabric.bisection_gbps == 10_000_000
    assert fabric.island_bisection_gbps == 819_200


def test_make_plan_is_pure() -> None:
    loaded = load_fixture("a800-rail-1250.yaml")
    assert make_plan(loaded.spec, loaded.catalog) == make_plan(loaded.spec, loaded.catalog)
