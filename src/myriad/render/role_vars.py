"""Spec → role variables. Each function says which role variables a part of the spec sets.

The names are the roles' interfaces (`roles/<role>/meta/argument_specs.yml`); a test
checks that every variable rendered here is declared by its role, so a rename in a role
fails the test suite instead of being silently ignored by Ansible.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from myriad.errors import StackOutputsError
from myriad.plan.fabric import leaf_placement
from myriad.plan.machines import StackStorage
from myriad.plan.model import Plan
from myriad.plan.nodes import NodeRecord
from myriad.plan.nvlink import rack_domain_members, rack_system_of
from myriad.plan.ports import hardware_expectation, ports, ports_to_name
from myriad.spec.catalog_models import Catalog
from myriad.spec.models import Cluster, Pool, Profile

# Slurm drains a node whose RealMemory exceeds what slurmd measures; the kernel, the
# daemons and page tables take a few percent of what the spec calls the node's memory.
SLURM_MEMORY_SHARE = 0.95
# Fabrics of three tiers route between islands over many equal-cost paths; more QPs per
# connection give the switches' hashing more flows to spread (REFERENCE.md, NCCL).
LARGE_FABRIC_QPS_PER_CONNECTION = 4
# Where the local twin's stand-in NVIDIA driver lists its stub GPUs (a directory per GPU).
TWIN_GPU_DRIVER_DIR = "/run/myriad-twin/nvidia/gpus"


def gpu_gres_type(model: str) -> str:
    """`H100-SXM5-80GB` → `h100`: a substring of NVML's name, as AutoDetect=nvml needs."""
    return model.split("-")[0].lower()


def cluster_vars(
    spec: Cluster,
    catalog: Catalog,
    plan: Plan,
    nodes: Sequence[NodeRecord],
    addresses: Mapping[str, str],
    *,
    filesystem: StackStorage | None = None,
) -> dict[str, Any]:
    variables: dict[str, Any] = {
        "myriad_cluster": spec.metadata.name,
        "myriad_provider": spec.provider.kind,
        "myriad_fabric": spec.network.fabric,
        "myriad_orchestrator": spec.software.orchestrator,
        "common_hosts": [{"name": n.name, "address": addresses[n.name]} for n in nodes],
    }
    variables.update(_driver_vars(spec))
    variables.update(_rdma_vars(spec))
    variables.update(_nccl_vars(spec, plan))
    variables.update(_storage_vars(spec, filesystem))
    variables.update(_container_vars(spec, plan))
    if spec.software.orchestrator == "slurm":
        variables.update(_slurm_vars(spec, nodes, addresses))
    else:
        variables.update(_kubernetes_vars(spec))
    variables.update(_health_vars(spec))
    variables.update(_reboot_vars(spec))
    variables.update(_kernel_vars(spec))
    if spec.provider.kind == "local":
        variables.update(CONTAINER_NODE_VARS)
    return variables


def _reboot_vars(spec: Cluster) -> dict[str, Any]:
    """site.yml's reboot play: the spec's policy, batch and patience (spec/bringup.py)."""
    bringup = spec.bringup
    variables: dict[str, Any] = {
        "myriad_reboot": bringup.reboot,
        "myriad_reboot_batch": bringup.reboot_batch,
        "myriad_reboot_timeout_s": bringup.reboot_timeout_s,
    }
    if spec.provider.kind == "local":
        # A container shares the host's boot_id, which Ansible's reboot waits to see change;
        # the start time of its PID 1 (field 22 of /proc/1/stat) changes at every boot.
        variables["myriad_reboot_boot_time_command"] = "cut -d ' ' -f 22 /proc/1/stat"
    return variables


def _kernel_vars(spec: Cluster) -> dict[str, Any]:
    """The spec's kernel: the common role installs, checks and holds it, the driver role holds
    it rather than the running one, and validation expects it booted."""
    release = spec.software.kernel
    if release is None:
        return {}
    variables: dict[str, Any] = {"common_kernel_release": release}
    if spec.software.nvidia_driver is not None:
        variables["nvidia_driver_kernel_release"] = release
    return variables


