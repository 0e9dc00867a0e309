"""Checks: facts (in the gatherer's format, with real captures where they exist) against
expectations, giving pass / fail / not-applicable / error with the node, the check, the
expected and actual values, the spec field and the fix."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import pytest
import yaml

from health_stubs import GB200_CLIQUE, GB200_CLUSTER, fabric_xml
from myriad.node.checks import CheckResult, ClusterExpectations, NodeExpectations, evaluate
from myriad.node.checks.nccl import SOCKET_PLACEHOLDER
from myriad.node.facts import HOSTS_BEGIN, HOSTS_END, NodeFacts, node_facts
from myriad.node.gather import DEFAULT_UNITS
from myriad.plan.pipeline import PlanResult, plan_loaded
from myriad.render.inventory import Inventory, build_inventory
from myriad.spec import load_spec_text
from myriad.validate.expectations import expect, load_role_defaults

from spec_builder import ROOT, cluster, gpu_profile, load_example

NVIDIA_XML = "nvidia-smi-q-x/a100-sxm4-80gb-x4-mig_v12_drv535.54.03.xml"
NVLINK = "nvidia-smi-nvlink/a100-sxm4-80gb-x8_nvlink-status.txt"
IBSTAT = "ibstat/h100-node_cx7-mt4129-ndr400-ib_all-active.txt"
MLNX_QOS = "mlnx_qos/connectx-mlx5_2_eth4_trust-dscp_pfc-prio3.txt"
BOND = "proc-net-bonding/bond0_802.3ad-lacp-fast_layer3+4_one-slave-down_lacp-pdu-details.txt"


def probe(stdout: str = "", rc: int | None = 0, **flags: Any) -> dict[str, Any]:
    return {
        "rc": rc,
        "stdout": stdout,
        "stderr": flags.get("stderr", ""),
        "missing": flags.get("missing", False),
        "timed_out": flags.get("timed_out", False),
    }


def missing(tool: str) -> dict[str, Any]:
    return probe(rc=None, missing=True, stderr=f"{tool}: command not found")


def units(active: set[str]) -> dict[str, Any]:
    states = ["active" if unit in active else "inactive" for unit in DEFAULT_UNITS]
    return probe("\n".join(states) + "\n", rc=0 if len(active) == len(DEFAULT_UNITS) else 3)


def files(contents: Mapping[str, str]) -> dict[str, Any]:
    return probe(json.dumps(dict(contents)))


LIMITS = {
    "/etc/security/limits.d/90-myriad.conf": "*  -  memlock  unlimited\nroot - memlock unlimited\n"
}
INIT_CAPPED = (
    "Limit                     Soft Limit           Hard Limit           Units     \n"
    "Max locked memory         8388608              8388608              bytes     \n"
)


KEY_SHA = "5" * 64
CONF_SHA = "c" * 64
SLURM_CONF_FILES = ("slurm.conf", "gres.conf", "cgroup.conf", "topology.conf")


def slurm_files(
    key: str | None = KEY_SHA,
    *,
    mode: str = "0400",
    owner: str = "munge",
    conf: str = CONF_SHA,
    without: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The gatherer's digests of the munge key and the Slurm files (never their content)."""
    record: dict[str, Any] = {
        "/etc/munge/munge.key": None
        if key is None
        else {"sha256": key, "mode": mode, "owner": owner, "group": owner}
    }
    for name in SLURM_CONF_FILES:
        record[f"/etc/slurm/{name}"] = (
            None
            if name in without
            else {"sha256": conf, "mode": "0644", "owner": "root", "group": "root"}
        )
    return probe(json.dumps(record))


def document(probes: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "schema": 1,
        "args": {"units": list(DEFAULT_UNITS)},
        "seconds": 0.5,
        "probes": dict(probes),
    }


