"""Parse speed of realistic specs, and how long `myriad plan` takes to refuse bad ones.

Targets (issue #12): a bare-metal spec that writes out every host of 100,000 GPUs (12,500
nodes, about 1.6 MB) loads in under a second on a 2-core machine; every spec of the
bad-spec corpus ends in exit 2 in under 2 s; the largest file a spec may be (MAX_BYTES)
is refused at once. Run: .venv/bin/python benchmarks/spec_parse.py
"""

from __future__ import annotations

import argparse
import contextlib
import io
import time
from collections.abc import Callable
from pathlib import Path

from conditions import measured

from myriad.cli import main as myriad
from myriad.errors import SpecError
from myriad.spec import load_spec_text
from myriad.spec.yaml_source import MAX_BYTES, parse_document

ROOT = Path(__file__).resolve().parents[1]
BAD = ROOT / "tests" / "spec" / "bad"
PROFILE = """profiles:
  gpu-node:
    gpu: {model: H100-SXM5-80GB, count: 8}
    cpu: {sockets: 2, cores_per_socket: 56}
    memory_gib: 2048
    pcie: {gen: 5, switches: 4}
    nics:
      compute: {model: ConnectX-7, count: 8}
pools:
  - {name: gpu, profile: gpu-node, count: NODES, role: compute}
network:
  fabric: infiniband
  topology: {kind: rail-optimized, switch: QM9700, island_nodes: 512}
  addressing: {management: 10.0.0.0/16}
software:
  os: ubuntu-22.04
  nvidia_driver: "550"
"""


def explicit_spec(gpus: int) -> str:
    """Every node written out as a bare-metal host: name, MAC, BMC and address."""
    nodes = gpus // 8
    lines = [
        "apiVersion: myriad/v1",
        "kind: Cluster",
        "metadata:",
        f"  name: bm-{gpus // 1000}k",
        "provider:",
        "  kind: baremetal",
        "  bmc: redfish",
        "  bmc_credentials_secret: bmc",
        "  hosts:",
    ]
    width = max(2, len(str(nodes)))
    for i in range(1, nodes + 1):
        name = f"gpu{i:0{width}d}"
        lines += [
            f"    - name: {name}",
            f"      mac: 0c:42:a1:{i >> 16 & 255:02x}:{i >> 8 & 255:02x}:{i & 255:02x}",
            f"      bmc_address: https://{name}-bmc.example.net",
            f"      address: 10.0.{i >> 8}.{i & 255}",
        ]
    return "\n".join(lines) + "\n" + PROFILE.replace("NODES", str(nodes))


def best_of(repeat: int, run: Callable[..., object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure; the best counts")
    args = parser.parse_args()
    print(f"{'GPUs':>8} {'MB':>6} {'parse s':>8} {'load s':>8}")
    for gpus in (10_000, 100_000):
        text = explicit_spec(gpus)
        parse = best_of(args.repeat, lambda text=text: parse_document(text, "bm.yaml"))
        load = best_of(args.repeat, lambda text=text: load_spec_text(text, "bm.yaml"))
        print(f"{gpus:>8,} {len(text.encode()) / 1e6:>6.2f} {parse:>8.3f} {load:>8.3f}")

    oversize = "#" * (MAX_BYTES + 1)

    def refuse_oversize() -> None:
        with contextlib.suppress(SpecError):
            parse_document(oversize, "big.yaml")

    print(f"refusing a {MAX_BYTES / 1e6:.0f} MB+ file: {best_of(1, refuse_oversize):.3f} s")

    slowest, name = 0.0, ""
    for spec in sorted(BAD.glob("[0-9]*.yaml")):
        sink = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            code = myriad(["plan", str(spec)])
        seconds = time.perf_counter() - start
        assert code == 2, (spec.name, code, sink.getvalue())
        if seconds > slowest:
            slowest, name = seconds, spec.name
    print(f"bad specs: every one exits 2; slowest {slowest:.3f} s ({name})")


if __name__ == "__main__":
    raise SystemExit(measured(main))
