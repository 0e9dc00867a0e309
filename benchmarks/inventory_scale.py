"""`ansible-inventory --list` on the rendered roce-10k and h100-100k inventories: time and size.

Targets (issue #18): on h100-100k (12,519 hosts) under 60 s and under 200 MB of output; on
roce-10k (1,257 hosts) under 5 s. `ansible-inventory --list` prints every host's variables
as Ansible merges them (group_vars/all, its groups, its host_vars), which is also what every
playbook run has to build: before the cluster-wide tables moved out of group_vars/all into
`cluster_tables.yml` (render.tables), roce-10k took 58 s and 410 MB and h100-100k never
finished.

Each example is rendered into a temporary folder (`myriad render`'s writer), then
`ansible-inventory -i DIR/hosts.yml --list` runs with its output to a file: wall time,
CPU seconds of the child (user + system, from wait4's resource usage, as /usr/bin/time
reports them), output bytes and the child's peak resident memory. `--inline` also measures
the other layout, every host's variables written inline in hosts.yml instead of one
host_vars file per host (slower: the YAML inventory plugin handles each inline variable on
its own). Exits 1 when a target fails.

Run: .venv/bin/python benchmarks/inventory_scale.py [--inline] [--example E] [--timeout S]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml
from conditions import measured

from myriad.plan.pipeline import plan_loaded
from myriad.render.inventory import build_inventory
from myriad.render.writer import write_inventory
from myriad.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
ANSIBLE_INVENTORY = Path(sys.executable).parent / "ansible-inventory"
MB = 1_000_000


@dataclass(frozen=True)
class Target:
    example: str
    wall_s: float
    output_mb: float | None = None


TARGETS = (Target("roce-10k", wall_s=5.0), Target("h100-100k", wall_s=60.0, output_mb=200.0))


@dataclass(frozen=True)
class Measured:
    hosts: int
    render_s: float
    wall_s: float
    cpu_s: float
    output_bytes: int
    peak_mb: float
    finished: bool


def render(example: str, out: Path) -> tuple[int, float]:
    start = time.perf_counter()
    result = plan_loaded(load_spec(ROOT / "inventories" / example / "cluster.yaml"))
    assert result.plan is not None, example
    inventory = build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)
    write_inventory(inventory, out)
    return len(inventory.host_vars), time.perf_counter() - start


def inline_host_vars(inventory: Path, out: Path) -> None:
    """The same inventory with each host's variables inline under `all.hosts` in hosts.yml."""
    out.mkdir()
    os.symlink(inventory / "group_vars", out / "group_vars")
    document = yaml.load((inventory / "hosts.yml").read_text(), Loader=yaml.CSafeLoader)
    document["all"]["hosts"] = {
        path.stem: json.loads(path.read_text())
        for path in sorted((inventory / "host_vars").glob("*.json"))
    }
    dumped = yaml.dump(document, Dumper=yaml.CSafeDumper, sort_keys=False)
    (out / "hosts.yml").write_text(dumped)


def list_inventory(inventory: Path, hosts: int, render_s: float, timeout_s: int) -> Measured:
    output = inventory.parent / f"{inventory.name}.list.json"
    start = time.perf_counter()
    with open(output, "wb") as handle:
        process = subprocess.Popen(
            [str(ANSIBLE_INVENTORY), "-i", str(inventory / "hosts.yml"), "--list"],
            stdout=handle,
            stderr=subprocess.DEVNULL,
        )
        status, usage = _wait(process, start + timeout_s)
    wall = time.perf_counter() - start
    size = output.stat().st_size
    output.unlink()
    return Measured(
        hosts,
        render_s,
        wall,
        # This child's own CPU, user and system, as /usr/bin/time reports it.
        usage.ru_utime + usage.ru_stime,
        size,
        usage.ru_maxrss / 1024,  # KiB on Linux
        finished=status == 0,
    )


def _wait(process: subprocess.Popen[bytes], deadline: float) -> tuple[int, resource.struct_rusage]:
    """wait4 on the child: its exit status and its own resource usage; killed at `deadline`."""
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return process.returncode, usage
        if time.perf_counter() > deadline:
            process.kill()
            _, _, usage = os.wait4(process.pid, 0)
            process.returncode = -9
            return -9, usage
        time.sleep(0.05)


def verdict(target: Target, measured: Measured) -> tuple[str, bool]:
    wanted = f"< {target.wall_s:g} s"
    ok = measured.finished and measured.wall_s < target.wall_s
    if target.output_mb is not None:
        wanted += f", < {target.output_mb:g} MB"
        ok = ok and measured.output_bytes / MB < target.output_mb
    return wanted, ok


def row(example: str, layout: str, measured: Measured, wanted: str, ok: bool | None) -> str:
    wall = f"{measured.wall_s:.1f}" if measured.finished else f"> {measured.wall_s:.0f}"
    result = "" if ok is None else ("ok" if ok else "FAIL")
    return (
        f"| {example} | {layout} | {measured.hosts:,} | {measured.render_s:.1f} | {wall} | "
        f"{measured.cpu_s:.1f} | {measured.output_bytes / MB:.1f} | {measured.peak_mb:,.0f} | "
        f"{wanted} | {result} |"
    )


HEADER = (
    "| inventory | host variables | hosts | render s | list wall s | list CPU s | output MB "
    "| peak MB | target | |\n|---|---|---|---|---|---|---|---|---|---|"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--inline", action="store_true", help="also measure host variables inline in hosts.yml"
    )
    parser.add_argument(
        "--timeout", type=int, default=600, help="seconds one ansible-inventory run may take"
    )
    parser.add_argument(
        "--example",
        action="append",
        choices=[t.example for t in TARGETS],
        help="measure only this example (repeatable; default: all)",
    )
    args = parser.parse_args()
    print(HEADER)
    failed = False
    with tempfile.TemporaryDirectory(prefix="myriad-inventory-scale-") as work:
        for target in TARGETS:
            if args.example and target.example not in args.example:
                continue
            folder = Path(work) / target.example
            hosts, render_s = render(target.example, folder)
            measured = list_inventory(folder, hosts, render_s, args.timeout)
            wanted, ok = verdict(target, measured)
            failed |= not ok
            print(row(target.example, "host_vars files", measured, wanted, ok), flush=True)
            if args.inline:
                inline = Path(work) / f"{target.example}-inline"
                inline_host_vars(folder, inline)
                other = list_inventory(inline, hosts, render_s, args.timeout)
                print(row(target.example, "inline in hosts.yml", other, "", None), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(measured(main))
