"""Names and subnets for Docker resources that a test or benchmark run creates.

Two runs on one Docker daemon (two checkouts, a CI job beside a developer) must never
share a container or a network, and a run must not touch what it did not create: a
user's `local` cluster (containers local-*, network myriad-local, 172.31.77.0/24) must
survive. So every cluster a run starts gets a fresh name and a management subnet that no
existing Docker network overlaps.
"""

from __future__ import annotations

import ipaddress
import json
import random
import subprocess
import uuid

# The pool run subnets come from, and the subnet of the local example, kept free even
# while the local cluster is down so that `myriad up` of it never finds its subnet taken.
POOL = ipaddress.ip_network("172.31.0.0/16")
RESERVED = (ipaddress.ip_network("172.31.77.0/24"),)


def unique_name(stem: str) -> str:
    """`stem` and a random suffix: a valid cluster name (at most 32 characters)."""
    name = f"{stem}-{uuid.uuid4().hex[:6]}"
    assert len(name) <= 32, name
    return name


def docker_subnets() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """Every subnet a Docker network on this daemon holds."""
    ids = subprocess.run(
        ["docker", "network", "ls", "--quiet", "--no-trunc"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.split()  # fmt: skip
    if not ids:
        return []
    inspected = subprocess.run(
        ["docker", "network", "inspect", *ids],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    subnets = []
    for network in json.loads(inspected):
        for config in (network.get("IPAM") or {}).get("Config") or []:
            if config.get("Subnet"):
                subnets.append(ipaddress.ip_network(config["Subnet"], strict=False))
    return subnets


def free_subnet() -> str:
    """A /24 of POOL that no Docker network overlaps, picked at random.

    Random, not the first free one: two runs that look at the same moment would both
    take the first.
    """
    taken = [*docker_subnets(), *RESERVED]
    free = [
        candidate
        for candidate in POOL.subnets(new_prefix=24)
        if not any(candidate.overlaps(used) for used in taken)
    ]
    if not free:
        raise RuntimeError(f"no free /24 left in {POOL} for a test cluster")
    return str(random.choice(free))
