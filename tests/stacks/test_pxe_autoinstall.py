"""The rendered autoinstall against what Ubuntu's installer reads, and the installed network.

Exercised: stacks.pxe's user-data for both supported releases, validated with jsonschema
against subiquity's own published schema (tests/samples/subiquity-schema, provenance in
tests/samples/SOURCES.md), and the network section run through Debian's real `netplan
generate` (netplan.io, installed by scripts/bootstrap) as the installed system would read it.

Where the facts live:
- subiquity reads curtin's `grub` settings from the autoinstall's `storage` section only: the
  filesystem controller's `autoinstall_key = "storage"` and `self.model.grub =
  self.ai_data.get("grub")` (subiquity/server/controllers/filesystem.py at tags 22.04.2 and
  24.04.4.1); the schema has no top-level `grub`, and its top level allows unknown keys
  (`additionalProperties: true`), so a misplaced `grub` is accepted and ignored.
- curtin's `reorder_uefi` defaults to true, which puts BootCurrent (the network entry the
  installer booted from) back first after GRUB's new entry (curtin doc/topics/config.rst,
  `reorder_uefi`; `uefi_reorder_loaders` in curtin/commands/curthooks.py). subiquity 22.04
  passes no default, so a misplaced setting leaves network boot first on 22.04.
- subiquity writes the autoinstall's network config as the installed system's
  /etc/netplan/00-installer-config.yaml and disables cloud-init networking
  (subiquity/models/network.py, `render`, at 22.04.2 and 24.04.4.1): what the installer
  uses is what the node keeps.
Not exercised: subiquity itself; the firmware's boot order after a real install.
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs; ansible-lint brings it
import pytest
import yaml

from myriad.spec.models import Cluster
from stacks import pxe
from stacks.settings import PxeSettings, StackFileConfig, pxe_settings

from stack_harness import ADMIN_KEY, REPO, spec_with, stack_config

STARTER = REPO / "inventories/starter-64/cluster.yaml"
SCHEMAS = REPO / "tests/samples/subiquity-schema"
# The subiquity release whose schema each supported OS is checked against.
SCHEMA_OF = {
    "ubuntu-22.04": SCHEMAS / "autoinstall-schema_22.04.2.json",
    "ubuntu-24.04": SCHEMAS / "autoinstall-schema_24.04.4.1.json",
}


def _settings(spec: Cluster) -> PxeSettings:
    config = {**stack_config("starter-64"), "myriad:sshAuthorizedKeys": [ADMIN_KEY]}
    return pxe_settings(StackFileConfig(config), spec)


def _spec(os: str, **baremetal: Any) -> Cluster:
    def edit(data: dict[str, Any]) -> None:
        data["software"]["os"] = os
        if baremetal:
            data["provider"]["baremetal"] = baremetal

    return spec_with(STARTER, hosts=True, edit=edit)


def _autoinstalls(spec: Cluster) -> dict[str, dict[str, Any]]:
    files = pxe.render_pxe(spec, _settings(spec), source="cluster.yaml")
    return {
        host.name: yaml.safe_load(files[f"http/nodes/{host.name}/user-data"])["autoinstall"]
        for host in spec.provider.hosts
    }


CASES = [
    ("ubuntu-22.04", {}),
    ("ubuntu-24.04", {}),
    ("ubuntu-22.04", {"os_disk": {"model": "SAMSUNG MZ1L2960*", "raid1": True}}),
    ("ubuntu-24.04", {"dhcp_subnet_prefix": 28}),
]


@pytest.mark.parametrize(("os", "baremetal"), CASES)
def test_the_autoinstall_is_valid_for_its_releases_installer(
    os: str, baremetal: dict[str, Any]
) -> None:
    schema = json.loads(SCHEMA_OF[os].read_text())
    validator = jsonschema.Draft7Validator(schema)
    for name, install in _autoinstalls(_spec(os, **baremetal)).items():
        errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(install)]
        assert errors == [], f"{name}: {errors}"
        # The schema lets unknown top-level keys through, and subiquity ignores them: every
        # section must be one the installer of this release reads.
        unknown = set(install) - set(schema["properties"])
        assert unknown == set(), f"{name}: sections subiquity {os} does not read: {unknown}"


@pytest.mark.parametrize(("os", "baremetal"), CASES)
def test_the_installed_system_boots_its_disk_first(os: str, baremetal: dict[str, Any]) -> None:
    for install in _autoinstalls(_spec(os, **baremetal)).values():
        assert "grub" not in install  # where subiquity ignores it
        # Under storage, where subiquity hands it to curtin: keep GRUB's new entry first
        # instead of moving the network entry (BootCurrent) back in front of it.
        assert install["storage"]["grub"] == {"reorder_uefi": False}


def test_the_installed_system_has_a_static_address() -> None:
    spec = _spec("ubuntu-22.04")
    settings = _settings(spec)
    hosts = {host.name: host for host in spec.provider.hosts}
    for name, install in _autoinstalls(spec).items():
        network = install["network"]
        assert network["version"] == 2
        (nic,) = network["ethernets"].values()
        assert nic["match"] == {"macaddress": hosts[name].mac}
        assert nic["dhcp4"] is False and nic.get("dhcp6", False) is False
        assert nic["addresses"] == [f"{hosts[name].address}/24"]
        assert nic["routes"] == [{"to": "0.0.0.0/0", "via": settings.gateway}]
        assert nic["nameservers"] == {
            "addresses": list(settings.dns),
            "search": [settings.domain],
        }


def test_behind_relays_each_rack_subnet_has_its_own_router() -> None:
    spec = _spec("ubuntu-24.04", dhcp_subnet_prefix=28)
    for name, install in _autoinstalls(spec).items():
        (nic,) = install["network"]["ethernets"].values()
        (address,) = nic["addresses"]
        interface = ipaddress.ip_interface(address)
        assert interface.network.prefixlen == 28, name
        (route,) = nic["routes"]
        # The rack's router is its subnet's first address (as dnsmasq's dhcp-option says),
        # except on the PXE server's own subnet, where it is the stack's gateway.
        expected = (
            "10.10.0.1"
            if interface.network == ipaddress.ip_network("10.10.0.0/28")
            else str(next(interface.network.hosts()))
        )
        assert route == {"to": "0.0.0.0/0", "via": expected}, name


NETPLAN = shutil.which("netplan")


@pytest.mark.skipif(NETPLAN is None, reason="netplan.io is not installed (scripts/bootstrap)")
def test_real_netplan_renders_a_static_address_without_dhcp(tmp_path: Path) -> None:
    """What the installed node's networkd gets: netplan generate on the file subiquity writes."""
    spec = _spec("ubuntu-22.04")
    settings = _settings(spec)
    host = next(h for h in spec.provider.hosts if h.name == "gpu01")
    install = _autoinstalls(spec)["gpu01"]
    netplan_dir = tmp_path / "etc/netplan"
    netplan_dir.mkdir(parents=True)
    config = netplan_dir / "00-installer-config.yaml"
    config.write_text(yaml.safe_dump({"network": install["network"]}))
    config.chmod(0o600)
    assert NETPLAN is not None
    result = subprocess.run(
        [NETPLAN, "generate", "--root-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (network,) = (tmp_path / "run/systemd/network").glob("10-netplan-*.network")
    text = network.read_text()
    lines = text.splitlines()
    assert f"MACAddress={host.mac}" in lines or f"PermanentMACAddress={host.mac}" in lines
    assert f"Address={host.address}/24" in lines
    assert f"Gateway={settings.gateway}" in lines
    assert f"DNS={settings.dns[0]}" in lines
    assert f"Domains={settings.domain}" in lines
    assert "DHCP" not in text  # networkd asks no DHCP server, ever
