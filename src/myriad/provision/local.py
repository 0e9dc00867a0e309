"""The local environment: one systemd container per node on a Docker network of its own.

The containers stand in for machines: the same inventory, roles and validation run against
them as against a real cluster. `converge` makes Docker match the spec (create what is
missing, start what is stopped) and is fast when nothing differs; a node the spec no longer
names is refused, never removed, since its jobs would die with it (`myriad remove` drains it
first); `remove` takes everything away again.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import logging
import subprocess
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

from myriad.errors import LocalClusterError, NodesLeftTheSpec
from myriad.plan.addresses import host_addresses
from myriad.plan.nodes import container_name, iter_nodes
from myriad.provision.node_image import IMAGE_TAG
from myriad.spec.models import Cluster

log = logging.getLogger(__name__)

CLUSTER_LABEL = "org.myriad.cluster"
NODE_LABEL = "org.myriad.node"
CONFIG_LABEL = "org.myriad.config"
DOCKER_TIMEOUT_S = 120.0
BOOT_TIMEOUT_S = 120.0
# What systemd needs in a container where --privileged is refused (see DESIGN.md).
SYSTEMD_RUN_OPTIONS = (
    "--cap-add", "SYS_ADMIN",
    "--security-opt", "seccomp=unconfined",
    "--cgroupns=host",
    "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
    "--tmpfs", "/run",
    "--tmpfs", "/run/lock",
)  # fmt: skip

# stale: kept running although made from another image or options (`recreate=False`).
NodeState = Literal["created", "started", "running", "stale"]


@dataclass(frozen=True, slots=True)
class LocalNode:
    name: str
    container: str
    address: str


@dataclass(frozen=True, slots=True)
class NodeStatus:
    name: str
    container: str
    state: str
    address: str | None


def network_name(spec: Cluster) -> str:
    return f"myriad-{spec.metadata.name}"


def local_nodes(spec: Cluster) -> list[LocalNode]:
    nodes = list(iter_nodes(spec))
    addresses = host_addresses(spec.network.addressing.management, len(nodes), what="management")
    return [
        LocalNode(node.name, container_name(spec, node.name), addresses[i])
        for i, node in enumerate(nodes)
    ]


def docker(*args: str, timeout: float = DOCKER_TIMEOUT_S, check: bool = True) -> str:
    try:
        done = subprocess.run(
            ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
        )
    except FileNotFoundError:
        raise LocalClusterError("docker is not installed; run scripts/bootstrap") from None
    except subprocess.TimeoutExpired:
        raise LocalClusterError(f"`docker {' '.join(args[:3])}` took over {timeout:g}s") from None
    if check and done.returncode != 0:
        lines = [
            line
            for line in (done.stderr or done.stdout).strip().splitlines()
            if line.strip() and "--help' for more information" not in line
        ]
        reason = " / ".join(lines[-3:]) if lines else f"exit {done.returncode}"
        raise LocalClusterError(f"`docker {' '.join(args[:3])}` failed: {reason}")
    return done.stdout


def _gateway(spec: Cluster) -> str:
    # .1 of the management network; node addresses start further up (render.addresses).
    return str(ipaddress.ip_network(spec.network.addressing.management).network_address + 1)


def ensure_network(spec: Cluster) -> bool:
    """Create the cluster's network if missing; True when it was created."""
    name = network_name(spec)
    found = docker("network", "ls", "--filter", f"name=^{name}$", "--format", "{{.Name}}")
    if found.strip() == name:
        subnet = docker(
            "network", "inspect", name, "--format", "{{range .IPAM.Config}}{{.Subnet}}{{end}}"
        ).strip()
        if subnet != spec.network.addressing.management:
            raise LocalClusterError(
                f"network {name} exists with subnet {subnet}, but the spec's management network "
                f"is {spec.network.addressing.management}: run `myriad down` first"
            )
        return False
    try:
        docker(
            "network", "create", "--driver", "bridge",
            "--subnet", spec.network.addressing.management,
            "--gateway", _gateway(spec),
            "--label", f"{CLUSTER_LABEL}={spec.metadata.name}",
            name,
        )  # fmt: skip
    except LocalClusterError as exc:
        if "overlaps" not in str(exc):
            raise
        owners = subnet_owners(spec.network.addressing.management)
        raise LocalClusterError(
            f"the management subnet {spec.network.addressing.management} overlaps "
            + (", ".join(owners) if owners else "a subnet Docker holds")
            + ": choose another network.addressing.management, or remove what holds it"
        ) from None
    return True