class Cluster:
    """A planned example (or built) spec with its inventory and expectations."""

    def __init__(
        self, result: PlanResult, images: Mapping[str, Mapping[str, str]] | None = None
    ) -> None:
        assert result.plan is not None
        self.result = result
        self.inventory: Inventory = build_inventory(
            result.loaded.spec, result.loaded.catalog, result.plan, images=images
        )
        self.expectations: ClusterExpectations = expect(
            result.loaded.spec,
            result.loaded.catalog,
            result.plan,
            self.inventory,
            load_role_defaults(),
        )

    def expected(self, node: str, check: str) -> Any:
        return next(
            e.expected for e in self.expectations.node(node).expectations if e.check == check
        )

    def base_probes(self, node: str) -> dict[str, Any]:
        """What a correctly brought-up node of this cluster reports (tools it lacks: missing)."""
        exps = {e.check: e for e in self.expectations.node(node).expectations}
        block = exps["hosts.file"].expected["text"]
        hosts = f"127.0.0.1 localhost\n{HOSTS_BEGIN}\n{block}\n{HOSTS_END}\n"
        active = {"chrony", "munge", "docker", "containerd", "kubelet", "nvidia-persistenced"}
        active |= {"slurmd"} if exps["slurm.slurmd"].applies else set()
        active |= {"slurmctld"} if exps["slurm.slurmctld"].applies else set()
        active |= {"nvidia-fabricmanager"} if exps["gpu.fabricmanager"].applies else set()
        probes = {
            "hostname": probe(node + "\n"),
            "hosts": probe(hosts),
            "units": units(active),
            "limits": files(LIMITS),
            "memlock_session": probe("unlimited\nunlimited\n"),
            "init_limits": probe(INIT_CAPPED),
            "chrony_tracking": probe(
                "Reference ID    : 0A000001 (ctl01)\nLeap status     : Normal\n"
            ),
            "modules": probe("nvidia_peermem 16384 0 - Live 0x0\n"),
            "nvidia_smi": missing("nvidia-smi"),
            "nvlink": missing("nvidia-smi"),
            "ibstat": missing("ibstat"),
            "sysfs_infiniband": missing("/sys/class/infiniband"),
            "pci": files({}),
            "bonding": missing("/proc/net/bonding"),
            "ip_link": probe("[]"),
            "docker_info": missing("docker"),
            "docker_daemon_json": missing("/etc/docker/daemon.json"),
            "containerd_config": missing("containerd"),
            "timedatectl": probe("NTPSynchronized=yes\n"),
            "slurm_files": slurm_files(),
        }
        if exps["roce.trust"].applies:
            # The gatherer is asked for every RoCE NIC; without mlnx-tools each is missing.
            for netdev in exps["roce.trust"].expected["names"]:
                probes[f"mlnx_qos:{netdev}"] = missing("mlnx_qos")
        if exps["nccl.conf"].applies:
            # As the nccl role writes it: the node's management interface by name.
            conf = exps["nccl.conf"].expected.replace(SOCKET_PLACEHOLDER, "=eth0")
            probes["nccl_conf"] = probe(conf)
        else:
            probes["nccl_conf"] = missing("/etc/nccl.conf")
        return probes

    def facts(self, probes_of: Mapping[str, Mapping[str, Any]]) -> dict[str, NodeFacts]:
        return {node: node_facts(node, document(p)) for node, p in probes_of.items()}

    def run(
        self,
        changes: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        unreachable: Mapping[str, str] | None = None,
        gather_failed: Mapping[str, str] | None = None,
    ) -> list[CheckResult]:
        probes_of = {}
        # Big examples: the nodes a test talks about, the controllers and a few more.
        wanted = {*(changes or {}), *self.expectations.controllers}
        per_pool: dict[str, int] = {}
        for node in self.expectations.nodes:
            per_pool[node.pool] = per_pool.get(node.pool, 0) + 1
            if per_pool[node.pool] <= 3:
                wanted.add(node.node)
        for node in self.expectations.nodes:
            if node.node in (unreachable or {}) or node.node in (gather_failed or {}):
                continue
            if node.node not in wanted:
                continue
            probes_of[node.node] = {
                **self.base_probes(node.node),
                **(changes or {}).get(node.node, {}),
            }
        return evaluate(self.expectations, self.facts(probes_of), unreachable or {}, gather_failed)


def by_key(results: list[CheckResult]) -> dict[tuple[str, str], CheckResult]:
    return {(r.node, r.check): r for r in results}


def problems(results: list[CheckResult]) -> set[tuple[str, str, str]]:
    return {(r.node, r.check, r.status) for r in results if r.status in ("fail", "error")}


# --- the local cluster: what `myriad up` brings up ------------------------------------------


def scontrol_line(name: str, state: str, gres: str = "(null)", reason: str = "") -> str:
    """One `scontrol show node -o` record in Slurm 23.11's key order."""
    line = (
        f"NodeName={name} Arch=x86_64 CoresPerSocket=2 CPUAlloc=0 CPUEfctv=2 CPUTot=2 "
        f"CPULoad=0.01 AvailableFeatures=(null) ActiveFeatures=(null) Gres={gres} "
        f"NodeAddr={name} NodeHostName={name} Version=22.05.8 OS=Linux 6.1.0 #1 SMP "
        f"RealMemory=1945 AllocMem=0 FreeMem=1500 Sockets=1 Boards=1 State={state} "
        "ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=node "
        "BootTime=2025-01-01T00:00:00 SlurmdStartTime=2025-01-01T00:00:00 "
        "LastBusyTime=2025-01-01T00:00:00 ResumeAfterTime=None CfgTRES=cpu=2,mem=1945M "
        "AllocTRES= CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/a "
        "ExtSensorsWatts=0 ExtSensorsTemp=n/a"
    )
    return line + (f" Reason={reason}" if reason else "") + "\n"


def local_controller_view(local: Cluster, *, drained: str = "") -> dict[str, Any]:
    reason = "bad dimm [root@2025-01-01T00:00:00]" if drained else ""
    lines = [
        scontrol_line("node01", "IDLE"),
        scontrol_line("node02", "IDLE" + drained, reason=reason),
    ]
    lines += [scontrol_line("node03", "IDLE"), scontrol_line("ctl01", "IDLE")]
    switch = local.expected("node01", "slurm.topology")
    return {
        "scontrol_nodes": probe("".join(lines)),
        "scontrol_topology": probe(f"SwitchName={switch} Level=0 LinkSpeed=1 Nodes=node[01-03]\n"),
    }


@pytest.fixture(scope="module")
def local() -> Cluster:
    return Cluster(plan_loaded(load_example("local")))


def test_a_correctly_brought_up_local_cluster_passes(local: Cluster) -> None:
    results = local.run({"ctl01": local_controller_view(local)})
    assert problems(results) == set()
    statuses = {(r.node, r.check): r.status for r in results}
    assert statuses[("node01", "slurm.node-state")] == "pass"
    assert statuses[("node01", "slurm.topology")] == "pass"
    assert statuses[("node01", "nccl.conf")] == "pass"
    assert statuses[("node01", "gpu.count")] == "not-applicable"
    na = by_key(results)[("node01", "gpu.count")]
    assert na.actual == "profile container has no GPUs" and na.expected == "" and na.fix == ""
    # docker caps the container's memlock at 8 MiB: not the node's fault, said as such.
    capped = local.run(
        {
            n: {"memlock_session": probe("8192\n8192\n")}
            for n in ("ctl01", "node01", "node02", "node03")
        }
        | {"ctl01": {**local_controller_view(local), "memlock_session": probe("8192\n8192\n")}}
    )
    session = by_key(capped)[("node01", "limits.memlock-session")]
    assert session.status == "not-applicable"
    assert "container engine's ceiling" in session.actual


