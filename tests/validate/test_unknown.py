"""Unknown is never healthy: per subject, a fact that could not be read (timed out, output
that is not the tool's format, a field the tool or driver did not report) gives `error`
with the reason, never `pass`.

Expectations are written by hand here, as plain data, the way a node's expectation file
holds them; facts come from gathered documents, mostly real captures with a part removed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from myriad.node.checks import (
    CheckResult,
    NodeExpectations,
    evaluate_node,
    view_of,
)
from myriad.node.facts import node_facts

NODE = "gpu01"
UNITS = ["chrony", "munge", "slurmd"]
A100 = "nvidia-smi-q-x/a100-sxm4-80gb-x4-mig_v12_drv535.54.03.xml"
A5000 = "nvidia-smi-q-x/rtx-a5000-x2_v13_drv590.44.01.xml"
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


TIMED_OUT = probe(rc=None, timed_out=True)


def expectation(check: str, expected: Any) -> dict[str, Any]:
    return {
        "check": check,
        "expected": expected,
        "spec_field": "hand-written",
        "fix": "fix {node}",
        "applies": True,
        "reason": "",
    }


def run(expected: Mapping[str, Any], probes: Mapping[str, Any]) -> dict[str, CheckResult]:
    """Evaluate hand-written expectations against one node's gathered document, as the
    node health runner does: the node's own facts are also the orchestrator's view."""
    document = {
        "schema": 1,
        "node": NODE,
        "pool": "gpu",
        "profile": "hand-written",
        "role": "compute",
        "expectations": [expectation(check, value) for check, value in expected.items()],
    }
    # Through JSON, exactly as the node reads its expectation file.
    node = NodeExpectations.from_dict(json.loads(json.dumps(document)))
    gathered = {"schema": 1, "args": {"units": UNITS}, "probes": dict(probes)}
    facts = node_facts(NODE, gathered)
    results = evaluate_node(node, facts, view_of(facts, NODE))
    return {r.check: r for r in results}


def assert_unknown(result: CheckResult, reason: str) -> None:
    assert result.status == "error", result
    assert reason in result.actual, result
    assert result.fix == f"fix {NODE}"


# --- host -------------------------------------------------------------------------------------


def test_host_facts_that_timed_out_or_were_not_asked_are_errors() -> None:
    found = run(
        {
            "hosts.file": {"entries": [["10.0.0.1", ["gpu01"]]], "text": "10.0.0.1        gpu01"},
            "host.name": NODE,
            "time.sync": "systemd-timesyncd",
            "limits.memlock-session": {"value": "unlimited", "container": False},
        },
        {
            "hosts": TIMED_OUT,
            "hostname": probe(""),
            "units": probe("active\nactive\ninactive\n", rc=3),
            # A login shell that asks for a password prints no limits.
            "memlock_session": probe("Password: \n"),
        },
    )
    assert_unknown(found["hosts.file"], "/etc/hosts timed out")
    # systemctl answered for chrony, munge and slurmd only: nothing is known of the others.
    assert_unknown(found["time.sync"], "systemd-timesyncd was not among the units")
    assert_unknown(found["limits.memlock-session"], "could not read ulimit -l")
    # An empty host name is an answer (a wrong one), not an unknown.
    assert found["host.name"].status == "fail"


# --- gpu --------------------------------------------------------------------------------------


def test_gpu_fields_the_driver_did_not_report_are_errors(sample: Callable[[str], str]) -> None:
    expected = {
        "gpu.count": 2,
        "gpu.memory": 24,
        "gpu.persistence": True,
        "gpu.pcie": {"gen": 4, "width": 16},
        "gpu.health": True,
    }
    whole = run(expected, {"nvidia_smi": probe(sample(A5000))})
    assert {check: r.status for check, r in whole.items() if check in expected} == dict.fromkeys(
        expected, "pass"
    )
    # The same capture without GPU 0's persistence mode, memory size and link width.
    cut = sample(A5000)
    cut = cut.replace("<persistence_mode>Enabled</persistence_mode>", "", 1)
    cut = re.sub(r"(<fb_memory_usage>\s*<total>)[^<]*", r"\1N/A", cut, count=1)
    cut = re.sub(r"(<link_widths>\s*<max_link_width>)[^<]*", r"\1N/A", cut, count=1)
    cut = re.sub(r"(<current_link_width>)[^<]*", r"\1N/A", cut, count=1)
    found = run(expected, {"nvidia_smi": probe(cut)})
    assert found["gpu.count"].status == "pass"
    assert_unknown(found["gpu.persistence"], "GPU 0 persistence not reported")
    assert_unknown(found["gpu.memory"], "GPU 0: memory not reported")
    assert_unknown(found["gpu.pcie"], "GPU 0: link not reported")


def test_a_gpu_that_reports_neither_remapping_nor_retirement_is_an_error(
    sample: Callable[[str], str],
) -> None:
    # The A100 capture (MIG, in a VM) says N/A for row remapping and page retirement.
    found = run({"gpu.health": True}, {"nvidia_smi": probe(sample(A100))})
    assert_unknown(found["gpu.health"], "neither row remapping nor page retirement reported")


def test_mig_and_ecc_modes_the_driver_did_not_report_are_errors(
    sample: Callable[[str], str],
) -> None:
    expected = {"gpu.mig": {"capable": True}, "gpu.ecc": True}
    # The A100 capture without its <mig_mode> and with ECC's pending mode unreadable.
    cut = re.sub(r"<mig_mode>.*?</mig_mode>", "", sample(A100), count=1, flags=re.S)
    cut = cut.replace("<pending_ecc>Enabled", "<pending_ecc>[Unknown Error]", 1)
    found = run(expected, {"nvidia_smi": probe(cut)})
    assert_unknown(found["gpu.mig"], "GPU 0: MIG mode not reported")
    assert_unknown(found["gpu.ecc"], "GPU 0: ECC mode not reported")
    timed_out = run(expected, {"nvidia_smi": TIMED_OUT})
    assert_unknown(timed_out["gpu.mig"], "timed out")
    assert_unknown(timed_out["gpu.ecc"], "timed out")


# --- fabric -----------------------------------------------------------------------------------


def sysfs(
    ports: Mapping[str, Mapping[str, str]],
    pci: str = "0000:17:00.0",
    device_files: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    files = {
        f"{device}/ports/1/{name}": value
        for device, attributes in ports.items()
        for name, value in attributes.items()
    }
    files |= {
        f"{device}/{name}": value
        for device in ports
        for name, value in (device_files or {}).items()
    }
    devices = {device: {"pci": pci, "netdevs": []} for device in ports}
    return probe(json.dumps({"files": files, "devices": devices}))


def test_hca_port_values_the_kernel_did_not_give_are_errors() -> None:
    port = {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "link_layer": "InfiniBand"}
    found = run(
        {
            "hca.rate": {"names": ["mlx5_0"], "value": 400},
            "hca.link-layer": {"names": ["mlx5_0"], "value": "InfiniBand"},
            "nic.pcie": [["mlx5_0", {"gen": 5, "width": 16}]],
        },
        {
            # No rate file for the port.
            "sysfs_infiniband": sysfs({"mlx5_0": port}),
            "pci": probe(
                json.dumps(
                    {
                        "0000:17:00.0": {
                            "vendor": "0x15b3",
                            "current_link_speed": "Unknown",
                            "current_link_width": "16",
                        }
                    }
                )
            ),
        },
    )
    assert_unknown(found["hca.rate"], "mlx5_0 rate gbps not reported")
    assert found["hca.link-layer"].status == "pass"
    assert_unknown(found["nic.pcie"], "mlx5_0 link speed or width not reported")


def test_hca_state_of_an_unreadable_sysfs_tree_is_an_error() -> None:
    found = run(
        {"hca.present": ["mlx5_0"], "hca.state": ["mlx5_0"]},
        {"sysfs_infiniband": probe("{truncated", rc=0)},
    )
    assert_unknown(found["hca.present"], "could not read sysfs infiniband output")
    assert_unknown(found["hca.state"], "could not read sysfs infiniband output")


def test_hca_model_and_counters_the_kernel_did_not_give_are_errors() -> None:
    port = {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "link_layer": "InfiniBand"}
    model = {"model": "ConnectX-7", "ca_types": ["MT4129", "MT4126"], "firmware_major": 28}
    limits = {"link_downed": 0, "symbol_error": 10}
    # No hca_type or fw_ver file, and no counters/ directory for the port.
    found = run(
        {
            "hca.model": {"names": ["mlx5_0"], "value": model},
            "hca.firmware": {"names": ["mlx5_0"], "value": "28.39.1002"},
            "hca.errors": {"names": ["mlx5_0"], "value": limits},
        },
        {"sysfs_infiniband": sysfs({"mlx5_0": port})},
    )
    assert_unknown(found["hca.model"], "mlx5_0 CA type not reported")
    assert_unknown(found["hca.firmware"], "mlx5_0 firmware not reported")
    assert_unknown(found["hca.errors"], "mlx5_0 no counters")
    typed = {"hca_type": "MT4129", "fw_ver": "unknown"}
    garbled = run(
        {"hca.model": {"names": ["mlx5_0"], "value": model}},
        {"sysfs_infiniband": sysfs({"mlx5_0": port}, device_files=typed)},
    )
    assert_unknown(garbled["hca.model"], "mlx5_0 firmware 'unknown' is not a version")
    # One counter of the two, and a tree that cannot be read at all.
    with_one = {**port, "counters/link_downed": "0"}
    one = run(
        {"hca.errors": {"names": ["mlx5_0"], "value": limits}},
        {"sysfs_infiniband": sysfs({"mlx5_0": with_one})},
    )
    assert_unknown(one["hca.errors"], "mlx5_0 symbol_error not reported")
    broken = run(
        {"hca.errors": {"names": ["mlx5_0"], "value": limits}},
        {"sysfs_infiniband": probe("{truncated", rc=0)},
    )
    assert_unknown(broken["hca.errors"], "could not read sysfs infiniband output")


# --- roce -------------------------------------------------------------------------------------


def test_roce_qos_the_nic_did_not_print_is_an_error(sample: Callable[[str], str]) -> None:
    capture = sample(MLNX_QOS)
    lines = capture.splitlines(keepends=True)
    # The capture without its dscp2prio table (header and eight rows).
    start = next(i for i, line in enumerate(lines) if line.startswith("dscp2prio"))
    no_table = "".join(lines[:start] + lines[start + 9 :])
    rails = ["rail0", "rail1"]
    found = run(
        {
            "roce.trust": {"names": rails, "value": "dscp"},
            "roce.dscp": {"names": rails, "value": [[26, 3], [48, 6]]},
            "roce.pfc": {"names": rails, "value": 3},
        },
        {"mlnx_qos:rail0": probe(no_table), "mlnx_qos:rail1": TIMED_OUT},
    )
    assert_unknown(found["roce.trust"], "mlnx_qos -i rail1 timed out")
    assert_unknown(found["roce.pfc"], "mlnx_qos -i rail1 timed out")
    only_rail0 = run(
        {"roce.dscp": {"names": ["rail0"], "value": [[26, 3], [48, 6]]}},
        {"mlnx_qos:rail0": probe(no_table)},
    )
    assert_unknown(only_rail0["roce.dscp"], "rail0: not reported")
    # A mapping the NIC did print that differs is a difference, even next to an unknown.
    wrong = run(
        {"roce.dscp": {"names": ["rail0"], "value": [[26, 5], [48, 6]]}},
        {"mlnx_qos:rail0": probe(capture)},
    )
    assert wrong["roce.dscp"].status == "fail"
    assert wrong["roce.dscp"].actual == "rail0: 26→3, 48→6"


def test_a_roce_nic_the_gatherer_was_not_asked_about_is_an_error() -> None:
    found = run({"roce.trust": {"names": ["rail0"], "value": "dscp"}}, {})
    assert_unknown(found["roce.trust"], "mlnx_qos -i rail0 was not gathered")


# --- bond -------------------------------------------------------------------------------------


def test_a_bond_member_of_unknown_speed_is_an_error(sample: Callable[[str], str]) -> None:
    capture = sample(BOND)
    bond = {
        "name": "bond0",
        "mode": "802.3ad",
        "slaves": ["enp1s0f0", "enp1s0f1"],
        "speed_mbps": 1000,
        "mtu": 9000,
    }
    found = run(
        {"bond.speed": bond, "bond.slaves": bond},
        {"bonding": probe(json.dumps({"bond0": capture}))},
    )
    # enp1s0f0 is down ("Speed: Unknown"); enp1s0f1 runs at the expected 1 Gb/s.
    assert_unknown(found["bond.speed"], "enp1s0f0 speed unknown")
    assert found["bond.slaves"].status == "fail"
    unreadable = run({"bond.mode": bond}, {"bonding": probe(json.dumps({"bond0": "garbage"}))})
    assert_unknown(unreadable["bond.mode"], "could not read /proc/net/bonding output")


# --- storage, runtime, nccl -----------------------------------------------------------------


def test_storage_runtime_and_nccl_facts_that_cannot_be_read_are_errors() -> None:
    found = run(
        {
            "storage.mount": {
                "path": "/data",
                "kind": "nfs",
                "fstypes": ["nfs", "nfs4"],
                "source": "10.0.0.2:/data",
            },
            "runtime.nvidia": {"engine": "docker", "default": True},
            "nccl.conf": "NCCL_IB_HCA==mlx5_0:1\n",
        },
        {
            "findmnt": probe('{"filesystems": "not a list"}'),
            "docker_info": probe("<html>proxy error</html>"),
            "nccl_conf": TIMED_OUT,
        },
    )
    assert_unknown(found["storage.mount"], "could not read findmnt output")
    assert_unknown(found["runtime.nvidia"], "could not read docker info output")
    assert_unknown(found["nccl.conf"], "/etc/nccl.conf timed out")


# --- slurm, kubernetes ------------------------------------------------------------------------


def test_orchestrator_views_that_cannot_be_read_are_errors() -> None:
    found = run(
        {
            "slurm.node-state": ["IDLE", "ALLOCATED", "MIXED", "COMPLETING"],
            "slurm.topology": "leaf01",
            "k8s.node-ready": True,
        },
        {
            "scontrol_nodes": probe("NodeName=gpu01 Arch=x86_64 CPUTot="),
            "sinfo": TIMED_OUT,
            "scontrol_topology": TIMED_OUT,
            "kubectl_nodes": probe("error: You must be logged in to the server\n", rc=0),
        },
    )
    assert_unknown(found["slurm.node-state"], "Slurm's view unavailable")
    assert_unknown(found["slurm.topology"], "Slurm's topology unavailable")
    assert_unknown(found["k8s.node-ready"], "Kubernetes' view unavailable")


def test_a_node_without_the_orchestrators_view_claims_nothing() -> None:
    found = run({"slurm.gres": [{"name": "gpu", "type": "h100", "count": 8}]}, {})
    assert_unknown(found["slurm.gres"], "not gathered")


# --- the model --------------------------------------------------------------------------------


def test_a_check_this_version_does_not_know_is_an_error() -> None:
    found = run({"gpu.from-a-newer-myriad": 1}, {})
    result = found["gpu.from-a-newer-myriad"]
    assert result.status == "error"
    assert result.actual == "check gpu.from-a-newer-myriad is unknown to this version of Myriad"


def test_fabric_state_the_driver_did_not_report_is_an_error(sample: Callable[[str], str]) -> None:
    # The real A100 v12 capture: its Fabric section holds State and Status only (driver 535),
    # so on an NVL72 tray neither its clique nor its cluster can be vouched for; without any
    # Fabric section, nothing at all.
    xml = sample(A100)
    completed = xml.replace(
        "<state>N/A</state>\n            <status>N/A</status>",
        "<state>Completed</state>\n            <status>Success</status>",
    )
    assert completed != xml
    found = run({"gpu.fabric-state": {"domain": True}}, {"nvidia_smi": probe(completed)})
    assert found["gpu.fabric-state"].status == "error"
    assert found["gpu.fabric-state"].actual == "GPU 0: clique ID or cluster UUID not reported"
    absent = re.sub(r"<fabric>.*?</fabric>", "", xml, flags=re.DOTALL)
    found = run({"gpu.fabric-state": {"domain": False}}, {"nvidia_smi": probe(absent)})
    assert found["gpu.fabric-state"].status == "error"
    assert "no Fabric section" in found["gpu.fabric-state"].actual


def test_an_imex_query_that_timed_out_or_was_cut_is_an_error(
    sample: Callable[[str], str],
) -> None:
    capture = sample(
        "nvidia-imex-ctl/p6e-gb200-ultraserver_18-nodes_imex-570.172_domain-up_nvidia-imex-ctl-N.txt"
    )
    for imex in (TIMED_OUT, probe(capture[: capture.index("Domain State")])):
        found = run({"gpu.imex-domain": "UP"}, {"imex": imex})
        assert found["gpu.imex-domain"].status == "error", imex
