"""The inventory an image is built from: one build host standing for a whole profile.

A profile's image must hold what every node of that profile installs, whatever its part, so
the build host is in every group any of those nodes is in (their group variables apply), and
carries the host variables of one node per pool, so that the layer sort picks the layers those
pools need. It carries no cluster table: the image phase reads nothing that names a node, and
an image must not change when a node joins the cluster.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from typing import Any

from myriad.plan.nodes import iter_nodes
from myriad.render.inventory import CONNECTION_VARS, Inventory
from myriad.render.tables import FILE_MARKER
from myriad.spec.models import Cluster

BUILD_HOST = "image-build"


def profiles_in_use(spec: Cluster) -> list[str]:
    """Profiles some pool uses, in the spec's order."""
    return list(dict.fromkeys(pool.profile for pool in spec.pools))


def image_build_inventory(
    spec: Cluster,
    inventory: Inventory,
    profile: str,
    connection: Mapping[str, Any],
) -> Inventory:
    members = {n.name for n in iter_nodes(spec) if n.profile == profile}
    if not members:
        raise ValueError(f"no pool uses profile {profile!r}")
    groups = {g: [BUILD_HOST] for g, hosts in inventory.groups.items() if members & set(hosts)}
    host_vars: dict[str, Any] = {}
    for pool in spec.pools:
        if pool.profile != profile:
            continue
        first = next(n for n in inventory.groups[f"pool_{pool.name}"])
        host_vars.update(
            {k: v for k, v in inventory.host_vars[first].items() if k not in CONNECTION_VARS}
        )
    host_vars.update(connection)
    host_vars["myriad_image_build"] = True
    # The record of the image being replaced is no input of the new one; the build reads no
    # cluster table, so it is not told of a tables file.
    dropped = {"myriad_image", FILE_MARKER}
    group_vars = {
        g: {k: v for k, v in values.items() if k not in dropped}
        for g, values in inventory.group_vars.items()
        if g == "all" or g in groups
    }
    return Inventory(
        cluster=inventory.cluster,
        groups=groups,
        group_vars=group_vars,
        host_vars={BUILD_HOST: host_vars},
    )


def build_inputs_digest(build: Inventory, image_variables: Collection[str]) -> str:
    """What the image phase can read, and only that: the groups the build host is in (they
    pick the layers), the values of the variables the roles' image steps declare
    (`image_variables`: their `image` entry points, the layer sort's and the myriad_* ones),
    and which host variables exist (their values name one node — an address, a rail — and
    must not rebuild the image). A variable no image step reads changes no image."""
    merged: dict[str, Any] = {}
    # Ansible's order for groups of one depth: `all` first, then by name.
    for group in ["all", *sorted(g for g in build.group_vars if g != "all")]:
        merged.update(build.group_vars.get(group, {}))
    host = build.host_vars[BUILD_HOST]
    inputs = {
        "groups": sorted(build.groups),
        "values": {k: merged[k] for k in sorted(image_variables) if k in merged},
        "host_vars": sorted(k for k in host if k not in CONNECTION_VARS),
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()