# Where the health role installs the runner (roles/health defaults/main.yml health_program).
HEALTH_PROGRAM = "/usr/local/sbin/myriad-health"


def _health_vars(spec: Cluster) -> dict[str, Any]:
    """Node health: the health role on, and Slurm's health check settings from the spec."""
    if spec.health is None:
        return {}
    variables: dict[str, Any] = {"health_enabled": True}
    if spec.software.orchestrator == "slurm":
        variables.update(
            slurm_health_check_program=HEALTH_PROGRAM,
            slurm_health_check_interval=spec.health.interval_s,
            slurm_health_check_node_state=spec.health.node_state,
        )
        remediation = spec.health.remediation
        if remediation is not None and remediation.requeue_exit:
            variables["slurm_requeue_exit"] = list(remediation.requeue_exit)
    else:
        variables.update(health_npd_enabled=True, health_npd_interval_s=spec.health.interval_s)
    return variables


# The local provider's nodes are containers on the operator's machine: the kernel, the clock
# and /proc/sys belong to the host, and only the Debian mirror is reachable. Every role keeps
# its full behaviour for real nodes; these switches are the roles' own documented ways to
# skip what a container cannot do (see each role's README), so the same roles and the same
# validation still run everywhere else.
CONTAINER_NODE_VARS: dict[str, Any] = {
    "common_sysctl_apply": False,
    "common_kernel_modules_load": False,
    "common_time_sync_control_clock": False,
    "common_time_pools": [],
    # A container boots no kernel and gets a new /etc/hosts at every start: a unit puts back
    # what a server keeps (the kernel its boot loader boots, the hosts block), and the role
    # and validation read that kernel record.
    "common_container_boot": True,
    "common_kernel_release_file": "/run/myriad/kernel-release",
    "nvidia_driver_manage_kernel_module": False,
    # Only Debian's own driver branch is reachable from the containers.
    "nvidia_driver_source": "distribution",
    "rdma_kernel_modules_load": False,
    "roce_apply": False,
    "infiniband_opensm_start": False,
    "storage_net_apply": False,
    "container_runtime_package_source": "distribution",
    # Docker inside an unprivileged container: no iptables (no NET_ADMIN), no overlay mounts.
    "container_runtime_docker_daemon_options": {
        "iptables": False,
        "ip-masq": False,
        "bridge": "none",
        "storage-driver": "vfs",
    },
    "container_runtime_nvidia_toolkit_install": False,
    "container_runtime_enroot_install": False,
    "container_runtime_pyxis_install": False,
    "kubernetes_sysctl_apply": False,
    "kubernetes_kernel_modules_load": False,
    "kubernetes_apt_repository_enabled": False,
    "kubernetes_packages_install": False,
    "kubernetes_cluster_bootstrap": False,
    # slurmctld judges a reboot by the boot time slurmd reports (now minus sysinfo's uptime,
    # slurmctld/node_mgr.c), which in a container is the host's: a rebooted node never looks
    # rebooted, and `scontrol reboot` ends in "reboot timed out". `-b` (slurmd(8), "report
    # node rebooted when daemon restarted") counts from slurmd's start; ReturnToService=2
    # keeps a plain slurmd restart from marking the node down.
    "slurm_slurmd_options": "-b",
}


def _driver_vars(spec: Cluster) -> dict[str, Any]:
    driver = spec.software.nvidia_driver
    if driver is None:
        return {}
    variables: dict[str, Any] = {
        "nvidia_driver_branch": driver.split(".")[0],
        # On EFA, GPUDirect RDMA is the efa driver's and libfabric's (DMA-BUF); nvidia-peermem
        # serves the HCA stack's peer-memory interface, which an EFA node does not have.
        "nvidia_driver_gpudirect_rdma": (
            spec.software.gpudirect_rdma and spec.network.fabric not in ("ethernet", "efa")
        ),
    }
    if "." in driver:
        variables["nvidia_driver_version"] = driver
    return variables


