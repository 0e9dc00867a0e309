"""A node for the node health runner's tests (tests/health): stub nvidia-smi and a fake
scontrol on PATH, an InfiniBand tree and a kernel log file, all built from real captures
(tests/health_stubs.py), and the runner started the way the node starts it: `python3 -I -S`
with only the installed modules (here: src) on its path."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from health_stubs import gpu_xml, infiniband_tree, nvidia_smi_script, set_counter

SRC = Path(__file__).resolve().parents[1] / "src"
BOOT = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); "
    "from myriad.node.health import main; sys.exit(main())"
)

# A Slurm controller's answers for one node, from a JSON file: `show node -o` prints the
# record as scontrol does (Reason last, with [user@time]); `update` changes it.
FAKE_SCONTROL = textwrap.dedent(
    """\
    #!{python}
    import json, sys
    STATE = {state!r}
    with open(STATE) as f:
        node = json.load(f)
    with open(STATE + ".calls", "a") as f:
        f.write(" ".join(sys.argv[1:]) + "\\n")
    args = sys.argv[1:]
    if args[:2] == ["show", "node"]:
        state = "IDLE+DRAIN" if node["drain"] else "IDLE"
        reason = f" Reason={{node['reason']}} [root@2026-12-01T18:40:00]" if node["reason"] else ""
        print(f"NodeName={{args[2]}} Arch=x86_64 CPUTot=2 RealMemory=1000 State={{state}} "
              f"ThreadsPerCore=1{{reason}}")
    elif args[0] == "update":
        settings = dict(a.split("=", 1) for a in args[1:])
        if settings.get("State") == "DRAIN":
            node.update(drain=True, reason=settings["Reason"])
        elif settings.get("State") == "RESUME":
            node.update(drain=False, reason=None)
        with open(STATE, "w") as f:
            json.dump(node, f)
    """
)


def expectation(check: str, expected: Any, field: str) -> dict[str, Any]:
    return {
        "check": check,
        "expected": expected,
        "spec_field": field,
        "fix": f"fix {check} on {{node}}",
        "applies": True,
        "reason": "",
    }


@dataclass
class Node:
    root: Path
    config: Path

    @property
    def calls(self) -> list[str]:
        path = self.root / "slurm.json.calls"
        return path.read_text().splitlines() if path.exists() else []

    def slurm(self) -> dict[str, Any]:
        return json.loads((self.root / "slurm.json").read_text())

    def set_slurm(self, drain: bool, reason: str | None) -> None:
        (self.root / "slurm.json").write_text(json.dumps({"drain": drain, "reason": reason}))

    def gpus(self, count: int) -> None:
        (self.root / "nvidia-smi.xml").write_text(gpu_xml(count))

    def log(self, *lines: str) -> None:
        with (self.root / "kern.log").open("a") as handle:
            handle.writelines(line + "\n" for line in lines)

    def counter(self, device: str, name: str, value: int) -> None:
        set_counter(self.root / "infiniband", device, name, value)

    def policy(self, **changes: Any) -> None:
        document = json.loads(self.config.read_text())
        document["policy"].update(changes)
        self.config.write_text(json.dumps(document))

    def state(self) -> dict[str, Any]:
        return json.loads((self.root / "state.json").read_text())

    def metrics(self) -> str:
        return (self.root / "metrics" / "myriad_health.prom").read_text()

    def run(self, *extra: str) -> tuple[int, str]:
        done = subprocess.run(
            [
                sys.executable,
                "-I",
                "-S",
                "-c",
                BOOT,
                str(SRC),
                "--config",
                str(self.config),
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={"PATH": f"{self.root / 'bin'}:/usr/bin:/bin"},
            cwd=self.root,
        )
        assert done.stderr == "", done.stderr
        lines = done.stdout.splitlines()
        assert len(lines) == 1, done.stdout
        return done.returncode, lines[0]


def make_node(tmp_path: Path) -> Node:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(nvidia_smi_script(str(tmp_path / "nvidia-smi.xml")))
    smi.chmod(0o755)
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(
        FAKE_SCONTROL.format(python=sys.executable, state=str(tmp_path / "slurm.json"))
    )
    scontrol.chmod(0o755)
    infiniband_tree(tmp_path, ["mlx5_0", "mlx5_1"])
    (tmp_path / "kern.log").write_text("")
    document = {
        "schema": 1,
        "node": {
            "schema": 1,
            "node": "node02",
            "pool": "node",
            "profile": "h100",
            "role": "compute",
            "expectations": [
                expectation("gpu.count", 8, "profiles.h100.gpu.count"),
                expectation("gpu.xid", {"hold_s": 0}, "health.xid_hold_s"),
                expectation(
                    "hca.counter-growth",
                    {
                        "names": ["mlx5_0", "mlx5_1"],
                        "value": {"link_downed": 0, "port_rcv_errors": 10},
                    },
                    "health.counters",
                ),
                expectation("disk.space", {"/": 1}, "health.disk"),
            ],
        },
        "policy": {
            "orchestrator": "slurm",
            "interval_s": 10,
            "drain": ["gpu.count", "gpu.xid", "hca.counter-growth"],
            "flap_window_s": 3600,
            "flap_limit": 3,
            "xid_hold_s": 0,
            "kernel_log": str(tmp_path / "kern.log"),
            "state_file": str(tmp_path / "state.json"),
            "metrics_file": str(tmp_path / "metrics" / "myriad_health.prom"),
            "infiniband": str(tmp_path / "infiniband"),
            "scontrol": str(scontrol),
            "probe_timeout_s": 10,
        },
    }
    config = tmp_path / "node.json"
    config.write_text(json.dumps(document))
    made = Node(tmp_path, config)
    made.gpus(8)
    made.set_slurm(False, None)
    return made
