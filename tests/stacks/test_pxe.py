"""The PXE bundle rendered from the spec's hosts: dnsmasq, iPXE, Ubuntu autoinstall.

Exercised: stacks.pxe with the templates in templates/pxe and the `python -m stacks.pxe` CLI;
the one-shot install flag (myriad.provision.pxe_state) and the installers' callback through
the PXE server's HTTP side (myriad.provision.pxe_server) on a loopback port.
Not exercised here: real tools (test_pxe_dnsmasq.py runs Debian's dnsmasq on the rendered
configuration, test_pxe_autoinstall.py validates the autoinstall against subiquity's schema
and runs netplan); iPXE, firmware and the installer need real servers to confirm.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from myriad.provision.pxe_server import make_server
from myriad.provision.pxe_state import (
    HOSTS_FILE,
    PxeState,
    PxeStateError,
    installer_path,
    served_path,
)
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
    assert "dhcp-range=set:mgmt,10.10.0.0,static,255.255.255.0,12h" in lines
    assert "dhcp-option=tag:mgmt,option:router,10.10.0.1" in lines
    assert "dhcp-boot=tag:ipxe,http://10.10.0.2/boot.ipxe" in lines
    assert "dhcp-boot=tag:!ipxe,tag:efi-x86_64,ipxe.efi,,10.10.0.2" in lines
    assert "interface=eno1" in lines and "domain=starter-64.internal" in lines
    assert "port=0" in lines  # no DNS service of its own


def test_unflagged_nodes_boot_their_disk(spec: Cluster, files: dict[str, str]) -> None:
    boot = files["http/boot.ipxe"].splitlines()
    assert "chain --autofree http://10.10.0.2/nodes/${netX/mac:hexhyp}.ipxe || goto disk" in boot
    disk = boot[boot.index(":disk") :]
    assert "iseq ${platform} efi && exit ||" in disk  # UEFI: the firmware's next entry
    assert "sanboot --no-describe --drive 0x80 || exit" in disk  # BIOS: the first disk
    # No installer is served as rendered: a node gets one only while it is flagged.
    assert not [path for path in files if path.startswith("http/nodes/") and path.endswith(".ipxe")]


def test_each_node_has_its_own_installer(spec: Cluster, files: dict[str, str]) -> None:
    for host in spec.provider.hosts:
        script = files[installer_path(host.mac)]
        assert script.startswith("#!ipxe\n")
        kernel = next(line for line in script.splitlines() if line.startswith("kernel "))
        # Media from the sendfile web server (nginx.conf), the rest from the PXE server.
        media = f"http://10.10.0.2:8080/images/{spec.software.os}"
        assert kernel.startswith(f"kernel {media}/vmlinuz ")
        assert f" url={media}/live-server.iso " in kernel
        # The installer uses the NIC the node booted from.
        assert " BOOTIF=01-${netX/mac:hexhyp} " in kernel
        assert f"ds=nocloud-net;s=http://10.10.0.2/nodes/{host.name}/" in kernel
        assert f"initrd {media}/initrd" in script
    hosts = json.loads(files[HOSTS_FILE])
    assert hosts["gpu01"] == {"mac": spec.provider.hosts[3].mac, "address": "10.10.0.23"}


def test_autoinstall_sets_keys_and_no_password(spec: Cluster, files: dict[str, str]) -> None:
    for host in spec.provider.hosts:
        text = files[f"http/nodes/{host.name}/user-data"]
        assert text.startswith("#cloud-config\n")
        install = yaml.safe_load(text)["autoinstall"]
        assert install["version"] == 1
        assert "identity" not in install  # which would need a password hash
        assert install["ssh"] == {"install-server": True, "allow-pw": False}
        assert install["network"]["ethernets"]["pxe"]["match"]["macaddress"] == host.mac
        # GRUB's new entry stays first (test_pxe_autoinstall.py has where subiquity reads it).
        assert install["storage"] == {
            "layout": {"name": "lvm", "match": {"size": "smallest"}},
            "grub": {"reorder_uefi": False},
        }
        (callback,) = install["late-commands"]
        assert f"-X POST http://10.10.0.2/installed/{host.name} " in callback
        assert callback.endswith("|| true")  # a lost callback must not fail the install
        system = install["user-data"]
        assert system["hostname"] == host.name
        (user,) = system["users"]
        assert user["lock_passwd"] is True and user["ssh_authorized_keys"] == [ADMIN_KEY]
        assert not _password_keys(install)
        assert BMC_PASSWORD not in text
        banner = next(f for f in system["write_files"] if f["path"].startswith("/etc/ssh/"))
        assert (
            banner["content"]
            == f"VersionAddendum {ssh_banner_marker(host.name, spec.software.os)}\n"
        )
        identity = next(f for f in system["write_files"] if f["path"] == "/etc/myriad/node.json")
        assert json.loads(identity["content"])["name"] == host.name
        meta = yaml.safe_load(files[f"http/nodes/{host.name}/meta-data"])
        assert meta == {
            "instance-id": f"starter-64-{host.name}-{spec.software.os}",
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
    assert len(files) == 4 + 3 * len(spec.provider.hosts)


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
    assert HOSTS_FILE in written and installer_path(spec.provider.hosts[-1].mac) in written
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


def test_the_os_disk_is_chosen_by_model_serial_and_size() -> None:
    def hgx(data: dict[str, Any]) -> None:
        data["provider"]["baremetal"] = {
            "os_disk": {"model": "SAMSUNG MZ1L2960*", "serial": "S6*", "size": "smallest"}
        }

    spec = spec_with(STARTER, hosts=True, edit=hgx)
    config = {**stack_config("starter-64"), "myriad:sshAuthorizedKeys": [ADMIN_KEY]}
    files = pxe.render_pxe(spec, pxe_settings(StackFileConfig(config), spec), source=SOURCE)
    install = yaml.safe_load(files["http/nodes/gpu01/user-data"])["autoinstall"]
    assert install["storage"] == {
        "layout": {
            "name": "lvm",
            "match": {"size": "smallest", "model": "SAMSUNG MZ1L2960*", "serial": "S6*"},
        },
        "grub": {"reorder_uefi": False},
    }


def test_raid1_on_the_m2_pair() -> None:
    def raid(data: dict[str, Any]) -> None:
        data["provider"]["baremetal"] = {"os_disk": {"model": "SAMSUNG MZ1L2960*", "raid1": True}}

    spec = spec_with(STARTER, hosts=True, edit=raid)
    config = {**stack_config("starter-64"), "myriad:sshAuthorizedKeys": [ADMIN_KEY]}
    files = pxe.render_pxe(spec, pxe_settings(StackFileConfig(config), spec), source=SOURCE)
    storage = yaml.safe_load(files["http/nodes/gpu01/user-data"])["autoinstall"]["storage"]
    actions = {a["id"]: a for a in storage["config"]}
    disks = [a for a in storage["config"] if a["type"] == "disk"]
    assert [d["match"] for d in disks] == [{"size": "smallest", "model": "SAMSUNG MZ1L2960*"}] * 2
    (md,) = [a for a in storage["config"] if a["type"] == "raid"]
    assert md["raidlevel"] == 1 and md["devices"] == ["os-disk0-md", "os-disk1-md"]
    assert {actions[d]["device"] for d in md["devices"]} == {"os-disk0", "os-disk1"}
    # Either disk boots alone: an ESP with GRUB on each.
    esps = [a for a in storage["config"] if a.get("flag") == "boot"]
    assert {e["device"] for e in esps} == {"os-disk0", "os-disk1"}
    assert all(e["grub_device"] for e in esps)
    mounts = {
        a["path"]: actions[a["device"]]["volume"] for a in storage["config"] if a["type"] == "mount"
    }
    assert mounts == {"/": "os-md0", "/boot/efi": "os-disk0-esp"}


def test_a_range_per_rack_subnet_behind_relays(settings: PxeSettings) -> None:
    def racks(data: dict[str, Any]) -> None:
        data["provider"]["baremetal"] = {"dhcp_subnet_prefix": 28}

    spec = spec_with(STARTER, hosts=True, edit=racks)
    conf = pxe.render_pxe(spec, settings, source=SOURCE)["dnsmasq.conf"].splitlines()
    # Hosts are 10.10.0.20-30 (one /28 at .16, behind a relay); the PXE server .2 is in .0/28.
    assert [line for line in conf if line.startswith("dhcp-range=")] == [
        "dhcp-range=set:net0,10.10.0.0,static,255.255.255.240,12h",
        "dhcp-range=set:net1,10.10.0.16,static,255.255.255.240,12h",
    ]
    assert "dhcp-option=tag:net0,option:router,10.10.0.1" in conf
    assert "dhcp-option=tag:net1,option:router,10.10.0.17" in conf


def test_a_node_installs_only_while_flagged(
    spec: Cluster, files: dict[str, str], tmp_path: Path
) -> None:
    root = tmp_path / "pxe"
    pxe.write_bundle(files, root)
    state = PxeState(root)
    host = next(h for h in spec.provider.hosts if h.name == "gpu01")
    served = root / served_path(host.mac)
    assert not served.exists()  # as rendered: boots its disk

    state.flag("gpu01", host.mac, "ubuntu-22.04:initial", limit=8)
    assert served.read_text() == files[installer_path(host.mac)]
    # Rendering again (a spec change) keeps the flag and the install record.
    pxe.write_bundle(files, root)
    assert served.exists() and state.record("gpu01").state == "installing"  # type: ignore[union-attr]

    # Another machine cannot report gpu01 done; gpu01's own address can.
    with pytest.raises(PxeStateError, match=r"10\.10\.0\.99 reported gpu01 installed"):
        state.installed_callback("gpu01", "10.10.0.99")
    record = state.installed_callback("gpu01", host.address)
    assert record.state == "installed" and not served.exists()
    with pytest.raises(PxeStateError, match="gpu01 reported installed but is installed"):
        state.installed_callback("gpu01", host.address)


def test_the_pxe_server_serves_files_and_takes_the_callback(
    spec: Cluster, files: dict[str, str], tmp_path: Path
) -> None:
    root = tmp_path / "pxe"
    pxe.write_bundle(files, root)
    hosts = json.loads(files[HOSTS_FILE])
    hosts["gpu02"]["address"] = "127.0.0.1"  # loopback stands in for gpu02's address
    (root / HOSTS_FILE).write_text(json.dumps(hosts))
    state = PxeState(root)
    state.flag("gpu01", hosts["gpu01"]["mac"], "i1", limit=8)
    state.flag("gpu02", hosts["gpu02"]["mac"], "i1", limit=8)
    server = make_server(root, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with urllib.request.urlopen(f"{base}/boot.ipxe", timeout=5) as answer:
            assert answer.read().decode() == files["http/boot.ipxe"]
        mac = hosts["gpu02"]["mac"].replace(":", "-")
        with urllib.request.urlopen(f"{base}/nodes/{mac}.ipxe", timeout=5) as answer:
            assert answer.status == 200
        with pytest.raises(urllib.error.HTTPError, match="403"):
            post(f"{base}/installed/gpu01")  # from 127.0.0.1, which is not gpu01
        assert state.flagged(hosts["gpu01"]["mac"])
        assert post(f"{base}/installed/gpu02").startswith("gpu02 installed")
        assert not state.flagged(hosts["gpu02"]["mac"])
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(f"{base}/nodes/{mac}.ipxe", timeout=5)
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(f"{base}/nodes/", timeout=5)  # no listings
    finally:
        server.shutdown()
        server.server_close()


def post(url: str) -> str:
    request = urllib.request.Request(url, data=b"", method="POST")
    with urllib.request.urlopen(request, timeout=5) as answer:
        return str(answer.read().decode())


def test_rack_subnets_wider_than_the_management_network_are_refused(
    settings: PxeSettings,
) -> None:
    def wide(data: dict[str, Any]) -> None:
        data["provider"]["baremetal"] = {"dhcp_subnet_prefix": 16}

    with pytest.raises(pxe.StackError, match=r"/16 is wider than the management network"):
        pxe.render_pxe(spec_with(STARTER, hosts=True, edit=wide), settings, source=SOURCE)
