"""Lints for what would stop or weaken a real cluster's node roles (issue 19).

Each is read against the example specs with one line changed, so the example stays the
reference and the test shows the exact spec text an operator would have written.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

from myriad.plan.lints import Finding, _driver_branch
from myriad.plan.pipeline import plan_loaded
from myriad.spec import LoadedSpec, load_spec_text

ROOT = Path(__file__).resolve().parents[2]


def example(name: str, old: str = "", new: str = "") -> LoadedSpec:
    text = (ROOT / "inventories" / name / "cluster.yaml").read_text()
    if old:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return load_spec_text(text, file=f"{name}.yaml")


def findings(loaded: LoadedSpec, lint_id: str) -> list[Finding]:
    return [f for f in plan_loaded(loaded).findings if f.id == lint_id]


def test_examples_name_a_supported_driver_and_share_slurm_state() -> None:
    for name in ("starter-64", "roce-10k", "h100-100k", "aws-dev"):
        loaded = example(name)
        assert findings(loaded, "driver-end-of-life") == [], name
        assert findings(loaded, "slurm-state-not-shared") == [], name


def test_an_ended_driver_branch_is_flagged_where_the_spec_names_it() -> None:
    loaded = example("starter-64", 'nvidia_driver: "580"', 'nvidia_driver: "550"')
    [finding] = findings(loaded, "driver-end-of-life")
    assert finding.severity == "warning"
    assert "550 is not on NVIDIA's supported list" in finding.message
    assert "580 (long-term-support, until 2028-06)" in finding.suggestion
    # starter-64.yaml line 54 is `nvidia_driver:` under software.
    assert finding.location(loaded) == "starter-64.yaml:54:3"


def test_a_listed_branch_ends_on_its_date() -> None:
    loaded = example("roce-10k", 'nvidia_driver: "580"', 'nvidia_driver: "535"')
    # R535 is listed until 2026-06 (NVIDIA's r615 table): fine in May 2026, ended in July.
    assert list(_driver_branch(loaded, today=date(2026, 5, 1))) == []
    [finding] = _driver_branch(loaded, today=date(2026, 7, 1))
    assert "535 ended in 2026-06" in finding.message
    # A branch newer than the catalog's table is not known to have ended.
    newer = example("roce-10k", 'nvidia_driver: "580"', 'nvidia_driver: "700"')
    assert list(_driver_branch(newer, today=date(2026, 7, 1))) == []


def test_several_controllers_need_shared_state() -> None:
    loaded = example("roce-10k", "    state_save_location: /ckpt/slurm/state\n", "")
    [finding] = findings(loaded, "slurm-state-not-shared")
    assert finding.severity == "error"
    assert "3 Slurm controllers" in finding.message
    assert "/ckpt/slurm/state" in finding.suggestion
    local = example(
        "roce-10k", "state_save_location: /ckpt/slurm/state", "state_save_location: /var/lib/slurm"
    )
    [finding] = findings(local, "slurm-state-not-shared")
    assert finding.path == ("software", "slurm", "state_save_location")
    assert "not on the cluster's shared storage" in finding.message


def test_one_controller_keeps_its_state_locally() -> None:
    loaded = example("aws-dev")
    assert findings(loaded, "slurm-state-not-shared") == []


def test_opensm_on_compute_nodes_of_one_island_is_flagged() -> None:
    loaded = example(
        "starter-64",
        "subnet_manager: switch",
        "subnet_manager: opensm\n    sm_nodes: [gpu01, gpu02]",
    )
    [finding] = findings(loaded, "subnet-manager-domain")
    assert "gpu01, gpu02" in finding.message
    assert "subnet_manager: switch|ufm" in finding.suggestion
    # The switch-managed example has no OpenSM node to flag.
    assert findings(example("starter-64"), "subnet-manager-domain") == []


def test_slurm_without_containers_says_so() -> None:
    # The example says it runs without containers on purpose; without that line it is an error.
    assert findings(example("starter-64"), "slurm-no-containers") == []
    [finding] = findings(
        example("starter-64", "    no_containers: true\n", ""), "slurm-no-containers"
    )
    assert finding.severity == "error"
    assert "software.slurm.containers" in finding.suggestion
    assert "no_containers: true" in finding.suggestion
    checksum = "sha256:" + "0" * 64
    with_containers = example(
        "starter-64",
        "    no_containers: true\n",
        f"    containers: {{enroot_checksums: {{enroot_3.5.0-1_amd64.deb: '{checksum}'}}, "
        f"pyxis_checksum: '{checksum}'}}\n",
    )
    assert findings(with_containers, "slurm-no-containers") == []


def test_several_kubernetes_control_plane_nodes_need_an_endpoint() -> None:
    """kubeadm joins further control-plane nodes through one address in front of them all;
    the kubernetes role stops without it (roles/kubernetes/tasks/assert.yml), so the plan
    says so first, where the spec would name it."""
    assert findings(example("h100-100k"), "kubernetes-endpoint") == []
    loaded = example("h100-100k", "control_plane_endpoint: 10.0.255.250:6443, ", "")
    [finding] = findings(loaded, "kubernetes-endpoint")
    assert finding.severity == "error"
    assert "3 Kubernetes control-plane nodes" in finding.message
    assert finding.path == ("software", "kubernetes")
    # One control-plane node is its own endpoint.
    single = example(
        "h100-100k",
        "{name: ctl, profile: cpu-server, count: 3, role: controller}",
        "{name: ctl, profile: cpu-server, count: 1, role: controller}",
    )
    assert findings(single, "kubernetes-endpoint") == []


def test_the_endpoint_reaches_the_kubernetes_role() -> None:
    from myriad.render.inventory import build_inventory

    result = plan_loaded(example("h100-100k"))
    assert result.plan is not None
    inventory = build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)
    endpoint = inventory.group_vars["all"]["kubernetes_control_plane_endpoint"]
    assert endpoint == "10.0.255.250:6443"


def test_an_endpoint_on_a_nodes_address_is_refused() -> None:
    # Node addresses start at the 10th of 10.0.0.0/16 in spec order: ctl01 is 10.0.0.10.
    loaded = example("h100-100k", "10.0.255.250:6443", "10.0.0.10:6443")
    [finding] = findings(loaded, "kubernetes-endpoint")
    assert "10.0.0.10 is ctl01's management address" in finding.message
    assert finding.path == ("software", "kubernetes", "control_plane_endpoint")


def test_a_branch_older_than_the_gpu_is_an_error_where_the_spec_names_it() -> None:
    # GB200 is Blackwell (compute capability 10.0): NVIDIA's architecture matrix gives
    # Blackwell's first CUDA toolkit as 12.8, whose release notes ask for driver 570.26 or
    # newer. R535 predates it: its driver does not know the GPUs, and nothing works.
    loaded = example("gb200-nvl72", 'nvidia_driver: "580"', 'nvidia_driver: "535"')
    [finding] = findings(loaded, "driver-gpu")
    assert finding.severity == "error"
    assert finding.message == (
        "NVIDIA driver branch 535 predates GB200-186GB (profiles gb200-tray): Blackwell "
        "(compute capability 10.0) needs branch 570 or newer (CUDA 12.8's minimum driver)"
    )
    assert finding.suggestion.startswith("pick branch 580 or newer")
    assert finding.location(loaded) == "gb200-nvl72.yaml:" + _line(loaded, "nvidia_driver")
    # Hopper on R535 is fine; every example's branch knows its GPUs.
    for name in ("starter-64", "h100-100k", "gb200-nvl72", "gb300-nvl72-8"):
        assert findings(example(name), "driver-gpu") == [], name
    hopper = example("starter-64", 'nvidia_driver: "580"', 'nvidia_driver: "535"')
    assert findings(hopper, "driver-gpu") == []


def _line(loaded: LoadedSpec, key: str) -> str:
    text = (ROOT / "inventories" / loaded.spec.metadata.name / "cluster.yaml").read_text()
    number = next(i for i, line in enumerate(text.splitlines(), 1) if f"{key}:" in line)
    return f"{number}:3"
