"""Every plan lint by its id: why it exists and how a finding is fixed.

`myriad plan --explain RULE` prints one; `lints.accept` in a spec names them. Data only, so
the spec layer can check an accepted rule's name without importing the planner; a test holds
this table and the ids `plan/lints.py` yields equal.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    why: str
    fix: str
    # Errors stop bring-up: they describe a cluster that cannot work, so they are fixed, never
    # accepted. Rules that only ever warn or inform can be accepted with a reason.
    acceptable: bool = True


_RULES = (
    Rule(
        "nic-pcie-bottleneck",
        "A NIC faster than its PCIe slot can move never reaches line rate: the slot, not the "
        "fabric, bounds every transfer (PCIe gen x lanes against the NIC's Gb/s).",
        "Put the NIC in a slot of its own PCIe generation and width, or choose a slower NIC.",
    ),
    Rule(
        "nics-per-gpu",
        "Collectives across nodes run at the bandwidth of the NICs beside the GPUs: fewer than "
        "one compute NIC per GPU pair leaves GPUs waiting on the network (GPUDirect RDMA).",
        "One RDMA NIC per GPU (or per GPU pair) in profiles.*.nics.compute.",
    ),
    Rule(
        "gpu-nic-placement",
        "GPUDirect RDMA is fast only when a GPU and its NIC share a PCIe switch; NICs that do "
        "not split evenly over the switches cross the CPU's root complex.",
        "A NIC count that is a multiple of the PCIe switches, or a layout that pairs them.",
    ),
    Rule(
        "host-memory",
        "Checkpoint staging, pinned buffers and data loaders hold host copies of GPU memory: "
        "less host memory than GPU memory stalls them.",
        "At least the GPUs' memory in host memory, ideally twice.",
    ),
    Rule(
        "cpu-cores-per-gpu",
        "Data loaders, NCCL proxy threads and the launcher each want host cores per GPU.",
        "At least 8 cores per GPU.",
    ),
    Rule(
        "rack-power",
        "A server drawing more than its rack's power budget cannot be racked as planned.",
        "Raise facility.rack_kw (with the cooling to match) or pick smaller servers.",
        acceptable=False,
    ),
    Rule(
        "rack-tor",
        "A ToR design (topology.leaf_nodes) puts that many servers and their leaf switches in "
        "one rack: the rack must hold their rack units and carry their power.",
        "Fewer servers per leaf (leaf_nodes), a higher facility.rack_kw with the cooling to "
        "match, or taller racks (facility.rack_units).",
        acceptable=False,
    ),
    Rule(
        "rack-cooling",
        "Air cooling is commonly limited to roughly 30-40 kW per rack (REFERENCE.md).",
        "Liquid cooling (rear-door or direct-to-chip), or a lower facility.rack_kw.",
    ),
    Rule(
        "rack-liquid-cooling",
        "A rack-scale system (GB200 / GB300 NVL72) is liquid-cooled only: its 120-142 kW "
        "cannot be taken away by air.",
        "facility.cooling: liquid in a hall with direct-to-chip liquid cooling.",
        acceptable=False,
    ),
    Rule(
        "nvlink-domain-partial",
        "An NVL72 rack is one NVLink domain of 18 compute trays: a pool that ends in part of a "
        "rack has a domain short of trays, and Slurm 23.11's topology/block refuses blocks of "
        "unequal size.",
        "A tray count that is a multiple of the rack's compute trays.",
        acceptable=False,
    ),
    Rule(
        "facility-power",
        "The cluster's facility power (IT power x PUE) exceeds what the site can deliver.",
        "Fewer nodes, a lower PUE, or more facility power (facility.power_limit_mw).",
        acceptable=False,
    ),
    Rule(
        "island-radix",
        "An island larger than a two-tier Clos of its leaves and spines needs a third tier.",
        "Islands of at most d x max(radix, spine ports) / rails nodes stay two-tier, d the "
        "leaf's ports for endpoints: radix / 2, fewer below a ratio of 1 (network.topology).",
    ),
    Rule(
        "fabric-shape",
        "The topology cannot be built from the chosen switches (ports, tiers, islands).",
        "Change network.topology (island_nodes, switch) so the fabric fits.",
        acceptable=False,
    ),
    Rule(
        "fabric-spines-per-group",
        "Each leaf group needs as many spines as leaf uplinks; the spine's radix bounds it.",
        "Smaller islands or a larger spine (network.topology).",
        acceptable=False,
    ),
    Rule(
        "fabric-groups-per-core",
        "Every island's spines must reach the core layer; the core's radix bounds the islands.",
        "Fewer, larger islands, or a larger core switch (network.topology).",
        acceptable=False,
    ),
    Rule(
        "fabric-switch-kind",
        "An InfiniBand fabric needs InfiniBand switches, a RoCE fabric Ethernet ones.",
        "Pick a switch of the fabric's kind from the catalog.",
        acceptable=False,
    ),
    Rule(
        "fabric-nic-kind",
        "Compute NICs must speak the fabric's link layer and do RDMA.",
        "A compute NIC of the fabric's link layer with RDMA (ConnectX family).",
        acceptable=False,
    ),
    Rule(
        "nic-switch-speed",
        "A NIC faster than its leaf port is cut to the port's speed; a slower one wastes ports "
        "unless the switch splits them.",
        "A leaf whose ports match the NIC, or its split-port entry (e.g. SN5600-400G).",
    ),
    Rule(
        "addressing",
        "Every node needs an address in each network; a network smaller than the nodes cannot "
        "be rendered.",
        "A larger network in network.addressing.",
        acceptable=False,
    ),
    Rule(
        "storage-server-address",
        "Node addresses start at the 10th of each network, one per node in spec order: a "
        "storage server inside that range shares an address with a node.",
        "An address below the nodes' range (.2 to .9), or one outside the network.",
        acceptable=False,
    ),
    Rule(
        "rail-addresses",
        "RoCEv2 needs an IPv4 address on every rail (its GID comes from it); each rail gets a "
        "network cut from network.addressing.compute, and each of the rail's leaves a subnet "
        "of it (routed at the leaf, the leaf the hosts' gateway).",
        "Set network.addressing.compute large enough for every rail's leaves and nodes.",
        acceptable=False,
    ),
    Rule(
        "rail-subnets-stretched",
        "A rail subnet stretched over several leaves (network.addressing.rail_subnets: "
        "stretched) has hosts ARP for peers behind other leaves: that works only if the "
        "switches carry the rail's L2 between leaves (EVPN/VXLAN) or answer ARP for them "
        "(proxy-ARP). RoCE fabrics at scale route at the leaf instead.",
        "Configure the switches for it and accept the rule, or use rail_subnets: per-leaf.",
    ),
    Rule(
        "storage-checkpoint",
        "Checkpoints are written to shared storage: its write bandwidth decides how long "
        "training waits and whether one checkpoint ends before the next.",
        "Faster storage (storage.write_gbs), a longer interval, or asynchronous checkpoints.",
        acceptable=False,
    ),
    Rule(
        "storage-not-mounted",
        "Some shared file systems' clients cannot be installed by a role (WEKA's comes from "
        "the WEKA cluster): bring-up leaves their mount to the site.",
        "Install the client and mount it on every node before validating, or accept it.",
    ),
    Rule(
        "checkpoint-overhead",
        "Blocking checkpoints stop training for the whole write; too large a share of the "
        "interval is lost compute.",
        "Distributed-async checkpoints, or a longer interval.",
    ),
    Rule(
        "driver-missing",
        "GPU nodes need an NVIDIA driver branch to install.",
        'Set software.nvidia_driver (for example "580").',
        acceptable=False,
    ),
    Rule(
        "driver-gpu",
        "A driver branch older than a GPU's architecture does not know the GPU: the driver "
        "installs and loads, and nvidia-smi finds no device. NVIDIA's architecture matrix and "
        "the CUDA release notes give each architecture's first branch (Blackwell 570).",
        "A branch at least as new as the newest GPU of the cluster.",
        acceptable=False,
    ),
    Rule(
        "driver-end-of-life",
        "A driver branch past NVIDIA's end of life gets no security or bug fixes.",
        "A supported branch of the catalog's driver_branches.",
    ),
    Rule(
        "subnet-manager",
        "One OpenSM is a single point of failure: the fabric loses routing when it goes.",
        "Two sm_nodes (master and standby), or switch / UFM subnet management.",
    ),
    Rule(
        "subnet-manager-domain",
        "Master and standby OpenSM in one island (one leaf group, one power domain) fail together.",
        "OpenSM on nodes of different islands or racks, or switch / UFM subnet management.",
    ),
    Rule(
        "kubernetes-runtime",
        "Kubernetes has not run on Docker since 1.24 (dockershim was removed).",
        "software.container_runtime: containerd.",
        acceptable=False,
    ),
    Rule(
        "roce-tools",
        "RoCE needs mlnx_qos (DOCA's mlnx-tools) to set trust, PFC and DSCP; no distribution "
        "ships it.",
        "Set software.doca_version so the DOCA repository is configured.",
        acceptable=False,
    ),
    Rule(
        "server-layout-mismatch",
        "The profile's GPUs differ from the server layout it names: the plan's figures would "
        "mix two machines.",
        "Make the profile's gpu match the layout, or drop server.",
    ),
    Rule(
        "slurm-state-not-shared",
        "A backup slurmctld takes over from the saved state: a local StateSaveLocation per "
        "controller makes a failover that forgets every job.",
        "software.slurm.state_save_location on the shared storage, or one controller.",
        acceptable=False,
    ),
    Rule(
        "kubernetes-endpoint",
        "kubeadm joins further control-plane nodes through one address in front of them all "
        "(controlPlaneEndpoint): without it each would be a cluster of its own.",
        "software.kubernetes.control_plane_endpoint: a VIP or load balancer (host:6443), or "
        "one controller.",
        acceptable=False,
    ),
    Rule(
        "slurm-no-containers",
        "GPU jobs run from containers (srun --container-image, Enroot and Pyxis); Myriad "
        "installs them only with release checksums someone vouched for.",
        "software.slurm.containers with the checksums, or software.slurm.no_containers: true.",
        acceptable=False,
    ),
    Rule(
        "slurm-legacy-cgroup",
        "The legacy cgroup hierarchy is deprecated by systemd and dropped by newer container "
        "tools; it is the price of an OS whose Slurm has no cgroup/v2.",
        "An OS whose Slurm manages cgroup/v2 (ubuntu-24.04), then remove legacy_cgroup.",
    ),
    Rule(
        "slurm-os-cgroup",
        "slurmd cannot start when the OS's Slurm has no plugin for the cgroup hierarchy the "
        "OS boots (Ubuntu 22.04: Slurm 21.08 without cgroup/v2).",
        "software.os: ubuntu-24.04, or software.slurm.legacy_cgroup: true.",
        acceptable=False,
    ),
    Rule(
        "slurm-os-topology",
        "Slurm places jobs inside NVLink domains larger than a node (NVL72 racks) with "
        "topology/block, which Slurm has from 23.11 (Ubuntu 24.04); older Slurm has none.",
        "software.os: ubuntu-24.04.",
        acceptable=False,
    ),
    Rule(
        "slurm-blocks-mixed",
        "topology/block (Slurm 23.11) wants every compute node in a block, every block the same "
        "size: with servers beside NVL72 racks the cluster keeps the switch tree, and Slurm "
        "does not keep a job inside one rack's NVLink domain.",
        "One cluster per kind of compute node, or accept the tree for the mix.",
    ),
    Rule(
        "workload-precision",
        "FP8 or FP4 training on GPUs without those tensor cores runs at BF16 rates at best.",
        "workload.precision: bf16, or GPUs with FP8 (FP4: Blackwell).",
    ),
    Rule(
        "oversubscription-unused",
        "An oversubscription ratio between islands does nothing when the fabric is one island.",
        "Set island_nodes, or island_oversubscription inside the island.",
    ),
    Rule(
        "accept-unused",
        "A lints.accept entry whose rule no longer fires would silently accept the next, "
        "different finding of that rule.",
        "Remove the entry from lints.accept.",
        acceptable=False,
    ),
)

RULES: dict[str, Rule] = {rule.id: rule for rule in _RULES}
