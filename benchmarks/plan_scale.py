"""Load, plan and lint specs of 1k to 1M GPUs; print time and peak memory per size.

Target (issue #2): a 100,000-GPU spec planned in under 1 s on a 2-core machine, growing
linearly with the GPU count. Run: .venv/bin/python benchmarks/plan_scale.py
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from pathlib import Path

from conditions import measured

from myriad.plan.pipeline import plan_loaded
from myriad.spec import load_spec_text

TEMPLATE = Path(__file__).resolve().parents[1] / "inventories" / "h100-100k" / "cluster.yaml"
SIZES = (1_000, 10_000, 100_000, 1_000_000)


def spec_for(gpus: int) -> str:
    """The 100k example resized: same hardware, islands of 256 nodes, /8 addressing."""
    nodes = gpus // 8
    text = TEMPLATE.read_text()
    text = text.replace("count: 12500", f"count: {nodes}")
    text = text.replace("management: 10.0.0.0/16", "management: 10.0.0.0/12")
    text = text.replace("storage: 10.32.0.0/16", "storage: 10.32.0.0/12")
    # /10 (10.128-10.191) holds 1M compute NICs and stays clear of the pod network 10.244/14.
    text = text.replace("compute: 10.128.0.0/14", "compute: 10.128.0.0/10")
    text = text.replace("power_limit_mw: 200", "power_limit_mw: 5000")
    return text.replace("name: h100-100k", f"name: h100-{gpus // 1000}k")


def measure(gpus: int, repeat: int) -> tuple[float, float, int]:
    text = spec_for(gpus)
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = plan_loaded(load_spec_text(text, f"{gpus}-gpus.yaml"))
        best = min(best, time.perf_counter() - start)
    gc.collect()
    tracemalloc.start()
    plan_loaded(load_spec_text(text, f"{gpus}-gpus.yaml"))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert result.plan.gpus == gpus, result.plan.gpus
    return best, peak / 2**20, len(result.findings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3, help="runs per size; the best counts")
    args = parser.parse_args()
    print(f"{'GPUs':>10} {'nodes':>8} {'seconds':>9} {'us/GPU':>8} {'peak MiB':>9} {'findings':>8}")
    for gpus in SIZES:
        seconds, peak_mib, findings = measure(gpus, args.repeat)
        print(
            f"{gpus:>10,} {gpus // 8:>8,} {seconds:>9.3f} {seconds / gpus * 1e6:>8.2f} "
            f"{peak_mib:>9.1f} {findings:>8}"
        )


if __name__ == "__main__":
    raise SystemExit(measured(main))
