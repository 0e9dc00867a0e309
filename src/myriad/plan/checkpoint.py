"""How long a checkpoint blocks training, for each way of writing it.

The checkpoint travels over the storage NICs, else the management NICs; a node with
neither has no storage path and its stall is infinite. Sizes are decimal GB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from myriad.plan.bandwidth import BITS_PER_BYTE, gpu_pcie_gbs
from myriad.plan.model import Checkpoint, CheckpointStall
from myriad.spec.catalog_models import Catalog
from myriad.spec.models import Checkpoint as CheckpointSpec
from myriad.spec.models import Cluster, NicGroup, Pool, Profile

# TCP (NFS, Lustre, BeeGFS clients) carries about 90 % of the line rate as file data once
# headers, acknowledgements and the file system's own messages are paid for.
STORAGE_LINE_EFFICIENCY = 0.9
# REFERENCE.md "Bandwidth": practical host<->device copies reach about 75-85 % of PCIe.
HOST_COPY_EFFICIENCY = 0.8
SECONDS_PER_MINUTE = 60
STRATEGIES = ("single-node", "bonded", "distributed", "distributed-async")
NO_PATH = "no storage path"


def storage_path(profile: Profile) -> NicGroup | None:
    return profile.nics.storage or profile.nics.management


@dataclass(frozen=True, slots=True)
class _NodeStorage:
    """What one node of a compute pool can push to storage, GB/s (0 without a path):
    one link, and every link the node's bond mode lets it use at once."""

    pool: Pool
    link_gbs: float
    node_gbs: float


def storage_links(group: NicGroup, ports: int) -> int:
    """Links one node's storage traffic can use at once.

    Only an 802.3ad (LACP) bond, hashing layer3+4, spreads a node's many streams over
    every member; an active-backup bond carries everything on its active link, and ports
    without a bond send a node's traffic to the storage network out of the one interface
    its route names (Linux bonding documentation, "Bonding Driver Options", mode).
    """
    return ports if group.bond == "802.3ad" else 1


def _node_storage(pool: Pool, spec: Cluster, catalog: Catalog) -> _NodeStorage:
    group = storage_path(spec.profiles[pool.profile])
    if group is None:
        return _NodeStorage(pool, 0.0, 0.0)
    nic = catalog.nics[group.model]
    link = STORAGE_LINE_EFFICIENCY * nic.speed_gbps / BITS_PER_BYTE
    return _NodeStorage(pool, link, link * storage_links(group, nic.ports * group.count))


def _capped(size_gb: float, gbs: float, storage_gbs: float | None) -> tuple[float, str]:
    if gbs <= 0:
        return math.inf, NO_PATH
    if storage_gbs is not None and storage_gbs < gbs:
        return size_gb / storage_gbs, "storage"
    return size_gb / gbs, "nic"


def _async_copy_seconds(
    size_gb: float, nodes: tuple[_NodeStorage, ...], spec: Cluster, catalog: Catalog
) -> float | None:
    """Every GPU copies its shard to host memory at once; the slowest pool decides."""
    gpus = sum(
        n.pool.count * gpu.count
        for n in nodes
        if (gpu := spec.profiles[n.pool.profile].gpu) is not None
    )
    if gpus == 0:
        return None
    shard = size_gb / gpus
    seconds = 0.0
    for node in nodes:
        profile = spec.profiles[node.pool.profile]
        if profile.gpu is not None:
            copy_gbs = HOST_COPY_EFFICIENCY * gpu_pcie_gbs(catalog.gpus[profile.gpu.model], profile)
            seconds = max(seconds, shard / copy_gbs)
    return seconds


def _stalls(
    size_gb: float, nodes: tuple[_NodeStorage, ...], spec: Cluster, catalog: Catalog
) -> tuple[CheckpointStall, ...]:
    storage_gbs = spec.storage.write_gbs
    # Rank 0 of the first compute pool writes a single-node or bonded checkpoint.
    first = nodes[0]
    # One client stream rides one link, even inside a bond.
    single = _capped(size_gb, first.link_gbs, storage_gbs)
    # What the node's bond carries (`storage_links`): every link only under 802.3ad.
    bonded = _capped(size_gb, first.node_gbs, storage_gbs)
    no_path = any(n.node_gbs == 0 for n in nodes)
    aggregate = 0.0 if no_path else sum(n.pool.count * n.node_gbs for n in nodes)
    distributed = _capped(size_gb, aggregate, storage_gbs)
    copy = _async_copy_seconds(size_gb, nodes, spec, catalog)
    if math.isinf(distributed[0]):
        # The copy would finish, but the drain never can: the checkpoint is never saved.
        asynchronous = distributed
    elif copy is None:
        # Without GPUs the state is in host memory already and is written as distributed.
        asynchronous = distributed
    else:
        asynchronous = (copy, "pcie")
    figures = (single, bonded, distributed, asynchronous)
    return tuple(
        CheckpointStall(strategy=name, seconds=seconds, limited_by=limit)
        for name, (seconds, limit) in zip(STRATEGIES, figures, strict=True)
    )


def checkpoint_size_gb(checkpoint: CheckpointSpec) -> float:
    # params_billion x 1e9 x bytes / 1e9 bytes per GB.
    return checkpoint.params_billion * checkpoint.bytes_per_param


def plan_checkpoint(spec: Cluster, catalog: Catalog) -> Checkpoint | None:
    checkpoint = spec.storage.checkpoint
    compute = spec.pools_with_role("compute")
    if checkpoint is None or not compute:
        return None
    size = checkpoint_size_gb(checkpoint)
    nodes = tuple(_node_storage(pool, spec, catalog) for pool in compute)
    stalls = _stalls(size, nodes, spec, catalog)
    chosen = next(s for s in stalls if s.strategy == checkpoint.strategy)
    return Checkpoint(
        params_billion=checkpoint.params_billion,
        size_gb=size,
        chosen=checkpoint.strategy,
        stalls=stalls,
        interval_minutes=checkpoint.interval_minutes,
        overhead_fraction=chosen.seconds / (checkpoint.interval_minutes * SECONDS_PER_MINUTE),
        burst_gbs=sum(n.pool.count * n.node_gbs for n in nodes),
        storage_write_gbs=spec.storage.write_gbs,
    )
