"""Small cluster specs for the plan tests, built as documents and loaded like a user's file.

Going through `load_spec_text` keeps the tests honest: a spec the loader would refuse
cannot sneak into a plan test, and the catalog is merged exactly as in production.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from myriad.spec import LoadedSpec, load_spec, load_spec_text

SPECS = Path(__file__).resolve().parent / "plan" / "specs"
ROOT = Path(__file__).resolve().parents[1]


def load_fixture(name: str) -> LoadedSpec:
    return load_spec(SPECS / name)


def load_example(environment: str) -> LoadedSpec:
    return load_spec(ROOT / "inventories" / environment / "cluster.yaml")


def example_text(environment: str, *, without: tuple[str, ...] = ()) -> str:
    """The example spec's text with the named top-level sections taken out (their lines and
    the comment lines just above them), for tests that write a section of their own."""
    lines = (ROOT / "inventories" / environment / "cluster.yaml").read_text().splitlines()
    kept: list[str] = []
    dropping = False
    for line in lines:
        top_level = bool(line) and not line[0].isspace() and not line.startswith("#")
        if top_level:
            dropping = line.split(":", 1)[0] in without
            if dropping:
                while kept and kept[-1].startswith("#"):
                    kept.pop()
        if not dropping:
            kept.append(line)
    missing = [s for s in without if not any(line.startswith(f"{s}:") for line in lines)]
    assert not missing, f"the {environment} example has no {missing} section"
    return "\n".join(kept) + "\n"


def gpu_profile(
    gpu: str | None = "H100-SXM5-80GB",
    gpus: int = 8,
    nic: str | None = "ConnectX-7",
    nics: int = 8,
    **extra: Any,
) -> dict[str, Any]:
    profile: dict[str, Any] = {
        "cpu": {"sockets": 2, "cores_per_socket": 56},
        "memory_gib": 2048,
        "pcie": {"gen": 5, "switches": 4},
        "nvswitch": 4 if gpu is not None and gpus == 8 else 0,
    }
    if gpu is not None:
        profile["gpu"] = {"model": gpu, "count": gpus}
    if nic is not None:
        profile["nics"] = {"compute": {"model": nic, "count": nics}}
    profile.update(extra)
    return profile


def cluster(
    *,
    nodes: int = 8,
    profile: dict[str, Any] | None = None,
    pools: list[dict[str, Any]] | None = None,
    profiles: dict[str, dict[str, Any]] | None = None,
    fabric: str = "infiniband",
    topology: dict[str, Any] | None = None,
    storage: dict[str, Any] | None = None,
    facility: dict[str, Any] | None = None,
    workload: dict[str, Any] | None = None,
    catalog: dict[str, Any] | None = None,
) -> LoadedSpec:
    """One compute pool `gpu` of `nodes` nodes unless `pools`/`profiles` say otherwise."""
    document: dict[str, Any] = {
        "apiVersion": "myriad/v1",
        "kind": "Cluster",
        "metadata": {"name": "test"},
        "provider": {"kind": "local"},
        "profiles": profiles or {"node": profile or gpu_profile()},
        "pools": pools or [{"name": "gpu", "profile": "node", "count": nodes, "role": "compute"}],
        "network": {
            "fabric": fabric,
            "topology": topology or {"kind": "rail-optimized", "switch": "QM9700"},
        },
        "software": {"os": "ubuntu-22.04", "nvidia_driver": "550"},
    }
    for key, value in (
        ("storage", storage),
        ("facility", facility),
        ("workload", workload),
        ("catalog", catalog),
    ):
        if value is not None:
            document[key] = value
    return load_spec_text(yaml.safe_dump(document, sort_keys=False))


def made_up_switch(ports: int, speed: int = 400, power_w: float = 100.0) -> dict[str, Any]:
    return {
        "kind": "infiniband",
        "ports": ports,
        "port_speed_gbps": speed,
        "power_w": power_w,
        "source": "a switch made up for the tests",
    }


def made_up_nic(ports: int = 1, speed: int = 400) -> dict[str, Any]:
    return {
        "speed_gbps": speed,
        "ports": ports,
        "pcie_gen": 5,
        "link_layers": ["infiniband"],
        "source": "a NIC made up for the tests",
    }
