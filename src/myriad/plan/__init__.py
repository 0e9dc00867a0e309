"""The plan: fabric, power, bandwidth, compute and checkpoint figures from spec + catalog.

Pure functions, no I/O. `make_plan` is linear in pools and islands; per-node facts
(NIC placements, the switch tree) are computed on demand by the iterators below.
"""

from myriad.errors import FabricError
from myriad.plan.fabric import (
    FabricLimit,
    TreeSwitch,
    fabric_limits,
    iter_placements,
    iter_switch_tree,
    leaf_placement,
    plan_fabric,
)
from myriad.plan.model import Plan
from myriad.plan.planner import make_plan

__all__ = [
    "FabricError",
    "FabricLimit",
    "Plan",
    "TreeSwitch",
    "fabric_limits",
    "iter_placements",
    "iter_switch_tree",
    "leaf_placement",
    "make_plan",
    "plan_fabric",
]
