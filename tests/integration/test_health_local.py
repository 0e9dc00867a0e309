"""Node health end to end on a local Slurm cluster: slurmd runs myriad-health, which drains
its own node with its own reason and resumes it when the fault clears, never touching a
node an administrator drained; `myriad health` shows it.

Said plainly: these containers have no GPUs and no HCAs. The spec is a test-only one
(tests/health_stubs.py h100_spec): its compute nodes declare 8 x H100 and two ConnectX-7 on
InfiniBand, so the nodes' documents expect eight GPUs and two HCAs. Before bring-up the test
installs on each compute node a stub `nvidia-smi` that prints an 8-GPU `nvidia-smi -q -x`
built from real captures, a fake /sys/class/infiniband tree built from node_exporter's real
sysfs fixture (under /var/lib/myriad-health-test/infiniband), a stand-in NVIDIA driver (a
unit named nvidia-persistenced.service that lists eight GPUs under /run, and an
nvidia-modprobe that makes their device nodes, char 195, for slurmd's gres.conf), and a
kernel log file that stands for /dev/kmsg (the host's, shared by every container). After
bring-up it points each node's document at the tree and the file (the policy's `infiniband`
and `kernel_log`). Bring-up runs only the roles this needs: common, health, slurm.

Faults are injected where they come from (a line in the kernel log, a counter file, the stub's
output) and slurmd's own HealthCheckInterval (10 s) runs the checks; the test only watches
`scontrol show node`. Last, reboots (the containers restart when a node reboots, as a
server does): node02 is power-cycled with its driver not loading at that boot, and slurmd
refuses to start there until the driver is up; then bring-up's reboot play reboots node02 at
once and hands node01, which runs a job, to Slurm, which reboots it when the job ends and
resumes it. Then remediation (`myriad remedy`): a node drained for a missing GPU is rebooted
through Slurm and comes back in service, and the same fault again escalates it to
needs-hardware, with the hook's payload, while a job on the other node runs to its end;
`myriad resume` returns it, once repaired, only through an acceptance run of it alone.
Beside them stand two trays of a rack-scale NVLink domain (issue #30): a GB200 NVL72 rack
cut to two trays (tests/health_stubs.py `twin_rack_catalog`). Said plainly: each tray's
stub `nvidia-smi` prints four GB200s whose Fabric sections follow the real DTD v13
capture, its stub `nvidia-imex-ctl -N` the real 18-node capture cut to the two trays'
addresses, and its IMEX daemon is a stand-in unit. Blackwell needs driver 570 or newer
(lint driver-gpu), so the spec asks for 580 and every stub reports a 580 release. Node
health judges the trays' fabric state from those, on the document the health role renders
for a tray, under slurmd.
One cluster for the module; `down` at the end, even on failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from accept_stubs import dcgm_output, ib_write_bw_output, nccl_output, standin_script
from health_stubs import (
    DRIVER_580,
    FAULT_XML,
    GB200_CLIQUE,
    GB200_CLUSTER,
    GPU_PROCESSES,
    TRAY_GPUS,
    TWIN_MODULE_FILE,
    ecc_off_xml,
    gpu_xml,
    h100_spec,
    imex_ctl_script,
    infiniband_tree,
    nvidia_modprobe_script,
    nvidia_smi_script,
    tray_xml,
    twin_driver_unit,
)
from myriad.node.health import REASON_MAX
from myriad.node.parsers import parse_scontrol_nodes
from myriad.node.parsers.slurm import SlurmNode
from myriad.plan.acceptance import profile_figures
from myriad.plan.nodes import container_name
from myriad.plan.pipeline import plan_loaded
from myriad.provision import local
from myriad.render.inventory import build_inventory
from myriad.spec import load_spec

from run_names import free_subnet, unique_name

ROOT = Path(__file__).resolve().parents[2]
MYRIAD = [sys.executable, "-m", "myriad.cli"]
TEST_DIR = "/var/lib/myriad-health-test"
INTERVAL_S = 10
XID_HOLD_S = 10
HEALTH = {
    "interval_s": INTERVAL_S,
    "drain": ["gpu.count", "gpu.xid", "hca.counter-growth", "gpu.fabric-state", "gpu.imex-domain"],
    # The fixture's ConnectX-3 port has no symbol_error file: follow the counters it has.
    "counters": {"link_downed": 0, "port_rcv_errors": 10},
    "xid_hold_s": XID_HOLD_S,
    "flap_limit": 10,
    # `myriad health` gathers for a while; a run is stale only well past the interval.
    "stale_after_s": 120,
}
# At most one node in repair; two failing together trip the breaker (issue #29).
REMEDIATION = {"max_nodes": 1, "breaker_nodes": 2}
HOOK_PAYLOADS = "hook-payloads.jsonl"
TRAYS = ("tray01", "tray02")
# The twin's stand-in IMEX daemon: up, as the real one is once it joined its domain.
IMEX_UNIT = (
    "# Test stub (tests/integration/test_health_local.py): the twin's stand-in IMEX daemon.\n"
    "[Unit]\nDescription=Stand-in NVIDIA IMEX daemon of the local twin\n\n"
    "[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n\n"
    "[Install]\nWantedBy=multi-user.target\n"
)
# The real XID 79 message (NVIDIA/NVSentinel issue #155; tests/samples/kernel-log).
OFF_THE_BUS = "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"


@dataclass(frozen=True)
class Cluster:
    name: str
    spec: Path
    state: Path

    def container(self, node: str) -> str:
        return f"{self.name}-{node}"

    def run(self, node: str, *command: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            ["docker", "exec", "-i", self.container(node), *command],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"{node}: {command}: {done.stdout}{done.stderr}"
        return done.stdout

    def write(self, node: str, path: str, text: str) -> None:
        self.run(node, "sh", "-c", f"cat > {path}.new && mv {path}.new {path}", stdin=text)

    def record(self, node: str) -> SlurmNode:
        (record,) = parse_scontrol_nodes(self.run("ctl01", "scontrol", "show", "node", node, "-o"))
        return record

    def slurm(self, node: str) -> tuple[bool, str]:
        """(drained, reason without its [user@time]) as the controller sees the node."""
        record = self.record(node)
        reason = record.reason or ""
        if reason.endswith("]") and " [" in reason:
            reason = reason[: reason.rindex(" [")]
        return record.drained, reason

    def wait(self, what: str, check: Callable[[], bool], timeout_s: float) -> float:
        start = time.monotonic()
        while time.monotonic() - start < timeout_s:
            if check():
                return time.monotonic() - start
            time.sleep(1)
        raise AssertionError(f"not within {timeout_s:.0f} s: {what}")

    def health_state(self, node: str) -> dict[str, Any]:
        state: dict[str, Any] = json.loads(
            self.run(node, "cat", "/var/lib/myriad-health/state.json")
        )
        return state


def myriad(*args: str, state: Path, timeout: float = 1200) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MYRIAD_STATE_DIR": str(state), "COLUMNS": "200"}
    return subprocess.run(
        [*MYRIAD, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
        check=False,
    )  # fmt: skip


def install_stubs(
    cluster: Cluster, node: str, work: Path, xml: str | None = None, gpus: int = 8
) -> None:
    cluster.run(node, "mkdir", "-p", TEST_DIR)
    cluster.write(
        node, f"{TEST_DIR}/nvidia-smi.xml", gpu_xml(gpus, DRIVER_580) if xml is None else xml
    )
    cluster.write(
        node,
        "/usr/local/bin/nvidia-smi",
        nvidia_smi_script(f"{TEST_DIR}/nvidia-smi.xml", calls_file=f"{TEST_DIR}/nvidia-smi.calls"),
    )
    cluster.run(node, "chmod", "755", "/usr/local/bin/nvidia-smi")
    cluster.run(node, "touch", f"{TEST_DIR}/kern.log")
    tree = infiniband_tree(work / node, ["mlx5_0", "mlx5_1"])
    subprocess.run(
        ["docker", "cp", str(tree), f"{cluster.container(node)}:{TEST_DIR}/"],
        capture_output=True, timeout=60, check=True,
    )  # fmt: skip
    # slurm.conf gives the node Gres=gpu:h100:8 with gres.conf File=/dev/nvidia[0-7]: slurmd's
    # pre-start makes the device nodes with nvidia-modprobe once the driver lists the GPUs.
    # The twin's driver is a unit of the name slurmd's drop-in waits for; it starts at boot.
    cluster.write(node, "/etc/systemd/system/nvidia-persistenced.service", twin_driver_unit(gpus))
    cluster.run(node, "mkdir", "-p", os.path.dirname(TWIN_MODULE_FILE))
    cluster.run(node, "touch", TWIN_MODULE_FILE)
    cluster.write(node, "/usr/local/bin/nvidia-modprobe", nvidia_modprobe_script())
    cluster.run(node, "chmod", "755", "/usr/local/bin/nvidia-modprobe")
    cluster.run(node, "systemctl", "daemon-reload")
    cluster.run(node, "systemctl", "enable", "--now", "nvidia-persistenced.service")


def install_tray_stubs(cluster: Cluster, tray: str, work: Path, imex_nodes: list[str]) -> None:
    """A tray: four GB200s in one NVLink domain, and the IMEX daemon of its domain up."""
    install_stubs(
        cluster,
        tray,
        work,
        tray_xml(),
        TRAY_GPUS,
    )
    cluster.write(tray, "/usr/local/bin/nvidia-imex-ctl", imex_ctl_script(imex_nodes))
    cluster.run(tray, "chmod", "755", "/usr/local/bin/nvidia-imex-ctl")
    # The unit slurmd's drop-in waits for on a tray (render: NVLINK_FABRIC_UNITS["imex"]).
    cluster.write(tray, "/etc/systemd/system/nvidia-imex.service", IMEX_UNIT)
    cluster.run(tray, "systemctl", "daemon-reload")
    cluster.run(tray, "systemctl", "enable", "--now", "nvidia-imex.service")


def use_test_sources(cluster: Cluster, node: str) -> None:
    document = json.loads(cluster.run(node, "cat", "/etc/myriad-health/node.json"))
    document["policy"].update(
        kernel_log=f"{TEST_DIR}/kern.log", infiniband=f"{TEST_DIR}/infiniband"
    )
    cluster.write(node, "/etc/myriad-health/node.json", json.dumps(document))


@pytest.fixture(scope="module")
def cluster(docker_available: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    state = tmp_path_factory.mktemp("health-state")
    name = unique_name("health")
    spec_path = state / f"{name}.yaml"
    # The needs-hardware hook: an executable on this machine (where `myriad remedy` runs) that
    # keeps each payload it is given on stdin.
    hook = state / "hook"
    hook.write_text(f"#!/bin/sh\ncat >> {state / HOOK_PAYLOADS}\necho >> {state / HOOK_PAYLOADS}\n")
    hook.chmod(0o755)
    policy = {**HEALTH, "remediation": {**REMEDIATION, "hook": str(hook)}}
    document = h100_spec(name, free_subnet(), policy, trays=len(TRAYS))
    # One compute node a rack: a node draws 6.25 kW (8 x 700 W GPUs and the rest, as the plan
    # counts it), floor(10 / 6.25) = 1. Two nodes failing together are then two racks' single
    # failures, which the breaker stops, not one whole rack drained as a unit.
    document["facility"] = {"rack_kw": 10.0}
    spec_path.write_text(yaml.safe_dump(document, sort_keys=False))
    loaded = load_spec(spec_path)
    spec = loaded.spec
    planned = plan_loaded(loaded)
    assert planned.plan is not None
    host_vars = build_inventory(spec, loaded.catalog, planned.plan).host_vars
    made = Cluster(name, spec_path, state)
    assert made.container("node02") == container_name(spec, "node02")
    try:
        local.converge(spec)
        for node in ("node01", "node02"):
            install_stubs(made, node, state)
        for tray in TRAYS:
            install_tray_stubs(made, tray, state, host_vars[tray]["nvidia_driver_imex_nodes"])
        up = myriad("bringup", str(spec_path), "--tags", "common,health,slurm", state=state)
        assert up.returncode == 0, up.stdout[-6000:] + up.stderr[-3000:]
        for node in ("node01", "node02", *TRAYS):
            use_test_sources(made, node)
        yield made
    finally:
        local.remove(spec)


@pytest.mark.docker
@pytest.mark.slow
def test_node_health_drains_resumes_and_leaves_an_administrators_drain(cluster: Cluster) -> None:
    conf = cluster.run("ctl01", "cat", "/etc/slurm/slurm.conf")
    assert "HealthCheckProgram=/usr/local/sbin/myriad-health\n" in conf
    assert f"HealthCheckInterval={INTERVAL_S}\n" in conf
    assert "HealthCheckNodeState=ANY\n" in conf
    for node in ("node01", "node02"):
        cluster.wait(f"{node} up", lambda n=node: cluster.slurm(n) == (False, ""), 6 * INTERVAL_S)
    assert cluster.run("ctl01", "timeout", "60", "srun", "-w", "node02", "hostname").split() == [
        "node02"
    ]

    # A GPU falls off the bus: XID 79 in node02's kernel log. Within one interval (and the
    # run's own time) slurmd's run drains node02 with myriad-health's reason.
    cluster.run("node02", "sh", "-c", f"echo '{OFF_THE_BUS}' >> {TEST_DIR}/kern.log")
    xid_reason = (
        "myriad-health: gpu.xid expected no draining XID (held 10 s); application XIDs "
        "recorded, found XID 79 on 0000:44:00 (GPU has fallen off the bus)"
    )
    took = cluster.wait(
        "node02 drained for XID 79", lambda: cluster.slurm("node02") == (True, xid_reason),
        2 * INTERVAL_S + 10,
    )  # fmt: skip
    # A job lands elsewhere.
    assert cluster.run("ctl01", "timeout", "60", "srun", "-N1", "hostname").split() == ["node01"]
    # The XID is held for health.xid_hold_s, then node02 resumes by itself.
    cluster.wait(
        "node02 resumed",
        lambda: cluster.slurm("node02") == (False, ""),
        XID_HOLD_S + 3 * INTERVAL_S,
    )
    assert cluster.health_state("node02")["slurm"]["action"] == "resume"
    print(f"XID 79 drained node02 {took:.0f} s after the line was logged")

    # An administrator's drain is never resumed, however healthy the node.
    cluster.run(
        "ctl01", "scontrol", "update", "NodeName=node01", "State=DRAIN", "Reason=admin: fan swap"
    )
    drained_at = time.time()
    cluster.wait(
        "a run on node01 since the administrator's drain",
        lambda: cluster.health_state("node01")["last_run"] > drained_at + 1,
        3 * INTERVAL_S,
    )
    assert cluster.slurm("node01") == (True, "admin: fan swap")
    assert cluster.health_state("node01")["slurm"]["drained_by"] == "other"

    # A link that goes down again: link_downed grows on node02's mlx5_0 (the baseline is the
    # last reading). One run drains, the next sees no growth and resumes.
    counter = f"{TEST_DIR}/infiniband/mlx5_0/ports/1/counters/link_downed"
    cluster.run("node02", "sh", "-c", f"echo 3 > {counter}")
    growth_reason = (
        "myriad-health: hca.counter-growth expected growth per run at most link_downed +0, "
        "port_rcv_errors +10 on mlx5_0, mlx5_1, found mlx5_0 link_downed +3"
    )
    cluster.wait(
        "node02 drained for link_downed",
        lambda: (
            cluster.health_state("node02")["slurm"].get("reason") == growth_reason
            or cluster.slurm("node02") == (True, growth_reason)
        ),
        3 * INTERVAL_S,
    )
    cluster.wait(
        "node02 resumed after growth",
        lambda: cluster.slurm("node02") == (False, ""),
        4 * INTERVAL_S,
    )

    # A GPU missing from nvidia-smi: drained with the count, shown by `myriad health`.
    cluster.write("node02", f"{TEST_DIR}/nvidia-smi.xml", gpu_xml(7, DRIVER_580))
    gpu_reason = "myriad-health: gpu.count expected 8, found 7"
    cluster.wait(
        "node02 drained for a missing GPU",
        lambda: cluster.slurm("node02") == (True, gpu_reason),
        3 * INTERVAL_S,
    )
    shown = myriad("health", str(cluster.spec), "--json", state=cluster.state, timeout=600)
    assert shown.returncode == 1, shown.stderr[-3000:]
    report = {n["node"]: n for n in json.loads(shown.stdout)["nodes"]}
    assert report["node02"]["drained"] is True
    assert report["node02"]["drained_by"] == "myriad-health"
    assert report["node02"]["failing"] == ["gpu.count expected 8, found 7"]
    assert report["node02"]["since"] is not None and report["node02"]["stale"] is False
    assert (report["node01"]["drained_by"], report["node01"]["reason"]) == (
        "other",
        "admin: fan swap",
    )
    # The runner is on compute nodes only.
    assert sorted(report) == ["node01", "node02", *TRAYS]

    cluster.write("node02", f"{TEST_DIR}/nvidia-smi.xml", gpu_xml(8, DRIVER_580))
    cluster.wait(
        "node02 resumed with 8 GPUs", lambda: cluster.slurm("node02") == (False, ""), 3 * INTERVAL_S
    )
    prom = "/var/lib/prometheus/node-exporter/myriad_health.prom"
    passing = 'myriad_health_check_failed{check="gpu.count",action="drain"} 0'
    # The run that resumed node02 writes its metrics just after.
    cluster.wait(
        "metrics of the resuming run", lambda: passing in cluster.run("node02", "cat", prom), 5
    )
    metrics = cluster.run("node02", "cat", prom)
    assert 'myriad_health_xid_events_total{xid="79",action="drain"} 1' in metrics
    assert "myriad_health_node_drained 0" in metrics
    # Still the administrator's.
    assert cluster.slurm("node01") == (True, "admin: fan swap")


@pytest.mark.docker
@pytest.mark.slow
def test_a_tray_whose_gpus_leave_its_nvlink_domain_drains_with_the_reason(cluster: Cluster) -> None:
    """Issue #30 on the twin: node health on the trays of a rack-scale NVLink domain.

    Real: the node document the health role renders for a tray (its fabric and IMEX checks
    derived from the plan), the runner under slurmd, Slurm's drain and resume, `myriad
    health`. Stand-ins: nvidia-smi and nvidia-imex-ctl printing captures (module docstring).
    The rack-wide comparison of trays is `myriad validate`'s (test_validate_local.py)."""
    for tray in TRAYS:
        cluster.wait(f"{tray} up", lambda n=tray: cluster.slurm(n) == (False, ""), 6 * INTERVAL_S)
    document = json.loads(cluster.run("tray02", "cat", "/etc/myriad-health/node.json"))
    applies = {e["check"]: e["applies"] for e in document["node"]["expectations"]}
    assert applies["gpu.fabric-state"] and applies["gpu.imex-domain"], applies
    # A job lands on the tray, its four GPUs in slurmd's GRES (each pool is a partition).
    assert "gpu:gb200:4" in cluster.record("tray02").fields["Gres"]
    job = ("srun", "-p", "tray", "-w", "tray02", "--gres=gpu:4", "hostname")
    assert cluster.run("ctl01", "timeout", "60", *job).split() == ["tray02"]

    # GPU 1 of tray02 registers in another NVLink domain than the tray's other three.
    cluster.run("tray02", "mkdir", "-p", os.path.dirname(FAULT_XML))
    cluster.write(
        "tray02",
        FAULT_XML,
        tray_xml({1: 4027}),
    )
    finding = (
        "gpu.fabric-state expected every GPU Completed, Success, in one NVLink domain (clique "
        "and cluster UUID), found GPUs disagree on their NVLink domain: "
        f"GPU 0,2,3 clique {GB200_CLIQUE} cluster {GB200_CLUSTER}; "
        f"GPU 1 clique 4027 cluster {GB200_CLUSTER}"
    )
    # Slurm's reason is the finding cut to REASON_MAX; the state file and `myriad health`
    # carry it whole.
    split = f"myriad-health: {finding}"[: REASON_MAX - 3] + "..."
    assert split.endswith("; GPU 1 ...")
    cluster.wait(
        "tray02 drained for its split domain",
        lambda: cluster.slurm("tray02") == (True, split),
        3 * INTERVAL_S,
    )
    assert cluster.slurm("tray01") == (False, "")
    shown = myriad("health", str(cluster.spec), "--json", state=cluster.state, timeout=600)
    report = {n["node"]: n for n in json.loads(shown.stdout)["nodes"]}
    assert report["tray02"]["drained_by"] == "myriad-health"
    assert report["tray02"]["failing"] == [finding]
    assert report["tray01"]["failing"] == [] and report["tray01"]["drained"] is False

    # Registered again (a reboot or GPU reset re-registers it): the tray resumes by itself.
    cluster.run("tray02", "rm", "-f", FAULT_XML)
    cluster.wait("tray02 resumed", lambda: cluster.slurm("tray02") == (False, ""), 3 * INTERVAL_S)


def _slurmd_back(cluster: Cluster, node: str, started_before: str) -> bool:
    record = cluster.record(node)
    return (
        record.state == "IDLE"
        and not record.drained
        and not record.not_responding
        and record.fields.get("SlurmdStartTime", started_before) != started_before
    )


@pytest.mark.docker
@pytest.mark.slow
def test_reboots_wait_for_the_gpu_driver_and_keep_the_running_job(cluster: Cluster) -> None:
    # Every node is to come back IDLE: the first test's administrator's drain ends here.
    if cluster.record("node01").drained:
        cluster.run("ctl01", "scontrol", "update", "NodeName=node01", "State=RESUME")
    journal = ["journalctl", "-u", "slurmd", "-b", "--no-pager", "-o", "cat"]

    # node02 is power-cycled from outside (its BMC), and its driver's module does not load
    # at that boot (as while DKMS builds, or Secure Boot refuses it). A restart empties /dev
    # and /run, as a reboot empties /dev and /proc/driver/nvidia.
    before = cluster.record("node02").fields["SlurmdStartTime"]
    cluster.run("node02", "rm", TWIN_MODULE_FILE)
    subprocess.run(
        ["docker", "restart", "--time", "20", cluster.container("node02")],
        capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    # slurmd refuses to start without the driver, and keeps retrying.
    cluster.wait(
        "node02's slurmd refused for want of the driver",
        lambda: "the NVIDIA driver is not loaded" in cluster.run("node02", *journal),
        60,
    )
    active = cluster.run("node02", "sh", "-c", "systemctl is-active slurmd || true").strip()
    assert active != "active"
    assert cluster.run("node02", "sh", "-c", "test -e /dev/nvidia0 || echo none") == "none\n"
    assert not _slurmd_back(cluster, "node02", before)
    # The driver loads: within a RestartSec (15 s) slurmd starts and node02 is back.
    cluster.run("node02", "touch", TWIN_MODULE_FILE)
    cluster.run("node02", "systemctl", "restart", "nvidia-persistenced.service")
    recovered = cluster.wait(
        "node02 back IDLE once its driver loaded",
        lambda: _slurmd_back(cluster, "node02", before),
        15 + 60,
    )
    restarts = cluster.run("node02", "systemctl", "show", "slurmd", "-p", "NRestarts", "--value")
    assert int(restarts) >= 1
    # nvidia-modprobe made the device nodes gres.conf names (195:0; stat prints hex).
    assert cluster.run("node02", "stat", "-c", "%F %t:%T", "/dev/nvidia0").strip() == (
        "character special file c3:0"
    )

    # Bring-up's reboot play (bringup.reboot: when-needed). Both nodes wait for a reboot, as
    # after a new driver module: node01 runs a job, so Slurm reboots it when the job ends
    # (scontrol reboot ASAP nextstate=RESUME); node02's slurmd is stopped, as the slurm role
    # leaves it on a node whose reboot is pending, so bring-up reboots it at once.
    started = {n: cluster.record(n).fields["SlurmdStartTime"] for n in ("node01", "node02")}
    job = sleeping_job(cluster, "node01", 45)
    cluster.run("node02", "systemctl", "stop", "slurmd")
    for node in ("node01", "node02"):
        cluster.run(node, "touch", "/run/reboot-required")
    rebooted = myriad("bringup", str(cluster.spec), "--tags", "reboot", state=cluster.state)
    assert rebooted.returncode == 0, rebooted.stdout[-6000:] + rebooted.stderr[-3000:]
    # Slurm holds node01's reboot while its job runs (ASAP also drains it meanwhile).
    assert "JobState=RUNNING" in cluster.run("ctl01", "scontrol", "show", "job", job)
    assert "REBOOT_REQUESTED" in cluster.record("node01").fields["State"]
    # node02 came back before bring-up went on: the flag is gone, slurmd up after the driver.
    assert cluster.run("node02", "sh", "-c", "test -e /run/reboot-required || echo gone") == (
        "gone\n"
    )
    cluster.wait(
        "node02 rebooted by bring-up and IDLE",
        lambda: _slurmd_back(cluster, "node02", started["node02"]),
        60,
    )
    # node01: the job ran to its end, then Slurm rebooted the node and resumed it.
    took = cluster.wait(
        "node01 rebooted by Slurm and resumed",
        lambda: _slurmd_back(cluster, "node01", started["node01"]),
        45 + 120,
    )
    shown = cluster.run("ctl01", "scontrol", "show", "job", job)
    assert "JobState=COMPLETED" in shown, shown
    assert cluster.run("node01", "sh", "-c", "test -e /run/reboot-required || echo gone") == (
        "gone\n"
    )
    assert sorted(cluster.run("ctl01", "timeout", "60", "srun", "-N2", "hostname").split()) == [
        "node01",
        "node02",
    ]
    print(
        f"node02 back {recovered:.0f} s after its driver loaded; node01 rebooted by Slurm "
        f"and resumed {took:.0f} s after bring-up"
    )


def remedy_pass(cluster: Cluster, *args: str) -> tuple[int, dict[str, Any]]:
    """One `myriad remedy --json` pass: its exit status and its document."""
    done = myriad("remedy", str(cluster.spec), "--json", *args, state=cluster.state, timeout=600)
    assert done.returncode in (0, 1), done.stdout[-4000:] + done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, result


def sleeping_job(cluster: Cluster, node: str, seconds: int, *, running: bool = True) -> str:
    """A batch job that sleeps `seconds` on `node`: its id, once it runs (`running`)."""
    job = cluster.run(
        "ctl01", "sbatch", "--parsable", "-w", node, "-o", "/dev/null", "--wrap", f"sleep {seconds}"
    ).strip()
    if running:
        cluster.wait(
            f"the job running on {node}",
            lambda: "JobState=RUNNING" in cluster.run("ctl01", "scontrol", "show", "job", job),
            30,
        )
    return job


def action_log(cluster: Cluster) -> list[tuple[str, str, str]]:
    path = cluster.state / cluster.name / "remediation-log.json"
    if not path.exists():
        return []
    return [(r["node"], r["action"], r["result"]) for r in json.loads(path.read_text())["records"]]


@pytest.mark.docker
@pytest.mark.slow
def test_remedy_reboots_a_failed_node_then_sends_it_for_repair(cluster: Cluster) -> None:
    """Issue #29 on the twin: fault → action → back in service, then escalation and the hook.

    Real: the health runner's drain, `myriad remedy`'s decisions and their execution through
    Slurm (`scontrol reboot ASAP nextstate=RESUME`, the role's RebootProgram restarting the
    container), the action log, the hook. Stand-ins: the GPU's fault is the stub nvidia-smi
    reporting 7 of 8 GPUs from /run (gone at the reboot, as a GPU that fell off the bus comes
    back), and the twin has no BMC."""
    for node in ("node01", "node02"):
        if cluster.record(node).drained:
            cluster.run("ctl01", "scontrol", "update", f"NodeName={node}", "State=RESUME")
        cluster.wait(f"{node} idle", lambda n=node: cluster.slurm(n) == (False, ""), 60)
    node01_started = cluster.record("node01").fields["SlurmdStartTime"]
    job = sleeping_job(cluster, "node01", 60)

    def fail_a_gpu() -> None:
        cluster.run("node02", "mkdir", "-p", os.path.dirname(FAULT_XML))
        cluster.write("node02", FAULT_XML, gpu_xml(7, DRIVER_580))
        cluster.wait(
            "node02 drained for a missing GPU",
            lambda: (
                cluster.slurm("node02") == (True, "myriad-health: gpu.count expected 8, found 7")
            ),
            3 * INTERVAL_S,
        )

    fail_a_gpu()
    dry = remedy_pass(cluster, "--dry-run")[1]
    (decision,) = [d for d in dry["plan"]["decisions"] if d["node"] == "node02"]
    assert (decision["status"], decision["action"]) == ("act", "reboot"), decision
    assert action_log(cluster) == []  # a dry run records nothing
    before = cluster.record("node02").fields["SlurmdStartTime"]
    acted = remedy_pass(cluster)[1]
    assert [(o["node"], o["action"], o["status"]) for o in acted["outcomes"]] == [
        ("node02", "reboot", "done")
    ]
    # Slurm reboots node02 (no job there) and resumes it when slurmd registers; the fault was
    # in /run, gone with the reboot.
    took = cluster.wait(
        "node02 rebooted and back in service",
        lambda: _slurmd_back(cluster, "node02", before),
        180,
    )
    settled = remedy_pass(cluster)[1]
    assert [(r["node"], r["action"], r["result"]) for r in settled["settled"]] == [
        ("node02", "reboot", "succeeded")
    ]
    assert action_log(cluster) == [
        ("node02", "reboot", "started"),
        ("node02", "reboot", "succeeded"),
    ]

    # The same fault again within the escalation window: not another reboot, the next step
    # up for a node that answers, needs-hardware. It stays drained and the hook hears of it.
    fail_a_gpu()
    escalated = remedy_pass(cluster)[1]
    assert [(o["node"], o["action"], o["status"]) for o in escalated["outcomes"]] == [
        ("node02", "needs-hardware", "done")
    ], escalated["outcomes"]
    (payload,) = [
        json.loads(line)
        for line in (cluster.state / HOOK_PAYLOADS).read_text().splitlines()
        if line.strip()
    ]
    assert (payload["format"], payload["node"], payload["action"]) == (
        "myriad.remediation.hook/v1",
        "node02",
        "needs-hardware",
    )
    # What was tried before: the reboot, started and then back.
    assert [(r["action"], r["result"]) for r in payload["history"]][:2] == [
        ("reboot", "started"),
        ("reboot", "succeeded"),
    ]
    drained, reason = cluster.slurm("node02")
    assert drained and reason.startswith("myriad-remedy: "), reason
    # Back only once it is tested again: a plain resume tests it, its GPU still missing, and
    # is refused; node02 stays held for repair.
    refused = myriad("resume", str(cluster.spec), "node02", state=cluster.state, timeout=600)
    assert refused.returncode != 0, refused.stdout + refused.stderr
    assert "back from repair but failed its test again: node02" in refused.stderr, refused.stderr
    drained, reason = cluster.slurm("node02")
    assert drained and reason.startswith("myriad-remedy: "), reason

    # The job on node01 ran to its end, and node01 was never rebooted nor had a GPU reset.
    cluster.wait(
        "the job on node01 done",
        lambda: "JobState=COMPLETED" in cluster.run("ctl01", "scontrol", "show", "job", job),
        90,
    )
    assert cluster.record("node01").fields["SlurmdStartTime"] == node01_started
    assert "-r" not in cluster.run("node01", "sh", "-c", f"cat {TEST_DIR}/nvidia-smi.calls || true")
    print(f"node02: reboot decided, done and back in {took:.0f} s; then escalated")

    # The GPU "replaced": `myriad resume` returns node02 only through a quick acceptance of
    # it alone, through Slurm (DCGM and NVLink; the stand-ins print real captures).
    cluster.run("node02", "rm", "-f", FAULT_XML)
    loaded = load_spec(cluster.spec)
    figures = profile_figures("h100", loaded.spec.profiles["h100"], loaded.catalog)
    assert figures.nvlink is not None and figures.rdma_port is not None
    install_accept_standins(cluster, "node02", figures.nvlink.gbs, figures.rdma_port.gbs)
    back = myriad("resume", str(cluster.spec), "node02", state=cluster.state, timeout=600)
    assert back.returncode == 0, back.stdout[-3000:] + back.stderr[-3000:]
    assert back.stdout.startswith("node02: resumed (was "), back.stdout
    assert back.stdout.index("myriad-remedy: ") == len("node02: resumed (was ") + 1, back.stdout
    cluster.wait("node02 back in service", lambda: cluster.slurm("node02") == (False, ""), 60)
    runs = [json.loads(p.read_text()) for p in cluster.state.glob("*/runs/*-accept/accept.json")]
    assert [(r["nodes"], r["finished"]) for r in runs] == [(["node02"], True)] * 2
    # Both returns, the refused one and this, are in the action log, by the person.
    (log,) = cluster.state.glob("*/remediation-log.json")
    returns = [r for r in json.loads(log.read_text())["records"] if r["action"] == "resume"]
    assert [(r["node"], r["result"], r["by"] != "myriad-remedy") for r in returns] == [
        ("node02", "failed", True),
        ("node02", "succeeded", True),
    ]


ACCEPT_DIR = "/etc/myriad-twin/accept"
ACCEPT_TOOLS = ("dcgmi", "all_reduce_perf", "ib_write_bw")


def install_accept_standins(
    cluster: Cluster, node: str, nvlink_gbs: float, rdma_gbs: float
) -> None:
    """The acceptance tools on `node`, each printing a real capture with this node's figures
    (tests/accept_stubs.py): DCGM's level-1 document, all_reduce_perf at `nvlink_gbs` busbw,
    ib_write_bw at `rdma_gbs` GB/s."""
    cluster.run(node, "mkdir", "-p", ACCEPT_DIR)
    outputs = {
        "dcgmi": dcgm_output(),
        "all_reduce_perf": nccl_output(nvlink_gbs),
        "ib_write_bw": ib_write_bw_output(rdma_gbs * 8),
    }
    for tool in ACCEPT_TOOLS:
        cluster.write(node, f"{ACCEPT_DIR}/{tool}.out", outputs[tool])
        cluster.write(
            node, f"/usr/local/bin/{tool}", standin_script(tool, f"{ACCEPT_DIR}/{tool}.out")
        )
        cluster.run(node, "chmod", "755", f"/usr/local/bin/{tool}")


@pytest.mark.docker
@pytest.mark.slow
def test_accept_finds_the_slow_node_through_slurm_drains_and_readmits_it(cluster: Cluster) -> None:
    """Issue #28 on the twin: `myriad accept --level quick` through the cluster's own Slurm.

    Real: the reservation, the job steps (srun with the nodes' GRES), the run record, the
    parsers reading each step's output, the drain with its figures and the re-test of drained
    nodes. Stand-ins: dcgmi, all_reduce_perf and ib_write_bw print real captures (tests/samples
    rows 28-31) with figures this test chose; node02's NVLink all_reduce at half its figure.
    The trays have no compute NICs, so no place in the fabric to test: `--limit` leaves them
    out, as an operator would (accept refuses them by name otherwise)."""
    loaded = load_spec(cluster.spec)
    figures = profile_figures("h100", loaded.spec.profiles["h100"], loaded.catalog)
    assert figures.nvlink is not None and figures.rdma_port is not None
    nvlink, rdma = figures.nvlink.gbs, figures.rdma_port.gbs
    for node in ("node01", "node02"):
        if cluster.record(node).drained:
            cluster.run("ctl01", "scontrol", "update", f"NodeName={node}", "State=RESUME")
        install_accept_standins(cluster, node, nvlink if node == "node01" else nvlink / 2, rdma)
    cluster.wait(
        "both nodes idle",
        lambda: all(cluster.slurm(n) == (False, "") for n in ("node01", "node02")),
        60,
    )
    junit = cluster.state / "accept.xml"
    run = myriad(
        "accept", str(cluster.spec), "--level", "quick", "--limit", "node01,node02",
        "--json", "--junit", str(junit), state=cluster.state, timeout=900,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout[-4000:] + run.stderr[-3000:]
    drained, reason = cluster.slurm("node02")
    assert drained and reason.startswith("myriad-accept: nccl all_reduce, one node"), reason
    assert f"{nvlink / 2:.1f} GB/s" in reason and f"{nvlink:.1f} GB/s" in reason, reason
    assert cluster.slurm("node01") == (False, "")
    assert junit.read_text().count("<failure") == 1
    assert "ReservationName=" not in cluster.run("ctl01", "scontrol", "show", "reservation")

    # Repaired: its figure back. Tested again, it passes and returns to service.
    install_accept_standins(cluster, "node02", nvlink, rdma)
    again = myriad(
        "accept", str(cluster.spec), "--level", "quick", "--nodes-from", "drained", "--json",
        state=cluster.state, timeout=900,
    )  # fmt: skip
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-3000:]
    cluster.wait("node02 back in service", lambda: cluster.slurm("node02") == (False, ""), 60)


def hook_heard(cluster: Cluster) -> str:
    path = cluster.state / HOOK_PAYLOADS
    return path.read_text() if path.exists() else ""


def remedy_metrics(cluster: Cluster) -> str:
    return (cluster.state / cluster.name / "remediation.prom").read_text()


@pytest.mark.docker
@pytest.mark.slow
def test_the_breaker_stops_remediation_when_both_nodes_fail_together(cluster: Cluster) -> None:
    """Issue #29 on the twin: more nodes failing together than health.remediation.breaker_nodes
    (2 here) stop every automatic action, and the pass says why; a job runs on to its end.

    Real: node health's drains, `myriad remedy`'s gathering, decision and metrics, Slurm.
    Stand-in: both nodes' nvidia-smi report 7 of 8 GPUs from /run (the first test's fault)."""
    for node in ("node01", "node02"):
        if cluster.record(node).drained:
            cluster.run("ctl01", "scontrol", "update", f"NodeName={node}", "State=RESUME")
        cluster.wait(f"{node} idle", lambda n=node: cluster.slurm(n) == (False, ""), 60)
    started = {n: cluster.record(n).fields["SlurmdStartTime"] for n in ("node01", "node02")}
    logged, heard = action_log(cluster), hook_heard(cluster)
    job = sleeping_job(cluster, "node01", 45)
    try:
        _both_fail_and_the_breaker_holds(cluster, logged, heard)
    finally:
        for node in ("node01", "node02"):
            cluster.run(node, "rm", "-f", FAULT_XML)

    # The fault cleared on both: node health resumes them, unrebooted; the job ran to its end.
    for node in ("node01", "node02"):
        cluster.wait(
            f"{node} resumed", lambda n=node: cluster.slurm(n) == (False, ""), 3 * INTERVAL_S
        )
    cluster.wait(
        "the job on node01 done",
        lambda: "JobState=COMPLETED" in cluster.run("ctl01", "scontrol", "show", "job", job),
        60,
    )
    assert {n: cluster.record(n).fields["SlurmdStartTime"] for n in started} == started
    status, result = remedy_pass(cluster)
    assert status == 0 and not result["plan"]["breaker"]["tripped"], result["plan"]
    assert "myriad_remediation_breaker_tripped 0\n" in remedy_metrics(cluster)


def _both_fail_and_the_breaker_holds(
    cluster: Cluster, logged: list[tuple[str, str, str]], heard: str
) -> None:
    reason = "myriad-health: gpu.count expected 8, found 7"
    for node in ("node01", "node02"):
        cluster.run(node, "mkdir", "-p", os.path.dirname(FAULT_XML))
        cluster.write(node, FAULT_XML, gpu_xml(7, DRIVER_580))
    for node in ("node01", "node02"):
        cluster.wait(
            f"{node} drained for a missing GPU",
            lambda n=node: cluster.slurm(n) == (True, reason),
            3 * INTERVAL_S,
        )

    status, result = remedy_pass(cluster)
    assert status == 1  # a person should look
    breaker = result["plan"]["breaker"]
    assert (breaker["tripped"], breaker["failing"], breaker["threshold"]) == (True, 2, 2)
    assert breaker["reason"].startswith(
        "2 nodes began failing within 900 s (health.remediation.breaker_nodes 2): a fault "
        "shared by many nodes"
    ), breaker["reason"]
    decisions = {d["node"]: d for d in result["plan"]["decisions"]}
    # node02 would be rebooted, or sent for repair again when the earlier test's repair is in
    # its log (that repair is over), but the breaker holds it; node01 waits for its job
    # first, and nothing acts on it either.
    repaired = ("node02", "needs-hardware", "succeeded") in logged
    assert (decisions["node02"]["action"], decisions["node02"]["status"]) == (
        "needs-hardware" if repaired else "reboot",
        "held",
    )
    assert decisions["node02"]["reason"] == f"breaker: {breaker['reason']}"
    assert decisions["node01"]["status"] == "wait", decisions["node01"]
    assert "1 job(s) still running" in decisions["node01"]["reason"]
    assert result["outcomes"] == []
    assert action_log(cluster) == logged  # nothing done, so nothing recorded
    metrics = remedy_metrics(cluster)
    assert "myriad_remediation_breaker_tripped 1\n" in metrics
    assert "myriad_remediation_breaker_failing 2\n" in metrics
    assert hook_heard(cluster) == heard  # no ticket opened
    assert result["plan"]["racks"] == []  # one node a rack: no rack fault, the breaker


def set_drain_checks(cluster: Cluster, node: str, checks: list[str]) -> None:
    document = json.loads(cluster.run(node, "cat", "/etc/myriad-health/node.json"))
    document["policy"]["drain"] = checks
    cluster.write(node, "/etc/myriad-health/node.json", json.dumps(document))


@pytest.mark.docker
@pytest.mark.slow
def test_remedy_resets_the_gpus_of_a_drained_node_only_once_no_process_holds_them(
    cluster: Cluster,
) -> None:
    """Issue #29 on the twin: a finding whose action is a GPU reset (gpu.ecc: ECC off until
    the next reset) → node health drains → `myriad remedy` waits while a process holds a GPU
    → resets (`nvidia-smi -r`) once none does → node health resumes the node.

    Real: node health's drain and resume, `myriad remedy`'s decision, its checks right
    before the reset and the command on the node, the action log, Slurm. Stand-in: nvidia-smi
    (tests/health_stubs.py), whose -r refuses while a process is listed, as the real one
    does, and clears the pending-ECC fault; the "process" is a pid in a file."""
    for node in ("node01", "node02"):
        if cluster.record(node).drained:
            cluster.run("ctl01", "scontrol", "update", f"NodeName={node}", "State=RESUME")
        cluster.wait(f"{node} idle", lambda n=node: cluster.slurm(n) == (False, ""), 60)
    node01_started = cluster.record("node01").fields["SlurmdStartTime"]
    calls = f"{TEST_DIR}/nvidia-smi.calls"
    cluster.run("node01", "rm", "-f", calls)
    drain = json.loads(cluster.run("node01", "cat", "/etc/myriad-health/node.json"))["policy"][
        "drain"
    ]
    set_drain_checks(cluster, "node01", [*drain, "gpu.ecc"])
    job = sleeping_job(cluster, "node02", 30, running=False)
    try:
        # A process holds the GPUs (another client: no Slurm job), and GPU 3's ECC is off
        # until the next reset.
        cluster.run("node01", "mkdir", "-p", os.path.dirname(FAULT_XML))
        cluster.write("node01", GPU_PROCESSES, "4242\n")
        cluster.write("node01", FAULT_XML, ecc_off_xml(8, 3, DRIVER_580))
        cluster.wait(
            "node01 drained for ECC",
            lambda: (
                cluster.slurm("node01")[0]
                and cluster.slurm("node01")[1].startswith("myriad-health: gpu.ecc ")
                and cluster.slurm("node01")[1].endswith("GPU 3 ECC off, on after reset")
            ),
            3 * INTERVAL_S,
        )
        logged = action_log(cluster)

        _, waiting = remedy_pass(cluster)
        (decision,) = [d for d in waiting["plan"]["decisions"] if d["node"] == "node01"]
        assert (decision["action"], decision["status"]) == ("reset-gpu", "wait"), decision
        assert decision["reason"].startswith(
            "GPU processes 1 running: a GPU reset needs none; gpu.ecc"
        ), decision["reason"]
        assert waiting["outcomes"] == []
        assert "-r" not in cluster.run("node01", "cat", calls).splitlines()

        # The process ends: the reset runs, and clears the fault.
        cluster.run("node01", "rm", GPU_PROCESSES)
        _, reset = remedy_pass(cluster)
        assert [(o["node"], o["action"], o["status"]) for o in reset["outcomes"]] == [
            ("node01", "reset-gpu", "done")
        ], reset["outcomes"]
        (outcome,) = reset["outcomes"]
        # The stand-in prints one line a GPU; the last is GPU 7's, bus 0x18 + 7 = 0x1F.
        assert (outcome["record"]["result"], outcome["record"]["detail"]) == (
            "succeeded",
            "nvidia-smi -r: GPU 00000000:1F:00.0 was successfully reset.",
        )
        # Checked right before: its GPUs' processes, then the reset.
        assert cluster.run("node01", "cat", calls).splitlines()[-2:] == [
            "--query-compute-apps=pid --format=csv,noheader",
            "-r",
        ]
        assert action_log(cluster) == [*logged, ("node01", "reset-gpu", "succeeded")]
        took = cluster.wait(
            "node01 resumed by node health after the reset",
            lambda: cluster.slurm("node01") == (False, ""),
            3 * INTERVAL_S,
        )
        assert cluster.record("node01").fields["SlurmdStartTime"] == node01_started  # no reboot
        cluster.wait(
            "the job on node02 done",
            lambda: "JobState=COMPLETED" in cluster.run("ctl01", "scontrol", "show", "job", job),
            60,
        )
        assert "-r" not in cluster.run("node02", "sh", "-c", f"cat {calls} || true").splitlines()
        print(f"node01: GPU reset, back in service {took:.0f} s later")
    finally:
        cluster.run("node01", "rm", "-f", GPU_PROCESSES, FAULT_XML)
        set_drain_checks(cluster, "node01", drain)
