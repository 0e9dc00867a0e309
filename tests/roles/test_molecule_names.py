"""Every Molecule container and network name comes from the run's prefix.

A fixed name would make two runs on one Docker daemon fight over one container (the second
`create` finds it, the first `destroy` removes it under the second). Each platform name,
each network name and each host_vars key that names a platform must start with
`${MYRIAD_MOLECULE_NODE:-<default>}`: test_molecule.py sets it per run; a standalone
`molecule test` uses the default. Checked on the files as Molecule reads them, before and
after its own `${VAR:-default}` interpolation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from molecule.interpolation import Interpolator, TemplateWithDefaults

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / ".config" / "molecule" / "config.yml"
SCENARIOS = sorted(ROOT.glob("roles/*/molecule/*/molecule.yml"))
PREFIX = "${MYRIAD_MOLECULE_NODE:-"


def names(document: dict[str, Any], base: dict[str, Any]) -> list[str]:
    """Platform names, their network names, and the hosts under host_vars."""
    platforms = document.get("platforms", base.get("platforms", []))
    found = [platform["name"] for platform in platforms]
    found += [net["name"] for platform in platforms for net in platform.get("networks", [])]
    inventory = (document.get("provisioner") or {}).get("inventory") or {}
    found += list(inventory.get("host_vars") or {})
    return found


def interpolated(path: Path, env: dict[str, str]) -> dict[str, Any]:
    text = Interpolator(TemplateWithDefaults, env).interpolate(path.read_text())
    document: dict[str, Any] = yaml.safe_load(text) or {}
    return document


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: str(p.relative_to(ROOT / "roles")))
def test_every_name_uses_the_run_prefix(path: Path) -> None:
    base = yaml.safe_load(BASE.read_text())
    raw = names(yaml.safe_load(path.read_text()) or {}, base)
    assert raw, "a scenario without platforms"
    fixed = [name for name in raw if not name.startswith(PREFIX)]
    assert fixed == [], f"names that do not start with {PREFIX}...}}: {fixed}"

    run_a, run_b = "molecule-x-0123abcd", "molecule-x-89efcdab"
    base_a = interpolated(BASE, {"MYRIAD_MOLECULE_NODE": run_a})
    a = names(interpolated(path, {"MYRIAD_MOLECULE_NODE": run_a}), base_a)
    b = names(
        interpolated(path, {"MYRIAD_MOLECULE_NODE": run_b}),
        interpolated(BASE, {"MYRIAD_MOLECULE_NODE": run_b}),
    )
    assert all(name.startswith(run_a) for name in a), a
    assert set(a).isdisjoint(b), "two runs would share a name"
    # Docker takes the container name as the hostname: at most 63 characters.
    assert all(len(name) <= 63 for name in a), a


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: str(p.relative_to(ROOT / "roles")))
def test_standalone_molecule_gets_default_names(path: Path) -> None:
    base = interpolated(BASE, {})
    standalone = names(interpolated(path, {}), base)
    assert all(name and "$" not in name for name in standalone), standalone


def test_the_shared_config_uses_the_run_prefix() -> None:
    base = yaml.safe_load(BASE.read_text())
    assert all(p["name"].startswith(PREFIX) for p in base["platforms"])