def test_drift_names_the_node_the_check_and_expected_against_actual(local: Cluster) -> None:
    conf = (
        str(local.expected("node02", "nccl.conf"))
        .replace("NCCL_IB_DISABLE=1", "NCCL_IB_DISABLE=0")
        .replace(SOCKET_PLACEHOLDER, "=eth0")
    )
    results = local.run(
        {
            "ctl01": local_controller_view(local, drained="+DRAIN"),
            "node02": {"nccl_conf": probe(conf + "NCCL_DEBUG=INFO\n")},
            "node03": {"units": units({"chrony", "docker"})},
        }
    )
    assert problems(results) == {
        ("node02", "nccl.conf", "fail"),
        ("node02", "slurm.node-state", "fail"),
        ("node03", "slurm.munge", "fail"),
        ("node03", "slurm.slurmd", "fail"),
    }
    found = by_key(results)
    nccl = found[("node02", "nccl.conf")]
    assert (
        nccl.expected == f"2 settings: NCCL_IB_DISABLE=1, NCCL_SOCKET_IFNAME={SOCKET_PLACEHOLDER}"
    )
    assert nccl.actual == "NCCL_IB_DISABLE=0 (expected 1), NCCL_DEBUG=INFO not expected"
    assert "-NCCL_IB_DISABLE=1\n+NCCL_IB_DISABLE=0\n" in nccl.detail
    assert nccl.fix == "re-run the nccl role: myriad bringup --tags nccl --limit node02"
    assert "software.nccl" in nccl.spec_field
    state = found[("node02", "slurm.node-state")]
    assert state.actual.startswith("IDLE+DRAIN (Reason=bad dimm")
    assert "scontrol update nodename=node02 state=resume" in state.fix
    slurmd = found[("node03", "slurm.slurmd")]
    assert (slurmd.expected, slurmd.actual) == ("slurmd active", "slurmd inactive")
    assert slurmd.spec_field == "software.orchestrator"


def test_a_node_missing_from_slurm_or_under_another_switch_fails(local: Cluster) -> None:
    view = local_controller_view(local)
    view["scontrol_nodes"] = probe(
        view["scontrol_nodes"]["stdout"].replace("NodeName=node03", "NodeName=node99")
    )
    view["scontrol_topology"] = probe(
        "SwitchName=leafA Level=0 LinkSpeed=1 Nodes=node[01-02]\n"
        "SwitchName=leafB Level=0 LinkSpeed=1 Nodes=node03\n"
    )
    found = by_key(local.run({"ctl01": view}))
    assert (
        found[("node03", "slurm.node-state")].actual == "node03 unknown to Slurm (controller ctl01)"
    )
    assert found[("node01", "slurm.topology")].actual == "leafA"
    assert found[("node01", "slurm.topology")].expected == "under switch is00-su01"
    assert found[("node03", "slurm.topology")].actual == "leafB"


def test_sinfo_answers_when_scontrol_output_cannot_be_read(local: Cluster) -> None:
    view = local_controller_view(local)
    view["scontrol_nodes"] = probe("NodeName=node01 Arch=x86_64 CPUTot=")
    view["sinfo"] = probe("node01 idle (null)\nnode02 drained (null)\nnode03 down* (null)\n")
    found = by_key(local.run({"ctl01": view}))
    assert found[("node01", "slurm.node-state")].status == "pass"
    assert found[("node02", "slurm.node-state")].actual == "IDLE+DRAIN"
    assert found[("node03", "slurm.node-state")].actual == "DOWN*"


def test_an_unreachable_node_fails_and_an_unreachable_controller_makes_slurm_checks_errors(
    local: Cluster,
) -> None:
    results = local.run(unreachable={"ctl01": "Failed to create temporary directory"})
    found = by_key(results)
    reach = found[("ctl01", "node.reachable")]
    assert reach.status == "fail" and reach.actual.startswith("unreachable: Failed to create")
    assert [r.check for r in results if r.node == "ctl01"] == ["node.reachable"]
    state = found[("node01", "slurm.node-state")]
    assert state.status == "error"
    assert "ctl01 unreachable" in state.actual
    failed = local.run(
        {"ctl01": local_controller_view(local)}, gather_failed={"node03": "python3: not found"}
    )
    assert by_key(failed)[("node03", "node.reachable")].status == "error"


def test_missing_tools_fail_unreadable_output_and_timeouts_are_errors(local: Cluster) -> None:
    found = by_key(
        local.run(
            {
                "ctl01": local_controller_view(local),
                "node01": {"units": missing("systemctl"), "limits": probe("{not json")},
                "node02": {"hosts": probe(rc=None, timed_out=True), "nccl_conf": missing("nccl")},
                "node03": {"memlock_session": probe("Password: \n")},
            }
        )
    )
    assert found[("node01", "time.sync")].status == "fail"
    assert found[("node01", "time.sync")].actual == "systemctl: command not found"
    assert found[("node01", "limits.memlock")].status == "error"
    assert found[("node01", "limits.memlock")].actual.startswith("could not read limits.d output")
    assert found[("node02", "hosts.file")].status == "error"
    assert found[("node02", "hosts.file")].actual == "/etc/hosts timed out"
    assert found[("node02", "nccl.conf")].actual == "/etc/nccl.conf does not exist"
    assert found[("node03", "limits.memlock-session")].status == "error"