def _rdma_vars(spec: Cluster) -> dict[str, Any]:
    variables: dict[str, Any] = {"rdma_provider": spec.software.ofed}
    if spec.software.ofed == "doca":
        variables["rdma_doca_version"] = spec.software.doca_version
        variables["rdma_doca_repo_enabled"] = True
    if spec.network.fabric == "infiniband":
        ib = spec.network.ib
        variables.update(
            {
                "rdma_ipoib_enabled": ib.ipoib,
                "infiniband_sm_priority": ib.sm_priority,
                "infiniband_routing_engine": ib.routing_engine,
                "infiniband_partitions": [
                    {
                        "name": "default" if pkey.lower() == "0x7fff" else f"pkey_{pkey[2:]}",
                        "pkey": pkey,
                    }
                    for pkey in ib.partition_keys
                ],
            }
        )
    if spec.network.fabric == "roce":
        qos = spec.network.roce_qos
        variables.update(
            {
                "roce_dscp": qos.dscp,
                "roce_priority": qos.pfc_priority,
                "roce_cnp_dscp": qos.cnp_dscp,
                "roce_cnp_priority": qos.cnp_priority,
                "roce_ecn_enabled": qos.ecn,
                "roce_mtu": qos.mtu,
            }
        )
    return variables


def _nccl_vars(spec: Cluster, plan: Plan) -> dict[str, Any]:
    fabric = spec.network.fabric
    variables: dict[str, Any] = {
        "nccl_fabric": fabric,
        "nccl_rail_optimized": spec.network.topology.kind == "rail-optimized",
        "nccl_conf_overrides": dict(spec.software.nccl),
    }
    if fabric == "roce":
        # Unset, NCCL (2.21+) picks the RoCEv2 GID of the rail's IPv4 address itself.
        if spec.network.roce_qos.gid_index is not None:
            variables["nccl_roce_gid_index"] = spec.network.roce_qos.gid_index
        variables["nccl_roce_dscp"] = spec.network.roce_qos.dscp
    if fabric == "infiniband":
        variables["nccl_ib_sl"] = spec.network.ib.service_level
    if plan.fabric is not None and plan.fabric.tiers >= 3:
        variables["nccl_ib_qps_per_connection"] = LARGE_FABRIC_QPS_PER_CONNECTION
    if fabric == "efa":
        # NCCL reaches EFA through the aws-ofi-nccl plugin (role efa), not its verbs transport:
        # the nccl role's ethernet settings minus NCCL_IB_DISABLE, so no NCCL_IB_* is written.
        variables["nccl_fabric"] = "ethernet"
        variables["nccl_conf_overrides"] = {"NCCL_IB_DISABLE": None, **spec.software.nccl}
        variables.pop("nccl_ib_qps_per_connection", None)
    return variables


def _storage_vars(spec: Cluster, made: StackStorage | None = None) -> dict[str, Any]:
    storage = spec.storage
    # WEKA's client comes from the WEKA cluster itself, not from a package the role can
    # install: bring-up mounts nothing for it (lint storage-not-mounted says so).
    if storage.kind in ("none", "weka"):
        return {"storage_net_mount_kind": "none"}
    if storage.kind == "fsx-lustre":
        return _fsx_vars(spec, made)
    variables: dict[str, Any] = {
        "storage_net_mount_kind": storage.kind,
        "storage_net_mount_path": storage.mount,
    }
    if storage.kind == "nfs":
        variables["storage_net_nfs_server"] = storage.server
        variables["storage_net_nfs_export"] = storage.export
    elif storage.kind == "lustre":
        variables["storage_net_lustre_mgs_nids"] = storage.server
        variables["storage_net_lustre_fsname"] = storage.export
    elif storage.kind == "beegfs":
        variables["storage_net_beegfs_mgmtd_host"] = storage.server
    if storage.options:
        variables["storage_net_mount_options_extra"] = list(storage.options)
    return variables