def subnet_owners(subnet: str) -> list[str]:
    """The Docker networks whose subnets overlap `subnet`, each with the Myriad cluster that
    made it (its label) or the containers on it."""
    wanted = ipaddress.ip_network(subnet, strict=False)
    ids = docker("network", "ls", "--quiet", "--no-trunc").split()
    if not ids:
        return []
    owners = []
    for network in json.loads(docker("network", "inspect", *ids)):
        configs = (network.get("IPAM") or {}).get("Config") or []
        taken = [c["Subnet"] for c in configs if c.get("Subnet")]
        clash = [s for s in taken if ipaddress.ip_network(s, strict=False).overlaps(wanted)]
        if not clash:
            continue
        cluster = (network.get("Labels") or {}).get(CLUSTER_LABEL)
        containers = sorted(c.get("Name", "?") for c in (network.get("Containers") or {}).values())
        whose = (
            f"of Myriad cluster {cluster}"
            if cluster
            else (f"used by {', '.join(containers[:3])}" if containers else "no containers")
        )
        owners.append(f"Docker network {network.get('Name')} ({', '.join(clash)}, {whose})")
    return owners


def container_states(spec: Cluster) -> dict[str, tuple[str, str]]:
    """Container name → (Docker state, config label) for this cluster's containers."""
    out = docker(
        "ps", "-a",
        "--filter", f"label={CLUSTER_LABEL}={spec.metadata.name}",
        "--format", f'{{{{.Names}}}}\t{{{{.State}}}}\t{{{{.Label "{CONFIG_LABEL}"}}}}',
    )  # fmt: skip
    states = {}
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) == 3:
            states[parts[0]] = (parts[1], parts[2])
    return states


def surplus_nodes(spec: Cluster, states: Mapping[str, tuple[str, str]]) -> list[str]:
    """Nodes with a container of this cluster that the spec no longer names."""
    wanted = {n.container for n in local_nodes(spec)}
    prefix = container_name(spec, "")
    return sorted(c.removeprefix(prefix) for c in states if c not in wanted)


def refuse_surplus(
    spec: Cluster, spec_file: str = "SPEC", states: Mapping[str, tuple[str, str]] | None = None
) -> None:
    """Raise NodesLeftTheSpec when containers of nodes the spec no longer names exist."""
    surplus = surplus_nodes(spec, container_states(spec) if states is None else states)
    if surplus:
        names = ",".join(surplus)
        raise NodesLeftTheSpec(
            f"{spec_file}: {names} no longer in the spec but still has a container: bringing the "
            f"cluster to the spec would remove them with their jobs; `myriad remove {spec_file} "
            f"{names}` drains them, waits for their jobs and takes them out (or raise the "
            "pool's count back)"
        )


def _run_arguments(spec: Cluster, node: LocalNode, image_id: str) -> list[str]:
    return [
        "--name", node.container,
        "--hostname", node.name,
        "--network", network_name(spec),
        "--ip", node.address,
        # A reboot inside the node (Slurm's RebootProgram, Ansible's reboot) ends its systemd
        # with status 0, and Docker starts it again as a server's firmware boots it; a node
        # stopped or killed from outside (powered off) stays down.
        "--restart", "unless-stopped",
        *SYSTEMD_RUN_OPTIONS,
        image_id, "/lib/systemd/systemd",
    ]  # fmt: skip


