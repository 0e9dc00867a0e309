"""The NVLink fabric software, one name in three places: the nvidia_driver role's
`nvidia_driver_nvlink_fabric` choices, the renderer's systemd units slurmd waits for, and
the validation checks' reading of the variable. A choice added to the role and missed by
either side fails here."""

from __future__ import annotations

from pathlib import Path

import yaml

from myriad.node.checks.gpu import NVLINK_FABRICS, nvlink_fabric
from myriad.render.role_vars import NVLINK_FABRIC_UNITS, nvlink_fabric_software

from spec_builder import cluster, gpu_profile

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


def test_nvswitch_boards_get_fabric_manager_and_others_nothing() -> None:
    spec = cluster(
        profiles={
            "hgx": gpu_profile(gpus=8),  # 4 NVSwitches (spec_builder)
            "pcie": gpu_profile(gpus=2),
        },
        pools=[
            {"name": "hgx", "profile": "hgx", "count": 2, "role": "compute"},
            {"name": "pcie", "profile": "pcie", "count": 2, "role": "compute"},
        ],
    ).spec
    assert nvlink_fabric_software(spec.profiles["hgx"]) == "fabricmanager"
    assert nvlink_fabric_software(spec.profiles["pcie"]) == "none"


def test_the_checks_read_the_older_switch_as_fabric_manager() -> None:
    assert nvlink_fabric({}) == "none"
    assert nvlink_fabric({"nvidia_driver_fabricmanager": True}) == "fabricmanager"
    assert nvlink_fabric({"nvidia_driver_nvlink_fabric": "imex"}) == "imex"
    both = {
        "nvidia_driver_fabricmanager": True,
        "nvidia_driver_nvlink_fabric": "fabricmanager-nvlsm",
    }
    assert nvlink_fabric(both) == "fabricmanager-nvlsm"
