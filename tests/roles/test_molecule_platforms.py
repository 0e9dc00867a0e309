"""Every scenario's platforms use only the keys the shared create playbook passes on to Docker.

`.config/molecule/create.yml` replaces the docker driver's create step and refuses a platform
key it does not apply; this finds such a key without starting Molecule, and checks the
shared config points every scenario at the shared create and destroy playbooks.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT / ".config" / "molecule"
SCENARIOS = sorted(ROOT.glob("roles/*/molecule/*/molecule.yml"))


def known_keys() -> set[str]:
    play = yaml.safe_load((SHARED / "create.yml").read_text())[0]
    return set(play["vars"]["molecule_create_known_keys"])


def test_the_shared_config_uses_the_shared_playbooks() -> None:
    config = yaml.safe_load((SHARED / "config.yml").read_text())
    playbooks = config["provisioner"]["playbooks"]
    for step in ("create", "destroy"):
        # Relative to roles/<role>/molecule/<scenario>/.
        scenario = ROOT / "roles" / "x" / "molecule" / "default"
        assert (scenario / playbooks[step]).resolve() == SHARED / f"{step}.yml"
    # Every key the base platform sets is one create.yml applies.
    for platform in config["platforms"]:
        assert set(platform) <= known_keys(), set(platform) - known_keys()


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: str(p.relative_to(ROOT / "roles")))
def test_every_platform_key_is_applied_by_the_create_playbook(path: Path) -> None:
    document = yaml.safe_load(path.read_text()) or {}
    for platform in document.get("platforms", []):
        unknown = set(platform) - known_keys()
        assert not unknown, f"{platform['name']}: {sorted(unknown)} not applied by create.yml"
    assert "playbooks" not in (document.get("provisioner") or {}), "use the shared playbooks"
