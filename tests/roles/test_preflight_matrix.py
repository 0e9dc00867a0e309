"""Preflight matrix: every example spec x every OS, rendered and checked by the roles.

For each `inventories/*/cluster.yaml` and each value of `software.os` (Ubuntu 22.04, Ubuntu 24.04,
Debian 12) the spec is rendered with `myriad render`; then `playbooks/site.yml` runs with
`--tags preflight --check` against the rendered inventory, on this machine, with a minimal fact set
of that OS injected as the play's facts module (nothing reads this machine's facts).
That runs every role's argument-spec validation (tagged `always` by Ansible) and every assertion
the roles tag `preflight` (the inputs the argument spec cannot express, with the OS's role
variables loaded), in the site playbook's own play order and layer groups.

Either `myriad render` refuses the combination with a located message (file:line, exit 2), or
every preflight passes. This is what would have caught the Slurm role refusing both rendered
examples (AutoDetect=nvml on Ubuntu 22.04, three controllers).

The test also holds that each of roce, storage_net, nccl, kubernetes, efa and netnames ran at
least one of its own preflight checks (not only its argument spec) on every host it applies to,
and that each example's nodes reach the roles its fabric, orchestrator and storage bond call for.

Hosts are grouped by what their variables can change (groups, and the boolean host variables
such as `infiniband_opensm_enabled`; addresses and names only differ), and one host per group
runs: 12,519 rendered hosts of h100-100k become a handful.

What this does not exercise: anything that reads the host (package lists, /sys, Secure Boot,
IOMMU, kernel modules). The roles' Molecule scenarios and each role README's real-hardware list
cover those.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from myriad.spec.os_table import OsRow, os_table

from spec_builder import example_text

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "playbooks" / "site.yml"
SPECS = sorted((ROOT / "inventories").glob("*/cluster.yaml"))

# The minimal facts the roles read, per `software.os`. Kernel releases are each release's
# general-availability kernel (jammy 5.15, noble 6.8, bookworm 6.1).
OS_FACTS: dict[str, dict[str, Any]] = {
    "ubuntu-22.04": {
        "distribution": "Ubuntu",
        "distribution_version": "22.04",
        "distribution_major_version": "22",
        "distribution_release": "jammy",
        "kernel": "5.15.0-125-generic",
    },
    "ubuntu-24.04": {
        "distribution": "Ubuntu",
        "distribution_version": "24.04",
        "distribution_major_version": "24",
        "distribution_release": "noble",
        "kernel": "6.8.0-49-generic",
    },
    "debian-12": {
        "distribution": "Debian",
        "distribution_version": "12.8",
        "distribution_major_version": "12",
        "distribution_release": "bookworm",
        "kernel": "6.1.0-27-amd64",
    },
}
COMMON_FACTS = {"os_family": "Debian", "system": "Linux", "architecture": "x86_64"}

# Groups that only say where a node is, not what it runs.
_PLACEMENT_GROUP = re.compile(r"^island_\d+$")
# A located refusal: "<file>:<line>[:<col>]: ..." on stderr.
_LOCATED = re.compile(r"cluster[^\s:]*\.yaml:\d+")


def _bin(tool: str) -> str:
    return str(Path(sys.executable).parent / tool)


def _spec_for_os(spec: Path, os_name: str, out: Path) -> Path:
    """The example spec with `software.os` replaced, written next to the inventory."""
    text = spec.read_text()
    data = yaml.safe_load(text)
    if data["software"]["os"] == os_name:
        target = out / "cluster.yaml"
        target.write_text(text)
        return target
    # Replace the one line, so that every other line keeps its number for located messages.
    replaced, count = re.subn(
        r"^(\s*os:\s*)\S+(.*)$", rf"\g<1>{os_name}\g<2>", text, count=1, flags=re.M
    )
    assert count == 1, f"{spec}: no `os:` line under software"
    target = out / "cluster.yaml"
    target.write_text(replaced)
    return target


def _inventory_hosts(inventory: Path) -> dict[str, set[str]]:
    """Host -> the groups it is in (hosts.yml is flat: all -> children -> hosts)."""
    # libyaml: the hosts file of h100-100k is 12,519 hosts long.
    tree = yaml.load((inventory / "hosts.yml").read_text(), Loader=yaml.CSafeLoader)
    groups: dict[str, set[str]] = {}

    def walk(name: str, node: dict[str, Any] | None) -> None:
        node = node or {}
        for host in node.get("hosts") or {}:
            groups.setdefault(host, set()).add(name)
        for child, sub in (node.get("children") or {}).items():
            walk(child, sub)

    walk("all", tree["all"])
    return groups


def representatives(inventory: Path) -> list[str]:
    """One host per set of hosts whose variables differ only in names and addresses."""
    return _representatives(_inventory_hosts(inventory), inventory)


def _representatives(memberships: dict[str, set[str]], inventory: Path) -> list[str]:
    chosen: dict[str, str] = {}
    for host, groups in sorted(memberships.items()):
        host_vars_file = inventory / "host_vars" / f"{host}.json"
        host_vars = json.loads(host_vars_file.read_text()) if host_vars_file.exists() else {}
        # Booleans switch behaviour (an SM node); other values are per-host data of one shape.
        shape = {
            key: (value if isinstance(value, bool) else type(value).__name__)
            for key, value in host_vars.items()
        }
        signature = json.dumps(
            [sorted(g for g in groups if not _PLACEMENT_GROUP.match(g)), shape], sort_keys=True
        )
        chosen.setdefault(signature, host)
    return sorted(chosen.values())


def reduced_inventory(
    inventory: Path, hosts: list[str], out: Path, memberships: dict[str, set[str]] | None = None
) -> Path:
    """The rendered inventory with only `hosts` in it: same group_vars, same groups.

    Ansible reads every host's variables when it loads an inventory; 12,519 host_vars files
    cost a minute, and the preflight reads the cluster's shape from group_vars anyway.
    """
    out.mkdir(parents=True, exist_ok=True)
    (out / "group_vars").symlink_to(inventory / "group_vars")
    if (inventory / "cluster_tables.yml").exists():
        (out / "cluster_tables.yml").symlink_to(inventory / "cluster_tables.yml")
    (out / "host_vars").mkdir()
    for host in hosts:
        source = inventory / "host_vars" / f"{host}.json"
        if source.exists():
            (out / "host_vars" / source.name).write_text(source.read_text())
    memberships = memberships or _inventory_hosts(inventory)
    children: dict[str, dict[str, Any]] = {}
    for host in hosts:
        for group in sorted(memberships[host] - {"all"}):
            children.setdefault(group, {"hosts": {}})["hosts"][host] = None
    (out / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": children}}))
    return out


def _write_facts_module(library: Path, os_name: str) -> None:
    """A facts module that answers with the OS's fact set instead of reading this machine.

    Ansible's `FACTS_MODULES` setting names the modules the play's fact gathering runs; the
    site playbook's `gather_facts` then gets these facts, exactly as from `setup` on a node.
    """
    library.mkdir(parents=True, exist_ok=True)
    facts = {
        f"ansible_{key}": value for key, value in {**COMMON_FACTS, **OS_FACTS[os_name]}.items()
    }
    (library / "myriad_injected_facts.py").write_text(
        "#!/usr/bin/python\n"
        "from ansible.module_utils.basic import AnsibleModule\n"
        "module = AnsibleModule(argument_spec={}, supports_check_mode=True, bypass_checks=True)\n"
        f"facts = {facts!r}\n"
        "facts['ansible_hostname'] = facts['ansible_nodename'] = module.params.get('_host', '')\n"
        "module.exit_json(changed=False, ansible_facts=facts)\n"
    )


def _tables_option(inventory: Path) -> list[str]:
    tables = inventory / "cluster_tables.yml"
    return ["-e", f"@{tables}"] if tables.exists() else []


def run_preflight(
    inventory: Path, hosts: list[str], os_name: str, work: Path, *extra: str
) -> dict[str, Any]:
    """site.yml --tags preflight --check on `hosts`; returns the json callback's report."""
    library = work / "library"
    _write_facts_module(library, os_name)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_ROLES_PATH": str(ROOT / "roles"),
        "ANSIBLE_LIBRARY": str(library),
        "ANSIBLE_FACTS_MODULES": "myriad_injected_facts",
        "ANSIBLE_STDOUT_CALLBACK": "json",
        "ANSIBLE_LOCAL_TEMP": str(work / "tmp"),
        "ANSIBLE_RETRY_FILES_ENABLED": "false",
        "ANSIBLE_HOST_KEY_CHECKING": "false",
    }
    result = subprocess.run(
        [
            _bin("ansible-playbook"),
            "-i",
            str(inventory / "hosts.yml"),
            str(SITE),
            "--tags",
            "preflight",
            "--check",
            "--connection",
            "local",
            "--limit",
            ",".join(hosts),
            # Nothing runs on a host; no task may need sudo on this machine. Extra variables
            # beat the inventory's own connection (the local example's `docker`).
            "-e",
            "ansible_become=false",
            "-e",
            "ansible_connection=local",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            # The cluster-wide tables, as the runner passes them.
            *_tables_option(inventory),
            *extra,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    try:
        report: dict[str, Any] = json.loads(result.stdout)
    except json.JSONDecodeError:
        pytest.fail(
            "ansible-playbook gave no JSON report:\n"
            f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    report["rc"] = result.returncode
    report["stderr"] = result.stderr
    return report


def failures(report: dict[str, Any]) -> list[str]:
    found = []
    for play in report.get("plays", []):
        for task in play.get("tasks", []):
            for host, outcome in task.get("hosts", {}).items():
                if outcome.get("failed") or outcome.get("unreachable"):
                    # A loop's failure says only "One or more items failed": add the items'.
                    items = [r.get("msg") for r in outcome.get("results", []) if r.get("failed")]
                    found.append(
                        f"{play['play']['name']} / {task['task']['name']} on {host}: "
                        f"{outcome.get('msg')}{''.join(f' | {m}' for m in items)}"
                    )
    return found


def tasks_run(report: dict[str, Any], host: str) -> list[str]:
    """Names of the tasks that ran (not skipped) on host, in order, as 'role : task'."""
    names = []
    for play in report.get("plays", []):
        for task in play.get("tasks", []):
            outcome = task.get("hosts", {}).get(host)
            if outcome is not None and not outcome.get("skipped"):
                names.append(task["task"]["name"])
    return names


# Roles whose input checks are tagged `preflight` besides their argument spec.
PREFLIGHT_ROLES = ("roce", "storage_net", "nccl", "kubernetes", "efa", "netnames")
_ARG_SPEC = "Validating arguments against arg spec"


def _is_preflight_check(role: str, task: str) -> bool:
    """A task of `role` that is one of its own checks, not its argument spec or a vars load."""
    return task.startswith(f"{role} : ") and _ARG_SPEC not in task and "Load the" not in task


def roles_validated(report: dict[str, Any], hosts: list[str]) -> dict[str, set[str]]:
    """Role -> the hosts on which it validated its arguments (so it applies to them)."""
    found: dict[str, set[str]] = {}
    for host in hosts:
        for task in tasks_run(report, host):
            if _ARG_SPEC in task:
                found.setdefault(task.split(" : ")[0], set()).add(host)
    return found


def roles_expected(spec: dict[str, Any]) -> set[str]:
    """The roles of PREFLIGHT_ROLES a spec's nodes must walk, from the spec's own fields."""
    network = spec.get("network", {})
    fabric = network.get("fabric", "ethernet")
    expected = {"nccl"}  # every example has GPU compute nodes
    if fabric == "roce":
        expected.add("roce")
    if fabric == "efa":
        expected.add("efa")
    if spec["software"].get("orchestrator", "slurm") == "kubernetes":
        expected.add("kubernetes")
    bonded = any(
        isinstance(nic, dict) and nic.get("bond")
        for profile in spec.get("profiles", {}).values()
        for nic in [profile.get("nics", {}).get("storage")]
    )
    if bonded:
        expected.add("storage_net")
    # Render names the RoCE rails and the bond members' ports.
    if fabric == "roce" or bonded:
        expected.add("netnames")
    return expected


def render(spec: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_bin("myriad"), "render", str(spec), "--out", str(out / "inventory")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _matrix() -> Iterator[Any]:
    for spec in SPECS:
        for os_name in OS_FACTS:
            yield pytest.param(spec, os_name, id=f"{spec.parent.name}-{os_name}")


@pytest.mark.slow
@pytest.mark.parametrize(("spec", "os_name"), list(_matrix()))
def test_every_role_accepts_the_rendered_inventory(
    spec: Path, os_name: str, tmp_path: Path
) -> None:
    variant = _spec_for_os(spec, os_name, tmp_path)
    rendered = render(variant, tmp_path)
    if rendered.returncode != 0:
        # A refusal is fine when `myriad plan` says where and what, without a traceback.
        assert "Traceback" not in rendered.stderr
        assert _planned_refusal(variant) is not None, rendered.stderr
        return
    memberships = _inventory_hosts(tmp_path / "inventory")
    hosts = _representatives(memberships, tmp_path / "inventory")
    inventory = reduced_inventory(tmp_path / "inventory", hosts, tmp_path / "reduced", memberships)
    report = run_preflight(inventory, hosts, os_name, tmp_path)
    assert not failures(report), "\n".join(failures(report))
    assert report["rc"] == 0, report["stderr"][-3000:]
    # Every representative walked at least the baseline role's argument and input checks, so
    # a tag or group mistake cannot make this test pass by running nothing.
    for host in hosts:
        ran = tasks_run(report, host)
        assert any("common : Validating arguments against arg spec" in t for t in ran), (host, ran)
        assert any("common : Check the inputs" in t for t in ran), (host, ran)
    # Each of these roles ran its own preflight checks, not only its argument spec, on every
    # host it applies to (the hosts whose arguments it validated).
    validated = roles_validated(report, hosts)
    for role in PREFLIGHT_ROLES:
        for host in validated.get(role, set()):
            checks = [t for t in tasks_run(report, host) if _is_preflight_check(role, t)]
            assert checks, f"{role} validated its arguments on {host} but ran no preflight check"
    expected = roles_expected(yaml.safe_load(variant.read_text()))
    assert expected <= set(validated), (expected, sorted(validated))
    slurm = yaml.safe_load(variant.read_text())["software"].get("orchestrator", "slurm") == "slurm"
    if slurm:
        checked = [
            h
            for h in hosts
            if any("slurm : Check that the cluster description" in t for t in tasks_run(report, h))
        ]
        assert checked, "no host ran the Slurm preflight"


def test_representatives_cover_every_kind_of_host(tmp_path: Path) -> None:
    spec = ROOT / "inventories" / "roce-10k" / "cluster.yaml"
    assert render(spec, tmp_path).returncode == 0
    hosts = representatives(tmp_path / "inventory")
    groups = _inventory_hosts(tmp_path / "inventory")
    # 1,257 hosts: the controller that is also the monitoring server, the other controllers,
    # logins and GPU nodes, each kind once.
    assert {r for h in hosts for r in groups[h]} >= {"controller", "login", "compute"}
    assert [h for h in hosts if "monitoring_server" in groups[h]] == ["ctl01"]
    assert len(hosts) == 4, hosts


@pytest.mark.slow
@pytest.mark.parametrize(
    ("os_name", "extra", "message"),
    [
        # No Ubuntu release before 25.10 packages the NVML plugin (src/myriad/catalog/os.yaml).
        ("ubuntu-24.04", ("-e", "slurm_gres_autodetect=nvml"), "packages no Slurm NVML plugin"),
        # Slurm 21.08 has no cgroup/v2 and jammy boots the unified hierarchy.
        ("ubuntu-22.04", (), "ships Slurm 21.08.5 with cgroup/v1"),
    ],
)
def test_the_slurm_preflight_refuses_what_a_node_cannot_do(
    os_name: str, extra: tuple[str, ...], message: str, tmp_path: Path
) -> None:
    """The matrix fails where the role would: what the OS's own Slurm packages cannot do."""
    spec = ROOT / "inventories" / "starter-64" / "cluster.yaml"
    assert render(spec, tmp_path).returncode == 0
    inventory = tmp_path / "inventory"
    gpu_host = next(h for h, g in sorted(_inventory_hosts(inventory).items()) if "compute" in g)
    report = run_preflight(inventory, [gpu_host], os_name, tmp_path, *extra)
    found = [" ".join(f.split()) for f in failures(report)]
    assert any(message in f for f in found), found
    assert report["rc"] != 0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("role", "tasks_from", "variables", "message"),
    [
        (
            "roce",
            "main.yml",
            {"roce_nics": [{"netdev": "rail0", "device": "mlx5_0", "address": "10.64.0.0/20"}]},
            "is the network or broadcast address of 10.64.0.0/20",
        ),
        (
            "roce",
            "main.yml",
            {"roce_nics": [{"netdev": "rail0", "device": "mlx5_0", "address": "10.64.15.255/20"}]},
            "is the network or broadcast address of 10.64.0.0/20",
        ),
        (
            "roce",
            "main.yml",
            # The leaf of another subnet: no next hop the rail reaches directly.
            {
                "roce_nics": [
                    {
                        "netdev": "rail0",
                        "device": "mlx5_0",
                        "address": "10.64.1.11/24",
                        "gateway": "10.64.0.1",
                        "rail_network": "10.64.0.0/20",
                    }
                ]
            },
            "must be a host of 10.64.1.0/24 other than 10.64.1.11",
        ),
        (
            "roce",
            "main.yml",
            # A rail network that is another rail's: the own leaf's hosts would go through it.
            {
                "roce_nics": [
                    {
                        "netdev": "rail0",
                        "device": "mlx5_0",
                        "address": "10.64.1.11/24",
                        "gateway": "10.64.1.1",
                        "rail_network": "10.64.16.0/20",
                    }
                ]
            },
            "that holds 10.64.1.0/24",
        ),
        (
            "roce",
            "main.yml",
            {
                "roce_nics": [
                    {
                        "netdev": "rail0",
                        "device": "mlx5_0",
                        "address": "10.64.1.11/24",
                        "gateway": "10.64.1.1",
                    }
                ]
            },
            "rail_network (none) must be given together",
        ),
        (
            "roce",
            "main.yml",
            {
                "roce_route_table_base": 250,
                "roce_nics": [
                    {"netdev": f"rail{i}", "device": f"mlx5_{i}", "address": f"10.64.{i}.11/24"}
                    for i in range(4)
                ],
            },
            "must lie within 1-252",
        ),
        (
            "efa",
            "main.yml",
            {"efa_require_device": False, "efa_expected_devices": 4},
            "0 when efa_require_device is false",
        ),
        (
            "nvidia_driver",
            "main.yml",
            # An NVL72 compute tray that does not say which trays share its NVLink domain.
            {"nvidia_driver_nvlink_fabric": "imex"},
            "nvidia_driver_imex_nodes is empty",
        ),
        (
            "nvidia_driver",
            "main.yml",
            {
                "nvidia_driver_nvlink_fabric": "imex",
                "nvidia_driver_imex_nodes": ["10.0.0.1", "10.0.0.2"],
                "nvidia_driver_fabricmanager": True,
            },
            "runs no host Fabric Manager",
        ),
        (
            "nvidia_driver",
            "main.yml",
            {
                "nvidia_driver_source": "distribution",
                "nvidia_driver_nvlink_fabric": "imex",
                "nvidia_driver_imex_nodes": ["10.0.0.1", "10.0.0.2"],
            },
            "Ubuntu has no IMEX package with nvidia_driver_source=distribution",
        ),
    ],
)
def test_the_new_preflight_checks_refuse_inconsistent_inputs(
    role: str, tasks_from: str, variables: dict[str, Any], message: str, tmp_path: Path
) -> None:
    """The preflight-tagged input checks stop on a bad inventory, before any node task."""
    tasks = [
        {
            "name": f"Run the {role} preflight",
            "ansible.builtin.include_role": {"name": role, "tasks_from": tasks_from},
            # The include itself runs under any tag; inside, only the `preflight` tasks do.
            "tags": ["always"],
        }
    ]
    extra = [arg for key, value in variables.items() for arg in ("-e", json.dumps({key: value}))]
    report = run_play(tasks, "ubuntu-22.04", tmp_path, *extra, "--tags", "preflight,always")
    found = failures(report)
    assert report["rc"] != 0
    assert any(message in " ".join(f.split()) for f in found), found


@pytest.mark.slow
def test_the_roce_preflight_accepts_a_rail_behind_its_leaf(tmp_path: Path) -> None:
    """What render writes behind a routed leaf passes; each case above changes one thing."""
    tasks = [
        {
            "name": "Run the roce preflight",
            "ansible.builtin.include_role": {"name": "roce", "tasks_from": "main.yml"},
            "tags": ["always"],
        }
    ]
    nics = [
        {
            "netdev": f"rail{rail}",
            "device": f"mlx5_{rail}",
            "address": f"10.64.{16 * rail + 1}.11/24",
            "gateway": f"10.64.{16 * rail + 1}.1",
            "rail_network": f"10.64.{16 * rail}.0/20",
        }
        for rail in range(2)
    ]
    extra = ("-e", json.dumps({"roce_nics": nics}))
    report = run_play(tasks, "ubuntu-22.04", tmp_path, *extra, "--tags", "preflight,always")
    assert report["rc"] == 0, failures(report)


# --- Role order and the driver role's module logic ------------------------------------------


def test_the_rdma_stack_comes_before_the_gpu_driver() -> None:
    """nvidia-peermem builds against and loads on ib_core: the RDMA play must run first."""
    plays = yaml.safe_load(SITE.read_text())
    order = [role["role"] for play in plays for role in play.get("roles", [])]
    assert order.index("rdma") < order.index("nvidia_driver"), order
    # and on the same nodes: every GPU node with HCAs is in the RDMA play's group.
    rdma_play = next(p for p in plays if any(r["role"] == "rdma" for r in p.get("roles", [])))
    assert rdma_play["hosts"] == "myriad_layer_rdma"


def run_play(
    tasks: list[dict[str, Any]],
    os_name: str,
    work: Path,
    *extra: str,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One play on localhost with the OS's injected facts; the json callback's report."""
    library = work / "library"
    _write_facts_module(library, os_name)
    playbook = work / "play.yml"
    playbook.write_text(
        yaml.safe_dump(
            [{"name": "Probe", "hosts": "localhost", "gather_facts": True, "tasks": tasks}]
        )
    )
    environment = {
        **os.environ,
        "ANSIBLE_ROLES_PATH": str(ROOT / "roles"),
        "ANSIBLE_LIBRARY": str(library),
        "ANSIBLE_FACTS_MODULES": "myriad_injected_facts",
        "ANSIBLE_STDOUT_CALLBACK": "json",
        "ANSIBLE_LOCAL_TEMP": str(work / "tmp"),
        **(env or {}),
    }
    result = subprocess.run(
        [
            _bin("ansible-playbook"),
            "-i",
            "localhost,",
            "--connection",
            "local",
            str(playbook),
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            *extra,
        ],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    report: dict[str, Any] = json.loads(result.stdout)
    report["rc"] = result.returncode
    return report


def _gdr_method(os_name: str, work: Path, **variables: Any) -> str:
    tasks = [
        {
            "name": "Load the role's variables",
            "ansible.builtin.include_vars": {
                "dir": str(ROOT / "roles" / "nvidia_driver" / "defaults")
            },
        },
        {
            "name": "Load the role's internal variables",
            "ansible.builtin.include_vars": {
                "file": str(ROOT / "roles" / "nvidia_driver" / "vars" / "main.yml")
            },
        },
        {"name": "Report", "ansible.builtin.debug": {"msg": "{{ __nvidia_driver_gdr_method }}"}},
    ]
    extra = [arg for key, value in variables.items() for arg in ("-e", json.dumps({key: value}))]
    report = run_play(tasks, os_name, work, *extra)
    assert report["rc"] == 0, failures(report)
    last = report["plays"][0]["tasks"][-1]["hosts"]["localhost"]
    return str(last["msg"])


@pytest.mark.slow
@pytest.mark.parametrize("os_name", list(OS_FACTS))
def test_gpudirect_prefers_dmabuf_with_open_modules(os_name: str, tmp_path: Path) -> None:
    # Every supported OS's kernel is 5.12 or later: DMA-BUF with the open modules.
    assert _gdr_method(os_name, tmp_path, nvidia_driver_gpudirect_rdma=True) == "dmabuf"


@pytest.mark.slow
def test_gpudirect_falls_back_to_peermem(tmp_path: Path) -> None:
    proprietary = _gdr_method(
        "ubuntu-22.04",
        tmp_path,
        nvidia_driver_gpudirect_rdma=True,
        nvidia_driver_kernel_module_type="proprietary",
    )
    assert proprietary == "peermem"
    assert _gdr_method("ubuntu-22.04", tmp_path, nvidia_driver_gpudirect_rdma=False) == "none"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("efivar", "enrolled", "refused"),
    [
        (b"\x06\x00\x00\x00\x01", False, True),
        (b"\x06\x00\x00\x00\x01", True, False),
        (b"\x06\x00\x00\x00\x00", False, False),
        (None, False, False),
    ],
)
def test_secure_boot_refuses_unsigned_modules(
    efivar: bytes | None, enrolled: bool, refused: bool, tmp_path: Path
) -> None:
    """The role's Secure Boot task against a fake UEFI SecureBoot variable (attributes, value)."""
    variable = tmp_path / "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
    if efivar is not None:
        variable.write_bytes(efivar)
    tasks = [
        {
            "name": "Run the role's Secure Boot check",
            "ansible.builtin.include_role": {
                "name": "nvidia_driver",
                "tasks_from": "secure_boot.yml",
            },
        }
    ]
    report = run_play(
        tasks,
        "ubuntu-22.04",
        tmp_path,
        "-e",
        json.dumps(
            {
                "__nvidia_driver_secure_boot_efivar": str(variable),
                "__nvidia_driver_dkms_mok": "/var/lib/shim-signed/mok/MOK.der",
                "nvidia_driver_secure_boot_mok_enrolled": enrolled,
            }
        ),
    )
    found = failures(report)
    if refused:
        assert report["rc"] != 0
        assert any("Secure Boot is on" in f and "mokutil --import" in f for f in found), found
    else:
        assert report["rc"] == 0, found


# --- What the Slurm role writes from the rendered examples ----------------------------------


def _slurm_files(spec_name: str | Path, work: Path) -> dict[str, str]:
    """slurm.conf and gres.conf as the role templates them from the example's inventory (or
    the spec at a path)."""
    spec = spec_name if isinstance(spec_name, Path) else ROOT / "inventories" / spec_name
    done = render(spec if spec.suffix == ".yaml" else spec / "cluster.yaml", work)
    assert done.returncode == 0, done.stderr
    group_vars = {
        **yaml.load(
            (work / "inventory" / "group_vars" / "all.yml").read_text(), Loader=yaml.CSafeLoader
        ),
        # The cluster-wide tables (slurm_nodes, ...), extra vars in a real run.
        **yaml.load(
            (work / "inventory" / "cluster_tables.yml").read_text(), Loader=yaml.CSafeLoader
        ),
    }
    role = ROOT / "roles" / "slurm"
    variables = {
        **yaml.safe_load((role / "defaults" / "main.yml").read_text()),
        **group_vars,
        "__slurm_cgroup_plugin_default": "autodetect",
    }
    (work / "vars.json").write_text(json.dumps(variables))
    tasks = [
        {
            "name": "Load the role's internal variables",
            "ansible.builtin.include_vars": {"file": str(role / "vars" / "main.yml")},
        },
        *[
            {
                "name": f"Template {name}",
                "ansible.builtin.template": {
                    "src": str(role / "templates" / f"{name}.j2"),
                    "dest": str(work / name),
                    "mode": "0644",
                },
            }
            for name in ("slurm.conf", "gres.conf")
        ],
    ]
    report = run_play(
        tasks,
        "ubuntu-22.04",
        work,
        "-e",
        f"@{work / 'vars.json'}",
        env={"ANSIBLE_FILTER_PLUGINS": str(role / "filter_plugins")},
    )
    assert report["rc"] == 0, failures(report)
    return {name: (work / name).read_text() for name in ("slurm.conf", "gres.conf")}


@pytest.mark.slow
def test_gpu_gres_lines_name_devices_and_their_cores(tmp_path: Path) -> None:
    gres = _slurm_files("starter-64", tmp_path)["gres.conf"]
    lines = [line for line in gres.splitlines() if line.startswith("NodeName=")]
    # 2 sockets x 48 cores, 8 GPUs: GPUs 0-3 on socket 0 (cores 0-47), 4-7 on socket 1.
    assert lines == [
        "NodeName=gpu[01-08] AutoDetect=off Name=gpu Type=h100 File=/dev/nvidia[0-3] Cores=0-47",
        "NodeName=gpu[01-08] AutoDetect=off Name=gpu Type=h100 File=/dev/nvidia[4-7] Cores=48-95",
    ]


@pytest.mark.slow
def test_three_controllers_share_their_state(tmp_path: Path) -> None:
    conf = _slurm_files("roce-10k", tmp_path)["slurm.conf"]
    hosts = [line for line in conf.splitlines() if line.startswith("SlurmctldHost=")]
    assert [h.split("(")[0] for h in hosts] == [
        "SlurmctldHost=ctl01",
        "SlurmctldHost=ctl02",
        "SlurmctldHost=ctl03",
    ]
    assert "StateSaveLocation=/ckpt/slurm/state" in conf.splitlines()
    assert "Gres=gpu:a800:8" in conf


# --- Every rendered Slurm option against the OS capability table ----------------------------


def _planned_refusal(variant: Path) -> str | None:
    """The errors `myriad plan` refuses the spec with, each at its file:line; None if none.

    A spec that does not load is refused on stderr with its location (exit 2); one that loads
    but fails a lint lists each error finding with its `location` (--json, exit 1).
    """
    planned = subprocess.run(
        [_bin("myriad"), "plan", str(variant), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    said = planned.stdout + planned.stderr
    assert "Traceback" not in said
    if planned.returncode == 0:
        return None
    if planned.returncode == 2:
        assert _LOCATED.search(planned.stderr), said
        return planned.stderr
    errors = [f for f in json.loads(planned.stdout)["findings"] if f["severity"] == "error"]
    assert errors, said
    for finding in errors:
        assert _LOCATED.search(finding["location"]), finding
    return "\n".join(f"{f['location']}: {f['id']}: {f['message']}" for f in errors)


def _role_files(inventory: Path, os_name: str, work: Path) -> dict[str, str]:
    """cgroup.conf, slurm.conf and gres.conf as the slurm role writes them on `os_name`.

    The role's own os_vars.yml picks the OS's variables (roles/slurm/vars/<OS>.yml), over the
    role's defaults and under the rendered inventory's group variables, as on a node.
    """
    role = ROOT / "roles" / "slurm"
    names = ("cgroup.conf", "slurm.conf", "gres.conf")
    tasks = [
        {
            "name": f"Load the inventory's {source.name}",
            "ansible.builtin.include_vars": {"file": str(source)},
        }
        for source in (inventory / "group_vars" / "all.yml", inventory / "cluster_tables.yml")
        if source.exists()
    ]
    tasks += [
        {
            "name": "Load the role's variables for this OS",
            "ansible.builtin.include_role": {
                "name": "slurm",
                "tasks_from": "os_vars.yml",
                "public": True,
            },
        },
        *[
            {
                "name": f"Template {name}",
                "ansible.builtin.template": {
                    "src": str(role / "templates" / f"{name}.j2"),
                    "dest": str(work / name),
                    "mode": "0644",
                },
            }
            for name in names
        ],
    ]
    report = run_play(
        tasks, os_name, work, env={"ANSIBLE_FILTER_PLUGINS": str(role / "filter_plugins")}
    )
    assert report["rc"] == 0, failures(report)
    return {name: (work / name).read_text() for name in names}


def _settings(text: str) -> dict[str, str]:
    """Key=Value lines of a Slurm file (the first word of each line only)."""
    found = {}
    for line in text.splitlines():
        word = line.split("#", 1)[0].strip().split(" ", 1)[0]
        if "=" in word:
            key, value = word.split("=", 1)
            found[key] = value
    return found


def table_problems(row: OsRow, files: dict[str, str], *, legacy_hierarchy: bool) -> list[str]:
    """Each rendered option that this OS's Slurm packages cannot honour, with why."""
    problems = []
    cgroup = _settings(files["cgroup.conf"]).get("CgroupPlugin", "autodetect")
    why = row.cgroup_problem(cgroup, legacy_hierarchy=legacy_hierarchy)
    if why is not None:
        problems.append(f"cgroup.conf CgroupPlugin={cgroup}: {why}")
    topology = _settings(files["slurm.conf"]).get("TopologyPlugin", "")
    if topology and topology not in row.topology_plugins.value:
        problems.append(
            f"slurm.conf TopologyPlugin={topology}: not among {row.topology_plugins.value} "
            f"({row.topology_plugins.source})"
        )
    gres_lines = [line for line in files["gres.conf"].splitlines() if not line.startswith("#")]
    if any("AutoDetect=nvml" in line for line in gres_lines) and not row.nvml_package.value:
        problems.append(f"gres.conf AutoDetect=nvml: {row.nvml_package.source}")
    return problems


@pytest.mark.slow
@pytest.mark.parametrize(
    ("spec", "os_name"),
    [
        p
        for p in _matrix()
        if yaml.safe_load(p.values[0].read_text())["software"].get("orchestrator", "slurm")
        == "slurm"
    ],
)
def test_every_rendered_slurm_option_exists_on_the_os(
    spec: Path, os_name: str, tmp_path: Path
) -> None:
    """The role's cgroup.conf, slurm.conf and gres.conf use only what the OS's Slurm ships.

    Or `myriad plan` refuses the combination with a located message: the table is the one
    statement of what each OS ships (src/myriad/catalog/os.yaml).
    """
    variant = _spec_for_os(spec, os_name, tmp_path)
    if render(variant, tmp_path).returncode != 0:
        # Refused for what the OS's Slurm cannot do, and for nothing else the OS does not change.
        refusal = _planned_refusal(variant)
        assert refusal is not None
        # No cgroup plugin for the booted hierarchy, or no topology/block for NVLink domains.
        assert "slurm-os-cgroup" in refusal or "slurm-os-topology" in refusal, refusal
        return
    inventory = tmp_path / "inventory"
    files = _role_files(inventory, os_name, tmp_path)
    group_vars = yaml.safe_load((inventory / "group_vars" / "all.yml").read_text())
    legacy = bool(group_vars.get("slurm_cgroup_legacy_hierarchy", False))
    problems = table_problems(os_table()[os_name], files, legacy_hierarchy=legacy)
    assert not problems, "\n".join(problems)


def test_the_table_check_sees_cgroup_v2_on_slurm_21_08() -> None:
    """The check fails on what the role wrote for Ubuntu 22.04 before: cgroup/v2 on 21.08."""
    jammy = os_table()["ubuntu-22.04"]
    files = {"cgroup.conf": "CgroupPlugin=cgroup/v2\n", "slurm.conf": "", "gres.conf": ""}
    (problem,) = table_problems(jammy, files, legacy_hierarchy=False)
    assert "Slurm 21.08.5 has no cgroup/v2 plugin" in problem
    # autodetect is no way out: on jammy's unified hierarchy it picks cgroup/v2 as well.
    files["cgroup.conf"] = "CgroupPlugin=autodetect\n"
    assert table_problems(jammy, files, legacy_hierarchy=False)
    # v1 works only on a node booted with the legacy hierarchy.
    files["cgroup.conf"] = "CgroupPlugin=cgroup/v1\n"
    assert "cannot manage the unified" in table_problems(jammy, files, legacy_hierarchy=False)[0]
    assert table_problems(jammy, files, legacy_hierarchy=True) == []


@pytest.mark.slow
def test_reboots_go_through_slurm(tmp_path: Path) -> None:
    """`scontrol reboot ASAP nextstate=RESUME` works: a RebootProgram and a GPU-sized timeout."""
    lines = _slurm_files("starter-64", tmp_path)["slurm.conf"].splitlines()
    assert "RebootProgram=/usr/sbin/reboot" in lines
    # Slurm's default ResumeTimeout (60 s) would mark a rebooting GPU server DOWN.
    assert "ResumeTimeout=1200" in lines


@pytest.mark.slow
def test_jobs_on_a_failed_node_are_requeued(tmp_path: Path) -> None:
    """JobRequeue=1 always (slurm.conf(5) at slurm-22-05-8-1 and slurm-23-11-10-1: batch jobs
    may be requeued unless they said --no-requeue); RequeueExit from
    health.remediation.requeue_exit."""
    lines = _slurm_files("starter-64", tmp_path / "plain")["slurm.conf"].splitlines()
    assert "JobRequeue=1" in lines
    assert not any(line.startswith("RequeueExit=") for line in lines)
    text = example_text("starter-64", without=("health",))
    spec = tmp_path / "cluster.yaml"
    spec.write_text(text + "health: {remediation: {requeue_exit: [75, 99]}}\n")
    lines = _slurm_files(spec, tmp_path / "requeue")["slurm.conf"].splitlines()
    assert "JobRequeue=1" in lines and "RequeueExit=75,99" in lines


@pytest.mark.slow
def test_the_prolog_and_epilog_map_gpus_to_jobs(tmp_path: Path) -> None:
    """Prolog and Epilog (slurm.conf(5)) both run the role's myriad-gpu-jobs.sh, which tells
    them apart by SLURM_SCRIPT_CONTEXT; no site setting takes its place."""
    lines = _slurm_files("starter-64", tmp_path)["slurm.conf"].splitlines()
    assert "Prolog=/etc/slurm/myriad-gpu-jobs.sh" in lines
    assert "Epilog=/etc/slurm/myriad-gpu-jobs.sh" in lines
    assert sum(line.startswith(("Prolog=", "Epilog=")) for line in lines) == 2
