"""What the aws-dev example renders for its nodes: NCCL over EFA through the nccl role's
variables, the efa role's device count and install choice, and no InfiniBand settings.

Exercised: myriad's render (spec -> plan -> inventory variables) and the nccl role's own
derivation of /etc/nccl.conf from those variables (its vars/main.yml templated by Ansible's
Jinja environment is not run here; the role's Molecule scenario covers that). Not exercised:
a node with EFA devices.
"""

from __future__ import annotations

from typing import Any

from myriad.plan.pipeline import plan_loaded
from myriad.render.inventory import build_inventory
from myriad.spec import load_spec_text

from stack_harness import REPO

AWS_DEV = REPO / "inventories/aws-dev/cluster.yaml"


def host_vars() -> dict[str, dict[str, Any]]:
    result = plan_loaded(load_spec_text(AWS_DEV.read_text(), str(AWS_DEV)))
    assert result.plan is not None
    inventory = build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)
    merged = {**inventory.group_vars.get("all", {})}
    return {
        host: {**merged, **_group_vars(inventory, host), **values}
        for host, values in inventory.host_vars.items()
    }


def _group_vars(inventory: Any, host: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for group, members in inventory.groups.items():
        if host in members and group != "all":
            found.update(inventory.group_vars.get(group, {}))
    return found


def test_compute_nodes_get_efa_and_no_infiniband_settings() -> None:
    gpu = host_vars()["gpu01"]
    assert gpu["myriad_fabric"] == "efa"
    assert gpu["efa_expected_devices"] == 32
    assert gpu["efa_install"] is True
    # NCCL over the plugin: the nccl role's socket settings, with NCCL_IB_DISABLE removed.
    assert gpu["nccl_fabric"] == "ethernet"
    assert gpu["nccl_conf_overrides"] == {"NCCL_IB_DISABLE": None}
    assert "nccl_hcas" not in gpu
    assert not any(key.startswith(("infiniband_", "roce_", "rdma_mlxconfig")) for key in gpu)
    assert gpu["container_runtime_enroot_mellanox_devices"] == ""
    # GPUDirect RDMA over EFA is the efa stack's; no nvidia-peermem, which needs HCAs' ib_core.
    assert gpu["nvidia_driver_gpudirect_rdma"] is False


def test_other_nodes_get_no_efa_role() -> None:
    for name in ("ctl01", "login01"):
        assert "efa_expected_devices" not in host_vars()[name]


def test_dlami_nodes_keep_the_software_of_the_image() -> None:
    edited = AWS_DEV.read_text().replace("  image: os\n", "  image: dlami\n")
    assert "image: dlami" in edited
    result = plan_loaded(load_spec_text(edited, str(AWS_DEV)))
    assert result.plan is not None
    inventory = build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)
    values = {k: v for g in inventory.group_vars.values() for k, v in g.items()}
    values.update(inventory.host_vars["gpu01"])
    assert values["efa_install"] is False


def test_a_spec_nccl_override_still_wins() -> None:
    edited = AWS_DEV.read_text().replace(
        "  orchestrator: slurm\n", "  orchestrator: slurm\n  nccl: {NCCL_DEBUG: INFO}\n"
    )
    result = plan_loaded(load_spec_text(edited, str(AWS_DEV)))
    assert result.plan is not None
    inventory = build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)
    values = {k: v for g in inventory.group_vars.values() for k, v in g.items()}
    assert values["nccl_conf_overrides"] == {"NCCL_IB_DISABLE": None, "NCCL_DEBUG": "INFO"}
