"""The slow-node search at scale, simulated: rounds, tests and projected wall time.

For roce-10k (1,250 nodes) and h100-100k (12,500 nodes), `find_slow` runs against
`FaultModel` (each test measures its expected figure times the slowest part it touches)
with one bad node, one bad link and a whole rail of one leaf, drawn at random (seeded). It
reports the rounds, the tests, the search's own CPU time, and the wall time the rounds would
take on the cluster under the cost model below, against testing every pair of nodes
(N(N-1)/2 pair tests in N-1 rounds of disjoint pairs). A second table grows one flat group
(no topology) from 64 to 12,500 nodes to show rounds growing as log2(nodes).

Cost model (assumptions, printed with the figures): an nccl-tests run is `all_reduce_perf
-b 8G -e 16G -f 2 -g 1` (two sizes, 5 warm-up and 20 timed iterations each) at the test's
expected busbw (algbw = busbw x n / (2(n-1)) for n ranks), plus 20 s to launch and
0.002 s per rank for NCCL's set-up; an ib_write_bw is `-D 10` plus 5 s to connect. Every
test of a round runs at once; a round lasts as long as its longest test.

Run: .venv/bin/python benchmarks/slow_node_search.py [--samples 20] [--seed 28]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from pathlib import Path

from conditions import measured

from myriad.plan.acceptance import Expected, ProfileFigures
from myriad.plan.pipeline import plan_loaded
from myriad.plan.slow_nodes import (
    AcceptNode,
    AcceptTopology,
    FaultModel,
    GroupTest,
    find_slow,
    rounds_bound,
    search_inputs,
)
from myriad.spec.loader import load_spec

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ("roce-10k", "h100-100k")
GIB = 1 << 30
SIZES_BYTES = (8 * GIB, 16 * GIB)
ITERATIONS = 5 + 20
LAUNCH_S = 20.0
PER_RANK_S = 0.002
RDMA_S = 10.0 + 5.0


def test_seconds(test: GroupTest, expected: Expected, gpus_per_node: int = 8) -> float:
    if test.kind == "rdma":
        return RDMA_S
    ranks = gpus_per_node * len(test.nodes)
    algbw = expected.gbs * ranks / (2 * (ranks - 1))
    data = sum(ITERATIONS * size / (algbw * 1e9) for size in SIZES_BYTES)
    return LAUNCH_S + PER_RANK_S * ranks + data


def _example(name: str) -> tuple[AcceptTopology, dict[str, ProfileFigures]]:
    loaded = load_spec(ROOT / "inventories" / name / "cluster.yaml")
    fabric = plan_loaded(loaded).plan.fabric
    assert fabric is not None
    return search_inputs(loaded.spec, loaded.catalog, fabric)


def _faults(kind: str, topo: AcceptTopology, rng: random.Random) -> tuple[dict, dict]:
    node = rng.choice(topo.nodes).name
    if kind == "one node":
        return {node: 0.5}, {}
    if kind == "one link":
        return {}, {(node, rng.randrange(topo.rails)): 0.5}
    group = rng.choice(topo.leaf_groups())
    rail = rng.randrange(topo.rails)
    return {}, {(member, rail): 0.5 for member in group}


def _all_pairs(topo: AcceptTopology, figures: dict[str, ProfileFigures]) -> tuple[int, int, float]:
    n = len(topo.nodes)
    pair = GroupTest("nccl", (topo.nodes[0].name, topo.nodes[1].name), "bisect")
    expected = figures[topo.nodes[0].profile].allreduce
    assert expected is not None
    return n * (n - 1) // 2, n - 1, (n - 1) * test_seconds(pair, expected)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def _scale_table(figures: dict[str, ProfileFigures], profile: str, seed: int) -> None:
    print("\nOne flat group of N nodes (no topology), one bad node: rounds against log2(N)")
    print(f"{'nodes':>7} {'log2 N':>7} {'rounds':>7} {'bound log2 N + 3':>17}")
    rng = random.Random(seed)
    for n in (64, 256, 1024, 4096, 12500):
        topo = AcceptTopology(
            tuple(
                AcceptNode(f"n{i:05d}", profile, 0, "flat", tuple(f"leaf{r}" for r in range(8)))
                for i in range(n)
            ),
            8,
        )
        model = FaultModel(topo, figures, nodes={rng.choice(topo.nodes).name: 0.5})
        result = find_slow(topo, figures, model.measure)
        assert len(result.bad_nodes) == 1
        print(f"{n:>7} {math.log2(n):>7.2f} {result.rounds:>7} {rounds_bound(n):>17}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=20, help="random bad sets per case")
    parser.add_argument("--seed", type=int, default=28)
    args = parser.parse_args()
    print(
        f"cost model: all_reduce_perf 8G,16G x {ITERATIONS} iterations at the expected busbw"
        f" + {LAUNCH_S:g} s launch + {PER_RANK_S:g} s/rank; ib_write_bw {RDMA_S:g} s;"
        f" samples {args.samples}, seed {args.seed}"
    )
    rng = random.Random(args.seed)
    for name in EXAMPLES:
        started = time.perf_counter()
        topo, figures = _example(name)
        setup = time.perf_counter() - started
        groups = topo.leaf_groups()
        print(
            f"\n{name}: {len(topo.nodes)} nodes, {len(groups)} leaf groups of up to"
            f" {max(len(g) for g in groups)}, {topo.rails} rails, {len(topo.islands)} islands"
            f" (topology from the plan in {setup:.2f} s)"
        )
        print(
            f"{'bad set':<12} {'rounds':>11} {'bound':>6} {'tests':>11} {'named':>6}"
            f" {'search CPU':>11} {'projected wall':>15}"
        )
        for kind in ("one node", "one link", "whole rail"):
            rounds, tests, cpu, wall = [], [], [], []
            for _ in range(args.samples):
                nodes, links = _faults(kind, topo, rng)
                model = FaultModel(topo, figures, nodes=nodes, links=links)
                t0 = time.perf_counter()
                result = find_slow(topo, figures, model.measure)
                cpu.append(time.perf_counter() - t0)
                if result.bad_nodes != set(nodes) or result.bad_links != set(links):
                    print(f"  MISSED {kind}: {sorted(nodes)} {sorted(links)}", file=sys.stderr)
                    return 1
                rounds.append(result.rounds)
                tests.append(len(result.measurements))
                wall.append(result.projected_seconds(test_seconds))
            print(
                f"{kind:<12} {min(rounds):>4}-{max(rounds):<6} {rounds_bound(len(topo.nodes)):>6}"
                f" {min(tests):>5}-{max(tests):<5} {'all':>6}"
                f" {statistics.median(cpu):>10.2f}s {_hours(statistics.median(wall)):>15}"
            )
        pairs, pair_rounds, pair_wall = _all_pairs(topo, figures)
        print(
            f"{'every pair':<12} {pair_rounds:>11} {'':>6} {pairs:>11} {'':>6} {'':>11}"
            f" {_hours(pair_wall):>15}"
        )
    _, figures = _example("h100-100k")
    _scale_table(figures, "h100-node", args.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(measured(main))
