"""Time `myriad up` on the local cluster: the first run, and a run with nothing to change.

For the example spec (4 nodes) and a 16-node variant, per phase (containers, bring-up,
validation), with Myriad's tuned Ansible settings (forks from the node count, pipelining, a
fact cache, Mitogen), the same without Mitogen, and plain Ansible defaults (5 forks, no
pipelining, no fact cache) on the same nodes. Targets (issue #6): a no-change `up` of 4
nodes under 60 s on a 2-core machine, and 16 nodes under twice the 4-node time.

    .venv/bin/python benchmarks/bringup.py [--sizes 4 16] [--keep]
    .venv/bin/python benchmarks/bringup.py --modes push image --sizes 4 16 32

The second form compares bring-up modes (issue #18): per mode and size, the first `up` and
a no-change `up`: wall time, the image build's share, the controller's CPU seconds per node
(this process's children: myriad, Ansible, the docker CLI) and the nodes' CPU seconds per
node (the containers' cgroups). Targets: in image mode the 16-node first up within 2x the
4-node one, and the controller's CPU per node at 32 nodes within 1.2x of 4 nodes'.

Needs Docker and the node image (scripts/bootstrap); removes its clusters afterwards.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Unique cluster names and free subnets, shared with the integration tests.
sys.path.insert(0, str(ROOT / "tests"))
from conditions import measured  # noqa: E402  (benchmarks/ is on sys.path)

from myriad.provision.local import CLUSTER_LABEL  # noqa: E402

from run_names import free_subnet, unique_name  # noqa: E402

LOCAL = ROOT / "inventories" / "local" / "cluster.yaml"
PHASE = re.compile(r"^[✓✗] (?P<name>[a-z -]+?)(?: — .*)? \((?P<seconds>[0-9.]+) s\)$")
RECAP = re.compile(r"^Recap \((?P<status>\w+), (?P<seconds>[0-9.]+) s\)")


@dataclass
class Run:
    label: str
    seconds: float
    phases: dict[str, float]
    ok: bool


def spec_for(nodes: int, folder: Path, mode: str | None = None) -> Path:
    """The local example with `nodes - 1` compute containers, under a name and network of
    this run's own, so that a benchmark never touches the `local` cluster someone may be
    using, nor another benchmark or test run on the same Docker daemon."""
    name = unique_name(f"bench{nodes}")
    text = LOCAL.read_text()
    text = text.replace("name: local", f"name: {name}")
    text = text.replace("count: 3, role: compute", f"count: {nodes - 1}, role: compute")
    text = text.replace("172.31.77.0/24", free_subnet())
    if mode is not None:
        text += f"bringup: {{mode: {mode}}}\n"
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path


def myriad(*args: str, state: Path) -> tuple[float, str, int]:
    env = {**os.environ, "MYRIAD_STATE_DIR": str(state), "COLUMNS": "200"}
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "myriad.cli", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600, check=False,
    )  # fmt: skip
    return time.monotonic() - start, done.stdout + done.stderr, done.returncode


def phases_of(output: str) -> dict[str, float]:
    phases: dict[str, float] = {}
    for line in output.splitlines():
        line = line.strip()
        if match := PHASE.match(line):
            phases[match["name"]] = float(match["seconds"])
        elif match := RECAP.match(line):
            phases["bring-up"] = float(match["seconds"])
    return phases


def run(label: str, spec: Path, state: Path, *extra: str) -> Run:
    seconds, output, rc = myriad("up", str(spec), *extra, state=state)
    if rc != 0:
        print(output[-4000:], file=sys.stderr)
    return Run(label, seconds, phases_of(output), rc == 0)


# --- push mode against image mode (issue #18) --------------------------------------------


@dataclass
class Measured:
    seconds: float
    # CPU seconds of `myriad` and everything it ran on this machine (Ansible, docker CLI):
    # the controller's share.
    controller_cpu: float
    # CPU seconds the node containers used meanwhile (their cgroups): the nodes' share.
    node_cpu: float
    build_seconds: float
    ok: bool


def container_cpu_seconds(cluster: str) -> float:
    """CPU seconds used so far by the cluster's containers (cgroup v1 cpuacct or v2 cpu.stat)."""
    ids = subprocess.run(
        ["docker", "ps", "-q", "--no-trunc", "--filter", f"label={CLUSTER_LABEL}={cluster}"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.split()  # fmt: skip
    total = 0.0
    for container in ids:
        v1 = Path(f"/sys/fs/cgroup/cpuacct/docker/{container}/cpuacct.usage")
        v2 = Path(f"/sys/fs/cgroup/system.slice/docker-{container}.scope/cpu.stat")
        if v1.is_file():
            total += int(v1.read_text()) / 1e9
        elif v2.is_file():
            usage = v2.read_text().split("usage_usec ", 1)[1].split()[0]
            total += int(usage) / 1e6
    return total


def measured_up(spec: Path, state: Path, cluster: str) -> Measured:
    nodes_before = container_cpu_seconds(cluster)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds, output, rc = myriad("up", str(spec), state=state)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    controller = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if rc != 0:
        print(output[-4000:], file=sys.stderr)
    build = sum(v for k, v in phases_of(output).items() if k.startswith("image "))
    node_cpu = container_cpu_seconds(cluster) - nodes_before
    return Measured(seconds, controller, node_cpu, build, rc == 0)


def compare_modes(sizes: list[int], modes: list[str], keep: bool) -> int:
    rows: list[tuple[str, int, str, Measured]] = []
    with tempfile.TemporaryDirectory(prefix="myriad-bench-") as tmp:
        folder = Path(tmp)
        for mode in modes:
            for nodes in sizes:
                spec = spec_for(nodes, folder, mode=mode)
                cluster = spec.stem
                state = folder / f"state-{cluster}"
                try:
                    rows.append((mode, nodes, "first up", measured_up(spec, state, cluster)))
                    rows.append((mode, nodes, "no-change up", measured_up(spec, state, cluster)))
                finally:
                    if not keep:
                        myriad("down", str(spec), "--yes", state=state)
                print_modes(rows)
    return check_mode_targets(rows)


MODES_HEADER = (
    "| mode | nodes | run | wall s | of which image build s | controller CPU s/node "
    "| node CPU s/node |\n|---|---:|---|---:|---:|---:|---:|"
)


def print_modes(rows: list[tuple[str, int, str, Measured]]) -> None:
    print(MODES_HEADER)
    for mode, nodes, label, m in rows:
        flag = "" if m.ok else " FAILED"
        print(
            f"| {mode} | {nodes} | {label}{flag} | {m.seconds:.0f} | {m.build_seconds:.0f} "
            f"| {m.controller_cpu / nodes:.2f} | {m.node_cpu / nodes:.2f} |"
        )
    sys.stdout.flush()


def check_mode_targets(rows: list[tuple[str, int, str, Measured]]) -> int:
    """Image mode: 16-node first up within 2x the 4-node one; controller CPU per node at 32
    nodes within 1.2x of 4 nodes'."""
    first = {(mode, n): m for mode, n, label, m in rows if label == "first up"}
    ok = all(m.ok for *_, m in rows)
    if ("image", 4) in first and ("image", 16) in first:
        ratio = first["image", 16].seconds / first["image", 4].seconds
        print(f"image mode first up: 16 nodes take {ratio:.2f}x 4 nodes (target <= 2)")
        ok = ok and ratio <= 2.0
    if ("image", 4) in first and ("image", 32) in first:
        per = {n: first["image", n].controller_cpu / n for n in (4, 32)}
        ratio = per[32] / per[4]
        print(f"image mode controller CPU per node: 32 nodes {ratio:.2f}x 4 nodes (target <= 1.2)")
        ok = ok and ratio <= 1.2
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 16])
    parser.add_argument(
        "--modes", nargs="+", choices=["push", "image"],
        help="compare bring-up modes (first and no-change up, CPU on controller and nodes)",
    )  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="leave the clusters running")
    parser.add_argument(
        "--repeat", type=int, default=2, help="no-change tuned runs per size (default 2)"
    )
    parser.add_argument(
        "--tuned-only", action="store_true", help="skip the no-Mitogen and Ansible-defaults runs"
    )
    args = parser.parse_args()
    if args.modes:
        return compare_modes(args.sizes, args.modes, args.keep)
    results: list[tuple[int, Run]] = []
    with tempfile.TemporaryDirectory(prefix="myriad-bench-") as tmp:
        folder = Path(tmp)
        for nodes in args.sizes:
            spec = spec_for(nodes, folder)
            state = folder / f"state{nodes}"
            myriad("down", str(spec), "--yes", state=state)
            results.append((nodes, run("first up", spec, state)))
            # Consecutive no-change runs on a 2-core machine vary by a third; report each.
            for attempt in range(1, args.repeat + 1):
                results.append((nodes, run(f"no-change up, tuned #{attempt}", spec, state)))
            if not args.tuned_only:
                results.append((nodes, run("no-change up, tuned, no Mitogen", spec, state,
                                           "--no-mitogen")))  # fmt: skip
                results.append((nodes, run("no-change up, Ansible defaults", spec, state,
                                           "--ansible-defaults")))  # fmt: skip
            if not args.keep:
                myriad("down", str(spec), "--yes", state=state)
    names = ["containers", "inventory", "bring-up", "validation"]
    print(f"{'nodes':>5}  {'run':<34} {'total s':>8} " + " ".join(f"{n:>11}" for n in names))
    for nodes, result in results:
        cells = " ".join(f"{result.phases.get(n, float('nan')):>11.1f}" for n in names)
        flag = "" if result.ok else "  FAILED"
        print(f"{nodes:>5}  {result.label:<34} {result.seconds:>8.1f} {cells}{flag}")
    best = {
        nodes: min(r.seconds for n, r in results if n == nodes and "tuned #" in r.label)
        for nodes in args.sizes
    }
    smallest = min(args.sizes)
    for nodes in args.sizes:
        if nodes != smallest:
            ratio = best[nodes] / best[smallest]
            print(f"best no-change up, tuned: {nodes} nodes take {ratio:.1f}x {smallest} nodes")
    return 0 if all(r.ok for _, r in results) else 1


if __name__ == "__main__":
    raise SystemExit(measured(main))
