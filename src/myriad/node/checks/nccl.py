"""NCCL checks: /etc/nccl.conf is exactly what the nccl role writes for the node.

The expected file is the nccl role's logic in Python (roles/nccl/templates/nccl.conf.j2 and
roles/nccl/vars/main.yml), applied to the variables the role was given;
tests/validate/test_expectations.py runs the role and compares byte for byte.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from myriad.node.checks.model import (
    Check,
    ClusterView,
    Context,
    Expect,
    Outcome,
    Skip,
    bringup_fix,
    failed,
    listed,
    passed,
    unavailable,
)
from myriad.node.facts import NodeFacts

# Without nccl_socket_ifname the nccl role names the interface that holds the node's
# nccl_socket_address (a host variable; roles/nccl/tasks/main.yml looks it up on the node
# and refuses an address held by none or several), else writes "^docker,lo". The controller
# knows neither the interface's name nor, per kind of node, whether the address is set: the
# expected file holds this placeholder, which the node's file fills with one of those two.
SOCKET_PLACEHOLDER = "<one interface =NAME (the node's nccl_socket_address), else ^docker,lo>"
NCCL_CONF_HEADER = (
    "# Managed by Ansible (role nccl): local changes are overwritten.\n"
    "# NCCL defaults for every job on this node; a job's own environment overrides them.\n"
)


def _gdr_from_topology(topology: Mapping[str, Any]) -> str:
    """PXB when every NIC shares a PCIe switch with GPUs, PHB when each at least shares a
    CPU with GPUs, else nothing (roles/nccl/vars/main.yml `__nccl_topology_gdr_level`)."""
    nics = on_switch = on_cpu = 0
    for cpu in topology.get("cpus") or []:
        switches = cpu.get("pcie_switches") or []
        cpu_gpus = len(cpu.get("gpus") or []) + sum(len(s.get("gpus") or []) for s in switches)
        for switch in switches:
            for _nic in switch.get("nics") or []:
                nics += 1
                if switch.get("gpus"):
                    on_switch += 1
                elif cpu_gpus > 0:
                    on_cpu += 1
        for _nic in cpu.get("nics") or []:
            nics += 1
            if cpu_gpus > 0:
                on_cpu += 1
    if nics and on_switch == nics:
        return "PXB"
    if nics and on_switch + on_cpu == nics:
        return "PHB"
    return ""


def _value(value: Any) -> str:
    # The template prints booleans as 0/1 and everything else as Jinja would.
    if isinstance(value, bool):
        return str(int(value))
    return str(value)


def nccl_settings(variables: Mapping[str, Any]) -> dict[str, Any]:
    """The KEY → value pairs the nccl role writes, from its variables (defaults included)."""
    fabric = variables["nccl_fabric"]
    verbs = fabric in ("infiniband", "roce")
    hcas = list(variables.get("nccl_hcas") or [])
    if hcas and all("rail" in hca for hca in hcas):
        hcas = sorted(hcas, key=lambda hca: hca["rail"])
    topology = variables.get("nccl_topology") or {}
    gdr = variables.get("nccl_net_gdr_level") or _gdr_from_topology(topology)
    qps = int(variables.get("nccl_ib_qps_per_connection", 1))
    ifname = variables.get("nccl_socket_ifname") or SOCKET_PLACEHOLDER
    settings: dict[str, Any] = {"NCCL_SOCKET_IFNAME": ifname}
    if verbs and hcas:
        settings["NCCL_IB_HCA"] = "=" + ",".join(f"{h['name']}:{h.get('port', 1)}" for h in hcas)
    if fabric == "roce":
        settings["NCCL_IB_TC"] = int(variables["nccl_roce_dscp"]) * 4
        # -1 leaves the GID to NCCL (2.21+ picks the RoCEv2 GID of the rail's address).
        if int(variables.get("nccl_roce_gid_index", -1)) >= 0:
            settings["NCCL_IB_GID_INDEX"] = variables["nccl_roce_gid_index"]
    if fabric == "infiniband":
        settings["NCCL_IB_SL"] = variables["nccl_ib_sl"]
    if fabric == "ethernet":
        settings["NCCL_IB_DISABLE"] = 1
    if variables.get("nccl_rail_optimized"):
        settings["NCCL_CROSS_NIC"] = 0
    if verbs and qps > 1:
        settings["NCCL_IB_QPS_PER_CONNECTION"] = qps
    if verbs and gdr:
        settings["NCCL_NET_GDR_LEVEL"] = gdr
    if topology:
        settings["NCCL_TOPO_FILE"] = variables["nccl_topology_path"]
    settings.update(variables.get("nccl_conf_overrides") or {})
    return {key: value for key, value in settings.items() if value is not None}


def nccl_conf(variables: Mapping[str, Any]) -> str:
    """The exact text of /etc/nccl.conf (roles/nccl/templates/nccl.conf.j2)."""
    settings = nccl_settings(variables)
    # Jinja's dictsort compares keys without case.
    lines = [f"{key}={_value(settings[key])}\n" for key in sorted(settings, key=str.lower)]
    return NCCL_CONF_HEADER + "".join(lines)


def _settings(text: str) -> dict[str, str]:
    pairs = {}
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and "=" in stripped:
            key, _, value = stripped.partition("=")
            pairs[key.strip()] = value.strip()
    return pairs


def _role_socket(value: str) -> bool:
    """A NCCL_SOCKET_IFNAME the role may write for the placeholder."""
    name = value[1:]
    if value == "^docker,lo":
        return True
    return (
        value.startswith("=")
        and bool(name)
        and "," not in name
        and not name.startswith(("docker", "lo"))
    )


def _derive_conf(c: Context) -> Expect | Skip:
    if c.pool.role != "compute":
        return Skip("network.fabric", "the nccl role configures compute nodes only")
    return Expect(
        nccl_conf(c.variables),
        f"network.fabric, network.topology.kind, {c.p}.nics.compute, software.nccl",
        bringup_fix("nccl"),
    )


def _evaluate_conf(expected: str, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.nccl_conf.ok:
        if facts.nccl_conf.state == "missing":
            return failed("/etc/nccl.conf does not exist")
        return unavailable(facts.nccl_conf)
    actual = facts.nccl_conf.get()
    if actual is expected or actual == expected:
        return passed("identical to the expected file")
    want, have = _settings(expected), _settings(actual)
    named = have.get("NCCL_SOCKET_IFNAME", "")
    if want.get("NCCL_SOCKET_IFNAME") == SOCKET_PLACEHOLDER and _role_socket(named):
        # What the role writes there on this node: compare the rest of the file.
        expected = expected.replace(
            f"NCCL_SOCKET_IFNAME={SOCKET_PLACEHOLDER}\n", f"NCCL_SOCKET_IFNAME={named}\n"
        )
        if actual == expected:
            return passed("identical to the expected file")
        want["NCCL_SOCKET_IFNAME"] = named
    problems = [
        f"{k}={have[k]} (expected {want[k]})" for k in want if k in have and have[k] != want[k]
    ]
    problems += [f"{k} missing (expected {want[k]})" for k in want if k not in have]
    problems += [f"{k}={have[k]} not expected" for k in have if k not in want]
    diff = "".join(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            "expected /etc/nccl.conf",
            f"{node}:/etc/nccl.conf",
        )
    )
    return failed(listed(problems) or "same settings, other text (comments or spacing)", diff)


def _explain_conf(expected: str) -> str:
    settings = _settings(expected)
    return f"{len(settings)} settings: " + ", ".join(f"{k}={v}" for k, v in settings.items())


NCCL_CONF = Check(
    id="nccl.conf",
    title="/etc/nccl.conf content",
    spec_fields=(
        "network.fabric",
        "network.topology.kind",
        "profiles.*.nics.compute",
        "software.nccl",
    ),
    derive=_derive_conf,
    evaluate=_evaluate_conf,
    explain=_explain_conf,
)