def _fsx_vars(spec: Cluster, made: StackStorage | None) -> dict[str, Any]:
    """FSx for Lustre is a Lustre mount of `<dns_name>@tcp:/<mount_name>`, both of which
    only the stack knows (AWS, "Mounting from an Amazon EC2 instance"). The client comes from
    AWS's FSx repository, built for AWS's kernels; LNet keeps its default (tcp on the node's
    primary interface, where the file system's ENI is reachable): no storage bond on AWS."""
    if made is None:
        raise StackOutputsError(
            "storage.kind is fsx-lustre: its address (<dns_name>@tcp:/<mount_name>) comes from "
            "the aws stack's `storage` output; render with --stack ENV or --stack-outputs FILE"
        )
    variables: dict[str, Any] = {
        "storage_net_mount_kind": "lustre",
        "storage_net_mount_path": spec.storage.mount,
        "storage_net_lustre_mgs_nids": made.mgs_nid,
        "storage_net_lustre_fsname": made.mount_name,
        "storage_net_lustre_source": "fsx",
        "storage_net_lustre_lnet_networks": "",
    }
    if spec.storage.options:
        variables["storage_net_mount_options_extra"] = list(spec.storage.options)
    return variables


def _container_vars(spec: Cluster, plan: Plan) -> dict[str, Any]:
    # Enroot and Pyxis install from NVIDIA's GitHub releases only with checksums the operator
    # vouches for (software.slurm.containers); without them they stay off and `myriad plan`
    # says so (lint slurm-no-containers).
    containers = spec.software.slurm.containers
    enabled = spec.software.orchestrator == "slurm" and containers is not None
    variables: dict[str, Any] = {
        "container_runtime_engine": spec.software.container_runtime,
        "container_runtime_enroot_enabled": enabled,
        "container_runtime_pyxis_enabled": enabled,
    }
    if enabled and containers is not None:
        variables.update(
            {
                "container_runtime_enroot_version": containers.enroot_version,
                "container_runtime_enroot_checksums": dict(containers.enroot_checksums),
                "container_runtime_pyxis_version": containers.pyxis_version,
                "container_runtime_pyxis_checksum": containers.pyxis_checksum,
            }
        )
    return variables


def gpu_device_groups(sockets: int, cores_per_socket: int, gpus: int) -> list[dict[str, str]]:
    """gres.conf lines for a node's GPUs: each socket's share with the cores of that socket.

    GPUs are numbered in PCI bus order (/dev/nvidia0 first), which on HGX-style boards fills
    one socket's PCIe switches before the next, so GPU i sits on socket i * sockets // gpus.
    Cores= uses Slurm's core numbering, socket by socket (gres.conf, Cores).
    """
    groups = []
    for socket in range(sockets):
        first, last = socket * gpus // sockets, (socket + 1) * gpus // sockets - 1
        if last < first:
            continue
        files = f"/dev/nvidia{first}" if first == last else f"/dev/nvidia[{first}-{last}]"
        cores = f"{socket * cores_per_socket}-{(socket + 1) * cores_per_socket - 1}"
        groups.append({"file": files, "cores": cores})
    return groups


def _slurm_vars(
    spec: Cluster, nodes: Sequence[NodeRecord], addresses: Mapping[str, str]
) -> dict[str, Any]:
    controllers = [n for n in nodes if n.role == "controller"]
    node_sets = []
    partitions: list[dict[str, Any]] = []
    for pool in spec.pools_with_role("compute"):
        profile = spec.profiles[pool.profile]
        names = pool.hostnames()
        entry: dict[str, Any] = {
            "names": names,
            "sockets": profile.cpu.sockets,
            "cores_per_socket": profile.cpu.cores_per_socket,
            "threads_per_core": profile.cpu.threads_per_core,
            "real_memory": int(profile.memory_gib * 1024 * SLURM_MEMORY_SHARE),
        }
        if profile.gpu is not None:
            # Explicit device files with their cores, on every OS: Ubuntu 22.04 packages no
            # NVML plugin, and AutoDetect would also leave Cores= to a library on the node.
            entry["gres"] = [
                {
                    "name": "gpu",
                    "type": gpu_gres_type(profile.gpu.model),
                    "count": profile.gpu.count,
                    "devices": gpu_device_groups(
                        profile.cpu.sockets, profile.cpu.cores_per_socket, profile.gpu.count
                    ),
                }
            ]
        node_sets.append(entry)
        partitions.append({"name": pool.name, "nodes": names, "default": not partitions})
    variables: dict[str, Any] = {
        "slurm_cluster_name": spec.metadata.name,
        "slurm_controllers": [{"name": n.name, "address": addresses[n.name]} for n in controllers],
        "slurm_nodes": node_sets,
        "slurm_partitions": partitions,
        "slurm_accounting_enabled": spec.software.slurm.accounting,
        "slurm_gres_autodetect": "off",
    }
    if spec.software.slurm.state_save_location is not None:
        variables["slurm_state_save_location"] = spec.software.slurm.state_save_location
    if spec.software.slurm.legacy_cgroup:
        # The OS's Slurm has no cgroup/v2 (lint slurm-legacy-cgroup): boot the v1 hierarchy.
        variables["slurm_cgroup_legacy_hierarchy"] = True
    if spec.software.slurm.accounting and controllers:
        variables["slurm_dbd_host"] = controllers[0].name
    return variables


