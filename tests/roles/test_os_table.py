"""The OS capability table (src/myriad/catalog/os.yaml) and the roles' per-OS variables agree.

The table is the one statement of what each OS ships; roles/slurm/vars/<OS>.yml repeat the
values the role needs at run time on a node (where Myriad's package is not installed). This
test holds them equal, so a change to one without the other fails here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from myriad.spec.models import Software
from myriad.spec.os_table import OsRow, os_table

ROOT = Path(__file__).resolve().parents[2]
SLURM_VARS = ROOT / "roles" / "slurm" / "vars"

# The vars file the role's os_vars.yml picks for each OS (distribution-major, then distribution).
ROLE_VARS_FILE = {
    "ubuntu-22.04": "Ubuntu-22.yml",
    "ubuntu-24.04": "Ubuntu-24.yml",
    "debian-12": "Debian.yml",
}


def _role_vars(os_name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((SLURM_VARS / ROLE_VARS_FILE[os_name]).read_text())
    return data


def test_the_table_has_a_row_for_every_os_a_spec_may_name() -> None:
    allowed = set(Software.model_fields["os"].annotation.__args__)  # type: ignore[union-attr]
    assert set(os_table()) == allowed == set(ROLE_VARS_FILE)


@pytest.mark.parametrize("os_name", sorted(ROLE_VARS_FILE))
def test_the_slurm_role_vars_are_the_tables(os_name: str) -> None:
    row = os_table()[os_name]
    role = _role_vars(os_name)
    assert role["__slurm_version"] == row.slurm.value
    assert role["__slurm_cgroup_plugins"] == list(row.cgroup_plugins.value)
    assert role["__slurm_topology_plugins"] == list(row.topology_plugins.value)
    assert role["__slurm_nvml_package"] == row.nvml_package.value
    assert role["__slurm_boot_cgroup_plugin"] == row.boot_cgroup_plugin


@pytest.mark.parametrize("os_name", sorted(ROLE_VARS_FILE))
def test_the_role_default_cgroup_plugin_works_where_the_os_allows_any(os_name: str) -> None:
    """The default the role writes loads: as booted, or with the legacy hierarchy declared."""
    row = os_table()[os_name]
    default = _role_vars(os_name)["__slurm_cgroup_plugin_default"]
    booted_ok = row.cgroup_problem(default) is None
    legacy_ok = row.cgroup_problem(default, legacy_hierarchy=True) is None
    if "cgroup/v2" in row.cgroup_plugins.value:
        assert booted_ok, row.cgroup_problem(default)
    else:
        # Ubuntu 22.04: nothing works as it boots; v1 works once the node boots legacy.
        assert not booted_ok
        assert legacy_ok, row.cgroup_problem(default, legacy_hierarchy=True)


def test_the_role_defaults_are_debian_12s() -> None:
    """vars/main.yml's distribution defaults are the table's Debian 12 row."""
    defaults = yaml.safe_load((SLURM_VARS / "main.yml").read_text())
    assert {k: defaults[k] for k in _role_vars("debian-12")} == _role_vars("debian-12")


def test_every_fact_names_its_source() -> None:
    for name, row in os_table().items():
        for field in OsRow.model_fields:
            fact = getattr(row, field)
            assert len(fact.source) > 10, (name, field)
            if not fact.value:
                # An empty value says why it is empty.
                assert "no " in fact.source or "not read" in fact.source, (name, field)


def test_the_facts_the_issue_turned_on() -> None:
    """What slurmd on Ubuntu 22.04 and the examples' move to 24.04 rest on."""
    table = os_table()
    jammy, noble, bookworm = table["ubuntu-22.04"], table["ubuntu-24.04"], table["debian-12"]
    assert jammy.slurm.value.startswith("21.08")
    assert "cgroup/v2" not in jammy.cgroup_plugins.value
    assert jammy.cgroup_hierarchy.value == "unified"
    assert noble.slurm.value.startswith("23.11")
    assert "cgroup/v2" in noble.cgroup_plugins.value
    assert "topology/block" in noble.topology_plugins.value
    assert "topology/block" not in bookworm.topology_plugins.value
    # autodetect on a unified hierarchy answers cgroup/v2, which 21.08 lacks.
    assert jammy.cgroup_problem("autodetect") is not None
    assert noble.cgroup_problem("autodetect") is None