def test_hosts_block_drift_and_hosts_listed_outside_the_block(local: Cluster) -> None:
    block = str(local.expected("node01", "hosts.file")["text"])
    stale = block.replace("172.31.77.13    node03", "172.31.77.99    node09")
    elsewhere = "127.0.0.1 localhost\n" + block + "\n"
    found = by_key(
        local.run(
            {
                "ctl01": local_controller_view(local),
                "node01": {"hosts": probe(f"{HOSTS_BEGIN}\n{stale}\n{HOSTS_END}\n")},
                "node02": {"hosts": probe(elsewhere)},
            }
        )
    )
    assert found[("node01", "hosts.file")].actual == (
        "missing 172.31.77.13 node03, not in the spec: 172.31.77.99 node09"
    )
    assert found[("node02", "hosts.file")].status == "pass"
    assert found[("node02", "hosts.file")].actual == (
        "all 4 hosts listed (no managed block: listed elsewhere)"
    )
    assert found[("node03", "hosts.file")].actual == "all 4 hosts in the managed block"


def test_limits_catch_a_later_file_that_lowers_memlock(local: Cluster) -> None:
    lowered = files({**LIMITS, "/etc/security/limits.d/99-site.conf": "*  hard  memlock  65536\n"})
    missing_root = files({"/etc/security/limits.d/90-myriad.conf": "* - memlock unlimited\n"})
    split = files(
        {
            "/etc/security/limits.conf": "* soft memlock unlimited\n* hard memlock unlimited\n",
            "/etc/security/limits.d/rdma.conf": "root soft memlock unlimited\n",
        }
    )
    found = by_key(
        local.run(
            {
                "ctl01": local_controller_view(local),
                "node01": {"limits": lowered},
                "node02": {"limits": missing_root},
                "node03": {"limits": split},
            }
        )
    )
    assert found[("node01", "limits.memlock")].actual == (
        "/etc/security/limits.d/99-site.conf: * hard memlock 65536"
    )
    assert found[("node02", "limits.memlock")].actual == "no memlock line for root"
    assert found[("node03", "limits.memlock")].actual == "no hard memlock line for root"


# --- GPU nodes with real captures ----------------------------------------------------------


def gpu_cluster(**profile: Any) -> Cluster:
    nics = {"compute": {"model": "ConnectX-7", "count": 8, **profile.pop("compute", {})}}
    spec = cluster(
        nodes=2,
        profile=gpu_profile(gpu="A100-SXM4-80GB", gpus=profile.pop("gpus", 1), nics=8, **profile)
        | {"nics": nics, "pcie": {"gen": 4, "switches": 4}, "nvswitch": 6},
    )
    return Cluster(plan_loaded(spec))


def test_a_gpu_node_read_from_real_captures(sample: Callable[[str], str]) -> None:
    gpus = gpu_cluster(compute={"devices": [f"mlx5_{i}" for i in (0, 1, 4, 5, 6, 7, 8, 9)]})
    node = "gpu01"
    captured = {
        "nvidia_smi": probe(sample(NVIDIA_XML)),
        "nvlink": probe(sample(NVLINK)),
        "ibstat": probe(sample(IBSTAT)),
    }
    found = by_key(gpus.run({node: captured}))
    assert found[(node, "gpu.count")].status == "pass"
    assert found[(node, "gpu.model")].actual == "NVIDIA A100-SXM4-80GB"
    assert found[(node, "gpu.model")].status == "pass"
    assert found[(node, "gpu.memory")].status == "pass"
    # The spec asks for branch 550; the capture's driver is 535.54.03.
    driver = found[(node, "gpu.driver")]
    assert (driver.status, driver.expected, driver.actual) == (
        "fail",
        "branch 550 (550.x)",
        "535.54.03",
    )
    assert driver.fix == (
        "install the spec's driver, then reboot; re-run the nvidia_driver role: "
        "myriad bringup --tags nvidia_driver --limit gpu01"
    )
    # The capture was taken with persistence mode off.
    assert found[(node, "gpu.persistence")].actual == "GPU 0 off"
    # The capture (MIG, in a VM) reports neither row remapping nor retired pages: unknown.
    health = found[(node, "gpu.health")]
    assert (health.status, health.actual) == (
        "error",
        "GPU 0: neither row remapping nor page retirement reported",
    )
    assert found[(node, "gpu.pcie")].status == "pass"
    assert found[(node, "gpu.nvlink")].status == "pass"
    assert found[(node, "gpu.nvlink")].actual == "12 links up on 8 GPUs"
    assert found[(node, "hca.present")].status == "pass"
    assert found[(node, "hca.state")].status == "pass"
    assert found[(node, "hca.rate")].actual == "400 Gb/s on 8"
    assert found[(node, "hca.link-layer")].status == "pass"
    # Open kernel modules: GPUDirect RDMA goes through DMA-BUF, no nvidia_peermem to expect.
    assert found[(node, "gpudirect.peermem")].status == "not-applicable"
    # Without /sys/class/infiniband the HCAs cannot be placed on the PCIe bus: never a pass.
    assert found[(node, "nic.pcie")].status == "fail"
    assert found[(node, "nic.pcie")].actual.startswith("/sys/class/infiniband")


def test_default_device_names_that_the_node_lacks_fail_by_name(
    sample: Callable[[str], str],
) -> None:
    gpus = gpu_cluster(gpus=8)
    found = by_key(
        gpus.run(
            {"gpu01": {"nvidia_smi": probe(sample(NVIDIA_XML)), "ibstat": probe(sample(IBSTAT))}}
        )
    )
    assert found[("gpu01", "hca.present")].actual == "mlx5_2 missing, mlx5_3 missing"
    assert found[("gpu01", "hca.state")].status == "fail"
    assert found[("gpu01", "gpu.count")].actual == "1"
    assert found[("gpu01", "gpu.count")].expected == "8"


