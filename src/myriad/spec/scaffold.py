"""`myriad init`: a first spec from a handful of choices, one that plans clean.

Pure: choices and the catalog in, YAML text out (with comments a newcomer reads), so the
command and the tests write the same file. Every figure comes from the catalog's server
layout for the chosen GPU; what the catalog cannot know (addresses, storage, power price) gets
a stated placeholder the comments point at.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

from myriad.errors import BadArguments
from myriad.spec.catalog_models import Catalog, ServerLayout
from myriad.spec.references import suggestion

Fabric = Literal["infiniband", "roce"]
Orchestrator = Literal["slurm", "kubernetes"]
OS_CHOICES = ("ubuntu-24.04", "ubuntu-22.04", "debian-12")
FABRICS: tuple[Fabric, ...] = ("infiniband", "roce")
ORCHESTRATORS: tuple[Orchestrator, ...] = ("slurm", "kubernetes")
# Rail-optimized leaves of the NIC's own speed: one switch model per fabric and speed.
_LEAF = {
    ("infiniband", 200): "QM8700",
    ("infiniband", 400): "QM9700",
    ("roce", 200): "SN5600-200G",
    ("roce", 400): "SN5600-400G",
    ("roce", 800): "SN5600",
}
# Every network leaves its first addresses to gateways and servers (plan/addresses.py);
# the storage server takes the second, below the nodes' range.
_STORAGE_SERVER_INDEX = 2


DEFAULT_NAME = "my-cluster"


@dataclass(frozen=True, slots=True)
class Choices:
    name: str = DEFAULT_NAME
    gpu: str = "H100-SXM5-80GB"
    nodes: int = 4
    fabric: Fabric = "infiniband"
    os: str = "ubuntu-24.04"
    orchestrator: Orchestrator = "slurm"


def default_name(target: Path) -> str:
    """The folder's name for inventories/<name>/cluster.yaml, else the file's; "my-cluster"
    when neither is a valid cluster name."""
    for candidate in (target.resolve().parent.name, target.stem):
        name = candidate.lower()
        if candidate != "cluster" and re.fullmatch(r"[a-z][a-z0-9-]{0,30}[a-z0-9]|[a-z]", name):
            return name
    return DEFAULT_NAME


_QUESTIONS = {
    "gpu": "GPU model",
    "nodes": "GPU nodes",
    "fabric": f"fabric ({', '.join(FABRICS)})",
    "os": f"OS ({', '.join(OS_CHOICES)})",
    "orchestrator": f"scheduler ({', '.join(ORCHESTRATORS)})",
}


def ask_missing(
    given: Mapping[str, Any], gpus: Sequence[str], ask: Callable[[str], str]
) -> dict[str, Any]:
    """Each choice not given, asked with its default (Enter keeps it)."""
    defaults = {f.name: f.default for f in fields(Choices)}
    answers = dict(given)
    for key, question in _QUESTIONS.items():
        if answers.get(key) is not None:
            continue
        shown = f"{question}, one of {', '.join(gpus)}" if key == "gpu" else question
        reply = ask(f"{shown} [{defaults[key]}]: ").strip()
        if reply:
            answers[key] = int(reply) if key == "nodes" and reply.isdigit() else reply
    return answers


def _standalone(catalog: Catalog) -> dict[str, ServerLayout]:
    """Server layouts that stand alone: a rack-scale system's compute trays come by whole racks
    with their own power and cooling, which a first spec of N nodes cannot guess (start from
    inventories/gb200-nvl72 instead)."""
    return {name: s for name, s in catalog.servers.items() if s.rack_system is None}


def gpu_models(catalog: Catalog) -> list[str]:
    """The GPUs `init` can lay out: those with a stand-alone server layout in the catalog."""
    return sorted({layout.gpu_model for layout in _standalone(catalog).values()})


def _server(catalog: Catalog, gpu: str) -> tuple[str, ServerLayout]:
    layouts = sorted((n, s) for n, s in _standalone(catalog).items() if s.gpu_model == gpu)
    if not layouts:
        raise BadArguments(
            f"--gpu {gpu}: no server layout in the catalog has it; "
            + suggestion(gpu, gpu_models(catalog))
        )
    # An OEM (HGX) layout first: most clusters are not built from DGX systems.
    layouts.sort(key=lambda item: not item[0].startswith("HGX"))
    return layouts[0]


def _network(base: str, hosts: int) -> str:
    """The smallest network from `base` with room for the reserved addresses and `hosts`."""
    needed = hosts + 10 + 2
    prefix = max(8, min(24, 32 - math.ceil(math.log2(needed))))
    return str(ipaddress.ip_network(f"{base}/{prefix}", strict=False))


def _compute_network(rails: int, nodes: int, leaf_ports: int) -> str:
    """A network with room for every rail's addresses, as plan/addresses.py cuts it: one
    island, so a rail spans ceil(nodes / (ports / 2)) leaves; with more than one, a subnet
    per leaf for its ports / 2 nodes after the reserved 10 (rail_addresses)."""
    half = leaf_ports // 2
    leaves = math.ceil(nodes / half) if half else 1
    if nodes * rails <= leaf_ports or leaves == 1:
        prefix = 32 - math.ceil(math.log2(rails * (nodes + 12)))
    else:
        bits = (10 + half).bit_length() + (leaves - 1).bit_length() + (rails - 1).bit_length()
        prefix = 32 - bits
    return str(ipaddress.ip_network(f"10.64.0.0/{max(8, min(24, prefix))}", strict=False))


def scaffold(choices: Choices, catalog: Catalog) -> str:
    if choices.nodes < 1:
        raise BadArguments(f"--nodes {choices.nodes}: a cluster needs at least one GPU node")
    if choices.fabric not in FABRICS:
        raise BadArguments(f"--fabric {choices.fabric}: one of {', '.join(FABRICS)}")
    if choices.orchestrator not in ORCHESTRATORS:
        raise BadArguments(f"--scheduler {choices.orchestrator}: one of {', '.join(ORCHESTRATORS)}")
    if choices.os not in OS_CHOICES:
        raise BadArguments(f"--os {choices.os}: one of {', '.join(OS_CHOICES)}")
    server_name, server = _server(catalog, choices.gpu)
    nic = catalog.nics[server.compute_nics.model]
    leaf = _LEAF.get((choices.fabric, nic.speed_gbps))
    if leaf is None or (choices.fabric == "infiniband" and "infiniband" not in nic.link_layers):
        raise BadArguments(
            f"--fabric {choices.fabric}: {server_name}'s {nic.speed_gbps} Gb/s "
            f"{server.compute_nics.model} has no {choices.fabric} leaf in the catalog"
        )
    controllers = 1
    hosts = choices.nodes + controllers + 1
    management = _network("10.10.0.0", hosts)
    storage = _network("10.20.0.0", hosts)
    storage_server = ipaddress.ip_network(storage)[_STORAGE_SERVER_INDEX]
    rails = server.compute_nics.count
    compute = _compute_network(rails, choices.nodes, catalog.switches[leaf].ports)
    cpu = server.cpu
    lines = [
        f"# {choices.name}: {choices.nodes} x {server_name} "
        f"({choices.nodes * server.gpu_count} GPUs), written by `myriad init`.",
        "# Check every value marked CHECK against your site; `myriad plan` this file next.",
        "apiVersion: myriad/v1",
        "kind: Cluster",
        "metadata:",
        f"  name: {choices.name}",
        "provider:",
        "  kind: baremetal",
        "  bmc: redfish",
        "  bmc_credentials_secret: bmc-admin  # CHECK: the Pulumi secret holding the BMC login",
        "profiles:",
        "  gpu-node:",
        f"    server: {server_name}  # `myriad catalog show {server_name}`",
        f"    gpu: {{model: {server.gpu_model}, count: {server.gpu_count}}}",
        f"    cpu: {{sockets: {cpu.sockets}, cores_per_socket: {cpu.cores_per_socket}}}",
        f"    memory_gib: {server.memory_gib}",
        f"    pcie: {{gen: {server.pcie_gen}, switches: {server.pcie_switches}}}",
        f"    nvswitch: {server.nvswitch}",
        "    nics:",
        f"      compute: {{model: {server.compute_nics.model}, count: {rails}}}",
        "      storage: {model: ConnectX-6-Dx, count: 1, bond: 802.3ad}",
        "  head:",
        "    cpu: {sockets: 2, cores_per_socket: 32}",
        "    memory_gib: 512",
        "    nics:",
        "      storage: {model: ConnectX-6-Dx, count: 1, bond: 802.3ad}",
        "    power_kw: 1.2",
        "    rack_units: 2",
        "pools:",
        f"  - {{name: ctl, profile: head, count: {controllers}, role: controller}}",
        "  - {name: login, profile: head, count: 1, role: login}",
        f"  - {{name: gpu, profile: gpu-node, count: {choices.nodes}, role: compute}}",
        "network:",
        f"  fabric: {choices.fabric}",
        f"  topology: {{kind: rail-optimized, switch: {leaf}}}",
    ]
    if choices.fabric == "roce":
        lines.append(
            "  roce: {dscp: 26, pfc_priority: 3, cnp_dscp: 48, cnp_priority: 6, mtu: 9000}"
        )
    lines += [
        "  addressing:  # CHECK: networks free at your site",
        f"    management: {management}",
        f"    storage: {storage}",
    ]
    if choices.fabric == "roce":
        lines.append(f"    compute: {compute}")
    lines += [
        "storage:  # CHECK: your shared file system",
        "  kind: nfs",
        f"  server: {storage_server}",
        "  export: /srv/data",
        "  mount: /data",
        "software:",
        f"  os: {choices.os}",
        '  nvidia_driver: "580"',
        # RoCE's QoS tools (mlnx_qos) ship only with DOCA.
        *(
            ['  ofed: doca\n  doca_version: "2.9.1"']
            if choices.fabric == "roce"
            else ["  ofed: inbox"]
        ),
        f"  container_runtime: {'docker' if choices.orchestrator == 'slurm' else 'containerd'}",
        f"  orchestrator: {choices.orchestrator}",
    ]
    if choices.orchestrator == "slurm":
        lines += [
            "  slurm:",
            "    # Enroot and Pyxis (srun --container-image) need release checksums you vouch",
            "    # for: replace this with software.slurm.containers (roles/container_runtime).",
            "    no_containers: true",
        ]
    lines.append("facility: {pue: 1.3, usd_per_kwh: 0.10, rack_kw: 40, cooling: liquid}  # CHECK")
    return "\n".join(lines) + "\n"