def _kubernetes_vars(spec: Cluster) -> dict[str, Any]:
    k8s = spec.software.k8s
    return {
        "kubernetes_cluster_name": spec.metadata.name,
        "kubernetes_version": k8s.version,
        "kubernetes_pod_subnet": k8s.pod_cidr,
        "kubernetes_service_subnet": k8s.service_cidr,
        "kubernetes_cni": k8s.cni,
        "kubernetes_gpu_operator": k8s.gpu_operator,
        "kubernetes_control_plane_endpoint": k8s.control_plane_endpoint or "",
    }


# The systemd units of each NVLink fabric software (nvidia_driver_nvlink_fabric).
NVLINK_FABRIC_UNITS: dict[str, tuple[str, ...]] = {
    "none": (),
    "fabricmanager": ("nvidia-fabricmanager.service",),
    "fabricmanager-nvlsm": ("nvidia-fabricmanager.service",),
    "imex": ("nvidia-imex.service",),
}


# Compute capability of Blackwell (catalog `compute_capability`, NVIDIA's "CUDA GPUs - Compute
# Capability" table: B200 10.0): its HGX boards carry fourth-generation NVSwitch, where the
# Fabric Manager guide puts the NVLink Subnet Manager beside Fabric Manager.
BLACKWELL = 100


def nvlink_fabric_software(profile: Profile, catalog: Catalog) -> str:
    """The nvidia_driver role's nvidia_driver_nvlink_fabric for a profile (the role's README,
    "NVLink fabric software by platform"): IMEX on a rack-scale system's compute trays (GB200 /
    GB300 NVL72: the switch trays manage NVLink switching, no host Fabric Manager); Fabric
    Manager with NVLSM on Blackwell NVSwitch boards (HGX B200/B300); Fabric Manager on other
    NVSwitch boards (HGX A100/H100/H200); nothing elsewhere."""
    if profile.gpu is None:
        return "none"
    if rack_system_of(profile, catalog) is not None:
        return "imex"
    if profile.nvswitch <= 0:
        return "none"
    capability = catalog.gpus[profile.gpu.model].compute_capability
    return "fabricmanager-nvlsm" if (capability or 0) >= BLACKWELL else "fabricmanager"


def imex_domains(
    plan: Plan, nodes: Sequence[NodeRecord], addresses: Mapping[str, str]
) -> dict[str, list[str]]:
    """Node → the management addresses of every tray of its NVLink domain, itself included
    (`nvidia_driver_imex_nodes`, the IMEX daemon's nodes_config.cfg): the domains as
    `rack_domain_members` cuts them, as Slurm's blocks are cut (slurm_blocks), so each rack's
    trays list the same addresses."""
    domains: dict[str, list[str]] = {}
    for members in rack_domain_members(plan.nvlink, nodes).values():
        listed = [addresses[name] for name in members]
        for name in members:
            domains[name] = listed
    return domains


