"""The roles' image phase: playbooks/image.yml and each role's tasks/image.yml.

`myriad image build` runs playbooks/image.yml once per profile; a node started from the image
runs playbooks/site.yml against itself. These tests hold the contract between the two without
running anything:

- image.yml sorts with the same play as site.yml, then applies `tasks_from: image` of roles in
  site.yml's order, each play on the hosts of that role's site.yml play;
- every role with tasks/image.yml has an `image` entry point in meta/argument_specs.yml that
  declares every role variable the image step reads (the task files it imports, the templates
  they render, the handlers they notify, and the internal variables of vars/ they use, followed
  to the end), each exactly as the main entry point declares it;
- no image step reads a per-node value (the host's address, its name, the cluster tables) or
  sets up the munge key.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOKS = ROOT / "playbooks"
ROLES = ROOT / "roles"
IMAGE_ROLES = sorted(p.parent.parent.name for p in ROLES.glob("*/tasks/image.yml"))
TASK_FILE = re.compile(r"(?:import_tasks|include_tasks):\s*([\w.-]+\.ya?ml)\s*$", re.M)
TEMPLATE = re.compile(r"^\s*src:\s*\"?([\w.-]+\.j2)\"?\s*$", re.M)
# Values that differ from node to node, or that only the cluster tables know: an image built
# from them would carry one node's settings to every node started from it.
PER_NODE = re.compile(
    r"inventory_hostname|myriad_address|ansible_host\b|common_hosts|common_hostname\b"
    r"|slurm_node_name|slurm_nodes|slurm_partitions|slurm_topology_switches|slurm_topology_blocks|slurm_controllers"
    r"|nccl_socket_address|__slurm_munge_key_source|slurm_munge_key_host"
    # The host variables the renderer writes per node (render/role_vars.py host_role_vars).
    r"|storage_net_address|infiniband_opensm_enabled|kubernetes_node_ip|kubernetes_node_island"
    r"|myriad_island|myriad_leaves"
)


def plays(name: str) -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = yaml.safe_load((PLAYBOOKS / name).read_text())
    return loaded


def site_plays() -> dict[str, dict[str, Any]]:
    """Each role of site.yml and its play."""
    return {
        (role["role"] if isinstance(role, dict) else role): play
        for play in plays("site.yml")
        for role in play.get("roles", [])
    }


def image_plays() -> list[tuple[str, dict[str, Any]]]:
    """(role, play) for each play of image.yml after the sorting play, in order."""
    found = []
    for play in plays("image.yml")[1:]:
        tasks = play["tasks"]
        assert len(tasks) == 1, play["name"]
        action = tasks[0]["ansible.builtin.import_role"]
        assert action["tasks_from"] == "image", play["name"]
        found.append((action["name"], play))
    return found


def role_files(role: str) -> list[Path]:
    """tasks/image.yml and every task file and template it reaches, first to last."""
    tasks = ROLES / role / "tasks"
    queue, seen = [tasks / "image.yml"], []
    while queue:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.append(path)
        text = path.read_text()
        queue += [tasks / name for name in TASK_FILE.findall(text)]
        queue += [ROLES / role / "templates" / name for name in TEMPLATE.findall(text)]
    return seen


def notified_handlers(role: str, text: str) -> Iterator[str]:
    """The text of each handler that a task of the image step can notify."""
    path = ROLES / role / "handlers" / "main.yml"
    if not path.is_file():
        return
    for handler in yaml.safe_load(path.read_text()) or []:
        names = {handler.get("name"), handler.get("listen")}
        if any(
            re.search(rf"notify:.*{re.escape(str(n))}|^\s+- {re.escape(str(n))}$", text, re.M)
            for n in names
            if n
        ):
            yield yaml.safe_dump(handler)


def internal_values(role: str) -> dict[str, str]:
    """Every __<role>_* variable of vars/*.yml with its definition as text."""
    found: dict[str, str] = {}
    for path in sorted((ROLES / role / "vars").glob("*.yml")):
        for name, value in (yaml.safe_load(path.read_text()) or {}).items():
            found[name] = found.get(name, "") + "\n" + yaml.safe_dump(value)
    return found


def main_options(role: str) -> dict[str, Any]:
    document = yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())
    options: dict[str, Any] = document["argument_specs"]["main"].get("options", {})
    return options


def image_options(role: str) -> dict[str, Any]:
    document = yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())
    entry = document["argument_specs"].get("image")
    assert entry is not None, f"roles/{role}/meta/argument_specs.yml has no `image` entry point"
    options: dict[str, Any] = entry.get("options", {})
    return options


def image_text(role: str) -> str:
    """All the text the image step evaluates: files, handlers, internal and default values."""
    text = "\n".join(path.read_text() for path in role_files(role))
    text += "\n".join(notified_handlers(role, text))
    internal, defaults = internal_values(role), main_options(role)
    # An internal variable the image step sets itself (task or block vars) is not read from vars/.
    for name in re.findall(rf"^\s+(__{role}_[a-z0-9_]+):", text, re.M):
        internal.pop(name, None)
    name = re.compile(rf"(?<![\w])(__)?{role}_[a-z0-9_]+")
    seen: set[str] = set()
    while True:
        new = {m.group(0) for m in name.finditer(text)} - seen
        if not new:
            return text
        seen |= new
        for variable in sorted(new):
            if variable in internal:
                text += internal[variable]
            elif "default" in defaults.get(variable, {}):
                text += "\n" + yaml.safe_dump(defaults[variable]["default"])


def read_variables(role: str) -> set[str]:
    """The role variables (main entry point options) the image step reads."""
    return set(re.findall(rf"(?<![\w]){role}_[a-z0-9_]+", image_text(role))) & set(
        main_options(role)
    )


def test_image_sorts_with_the_site_play_and_follows_site_order() -> None:
    assert plays("image.yml")[0] == {
        "name": "Sort the nodes by the layers they need",
        "ansible.builtin.import_playbook": "layers.yml",
    }
    assert plays("site.yml")[0] == plays("image.yml")[0]
    site = site_plays()
    order = [role for role, _ in image_plays()]
    assert order == [role for role in site if role in order], "image.yml is out of site order"
    for role, play in image_plays():
        assert play["hosts"] == site[role]["hosts"], role
        assert play["tags"] == site[role]["tags"], role
        assert play["become"] is True, role


def test_every_image_step_is_applied_and_every_applied_role_has_one() -> None:
    assert sorted(role for role, _ in image_plays()) == IMAGE_ROLES


def test_the_local_profile_roles_have_an_image_step() -> None:
    """The roles the local example's nodes run (tests/bringup/test_site_layers.py)."""
    assert {"common", "container_runtime", "slurm", "monitoring"} <= set(IMAGE_ROLES)


@pytest.mark.parametrize("role", IMAGE_ROLES)
def test_image_entry_point_declares_what_the_image_step_reads(role: str) -> None:
    missing = read_variables(role) - set(image_options(role))
    assert missing == set(), f"add to the image entry point of roles/{role}: {sorted(missing)}"


@pytest.mark.parametrize("role", IMAGE_ROLES)
def test_image_entry_point_repeats_the_main_declarations(role: str) -> None:
    main, image = main_options(role), image_options(role)
    assert set(image) <= set(main), set(image) - set(main)
    for name, option in image.items():
        strip = {k: v for k, v in option.items() if k != "description"}
        assert strip == {k: v for k, v in main[name].items() if k != "description"}, name


@pytest.mark.parametrize("role", IMAGE_ROLES)
def test_image_step_reads_nothing_per_node(role: str) -> None:
    found = sorted(
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in role_files(role)
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if PER_NODE.search(line) and not line.lstrip().startswith("#")
    )
    assert found == []


def test_the_scan_finds_what_the_image_steps_read() -> None:
    """The scanner follows imports, templates and internal variables (else it proves nothing)."""
    # common: packages.yml through import_tasks, __common_packages from vars/main.yml.
    assert {"common_packages", "common_time_sync", "common_limits_memlock"} <= read_variables(
        "common"
    )
    # slurm: __slurm_packages names slurm_gres_autodetect; hold.yml reads slurm_hold_packages.
    assert {"slurm_gres_autodetect", "slurm_hold_packages", "slurm_packages_state"} <= (
        read_variables("slurm")
    )
    # A per-node name in a file the image step imports is found, a cluster-wide one is not.
    assert PER_NODE.search('    name: "{{ slurm_node_name }}"')
    assert not PER_NODE.search('    name: "{{ slurm_cluster_name }}"')


def test_every_site_role_decides_about_the_image() -> None:
    """A role of site.yml has an image step, or is one of these (all their work is per node)."""
    converge_only = {"netnames", "infiniband", "nccl", "health"}
    assert set(site_plays()) - set(IMAGE_ROLES) == converge_only, (
        "give the role tasks/image.yml, or add it here when all its work is per node"
    )


@pytest.mark.parametrize("role", sorted(site_plays()))
def test_every_role_readme_says_what_its_image_phase_does(role: str) -> None:
    assert "\n## Image phase\n" in (ROLES / role / "README.md").read_text()
