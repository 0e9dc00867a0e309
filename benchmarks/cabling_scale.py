"""The cabling sheet at 1k to 1M GPUs: time and peak memory of `myriad plan --json
--cabling` per size, each in a process of its own.

Target (issue #31): linear in GPUs, and the 1M-GPU sheet with `--json` far from the 6 GB
a document held whole needs; the cables are streamed. Peak memory is the child's maximum
resident set (wait4's ru_maxrss), which counts what the interpreter and the plan hold too;
tracemalloc would slow a run of millions of cables several times over.
Run: .venv/bin/python benchmarks/cabling_scale.py [--sizes 1000,100000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from conditions import measured
from plan_scale import spec_for

SIZES = (1_000, 10_000, 100_000, 1_000_000)
RUN = "import sys; from myriad.cli import main; sys.exit(main(sys.argv[1:]))"


def measure(gpus: int, folder: Path) -> tuple[float, float, int, int]:
    """(seconds, peak MiB, CSV bytes, JSON bytes) of one `plan --json --cabling` run."""
    spec = folder / f"{gpus}.yaml"
    spec.write_text(spec_for(gpus))
    csv, out = folder / f"{gpus}.csv", folder / f"{gpus}.json"
    command = [sys.executable, "-c", RUN, "plan", str(spec), "--json", "--cabling", str(csv)]
    start = time.perf_counter()
    with out.open("wb") as stdout:
        child = subprocess.Popen(command, stdout=stdout)
        _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    # Exit 1: the plan has lint errors (a resized example may); the files are still written.
    if child.returncode not in (0, 1):
        raise SystemExit(f"{gpus} GPUs: myriad plan exited {child.returncode}")
    sizes = csv.stat().st_size, out.stat().st_size
    csv.unlink()
    out.unlink()
    return seconds, usage.ru_maxrss / 1024, *sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--sizes", default=",".join(map(str, SIZES)), help="GPU counts, comma-separated"
    )
    args = parser.parse_args()
    print(f"{'GPUs':>10} {'seconds':>9} {'us/GPU':>8} {'peak MiB':>9} {'CSV MB':>8} {'JSON MB':>8}")
    with tempfile.TemporaryDirectory() as folder:
        for gpus in (int(size) for size in args.sizes.split(",")):
            seconds, peak, csv_bytes, json_bytes = measure(gpus, Path(folder))
            print(
                f"{gpus:>10,} {seconds:>9.1f} {seconds / gpus * 1e6:>8.1f} {peak:>9.0f} "
                f"{csv_bytes / 1e6:>8.1f} {json_bytes / 1e6:>8.1f}"
            )


if __name__ == "__main__":
    raise SystemExit(measured(main))
