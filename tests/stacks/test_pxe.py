"""The PXE bundle rendered from the spec's hosts: dnsmasq, iPXE, Ubuntu autoinstall.

Exercised: stacks.pxe with the templates in templates/pxe and the `python -m stacks.pxe` CLI.
Not exercised: a real dnsmasq, iPXE or installer (the files are checked as documents).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from myriad.provision.redfish import ssh_banner_marker
from myriad.spec.models import Cluster
from stacks import pxe
from stacks.settings import PxeSettings, StackFileConfig, pxe_settings

from stack_harness import ADMIN_KEY, BMC_PASSWORD, REPO, spec_with, stack_config

STARTER = REPO / "inventories/starter-64/cluster.yaml"
SOURCE = "inventories/starter-64/cluster.yaml"


@pytest.fixture(scope="module")
def spec() -> Cluster:
    return spec_with(STARTER, hosts=True)


@pytest.fixture(scope="module")
def settings(spec: Cluster) -> PxeSettings:
    config = {**stack_config("starter-64"), "myriad:sshAuthorizedKeys": [ADMIN_KEY]}
    return pxe_settings(StackFileConfig(config), spec)


@pytest.fixture(scope="module")
def files(spec: Cluster, settings: PxeSettings) -> dict[str, str]:
    return pxe.render_pxe(spec, settings, source=SOURCE)


def test_dnsmasq_leases_every_host_and_ignores_the_rest(
    spec: Cluster, files: dict[str, str]
) -> None:
    conf = files["dnsmasq.conf"]
    lines = conf.splitlines()
    leases = [line for line in lines if line.startswith("dhcp-host=")]
    assert leases == [
        f"dhcp-host={h.mac},{h.address},{h.name},infinite" for h in spec.provider.hosts
    ]
    assert "dhcp-ignore=tag:!known" in lines
    assert "dhcp-range=10.10.0.0,static,255.255.255.0,12h" in lines
    assert "dhcp-option=option:router,10.10.0.1" in lines
    assert "dhcp-boot=tag:ipxe,http://10.10.0.2/boot.ipxe" in lines
    assert "interface=eno1" in lines and "domain=starter-64.internal" in lines
    assert "port=0" in lines  # no DNS service of its own


def test_each_node_boots_its_own_installer(spec: Cluster, files: dict[str, str]) -> None:
    assert "chain http://10.10.0.2/nodes/${mac:hexhyp}.ipxe" in files["http/boot.ipxe"]
    for host in spec.provider.hosts:
        script = files[f"http/nodes/{host.mac.replace(':', '-')}.ipxe"]
        assert script.startswith("#!ipxe\n")
        assert "kernel http://10.10.0.2/images/ubuntu-22.04/vmlinuz " in script
        assert f"ds=nocloud-net;s=http://10.10.0.2/nodes/{host.name}/" in script
        assert "initrd http://10.10.0.2/images/ubuntu-22.04/initrd" in script


def test_autoinstall_sets_keys_and_no_password(spec: Cluster, files: dict[str, str]) -> None:
    for host in spec.provider.hosts:
        text = files[f"http/nodes/{host.name}/user-data"]
        assert text.startswith("#cloud-config\n")
        install = yaml.safe_load(text)["autoinstall"]
        assert install["version"] == 1
        assert "identity" not in install  # which would need a password hash
        assert install["ssh"] == {"install-server": True, "allow-pw": False}
        assert install["network"]["ethernets"]["pxe"]["match"]["macaddress"] == host.mac
        system = install["user-data"]
        assert system["hostname"] == host.name
        (user,) = system["users"]
        assert user["lock_passwd"] is True and user["ssh_authorized_keys"] == [ADMIN_KEY]
        assert not _password_keys(install)
        assert BMC_PASSWORD not in text
        banner = next(f for f in system["write_files"] if f["path"].startswith("/etc/ssh/"))
        assert (
            banner["content"] == f"VersionAddendum {ssh_banner_marker(host.name, 'ubuntu-22.04')}\n"
        )
        identity = next(f for f in system["write_files"] if f["path"] == "/etc/myriad/node.json")
        assert json.loads(identity["content"])["name"] == host.name
        meta = yaml.safe_load(files[f"http/nodes/{host.name}/meta-data"])
        assert meta == {
            "instance-id": f"starter-64-{host.name}-ubuntu-22.04",
            "local-hostname": host.name,
        }


def test_values_cannot_change_the_documents_structure(spec: Cluster, settings: PxeSettings) -> None:
    hostile = PxeSettings(**{**settings.__dict__, "admin_user": 'ops"\n  identity: {password: x}'})
    text = pxe.render_pxe(spec, hostile, source=SOURCE)["http/nodes/gpu01/user-data"]
    install = yaml.safe_load(text)["autoinstall"]
    assert "identity" not in install
    assert install["user-data"]["users"][0]["name"] == hostile.admin_user


def test_rendering_is_deterministic(
    spec: Cluster, settings: PxeSettings, files: dict[str, str]
) -> None:
    again = pxe.render_pxe(spec, settings, source=SOURCE)
    assert again == files and pxe.bundle_digest(again) == pxe.bundle_digest(files)
    assert len(files) == 2 + 3 * len(spec.provider.hosts)


def test_cli_writes_the_bundle(
    spec: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec_file = tmp_path / "cluster.yaml"
    spec_file.write_text(
        yaml.safe_dump(spec.model_dump(mode="json", by_alias=True, exclude_defaults=True))
    )
    stack_file = tmp_path / "Pulumi.lab.yaml"
    stack_file.write_text(
        yaml.safe_dump(
            {
                "config": {
                    **stack_config("starter-64"),
                    "myriad:spec": str(spec_file),
                    "myriad:sshAuthorizedKeys": [ADMIN_KEY],
                    "myriad:bmc-admin": {"secure": "v1:opaque"},
                }
            }
        )
    )
    out = tmp_path / "bundle"
    assert pxe.main(["--stack-file", str(stack_file), "--out", str(out)]) == 0
    written = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert "dnsmasq.conf" in written and "http/nodes/gpu08/user-data" in written
    assert capsys.readouterr().out.startswith(f"{len(written)} files in {out} (sha256 ")


def test_cli_on_the_committed_stack_says_what_is_missing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert pxe.main(["--stack", "starter-64", "--out", str(tmp_path)]) == 2
    assert "sshAuthorizedKeys is empty" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_hosts_outside_the_management_network_are_refused() -> None:
    def stray(data: dict[str, Any]) -> None:
        data["provider"]["hosts"] = [
            {
                "name": "ctl01",
                "mac": "02:00:00:00:00:01",
                "bmc_address": "10.255.0.1",
                "address": "192.0.2.7",
            }
        ]

    spec = spec_with(STARTER, edit=stray)
    with pytest.raises(pxe.StackError, match=r"ctl01 \(192\.0\.2\.7\)"):
        pxe.hosts_for(spec, [n for n in pxe.iter_nodes(spec) if n.name == "ctl01"])


def _password_keys(value: Any) -> list[str]:
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in {"password", "passwd", "hashed_passwd", "plain_text_passwd", "chpasswd"}:
                found.append(key)
            found += _password_keys(item)
    elif isinstance(value, list):
        for item in value:
            found += _password_keys(item)
    return found