def test_nvidia_smi_that_cannot_reach_the_driver_fails_every_gpu_check() -> None:
    gpus = gpu_cluster()
    broken = probe(
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", rc=9
    )
    found = by_key(gpus.run({"gpu01": {"nvidia_smi": broken}}))
    for check in ("gpu.count", "gpu.driver", "gpu.persistence"):
        assert found[("gpu01", check)].status == "fail"
        assert "exited 9: NVIDIA-SMI has failed" in found[("gpu01", check)].actual


def test_nic_pcie_links_come_from_sysfs() -> None:
    gpus = gpu_cluster(compute={"count": 2})
    sysfs = {
        "files": {
            f"mlx5_{i}/ports/1/{name}": value
            for i in (0, 1)
            for name, value in (
                ("state", "4: ACTIVE"),
                ("phys_state", "5: LinkUp"),
                ("rate", "400 Gb/sec (4X NDR)"),
                ("link_layer", "InfiniBand"),
            )
        },
        "devices": {
            "mlx5_0": {"pci": "0000:17:00.0", "netdevs": []},
            "mlx5_1": {"pci": "0000:3a:00.0", "netdevs": []},
        },
    }
    pci = {
        "0000:17:00.0": {
            "vendor": "0x15b3",
            "current_link_speed": "16.0 GT/s PCIe",
            "current_link_width": "16",
        },
        "0000:3a:00.0": {
            "vendor": "0x15b3",
            "current_link_speed": "8.0 GT/s PCIe",
            "current_link_width": "8",
        },
    }
    found = by_key(
        gpus.run(
            {"gpu01": {"sysfs_infiniband": probe(json.dumps(sysfs)), "pci": probe(json.dumps(pci))}}
        )
    )
    link = found[("gpu01", "nic.pcie")]
    assert (link.status, link.actual) == ("fail", "mlx5_1 Gen3 x8")
    assert link.expected == "mlx5_0 Gen4 x16, mlx5_1 Gen4 x16"
    assert found[("gpu01", "hca.state")].status == "pass"


# --- RoCE, bonds, storage, containers, Kubernetes -----------------------------------------


@pytest.fixture(scope="module")
def roce() -> Cluster:
    return Cluster(plan_loaded(load_example("roce-10k")))


def test_roce_qos_from_a_real_mlnx_qos_capture(roce: Cluster, sample: Callable[[str], str]) -> None:
    qos = {f"mlnx_qos:rail{i}": probe(sample(MLNX_QOS)) for i in range(4)}
    qos["mlnx_qos:rail2"] = probe(
        sample(MLNX_QOS)
        .replace("Priority trust state: dscp", "Priority trust state: pcp")
        .replace("enabled     0   0   0   1", "enabled     0   0   0   0")
    )
    found = by_key(roce.run({"gpu0001": qos}))
    assert found[("gpu0001", "roce.trust")].actual == "rail2: trust pcp"
    assert found[("gpu0001", "roce.pfc")].actual == "rail2: PFC on none"
    assert found[("gpu0001", "roce.pfc")].expected == "PFC on 3 on rail0, rail1, rail2, rail3"
    assert found[("gpu0001", "roce.dscp")].status == "pass"
    assert found[("gpu0001", "roce.dscp")].expected.startswith("26→3, 48→6")
    assert found[("gpu0002", "roce.trust")].status == "fail"  # mlnx_qos missing there
    assert found[("gpu0002", "roce.trust")].actual.startswith("rail0: mlnx_qos: command not found")


def test_bond_from_a_real_capture_reports_the_down_member(
    roce: Cluster, sample: Callable[[str], str]
) -> None:
    capture = sample(BOND).replace("enp1s0f0", "stor0").replace("enp1s0f1", "stor1")
    links = json.dumps([{"ifname": "bond0", "mtu": 1500, "flags": ["UP"]}])
    found = by_key(
        roce.run({"ctl01": {"bonding": files({"bond0": capture}), "ip_link": probe(links)}})
    )
    assert found[("ctl01", "bond.mode")].status == "pass"
    assert found[("ctl01", "bond.slaves")].actual == "stor0 down"
    # stor1 runs at 1 Gb/s where the spec's NIC gives 25; stor0 is down, its speed unknown.
    assert found[("ctl01", "bond.speed")].actual == "stor1 1000 Mb/s, stor0 speed unknown"
    assert found[("ctl01", "bond.mtu")].actual == "bond0 1500"
    assert found[("ctl02", "bond.mode")].actual == "bond0 does not exist (bonding not loaded)"


def test_storage_mount(roce: Cluster) -> None:
    mounted = {
        "filesystems": [
            {"target": "/ckpt", "source": "10.16.0.2:/srv/ckpt", "fstype": "nfs4", "options": "rw"}
        ]
    }
    elsewhere = {
        "filesystems": [
            {"target": "/ckpt", "source": "10.16.0.99:/srv/ckpt", "fstype": "nfs4", "options": "rw"}
        ]
    }
    found = by_key(
        roce.run(
            {
                "gpu0001": {"findmnt": probe(json.dumps(mounted))},
                "gpu0002": {"findmnt": probe("", rc=1)},
                "gpu0003": {"findmnt": probe(json.dumps(elsewhere))},
            }
        )
    )
    assert found[("gpu0001", "storage.mount")].status == "pass"
    assert found[("gpu0002", "storage.mount")].actual == "nothing mounted on /ckpt"
    assert found[("gpu0003", "storage.mount")].actual == "10.16.0.99:/srv/ckpt (nfs4)"


