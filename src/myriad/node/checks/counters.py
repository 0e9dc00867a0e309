"""HCA error counters that grow between node health runs (myriad-health keeps the last
reading): a link that went down again, symbol errors faster than a healthy link shows. The
absolute counters since boot are hca.errors; growth is what says the fault is happening now."""

from __future__ import annotations

from typing import Any

from myriad.node.checks.model import (
    Check,
    ClusterView,
    Context,
    Expect,
    Outcome,
    Skip,
    between_runs,
    each,
    listed,
    verdict,
)
from myriad.node.facts import NodeFacts

GROWTH_FIX = (
    "check the cable, transceiver and switch port of the named HCA (mlxlink -d <dev> shows "
    "the BER); the node resumes by itself after a run with no growth above health.counters"
)


def _derive_growth(c: Context) -> Expect | Skip:
    if c.spec.health is None:
        return Skip("health", "no health section: node health is off")
    if not c.compute_ports:
        return Skip(f"{c.p}.nics.compute", f"profile {c.pool.profile} has no compute NICs")
    if c.spec.network.fabric in ("ethernet", "efa"):
        return Skip("network.fabric", f"fabric is {c.spec.network.fabric}: no IB port counters")
    devices = [port.device for port in c.compute_ports]
    return Expect(each(devices, dict(c.spec.health.counters)), "health.counters", GROWTH_FIX)


def _evaluate_growth(
    expected: dict[str, Any], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    if (outcome := between_runs(facts.hca_counter_growth)) is not None:
        return outcome
    limits: dict[str, int] = expected["value"]
    growth = facts.hca_counter_growth.get()
    problems, unread = [], []
    for name in expected["names"]:
        port = growth.get(name)
        if port is None:
            unread.append(f"{name} no counters")
            continue
        for counter, limit in limits.items():
            grew = port.get(counter)
            if grew is None:
                unread.append(f"{name} {counter} not reported")
            elif grew > limit:
                problems.append(f"{name} {counter} +{grew}")
    return verdict(problems, f"no growth above limits on {len(expected['names'])}", unread)


def _explain_growth(expected: dict[str, Any]) -> str:
    limits = ", ".join(f"{k} +{v}" for k, v in expected["value"].items())
    return f"growth per run at most {limits} on {listed(expected['names'])}"


HCA_COUNTER_GROWTH = Check(
    id="hca.counter-growth",
    title="HCA error counters not growing between runs",
    spec_fields=("health.counters", "profiles.*.nics.compute"),
    derive=_derive_growth,
    evaluate=_evaluate_growth,
    explain=_explain_growth,
)
