"""The discovered fabric against the plan at 2,048 endpoints: ibsim builds the planned
fabric (with two cables swapped), the real ibnetdiscover discovers it, and Myriad parses
and compares it; each step timed on its own.

Target (issue #17): parse + compare under 2 s. The simulator's and ibnetdiscover's times
are reported separately; they are the tools', not Myriad's. Needs ibsim-utils and
infiniband-diags. Run: .venv/bin/python benchmarks/fabric_compare.py
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from conditions import measured  # noqa: E402  (benchmarks/ is on sys.path)

from ibsim_fabric import Simulator, available, planned, swap  # noqa: E402
from myriad.node.parsers.ibnetdiscover import parse_ibnetdiscover  # noqa: E402
from myriad.plan.ibnet import SIM_SPEED_CAP, ibsim_net, links_from_cables  # noqa: E402
from myriad.validate.cabling import compare_fabric  # noqa: E402

STARTER = ROOT / "inventories" / "starter-64" / "cluster.yaml"
TARGET_S = 2.0


def spec_text(nodes: int) -> str:
    """The starter resized to `nodes` x 8 NDR HCAs as a two-tier fat tree of QM9700s."""
    text = STARTER.read_text()
    text = text.replace("count: 8, role: compute", f"count: {nodes}, role: compute")
    text = text.replace("kind: rail-optimized", "kind: fat-tree")
    return text.replace("name: starter-64", f"name: fat-tree-{nodes * 8}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=256, help="8 endpoints each (2,048)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not available():
        print("needs ibsim-utils and infiniband-diags (scripts/bootstrap installs them)")
        return 2
    with tempfile.TemporaryDirectory() as folder:
        spec = Path(folder) / "cluster.yaml"
        spec.write_text(spec_text(args.nodes))
        started = time.perf_counter()
        cables, ports = planned(spec)
        links = swap(links_from_cables(cables), 10, 2500)
        net = Path(folder) / "fabric.net"
        net.write_text(ibsim_net(links, ports))
        plan_s = time.perf_counter() - started
        with Simulator(net) as sim:
            started = time.perf_counter()
            text = sim.ibnetdiscover()
            discover_s = time.perf_counter() - started
            sim_s = sim.start_seconds
        best = float("inf")
        for _ in range(args.repeat):
            started = time.perf_counter()
            comparison = compare_fabric(cables, parse_ibnetdiscover(text), speed_cap=SIM_SPEED_CAP)
            best = min(best, time.perf_counter() - started)
    endpoints = sum(1 for c in cables if c.tier == "node-leaf")
    print(f"fabric: {endpoints:,} endpoints, {len(cables):,} cables, {len(ports)} switches")
    print(f"plan + cabling + net file: {plan_s:.2f} s")
    print(f"ibsim start (parse net file, answer):  {sim_s:.2f} s")
    print(f"ibnetdiscover:                         {discover_s:.2f} s")
    print(f"parse + compare (best of {args.repeat}):          {best:.3f} s (target {TARGET_S} s)")
    kinds = [f.kind for f in comparison.findings]
    print(f"findings: {kinds}")
    ok = best < TARGET_S and kinds == ["swapped"]
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(measured(main))