def test_docker_nvidia_runtime_from_real_docker_info(
    roce: Cluster, fixture_text: Callable[[str], str]
) -> None:
    found = by_key(
        roce.run(
            {
                "gpu0001": {
                    "docker_info": probe(
                        fixture_text("docker-info_edited_nvidia-default-runtime.json")
                    )
                },
                "gpu0002": {
                    "docker_info": probe(fixture_text("docker-info_20.10.24_runc-only.json"))
                },
                "gpu0003": {
                    "docker_info": probe(
                        fixture_text("docker-info_client-28.2.2_daemon-unreachable.json"),
                        rc=1,
                        stderr="Cannot connect to the Docker daemon at unix:///var/run/docker.sock.",
                    )
                },
            }
        )
    )
    assert found[("gpu0001", "runtime.nvidia")].status == "pass"
    assert found[("gpu0002", "runtime.nvidia")].status == "fail"
    assert "default runc" in found[("gpu0002", "runtime.nvidia")].actual
    assert found[("gpu0003", "runtime.nvidia")].actual.startswith(
        "docker info exited 1: Cannot connect"
    )


def test_slurm_gres_from_scontrol(roce: Cluster) -> None:
    view = {
        "scontrol_nodes": probe(
            scontrol_line("gpu0001", "IDLE", gres="gpu:a800:8(S:0-1)")
            + scontrol_line("gpu0002", "MIXED", gres="gpu:a800:7")
        )
    }
    found = by_key(roce.run({"ctl01": view}))
    assert found[("gpu0001", "slurm.gres")].status == "pass"
    assert (found[("gpu0002", "slurm.gres")].expected, found[("gpu0002", "slurm.gres")].actual) == (
        "gpu:a800:8",
        "gpu:a800:7",
    )
    # The controller answered nodes but no topology: those checks are errors, not passes.
    assert found[("gpu0001", "slurm.topology")].status == "error"


def kubernetes_cluster() -> Cluster:
    document = {
        "apiVersion": "myriad/v1",
        "kind": "Cluster",
        "metadata": {"name": "k8s"},
        "provider": {"kind": "local"},
        "profiles": {
            "node": gpu_profile(),
            "cpu": {"cpu": {"sockets": 1, "cores_per_socket": 8}, "memory_gib": 64},
        },
        "pools": [
            {"name": "ctl", "profile": "cpu", "count": 1, "role": "controller"},
            {"name": "gpu", "profile": "node", "count": 3, "role": "compute"},
        ],
        "network": {
            "fabric": "infiniband",
            "topology": {"kind": "rail-optimized", "switch": "QM9700"},
        },
        "software": {
            "os": "ubuntu-24.04",
            "nvidia_driver": "550",
            "container_runtime": "containerd",
            "orchestrator": "kubernetes",
        },
    }
    return Cluster(plan_loaded(load_spec_text(yaml.safe_dump(document))))


def test_kubernetes_nodes_from_kubectl(fixture_text: Callable[[str], str]) -> None:
    k8s = kubernetes_cluster()
    view = json.loads(fixture_text("kubectl-get-nodes-o-json_v1.29.json"))
    for item, name in zip(view["items"], ("gpu01", "gpu02", "gpu03", "ctl01"), strict=True):
        item["metadata"]["name"] = name
    found = by_key(k8s.run({"ctl01": {"kubectl_nodes": probe(json.dumps(view))}}))
    assert found[("gpu01", "k8s.node-ready")].status == "pass"
    assert found[("gpu02", "k8s.node-ready")].status == "fail"
    assert found[("gpu02", "k8s.node-ready")].actual.startswith("Ready=False")
    assert found[("gpu02", "k8s.gpu-allocatable")].actual == "7"
    assert found[("gpu03", "k8s.gpu-allocatable")].status == "pass"
    assert found[("ctl01", "k8s.node-ready")].status == "pass"
    assert found[("gpu01", "slurm.node-state")].status == "not-applicable"
    containerd = {
        "/etc/containerd/conf.d/kubernetes-cri.toml": (
            '[plugins."io.containerd.grpc.v1.cri".containerd]\n  default_runtime_name = "nvidia"\n'
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
        )
    }
    runtime = by_key(k8s.run({"gpu01": {"containerd_config": files(containerd)}}))
    assert runtime[("gpu01", "runtime.nvidia")].status == "pass"
    assert runtime[("gpu02", "runtime.nvidia")].status == "fail"


# --- the node's copy: expectations through JSON evaluate the same ----------------------------


@pytest.mark.slow
def test_expectations_read_back_from_json_give_the_same_results(
    local: Cluster, roce: Cluster, sample: Callable[[str], str]
) -> None:
    """What the node health runner evaluates (each node's expectation document, read back)
    gives exactly what `myriad validate` gives from the expectations in memory."""
    qos = {f"mlnx_qos:rail{i}": probe(sample(MLNX_QOS)) for i in range(4)}
    for example, changes in (
        (local, {"ctl01": local_controller_view(local, drained="+DRAIN")}),
        (roce, {"gpu0001": qos, "ctl01": {"bonding": files({"bond0": sample(BOND)})}}),
    ):
        in_memory = example.run(changes)
        original = example.expectations
        read_back = tuple(
            NodeExpectations.from_dict(json.loads(json.dumps(node.to_dict())))
            for node in original.nodes
        )
        example.expectations = replace(original, nodes=read_back)
        try:
            assert example.run(changes) == in_memory
        finally:
            example.expectations = original
        assert {r.status for r in in_memory} >= {"pass", "fail", "not-applicable"}


