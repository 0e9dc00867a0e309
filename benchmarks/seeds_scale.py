"""Image mode's seeds for every node of roce-10k and h100-100k: controller CPU, time and bytes.

In image mode the controller's per-node work is a seed (the node's inventory, the cluster
tables, its health document, the munge key) and one transport per node; the README's
bring-up table measures the whole at 4 to 32 nodes (0.62 controller CPU s per node at 32).
This measures the seed part where it grows with the cluster: every seed carries the cluster
tables, whose size grows with the node count, and each node's groups are looked up among all
of the inventory's groups.

Each example is rendered (`build_inventory`), then `node_local.write_seeds` writes every
node's seed into a temporary state folder exactly as `myriad up` does: CPU seconds of this
process (user + system), wall time, the seeds' bytes on disk and the peak resident memory.
Target: at most 0.05 controller CPU s per node (under a tenth of the measured 0.62 s per node
of a whole image-mode bring-up), so seeds never decide the controller's size. Exits 1 when a
target fails.

Run: .venv/bin/python benchmarks/seeds_scale.py [--example E ...]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from conditions import measured

from myriad.bringup.flow import ClusterState
from myriad.bringup.node_local import write_seeds
from myriad.plan.pipeline import plan_loaded
from myriad.render.inventory import build_inventory
from myriad.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ("roce-10k", "h100-100k")
CPU_S_PER_NODE_MAX = 0.05
MB = 1_000_000


@dataclass(frozen=True)
class Measured:
    nodes: int
    tables_bytes: int
    cpu_s: float
    wall_s: float
    seeds_bytes: int
    peak_mb: float


def _cpu() -> float:
    usage = os.times()
    return usage.user + usage.system


def measure(example: str) -> Measured:
    result = plan_loaded(load_spec(ROOT / "inventories" / example / "cluster.yaml"))
    assert result.plan is not None, example
    inventory = build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)
    with tempfile.TemporaryDirectory(prefix="myriad-seeds-") as folder:
        state = ClusterState(Path(folder) / inventory.cluster)
        state.root.mkdir()
        cpu, wall = _cpu(), time.perf_counter()
        seeds = write_seeds(inventory, state, list(inventory.hosts), slurm=True)
        cpu, wall = _cpu() - cpu, time.perf_counter() - wall
        on_disk = sum(p.stat().st_size for p in seeds.values())
    assert len(seeds) == len(inventory.hosts)
    return Measured(
        nodes=len(inventory.hosts),
        tables_bytes=len(json.dumps(dict(inventory.tables)).encode()),
        cpu_s=cpu,
        wall_s=wall,
        seeds_bytes=on_disk,
        peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1000,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--example", action="append", choices=EXAMPLES)
    args = parser.parse_args()
    print(
        "| example | nodes | tables KB | controller CPU s | CPU s/node | wall s | seeds MB "
        "| peak MB | target |\n|---|---:|---:|---:|---:|---:|---:|---:|---|"
    )
    failed = False
    for example in args.example or EXAMPLES:
        m = measure(example)
        per_node = m.cpu_s / m.nodes
        ok = per_node <= CPU_S_PER_NODE_MAX
        failed |= not ok
        print(
            f"| {example} | {m.nodes:,} | {m.tables_bytes / 1000:.0f} | {m.cpu_s:.1f} "
            f"| {per_node:.4f} | {m.wall_s:.1f} | {m.seeds_bytes / MB:.0f} | {m.peak_mb:.0f} "
            f"| {'met' if ok else 'MISSED'} (≤ {CPU_S_PER_NODE_MAX} CPU s/node) |",
            flush=True,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(measured(main))
