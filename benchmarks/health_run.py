"""One myriad-health run on a node with 8 GPUs and 8 HCAs: CPU and wall time.

Target (issue #14): under 0.5 s of CPU and 1 s of wall time per run, since it runs every few
minutes on every node of a 12,500-node cluster.

The node is this machine standing in for a GPU node: a stub `nvidia-smi` prints an 8 x H100
`nvidia-smi -q -x` built from real captures and the real 8-GPU `nvidia-smi nvlink --status`
(tests/health_stubs.py), /sys/class/infiniband is a tree of eight HCAs built from
node_exporter's real sysfs fixture, and `scontrol` is a shell stub that answers `show node`
(idle, not drained) as Slurm's does. The document is rendered from a test spec whose compute
nodes are 8 x H100 with 8 ConnectX-7 on InfiniBand and the default health section, exactly as
`myriad bringup` renders it. Every other probe of the gatherer runs for real (systemctl, ip,
su, docker ...). Each run is the installed command's: `python3 -I -S` on the modules alone.
CPU is the run's and every process it starts (user + system, from RUSAGE_CHILDREN).

Run: .venv/bin/python benchmarks/health_run.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from conditions import measured  # noqa: E402  (benchmarks/ is on sys.path)

from health_stubs import gpu_xml, h100_spec, infiniband_tree, nvidia_smi_script  # noqa: E402
from myriad.health.render import documents  # noqa: E402
from myriad.plan.pipeline import plan_loaded  # noqa: E402
from myriad.provision.resolve import resolve_cluster  # noqa: E402
from myriad.spec import load_spec_text  # noqa: E402

NVLINK = ROOT / "tests" / "samples" / "nvidia-smi-nvlink" / "a100-sxm4-80gb-x8_nvlink-status.txt"
BOOT = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); "
    "from myriad.node.health import main; sys.exit(main())"
)
HCAS = [f"mlx5_{i}" for i in range(8)]


def node_document(work: Path) -> Path:
    spec = h100_spec("health-bench", "172.31.90.0/24", {})
    spec["profiles"]["h100"]["nics"]["compute"]["count"] = 8
    loaded = load_spec_text(yaml.safe_dump(spec, sort_keys=False), "health-bench.yaml")
    cluster = resolve_cluster(plan_loaded(loaded))
    document = documents(loaded, cluster.plan, cluster.inventory)["node01"]
    bin_dir = work / "bin"
    bin_dir.mkdir()
    (work / "nvidia-smi.xml").write_text(gpu_xml(8))
    (bin_dir / "nvidia-smi").write_text(
        nvidia_smi_script(str(work / "nvidia-smi.xml"), str(NVLINK))
    )
    (bin_dir / "scontrol").write_text(
        "#!/bin/sh\necho 'NodeName=node01 Arch=x86_64 CPUTot=2 RealMemory=1000 State=IDLE "
        "ThreadsPerCore=1'\n"
    )
    for tool in ("nvidia-smi", "scontrol"):
        (bin_dir / tool).chmod(0o755)
    infiniband_tree(work, HCAS)
    (work / "kern.log").write_text("")
    document["policy"].update(
        kernel_log=str(work / "kern.log"),
        state_file=str(work / "state.json"),
        metrics_file=str(work / "myriad_health.prom"),
        infiniband=str(work / "infiniband"),
        scontrol=str(bin_dir / "scontrol"),
    )
    path = work / "node.json"
    path.write_text(json.dumps(document))
    return path


def one_run(config: Path, work: Path) -> tuple[float, float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", BOOT, str(ROOT / "src"), "--config", str(config)],
        capture_output=True,
        text=True,
        check=False,
        env={
            "PATH": f"{work / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        },
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):
        raise SystemExit(f"run failed ({done.returncode}): {done.stdout}{done.stderr}")
    return wall, cpu, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        config = node_document(work)
        one_run(config, work)  # the first run takes the counters' baseline and the log cursor
        walls, cpus = [], []
        for _ in range(args.runs):
            wall, cpu, _code = one_run(config, work)
            walls.append(wall)
            cpus.append(cpu)
        state = json.loads((work / "state.json").read_text())
    judged = len(state["results"])
    print(f"myriad-health, 8 GPUs + 8 HCAs, {judged} results per run, {args.runs} runs:")
    print(
        f"  wall  median {statistics.median(walls):.3f} s  max {max(walls):.3f} s  (target < 1 s)"
    )
    print(
        f"  CPU   median {statistics.median(cpus):.3f} s  max {max(cpus):.3f} s  (target < 0.5 s)"
    )
    print(f"  the runner's own duration (state file): {state['duration_s']:.3f} s")
    # The stand-ins differ from the spec (an A100's 12 NVLink links, a QDR port fixture):
    # those checks fail, which a run must judge as fast as passing ones.
    print(f"  last run: exit {_code}, {len(state['failing'])} failing (the stand-ins' differences)")


if __name__ == "__main__":
    raise SystemExit(measured(main))
