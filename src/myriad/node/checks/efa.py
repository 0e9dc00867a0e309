"""AWS EFA checks: libfabric's efa provider sees every EFA device of an EFA compute node.

Source: Amazon EC2 User Guide, "Get started with EFA and NCCL" (`fi_info -p efa -t
FI_EP_RDM` lists one RDM domain per EFA device when the driver, rdma-core and libfabric are
in place); the device count per instance type is one per network card (32 on a p5.48xlarge).
"""

from __future__ import annotations

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

FIELD = "network.fabric"


def _derive_devices(c: Context) -> Expect | Skip:
    if c.spec.network.fabric != "efa":
        return Skip(FIELD, f"the fabric is {c.spec.network.fabric}, not efa")
    if c.pool.role != "compute" or "efa_expected_devices" not in c.variables:
        return Skip(FIELD, "EFA is used by compute nodes only")
    expected = int(c.variables["efa_expected_devices"])
    return Expect(
        max(expected, 1),
        f"{FIELD}, {c.p}.nics.compute.count",
        bringup_fix("efa", "launch the node with its EFA interfaces (the aws stack's template)"),
    )


def _evaluate_devices(expected: Any, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    fact = facts.efa_domains
    if not fact.ok:
        return unavailable(fact)
    domains = fact.get()
    actual = f"{len(domains)} EFA RDM domain(s)" + (f": {listed(list(domains))}" if domains else "")
    if len(domains) < int(expected):
        return failed(actual, f"fi_info -p efa shows {len(domains)} of {expected} EFA devices")
    return passed(actual)


EFA_DEVICES = Check(
    id="efa.devices",
    title="libfabric's efa provider sees every EFA device",
    spec_fields=(FIELD, "profiles.*.nics.compute.count"),
    derive=_derive_devices,
    evaluate=_evaluate_devices,
    explain=lambda expected: f"fi_info -p efa lists {expected} RDM domain(s), one per EFA device",
)
