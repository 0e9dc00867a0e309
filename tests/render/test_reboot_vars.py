"""The spec's reboot policy reaches site.yml's reboot play as cluster-wide variables."""

from __future__ import annotations

from myriad.plan.pipeline import plan_loaded
from myriad.render.inventory import build_inventory
from myriad.spec import load_spec_text

from spec_builder import ROOT


def cluster_variables(name: str, extra: str = "") -> dict[str, object]:
    text = (ROOT / "inventories" / name / "cluster.yaml").read_text() + extra
    result = plan_loaded(load_spec_text(text))
    assert result.plan is not None
    inventory = build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)
    return dict(inventory.group_vars["all"])


def test_bring_up_reboots_when_needed_sixteen_at_a_time_by_default() -> None:
    variables = cluster_variables("starter-64")
    assert variables["myriad_reboot"] == "when-needed"
    assert variables["myriad_reboot_batch"] == 16
    assert variables["myriad_reboot_timeout_s"] == 1800
    # Real nodes: Ansible's reboot tells boots apart by the kernel's boot_id.
    assert "myriad_reboot_boot_time_command" not in variables


def test_the_spec_can_forbid_reboots_and_size_the_batches() -> None:
    extra = "bringup: {reboot: never, reboot_batch: 4, reboot_timeout_s: 600}\n"
    variables = cluster_variables("roce-10k", extra)
    assert (variables["myriad_reboot"], variables["myriad_reboot_batch"]) == ("never", 4)
    assert variables["myriad_reboot_timeout_s"] == 600


def test_the_twins_containers_tell_boots_apart_by_their_init() -> None:
    # They share the host's /proc/sys/kernel/random/boot_id; PID 1 starts anew at each boot.
    variables = cluster_variables("local")
    assert variables["myriad_reboot_boot_time_command"] == "cut -d ' ' -f 22 /proc/1/stat"
    # Slurm judges a reboot by the uptime slurmd reports, the host's in a container: the
    # twin's slurmd counts from its own start (-b), real nodes keep the package's options.
    assert variables["slurm_slurmd_options"] == "-b"
    assert "slurm_slurmd_options" not in cluster_variables("starter-64")
