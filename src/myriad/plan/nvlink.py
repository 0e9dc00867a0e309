"""NVLink domains: the GPUs that reach each other over NVLink, counted per compute pool.

A server with NVSwitch is a domain of its own GPUs. A compute tray of a rack-scale system
(GB200 / GB300 NVL72) is not: its rack is the domain, so the pool's trays fill racks in host
order, `compute_trays` to a rack, and each rack is one domain. A pool whose tray count is not a
multiple of that leaves a last, incomplete rack (`partial_nodes`); the lints refuse it.
"""

from __future__ import annotations

from collections.abc import Sequence

from myriad.plan.model import NvlinkDomains
from myriad.plan.nodes import NodeRecord
from myriad.spec.catalog_models import Catalog, RackSystem
from myriad.spec.models import Cluster, Profile

GBS_PER_TBS = 1000


def rack_system_of(profile: Profile, catalog: Catalog) -> tuple[str, RackSystem] | None:
    """The rack-scale system the profile's server layout is a tray of, with its name."""
    if profile.server is None:
        return None
    name = catalog.servers[profile.server].rack_system
    return None if name is None else (name, catalog.racks[name])


def plan_nvlink(spec: Cluster, catalog: Catalog) -> tuple[NvlinkDomains, ...]:
    """One entry per compute pool whose GPUs share NVLink beyond a pair: rack-scale trays or
    servers with NVSwitch. Linear in pools."""
    domains = []
    for pool in spec.pools_with_role("compute"):
        profile = spec.profiles[pool.profile]
        if profile.gpu is None:
            continue
        system = rack_system_of(profile, catalog)
        if system is not None:
            name, rack = system
            full, rest = divmod(pool.count, rack.compute_trays)
            domains.append(
                NvlinkDomains(
                    pool=pool.name,
                    system=name,
                    nodes_per_domain=rack.compute_trays,
                    gpus_per_domain=rack.compute_trays * profile.gpu.count,
                    domains=full + (1 if rest else 0),
                    partial_nodes=rest,
                    domain_tbs=rack.nvlink_domain_tbs,
                    cpus_per_domain=rack.cpus,
                    switch_trays_per_domain=rack.switch_trays,
                    rack_kw=rack.max_power_kw,
                    cooling=rack.cooling,
                )
            )
        elif profile.nvswitch > 0:
            gpu = catalog.gpus[profile.gpu.model]
            domains.append(
                NvlinkDomains(
                    pool=pool.name,
                    system=None,
                    nodes_per_domain=1,
                    gpus_per_domain=profile.gpu.count,
                    domains=pool.count,
                    partial_nodes=0,
                    domain_tbs=profile.gpu.count * gpu.nvlink_gbs / GBS_PER_TBS,
                    cpus_per_domain=profile.cpu.sockets,
                    switch_trays_per_domain=0,
                    rack_kw=None,
                    cooling=None,
                )
            )
    return tuple(domains)


def rack_domain_members(
    domains: Sequence[NvlinkDomains], nodes: Sequence[NodeRecord]
) -> dict[str, list[str]]:
    """Each rack-scale NVLink domain's trays, named `nvlNN` in pool order then host order.

    One naming for every consumer (Slurm's topology/block, monitoring's `nvlink_domain`
    label), so an alert's domain is the block Slurm places jobs in. Servers with NVSwitch are
    left out: their domain is the node itself, which the `node` label already names.
    """
    members: list[list[str]] = []
    for entry in domains:
        if entry.system is None:
            continue
        trays = [node.name for node in nodes if node.pool == entry.pool]
        size = entry.nodes_per_domain
        members += [trays[start : start + size] for start in range(0, len(trays), size)]
    width = max(2, len(str(len(members))))
    return {f"nvl{number:0{width}d}": names for number, names in enumerate(members, start=1)}