def pool_vars(spec: Cluster, catalog: Catalog, pool: Pool) -> dict[str, Any]:
    """What the pool's server shape implies: GPUs, HCAs in rail order, the storage bond."""
    profile = spec.profiles[pool.profile]
    fabric = spec.network.fabric
    variables: dict[str, Any] = {"myriad_profile": pool.profile}
    gpus = 0 if profile.gpu is None else profile.gpu.count
    variables["container_runtime_nvidia_enabled"] = gpus > 0
    if profile.gpu is not None:
        variables["myriad_gpu"] = {"model": profile.gpu.model, "count": gpus}
        nvlink_fabric = nvlink_fabric_software(profile, catalog)
        variables["nvidia_driver_nvlink_fabric"] = nvlink_fabric
        if spec.software.orchestrator == "slurm":
            # slurmd starts after the driver's daemons: CUDA cannot use the GPUs of an NVSwitch
            # board before Fabric Manager runs, nor share memory across trays before IMEX does.
            variables["slurm_slurmd_gpu_units"] = [
                "nvidia-persistenced.service",
                *NVLINK_FABRIC_UNITS[nvlink_fabric],
            ]
            if spec.provider.kind == "local":
                # The twin's GPUs are stubs: no driver lists them in /proc/driver/nvidia,
                # which a container cannot fake (Docker refuses mounts under /proc). Its
                # stand-in driver lists them under /run, which a restart empties as a
                # reboot empties the real one's, so slurmd waits for it the same way.
                variables["slurm_slurmd_gpu_driver_dir"] = TWIN_GPU_DRIVER_DIR
    compute = ports(profile, catalog, "compute", fabric)
    if not compute or fabric in ("ethernet", "efa"):
        # Enroot's Mellanox hook fails container starts on nodes that have no HCA.
        variables["container_runtime_enroot_mellanox_devices"] = ""
    if compute and fabric not in ("ethernet", "efa"):
        variables["nccl_hcas"] = [
            {"name": p.device, "port": 1, "rail": p.index, "netdev": p.interface} for p in compute
        ]
        if profile.pcie.switches:
            # GPU and NIC share a PCIe switch: GPUDirect RDMA without crossing the CPU.
            variables["nccl_net_gdr_level"] = "PXB"
    if compute and fabric != "ethernet" and spec.provider.kind == "baremetal":
        # The compute HCAs' firmware: VPI cards carry the port protocol (LINK_TYPE).
        variables["rdma_mlxconfig_devices"] = [p.device for p in compute]
        variables["rdma_mlxconfig_link_type"] = "IB" if fabric == "infiniband" else "ETH"
    if compute and fabric == "efa" and pool.role == "compute":
        # One EFA device per network card; the AMI choice says whether the software is there.
        group = profile.nics.compute
        variables["efa_expected_devices"] = group.count if group is not None else 0
        variables["efa_install"] = spec.provider.image != "dlami"
    if compute and fabric == "roce":
        variables["roce_nics"] = [{"netdev": p.interface, "device": p.device} for p in compute]
    if spec.provider.kind == "baremetal":
        # Servers: what discovery on the node must find before firmware or names change.
        expected = hardware_expectation(profile, catalog, fabric, f"profiles.{pool.profile}.nics")
        if "compute" in expected or "storage" in expected:
            variables["rdma_hardware_expectation"] = expected
        if "compute" in expected and fabric in ("infiniband", "roce"):
            # NCCL's topology file from the node's own map (bus ids, switches, pinned names).
            variables["nccl_topology_from_map"] = True
        # Nothing but the netnames role gives the ports the names made up above.
        named = ports_to_name(profile, catalog, fabric)
        if named:
            variables["netnames_ports"] = [{"name": p.interface, "device": p.device} for p in named]
    storage = ports(profile, catalog, "storage", fabric)
    group = profile.nics.storage
    if storage and group is not None and group.bond is not None:
        variables["storage_net_bond_interfaces"] = [p.interface for p in storage]
        variables["storage_net_bond_mode"] = group.bond
    if spec.software.orchestrator == "kubernetes":
        variables["kubernetes_node_gpu_count"] = gpus
        if profile.gpu is not None:
            variables["kubernetes_node_gpu_product"] = profile.gpu.model
    return variables


