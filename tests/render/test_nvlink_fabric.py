"""The NVLink fabric software, one name in three places: the nvidia_driver role's
`nvidia_driver_nvlink_fabric` choices, the renderer's systemd units slurmd waits for, and
the validation checks' reading of the variable. A choice added to the role and missed by
either side fails here."""

from __future__ import annotations

from pathlib import Path

import yaml

from myriad.node.checks.gpu import NVLINK_FABRICS, nvlink_fabric
from myriad.plan.pipeline import plan_loaded
from myriad.render.inventory import build_inventory
from myriad.render.role_vars import NVLINK_FABRIC_UNITS, nvlink_fabric_software

from spec_builder import cluster, gpu_profile, load_example

ROLE = Path(__file__).resolve().parents[2] / "roles" / "nvidia_driver"


def role_choices() -> list[str]:
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())
    choices = {
        entry: specs["argument_specs"][entry]["options"]["nvidia_driver_nvlink_fabric"]["choices"]
        for entry in ("main", "image")
    }
    assert choices["main"] == choices["image"]
    return list(choices["main"])


def test_every_choice_of_the_role_is_known_to_the_renderer_and_the_checks() -> None:
    assert sorted(NVLINK_FABRIC_UNITS) == sorted(role_choices())
    assert sorted(NVLINK_FABRICS) == sorted(role_choices())


def test_the_units_are_the_ones_the_role_enables() -> None:
    internal = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    fabricmanager = internal["__nvidia_driver_fabricmanager_service"] + ".service"
    imex = internal["__nvidia_driver_imex_service"] + ".service"
    assert NVLINK_FABRIC_UNITS["fabricmanager"] == (fabricmanager,)
    assert NVLINK_FABRIC_UNITS["fabricmanager-nvlsm"] == (fabricmanager,)
    assert NVLINK_FABRIC_UNITS["imex"] == (imex,)
    assert NVLINK_FABRIC_UNITS["none"] == ()


def test_each_platform_gets_its_fabric_software() -> None:
    loaded = cluster(
        profiles={
            "hgx-h100": gpu_profile(gpus=8),  # 4 NVSwitches (spec_builder)
            "hgx-b200": gpu_profile(gpu="B200-SXM-180GB", gpus=8),
            "hgx-b300": gpu_profile(gpu="B300-SXM-288GB", gpus=8),
            "pcie": gpu_profile(gpus=2),  # no NVSwitch
        },
        pools=[
            {"name": name, "profile": name, "count": 2, "role": "compute"}
            for name in ("hgx-h100", "hgx-b200", "hgx-b300", "pcie")
        ],
    )
    spec, catalog = loaded.spec, loaded.catalog
    assert nvlink_fabric_software(spec.profiles["hgx-h100"], catalog) == "fabricmanager"
    # Blackwell (compute capability 10.0): fourth-generation NVSwitch, Fabric Manager + NVLSM.
    assert nvlink_fabric_software(spec.profiles["hgx-b200"], catalog) == "fabricmanager-nvlsm"
    # Blackwell Ultra (10.3, NVIDIA's compute capability table): the same fabric; the catalog
    # gave B300 no capability, so an HGX B300 got Fabric Manager without NVLSM.
    assert nvlink_fabric_software(spec.profiles["hgx-b300"], catalog) == "fabricmanager-nvlsm"
    assert nvlink_fabric_software(spec.profiles["pcie"], catalog) == "none"
    nvl72 = load_example("gb200-nvl72")
    tray = nvl72.spec.profiles["gb200-tray"]
    assert nvlink_fabric_software(tray, nvl72.catalog) == "imex"


def test_every_tray_lists_its_racks_trays_for_imex() -> None:
    # gb300-nvl72-8: 8 racks of 18 trays (gpu001-gpu144), management 10.x addresses in host
    # order; the IMEX lists are cut as the Slurm blocks are, one rack each.
    result = plan_loaded(load_example("gb300-nvl72-8"))
    assert result.plan is not None
    inventory = build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)
    pool = inventory.group_vars["pool_gpu"]
    assert pool["nvidia_driver_nvlink_fabric"] == "imex"
    assert pool["slurm_slurmd_gpu_units"] == [
        "nvidia-persistenced.service",
        "nvidia-imex.service",
    ]
    hosts = inventory.host_vars
    trays = [name for name in hosts if "nvidia_driver_imex_nodes" in hosts[name]]
    assert len(trays) == 144
    blocks = inventory.tables["slurm_topology_blocks"]
    assert len(blocks) == 8
    for block in blocks:
        addresses = [hosts[name]["myriad_address"] for name in block["nodes"]]
        assert len(addresses) == 18
        for name in block["nodes"]:
            assert hosts[name]["nvidia_driver_imex_nodes"] == addresses
    # The controller is no tray.
    assert all("nvidia_driver_imex_nodes" not in hosts[h] for h in hosts if h not in trays)


def test_the_checks_read_the_older_switch_as_fabric_manager() -> None:
    assert nvlink_fabric({}) == "none"
    assert nvlink_fabric({"nvidia_driver_fabricmanager": True}) == "fabricmanager"
    assert nvlink_fabric({"nvidia_driver_nvlink_fabric": "imex"}) == "imex"
    both = {
        "nvidia_driver_fabricmanager": True,
        "nvidia_driver_nvlink_fabric": "fabricmanager-nvlsm",
    }
    assert nvlink_fabric(both) == "fabricmanager-nvlsm"
