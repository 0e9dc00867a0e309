"""A node's seed (image mode): its own inventory, the tables, its documents and the munge key."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import yaml

from myriad.plan.pipeline import plan_loaded
from myriad.render.image_inventory import (
    BUILD_HOST,
    build_inputs_digest,
    image_build_inventory,
)
from myriad.render.inventory import Inventory, build_inventory
from myriad.render.seeds import SEED_DIR, seed_archive, seed_digest, seed_files
from myriad.spec import load_spec_text
from myriad.spec.models import Cluster

from spec_builder import load_example

LOCAL = Path(__file__).resolve().parents[2] / "inventories" / "local" / "cluster.yaml"


def local_inventory(text_edit: tuple[str, str] | None = None) -> tuple[Cluster, Inventory]:
    loaded = load_example("local")
    if text_edit is not None:
        loaded = load_spec_text(LOCAL.read_text().replace(*text_edit), str(LOCAL))
    result = plan_loaded(loaded)
    assert result.plan is not None
    spec = result.loaded.spec
    return spec, build_inventory(spec, result.loaded.catalog, result.plan)


def test_a_seed_holds_one_node_with_its_groups_and_connection_local() -> None:
    _, inventory = local_inventory()
    files = seed_files(inventory, "node02", tables={"common_hosts": [1]}, munge_key=b"k" * 1024)
    document = yaml.safe_load(files["inventory/hosts.yml"])["all"]
    assert list(document["hosts"]) == ["node02"]
    host = document["hosts"]["node02"]
    assert host["ansible_connection"] == "local" and "ansible_host" not in host
    assert host["slurm_munge_key_file"] == f"{SEED_DIR}/munge.key"
    # The groups node02 is in, with their variables; none it is not in.
    assert set(document["children"]) == {"compute", "pool_node", "island_00"}
    assert document["children"]["compute"]["vars"] == dict(inventory.group_vars["compute"])
    assert document["vars"]["myriad_cluster"] == "local"
    assert yaml.safe_load(files["inventory/cluster_tables.yml"]) == {"common_hosts": [1]}
    # Monitoring's files go to the server only (ctl01 in the local example).
    assert not any(p.startswith("inventory/monitoring/") for p in files)
    server = seed_files(inventory, "ctl01", tables={})
    assert any(p.startswith("inventory/monitoring/") for p in server)
    assert "munge.key" not in server


def test_the_seed_digest_names_its_content_and_the_archive_is_reproducible() -> None:
    _, inventory = local_inventory()
    one = seed_files(inventory, "node01", tables={}, health_document=b"{}")
    again = seed_files(inventory, "node01", tables={}, health_document=b"{}")
    other = seed_files(inventory, "node01", tables={}, health_document=b'{"x": 1}')
    assert json.loads(one["seed.json"])["digest"] == seed_digest(one) == seed_digest(again)
    assert seed_digest(other) != seed_digest(one)
    assert seed_archive(one) == seed_archive(again)
    with tarfile.open(fileobj=io.BytesIO(seed_archive(one)), mode="r:gz") as archive:
        names = archive.getnames()
        assert {"seed.json", "inventory/hosts.yml", "health/node01.json"} <= set(names)
        assert archive.getmember(".").mode == 0o700


def test_the_build_host_stands_for_every_part_its_profile_plays() -> None:
    spec, inventory = local_inventory()
    build = image_build_inventory(spec, inventory, "container", {"ansible_connection": "docker"})
    # One profile, a controller pool and a compute pool: the build host is in both parts.
    assert {"controller", "compute", "pool_ctl", "pool_node"} <= set(build.groups)
    assert all(hosts == [BUILD_HOST] for hosts in build.groups.values())
    host = build.host_vars[BUILD_HOST]
    assert host["myriad_image_build"] is True and host["ansible_connection"] == "docker"
    assert "common_hosts" not in build.group_vars["all"]


IMAGE_VARIABLES = {"common_packages_extra", "container_runtime_engine", "myriad_cluster"}


def with_all(inventory: Inventory, **values: object) -> Inventory:
    group_vars = {**inventory.group_vars, "all": {**inventory.group_vars["all"], **values}}
    return Inventory(inventory.cluster, inventory.groups, group_vars, inventory.host_vars)


def test_the_image_inputs_ignore_cluster_membership_and_follow_image_variables() -> None:
    spec, inventory = local_inventory()

    def digest(of: Inventory, cluster: Cluster = spec) -> str:
        build = image_build_inventory(cluster, of, "container", {})
        return build_inputs_digest(build, IMAGE_VARIABLES)

    bigger_spec, bigger = local_inventory(("count: 3, role: compute", "count: 5, role: compute"))
    # Two more nodes: the same image (the tables that list nodes are not its input).
    assert digest(bigger, bigger_spec) == digest(inventory)
    # A variable an image step reads rebuilds it; one only the converge reads does not.
    assert digest(with_all(inventory, common_packages_extra=["htop"])) != digest(inventory)
    assert digest(with_all(inventory, nccl_conf_overrides={"NCCL_DEBUG": "WARN"})) == digest(
        inventory
    )