def test_a_node_on_another_image_than_its_profiles_current_one_fails(local: Cluster) -> None:
    current = {"tag": "myriad-image-local-container:aaaaaaaaaaaa", "content_hash": "a" * 64}
    older = {"tag": "myriad-image-local-container:bbbbbbbbbbbb", "content_hash": "b" * 64}
    imaged = Cluster(local.result, images={"container": current})
    now = probe(json.dumps(current))
    results = imaged.run(
        {
            "ctl01": {**local_controller_view(imaged), "image_record": now},
            "node01": {"image_record": now},
            "node02": {"image_record": probe(json.dumps(older))},
            "node03": {"image_record": missing("/etc/myriad/image.json")},
        }
    )
    found = by_key(results)
    assert found[("node01", "image.current")].status == "pass"
    stale = found[("node02", "image.current")]
    assert (stale.status, stale.actual) == ("fail", f"{older['tag']} (bbbbbbbbbbbb)")
    assert "current image is myriad-image-local-container:aaaaaaaaaaaa" in stale.detail
    assert stale.spec_field == "bringup.mode" and "myriad up" in stale.fix
    bare = found[("node03", "image.current")]
    assert bare.status == "fail" and "not started from a baked image" in bare.actual
    # Push mode (no image recorded for the profile): the check does not apply.
    assert by_key(local.run({}))[("node01", "image.current")].status == "not-applicable"


def test_the_booted_kernel_is_the_specs_and_a_boot_record_stands_in_for_it(local: Cluster) -> None:
    # No kernel in the spec: the check does not apply, and nothing is read for it.
    assert not next(
        e for e in local.expectations.node("node01").expectations if e.check == "host.kernel"
    ).applies
    text = (ROOT / "inventories" / "local" / "cluster.yaml").read_text()
    old = "  orchestrator: slurm\n"
    pinned = Cluster(
        plan_loaded(load_spec_text(text.replace(old, old + "  kernel: 6.1.0-99-myriad\n")))
    )
    host = "6.1.0-28-amd64\n"
    found = by_key(
        pinned.run(
            {
                "ctl01": local_controller_view(pinned),
                # A real node: the running kernel is the booted one.
                "node01": {"kernel_release": files({"/proc/sys/kernel/osrelease": host})},
                # The twin: the container's boot record, not the host's kernel it shares.
                "node02": {
                    "kernel_release": files(
                        {
                            "/proc/sys/kernel/osrelease": host,
                            "/run/myriad/kernel-release": "6.1.0-99-myriad\n",
                        }
                    )
                },
                "node03": {"kernel_release": probe("not json")},
            }
        )
    )
    node01 = found[("node01", "host.kernel")]
    assert (node01.status, node01.expected, node01.actual) == (
        "fail",
        "6.1.0-99-myriad",
        "booted 6.1.0-28-amd64",
    )
    assert "reboot the node into 6.1.0-99-myriad" in node01.fix
    assert found[("node02", "host.kernel")].status == "pass"
    assert found[("node03", "host.kernel")].status == "error"


# --- NVLink-network trays (GB200/GB300 NVL72): fabric state and the IMEX domain ----------------

IMEX_UP = (
    "nvidia-imex-ctl/p6e-gb200-ultraserver_18-nodes_imex-570.172_domain-up_nvidia-imex-ctl-N.txt"
)


def nvlink_fabric(gpus: Cluster, fabric: str, **variables: Any) -> Cluster:
    """The cluster as the nvidia_driver role sees another NVLink platform. The catalog names
    no NVL72 tray or HGX B200 board yet, so the variable the renderer writes for the GPU pool
    is set on its inventory and the expectations derived again."""
    group_vars = {
        group: {**values, "nvidia_driver_nvlink_fabric": fabric, **variables}
        if "nvidia_driver_nvlink_fabric" in values
        else values
        for group, values in gpus.inventory.group_vars.items()
    }
    assert group_vars != gpus.inventory.group_vars
    gpus.inventory = replace(gpus.inventory, group_vars=group_vars)
    loaded, plan = gpus.result.loaded, gpus.result.plan
    assert plan is not None
    gpus.expectations = expect(
        loaded.spec, loaded.catalog, plan, gpus.inventory, load_role_defaults()
    )
    return gpus


@pytest.fixture
def nvl72() -> Cluster:
    return nvlink_fabric(gpu_cluster(gpus=8), "imex", nvidia_driver_imex_nodes=["172.31.48.81"])


def nvl72_tray(sample: Callable[[str], str], **changes: Any) -> dict[str, Any]:
    """A GB200 compute tray as it reports itself when its domain is whole."""
    active = {"chrony", "munge", "nvidia-persistenced", "nvidia-imex", "slurmd"}
    return {
        "nvidia_smi": probe(fabric_xml(8)),
        "imex": probe(sample(IMEX_UP)),
        "units": units(active),
        **changes,
    }


FABRIC_CHECKS = ("gpu.fabric-state", "gpu.imex-service", "gpu.imex-domain")


def test_an_nvl72_tray_in_its_whole_domain_passes(
    nvl72: Cluster, sample: Callable[[str], str]
) -> None:
    found = by_key(nvl72.run({"gpu01": nvl72_tray(sample)}))
    state = found[("gpu01", "gpu.fabric-state")]
    assert (state.status, state.actual) == (
        "pass",
        f"Completed, Success on 8 GPUs, clique {GB200_CLIQUE} of cluster {GB200_CLUSTER}",
    )
    assert state.expected == (
        "every GPU Completed, Success, in one NVLink domain (clique and cluster UUID)"
    )
    domain = found[("gpu01", "gpu.imex-domain")]
    assert (domain.status, domain.actual) == ("pass", "UP, 18 nodes READY, all connected")
    assert found[("gpu01", "gpu.imex-service")].status == "pass"
    # NVSwitches on the profile, but the tray's switching is the switch trays' business.
    fm = found[("gpu01", "gpu.fabricmanager")]
    assert fm.status == "not-applicable"
    assert "switch trays" in fm.actual


