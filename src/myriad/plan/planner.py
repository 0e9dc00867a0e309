"""make_plan: spec + catalog → Plan, pure and linear in pools and islands, never in nodes."""

from __future__ import annotations

from myriad.plan.bandwidth import plan_bandwidth
from myriad.plan.checkpoint import plan_checkpoint
from myriad.plan.compute import plan_compute
from myriad.plan.fabric import plan_fabric
from myriad.plan.model import Plan, PoolSummary
from myriad.plan.nvlink import plan_nvlink
from myriad.plan.power import plan_power, server_kw
from myriad.spec.catalog_models import Catalog
from myriad.spec.models import Cluster, Pool


def pool_summary(pool: Pool, spec: Cluster, catalog: Catalog) -> PoolSummary:
    """`gpus` counts the whole pool; `server_kw` is one server's maximum."""
    profile = spec.profiles[pool.profile]
    compute_nics = profile.nics.compute
    return PoolSummary(
        name=pool.name,
        role=pool.role,
        profile=pool.profile,
        nodes=pool.count,
        gpus=pool.count * profile.gpu.count if profile.gpu is not None else 0,
        gpu_model=profile.gpu.model if profile.gpu is not None else None,
        compute_nics_per_node=compute_nics.count if compute_nics is not None else 0,
        server_kw=server_kw(profile, catalog),
    )


def make_plan(spec: Cluster, catalog: Catalog) -> Plan:
    """The catalog must already hold the spec's own entries (as `load_spec` returns it).

    Raises FabricError (a ValueError) when the compute fabric cannot be built, for example
    an island beyond k³/4 endpoints of its switches.
    """
    pools = tuple(pool_summary(pool, spec, catalog) for pool in spec.pools)
    fabric = plan_fabric(spec, catalog)
    return Plan(
        cluster=spec.metadata.name,
        nodes=sum(pool.nodes for pool in pools),
        gpus=sum(pool.gpus for pool in pools),
        pools=pools,
        fabric=fabric,
        power=plan_power(spec, catalog, fabric),
        bandwidth=plan_bandwidth(spec, catalog),
        compute=plan_compute(spec, catalog),
        checkpoint=plan_checkpoint(spec, catalog),
        nvlink=plan_nvlink(spec, catalog),
    )
