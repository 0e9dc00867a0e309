"""The controller's half of node health: each node's document for the runner (myriad-health).

A document is the node's expectations exactly as `myriad validate` derives them (the same
`expect`, the same `NodeExpectations.to_dict()`), plus the policy from the spec's `health:`
section. Bring-up writes them into the cluster's state folder (`<state>/health/<node>.json`)
and the health role copies each node its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from myriad.errors import SpecError
from myriad.fsutil import atomic_write_text
from myriad.node import artefact
from myriad.node.checks import BY_ID
from myriad.plan.model import Plan
from myriad.render.inventory import Inventory
from myriad.spec.health import Health
from myriad.spec.loader import LoadedSpec
from myriad.validate.expectations import expect, load_role_defaults

SCHEMA = 1
FOLDER = "health"


def check_drain_ids(loaded: LoadedSpec) -> Health | None:
    """The spec's health section, with every check it names known; SpecError (located) if not."""
    health = loaded.spec.health
    if health is None:
        return None
    problems = []
    known = sorted(BY_ID)
    for index, name in enumerate(health.drain):
        if name not in BY_ID:
            close = [k for k in known if k.split(".")[0] == name.split(".")[0]]
            hint = f"checks of {name.split('.')[0]}: {', '.join(close)}" if close else ""
            problems.append(
                loaded.source.problem(
                    ("health", "drain", index),
                    f"unknown check '{name}'",
                    hint or "`myriad validate` lists the checks",
                )
            )
    if problems:
        raise SpecError(problems)
    return health


def policy(health: Health, orchestrator: str) -> dict[str, Any]:
    """What the runner needs of the spec besides the expectations."""
    return {
        "orchestrator": orchestrator if orchestrator == "slurm" else "none",
        "interval_s": health.interval_s,
        "drain": list(health.drain),
        "flap_window_s": health.flap_window_s,
        "flap_limit": health.flap_limit,
        "xid_hold_s": health.xid_hold_s,
    }


def documents(
    loaded: LoadedSpec,
    plan: Plan,
    inventory: Inventory,
    defaults: Mapping[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """Node name → its document; empty when the spec has no health section."""
    health = check_drain_ids(loaded)
    if health is None:
        return {}
    spec = loaded.spec
    cluster = expect(
        spec,
        loaded.catalog,
        plan,
        inventory,
        defaults if defaults is not None else load_role_defaults(),
    )
    rules = policy(health, spec.software.orchestrator)
    return {
        node.node: {"schema": SCHEMA, "node": node.to_dict(), "policy": rules}
        for node in cluster.nodes
    }


def write_documents(docs: Mapping[str, Mapping[str, Any]], folder: Path) -> list[Path]:
    """One file per node, each whole or not at all; a node no longer in the spec loses its."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for node, doc in docs.items():
        path = folder / f"{node}.json"
        atomic_write_text(path, json.dumps(doc, sort_keys=True) + "\n", mode=0o644)
        written.append(path)
    for stale in folder.glob("*.json"):
        if stale.stem not in docs:
            stale.unlink()
    return written


def prepare(
    spec_path: Path, *, stack: str | None = None, stack_outputs: Path | None = None
) -> Path | None:
    """Before a bring-up: every node's document in the cluster's state folder, where the
    health role finds them (`{{ inventory_dir }}/../health`), and beside them the node
    package the role installs (myriad-node.pyz); None without a health section."""
    from myriad.bringup.flow import cluster_state
    from myriad.plan.pipeline import plan_spec
    from myriad.provision.resolve import resolve_cluster

    result = plan_spec(spec_path)
    if result.loaded.spec.health is None:
        return None
    cluster = resolve_cluster(result, stack=stack, stack_outputs=stack_outputs)
    docs = documents(cluster.loaded, cluster.plan, cluster.inventory)
    if not docs:
        return None
    folder = cluster_state(cluster.loaded.spec.metadata.name).root / FOLDER
    write_documents(docs, folder)
    artefact.write(folder / artefact.NAME)
    return folder