def test_a_tray_whose_gpus_disagree_on_their_domain_fails_naming_them(
    nvl72: Cluster, sample: Callable[[str], str]
) -> None:
    tray = nvl72_tray(sample, nvidia_smi=probe(fabric_xml(8, {3: 4027})))
    state = by_key(nvl72.run({"gpu01": tray}))[("gpu01", "gpu.fabric-state")]
    assert state.status == "fail"
    assert state.actual == (
        "GPUs disagree on their NVLink domain: "
        f"GPU 0,1,2,4,5,6,7 clique 4026 cluster {GB200_CLUSTER}; "
        f"GPU 3 clique 4027 cluster {GB200_CLUSTER}"
    )
    assert state.fix.startswith("drain gpu01; a tray whose GPUs are not all in the rack's")


@pytest.mark.parametrize(
    ("fabric", "actual"),
    [
        # The values of the real Fabric blocks in tests/samples/nvidia-smi-q-fabric.
        ({"status": "Insufficient Resources"}, "GPU 0: fabric status Insufficient Resources"),
        ({"summary": "Unhealthy"}, "GPU 0: fabric health Unhealthy"),
        ({"state": "In Progress"}, "GPU 0: fabric state In Progress"),
        ({"state": "Not Supported"}, "GPU 0: fabric state Not Supported"),
    ],
)
def test_a_gpu_not_registered_with_the_fabric_fails(
    nvl72: Cluster, sample: Callable[[str], str], fabric: dict[str, str], actual: str
) -> None:
    tray = nvl72_tray(sample, nvidia_smi=probe(fabric_xml(1, **fabric)))
    state = by_key(nvl72.run({"gpu01": tray}))[("gpu01", "gpu.fabric-state")]
    assert (state.status, state.actual) == ("fail", actual)


def test_a_gpu_in_no_domain_fails(nvl72: Cluster, sample: Callable[[str], str]) -> None:
    xml = fabric_xml(1).replace(GB200_CLUSTER, "00000000-0000-0000-0000-000000000000")
    tray = nvl72_tray(sample, nvidia_smi=probe(xml))
    state = by_key(nvl72.run({"gpu01": tray}))[("gpu01", "gpu.fabric-state")]
    assert (state.status, state.actual) == (
        "fail",
        "GPU 0: in no NVLink domain (cluster UUID all zeros)",
    )


def test_an_imex_domain_with_a_link_down_fails_naming_it(
    nvl72: Cluster, sample: Callable[[str], str]
) -> None:
    text = sample(IMEX_UP)
    # Node 17 (172.31.56.47) sees node 0 as disconnected and is itself not ready.
    text = text.replace("      17        C", "      17        D", 1)
    text = text.replace("172.31.56.47    - READY", "172.31.56.47    - UNAVAILABLE", 1)
    text = text.replace("Domain State: UP", "Domain State: DEGRADED")
    domain = by_key(nvl72.run({"gpu01": nvl72_tray(sample, imex=probe(text))}))[
        ("gpu01", "gpu.imex-domain")
    ]
    assert domain.status == "fail"
    assert domain.actual == (
        "domain DEGRADED, 172.31.56.47 UNAVAILABLE, 172.31.56.47->172.31.48.81: D"
    )


def test_imex_not_installed_fails_and_its_output_unreadable_is_an_error(
    nvl72: Cluster, sample: Callable[[str], str]
) -> None:
    tray = nvl72_tray(sample, imex=missing("nvidia-imex-ctl"))
    tray["units"] = units({"chrony", "munge", "nvidia-persistenced", "slurmd"})
    found = by_key(nvl72.run({"gpu01": tray}))
    assert found[("gpu01", "gpu.imex-domain")].status == "fail"
    assert found[("gpu01", "gpu.imex-service")].actual == "nvidia-imex inactive"
    cut = sample(IMEX_UP)[:900]
    found = by_key(nvl72.run({"gpu01": nvl72_tray(sample, imex=probe(cut))}))
    domain = found[("gpu01", "gpu.imex-domain")]
    assert domain.status == "error"
    assert "truncated" in domain.actual


def test_fabric_checks_do_not_apply_to_other_nvswitch_boards(sample: Callable[[str], str]) -> None:
    # An HGX A100/H100 (Fabric Manager): no IMEX, and no fabric state judged.
    found = by_key(gpu_cluster(gpus=8).run({"gpu01": nvl72_tray(sample)}))
    for check in FABRIC_CHECKS:
        assert found[("gpu01", check)].status == "not-applicable", check
    assert found[("gpu01", "gpu.fabricmanager")].status == "fail"  # not active in the tray
    # An HGX B200 (Fabric Manager and NVLSM): the GPUs' registration, no domain, no IMEX.
    b200 = nvlink_fabric(gpu_cluster(gpus=8), "fabricmanager-nvlsm")
    xml = fabric_xml(8).replace(GB200_CLUSTER, "00000000-0000-0000-0000-000000000000")
    found = by_key(b200.run({"gpu01": nvl72_tray(sample, nvidia_smi=probe(xml))}))
    assert found[("gpu01", "gpu.fabric-state")].status == "pass"
    assert found[("gpu01", "gpu.fabric-state")].actual == "Completed, Success on 8 GPUs"
    assert found[("gpu01", "gpu.imex-domain")].status == "not-applicable"
    assert found[("gpu01", "gpu.fabricmanager")].expected == "nvidia-fabricmanager active"