def host_role_vars(
    spec: Cluster,
    catalog: Catalog,
    node: NodeRecord,
    *,
    address: str,
    storage_address: str | None,
) -> dict[str, Any]:
    # NCCL bootstraps over the interface that holds this address (the management network).
    variables: dict[str, Any] = {"nccl_socket_address": address} if node.role == "compute" else {}
    if storage_address is not None and spec.profiles[node.profile].nics.storage is not None:
        variables["storage_net_address"] = storage_address
    ib = spec.network.ib
    if (
        spec.network.fabric == "infiniband"
        and ib.subnet_manager == "opensm"
        and node.name in ib.sm_nodes
    ):
        variables["infiniband_opensm_enabled"] = True
    if spec.software.orchestrator == "kubernetes":
        variables["kubernetes_node_ip"] = address
        if node.island is not None:
            variables["kubernetes_node_island"] = str(node.island)
    return variables


def slurm_topology(spec: Cluster, plan: Plan, nodes: Sequence[NodeRecord]) -> list[dict[str, Any]]:
    """A strict tree for topology/tree: scalable units under islands under one root.

    In a rail-optimized fabric a node hangs under one leaf per rail, which topology.conf
    cannot express; the nodes that share the same leaves (a scalable unit) are one hop
    apart on every rail, so they form the tree's lowest level. Slurm then packs a job into
    one unit, then one island, before spreading across islands.
    """
    if spec.software.orchestrator != "slurm" or plan.fabric is None:
        return []
    units: dict[int, dict[str, list[str]]] = defaultdict(dict)
    position = 0
    for node in nodes:
        if node.island is None:
            continue
        leaf = leaf_placement(plan.fabric, position, 0).leaf
        units[node.island].setdefault(leaf, []).append(node.name)
        position += 1
    switches: list[dict[str, Any]] = []
    island_names = []
    for island, by_leaf in sorted(units.items()):
        unit_names = []
        for number, members in enumerate(by_leaf.values(), start=1):
            name = f"is{island:02d}-su{number:02d}"
            switches.append({"name": name, "nodes": members})
            unit_names.append(name)
        if len(unit_names) == 1 and len(units) == 1:
            return switches
        island_name = f"is{island:02d}"
        switches.append({"name": island_name, "switches": unit_names})
        island_names.append(island_name)
    if len(island_names) > 1:
        switches.append({"name": "core", "switches": island_names})
    return switches


def slurm_blocks(spec: Cluster, plan: Plan, nodes: Sequence[NodeRecord]) -> list[dict[str, Any]]:
    """One block per NVLink domain, for topology/block (topology.conf(5), Slurm 23.11).

    The trays of a rack-scale pool fill racks in host order, as the plan counts them, so each
    block is one rack's trays. Empty where some compute node is not a tray (its NVLink stops at
    the server, and Slurm 23.11 wants every block the same size): those clusters keep the tree.
    """
    if spec.software.orchestrator != "slurm":
        return []
    racks = {d.pool: d for d in plan.nvlink if d.system is not None}
    if not racks or any(p.name not in racks for p in spec.pools_with_role("compute")):
        return []
    return [
        {"name": name, "nodes": names}
        for name, names in rack_domain_members(plan.nvlink, nodes).items()
    ]


def role_group_vars(
    spec: Cluster, nodes: Sequence[NodeRecord], addresses: Mapping[str, str]
) -> dict[str, dict[str, Any]]:
    """Per role group: controllers keep time for the cluster, every other node asks them.

    One time source inside the cluster keeps clocks close to each other even when the
    upstream pools are far away or unreachable; Slurm and munge reject skewed credentials.
    """
    controllers = [addresses[n.name] for n in nodes if n.role == "controller"]
    if not controllers:
        return {}
    clients = {"common_time_servers": controllers}
    return {
        "controller": {"common_time_serve_networks": [spec.network.addressing.management]},
        "login": dict(clients),
        "compute": dict(clients),
        "storage": dict(clients),
    }