def _config_digest(arguments: list[str]) -> str:
    """Names what the container was made from: a new image or other options mean recreate."""
    return hashlib.sha256("\0".join(arguments).encode()).hexdigest()[:16]


def _create(spec: Cluster, node: LocalNode, arguments: list[str]) -> None:
    docker(
        "run", "--detach",
        "--label", f"{CLUSTER_LABEL}={spec.metadata.name}",
        "--label", f"{NODE_LABEL}={node.name}",
        "--label", f"{CONFIG_LABEL}={_config_digest(arguments)}",
        *arguments,
    )  # fmt: skip


def wait_booted(container: str, timeout_s: float = BOOT_TIMEOUT_S) -> None:
    """Until systemd says running or degraded: both mean the boot finished."""
    deadline = time.monotonic() + timeout_s
    state = ""
    while time.monotonic() < deadline:
        state = docker(
            "exec", container, "systemctl", "is-system-running", check=False, timeout=30
        ).strip()
        if state in ("running", "degraded"):
            return
        time.sleep(0.5)
    raise LocalClusterError(
        f"{container} did not finish booting within {timeout_s:g}s (systemd says {state!r}); "
        f"see `docker exec {container} systemctl --failed`"
    )


def converge(
    spec: Cluster,
    *,
    image: str = IMAGE_TAG,
    images: Mapping[str, str] | None = None,
    recreate: bool = True,
    on_node: Callable[[str, NodeState], None] | None = None,
) -> dict[str, NodeState]:
    """Make Docker match the spec's nodes; returns what happened to each node. `images`
    names a node's own image (image mode: its profile's baked image); others get `image`.
    `recreate=False` keeps a running container made from another image as it is ("stale"):
    image mode rolls those onto the new image one at a time, their jobs waited for."""
    ensure_network(spec)
    refs = {image, *(images or {}).values()}
    ids = {ref: docker("image", "inspect", "--format", "{{.Id}}", ref).strip() for ref in refs}
    wanted = local_nodes(spec)
    states = container_states(spec)
    refuse_surplus(spec, states=states)
    outcome: dict[str, NodeState] = {}

    def bring(node: LocalNode) -> tuple[str, NodeState]:
        arguments = _run_arguments(spec, node, ids[(images or {}).get(node.name, image)])
        state, config = states.get(node.container, ("", ""))
        result: NodeState
        if state and config != _config_digest(arguments):
            if not recreate and state == "running":
                if on_node is not None:
                    on_node(node.name, "stale")
                return node.name, "stale"
            docker("rm", "--force", node.container)
            state = ""
        if not state:
            _create(spec, node, arguments)
            result = "created"
        elif state == "paused":
            # `docker start` refuses a paused container; a frozen node is thawed, not restarted.
            docker("unpause", node.container)
            result = "started"
        elif state != "running":
            docker("start", node.container)
            result = "started"
        else:
            result = "running"
        wait_booted(node.container)
        if on_node is not None:
            on_node(node.name, result)
        return node.name, result

    # Container starts are mostly waiting on Docker and systemd; a few at a time overlap it.
    with ThreadPoolExecutor(max_workers=8) as pool:
        outcome.update(pool.map(bring, wanted))
    return outcome


def status(spec: Cluster) -> list[NodeStatus]:
    states = container_states(spec)
    return [
        NodeStatus(
            n.name,
            n.container,
            states[n.container][0] if n.container in states else "missing",
            n.address if n.container in states else None,
        )
        for n in local_nodes(spec)
    ]


def remove(spec: Cluster) -> list[str]:
    """Remove the cluster's containers and network; returns what was removed."""
    removed = sorted(container_states(spec))
    if removed:
        docker("rm", "--force", *removed, timeout=300)
    name = network_name(spec)
    if docker("network", "ls", "--filter", f"name=^{name}$", "--format", "{{.Name}}").strip():
        docker("network", "rm", name)
        removed.append(name)
    return removed
