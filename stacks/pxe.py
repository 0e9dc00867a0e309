"""The PXE server's side of a bare-metal environment, rendered from the spec's host list.

    python -m stacks.pxe --stack starter-64 --out /srv/myriad-pxe

writes `dnsmasq.conf`, `hosts.json`, an `http/` folder (the first iPXE script, per-node
Ubuntu autoinstall) and `installers/` (each node's installer iPXE script) for the stack's
cluster.yaml and PXE config keys (Pulumi.<env>.yaml). An installer script is served, as
`http/nodes/<mac>.ipxe`, only while its node is flagged for installation
(`myriad.provision.pxe_state`); every other boot goes to the local disk. The bare-metal stack
renders the same bundle to check it and exports its digest, so a spec change that changes
the PXE files shows in `pulumi preview`.
"""

from __future__ import annotations

import argparse
import hashlib
import ipaddress
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import jinja2

from myriad.errors import MyriadError
from myriad.fsutil import atomic_write_text
from myriad.plan.node_images import ImageManifest
from myriad.plan.nodes import NodeRecord, iter_nodes
from myriad.provision.pxe_state import HOSTS_FILE, SEED_TOKEN_MARK, installer_path
from myriad.provision.redfish import ssh_banner_marker
from myriad.spec import SpecError, load_spec
from myriad.spec.models import BareMetalHost, BareMetalOptions, Cluster, OsDisk
from stacks.interface import StackError
from stacks.pxe_images import (
    ARCHIVE_FOLDER,
    installs_for,
    late_commands,
    load_images,
    publish_archives,
    publish_seeds,
)
from stacks.settings import (
    PROJECT_ROOT,
    PxeSettings,
    StackFileConfig,
    pxe_settings,
    spec_path,
    spec_source,
    state_folder,
)

TEMPLATES = PROJECT_ROOT / "templates" / "pxe"
# What the media web server (nginx.conf) serves from the bundle's http/: public, large, the
# same bytes for every node. Everything else (flagged installers, seeds, the callback) stays
# with the PXE server, which checks who asks.
MEDIA_FOLDERS = ("images", ARCHIVE_FOLDER)
# The installer the templates drive is Ubuntu's autoinstall (subiquity).
PXE_OS = ("ubuntu-22.04", "ubuntu-24.04")


@dataclass(frozen=True, slots=True)
class HostEntry:
    node: NodeRecord
    host: BareMetalHost


def hosts_for(spec: Cluster, nodes: Sequence[NodeRecord]) -> list[HostEntry]:
    """Each node with its host entry; every node must have one, inside the management network."""
    hosts = {host.name: host for host in spec.provider.hosts}
    missing = [node.name for node in nodes if node.name not in hosts]
    if missing:
        shown = ", ".join(missing[:8]) + (
            f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        )
        raise StackError(
            f"provider.hosts has no entry for {len(missing)} node(s): {shown}; give each its "
            "name, mac, bmc_address and address"
        )
    network = ipaddress.ip_network(spec.network.addressing.management)
    outside = [
        f"{n.name} ({hosts[n.name].address})"
        for n in nodes
        if ipaddress.ip_address(hosts[n.name].address) not in network
    ]
    if outside:
        raise StackError(
            f"host addresses outside the management network {network}: {', '.join(outside[:8])}"
        )
    return [HostEntry(node, hosts[node.name]) for node in nodes]


@dataclass(frozen=True, slots=True)
class DhcpSubnet:
    """One `dhcp-range`: the PXE server's own segment, or a rack subnet behind a DHCP relay."""

    tag: str
    network: ipaddress.IPv4Network
    router: str
    relayed: bool


@dataclass(frozen=True, slots=True)
class DnsmasqLimits:
    """dnsmasq's ceilings for a fleet, and the open-files limit it must run with to keep them."""

    lease_max: int
    tftp_max: int
    open_files: int


# dnsmasq(8) (Debian 2.90): `--dhcp-lease-max` defaults to 1000 leases and `--tftp-max` to 50
# concurrent transfers; each transfer takes a file descriptor, "(2*n)+10" when the files
# differ, and at start-up dnsmasq lowers tftp-max to what its open-files limit allows
# (src/dnsmasq.c: "restricting maximum simultaneous TFTP transfers to %d").
_MARGIN_MIN = 64
_OTHER_FDS = 128  # sockets, the lease file, logs: dnsmasq reserves about 50 for them itself


def dnsmasq_limits(hosts: int) -> DnsmasqLimits:
    """Room for every host at once, plus a quarter (at least 64).

    Leases are `infinite` (each host's static address), so every host that ever booted holds
    one; the margin covers the leases a swapped board's old MAC keeps until it is removed, and
    hosts added before the next render. TFTP: every host may network-boot at once (a site-wide
    power restore with network boot first in the firmware's order), one transfer each.
    """
    room = hosts + max(_MARGIN_MIN, hosts // 4)
    return DnsmasqLimits(lease_max=room, tftp_max=room, open_files=2 * room + _OTHER_FDS)


def options(spec: Cluster) -> BareMetalOptions:
    return spec.provider.baremetal or BareMetalOptions()


def dhcp_subnets(
    entries: Sequence[HostEntry],
    network: ipaddress.IPv4Network,
    settings: PxeSettings,
    prefix: int | None,
) -> list[DhcpSubnet]:
    """One flat segment, or (with `dhcp_subnet_prefix`) one range per rack subnet in use.

    A rack subnet other than the PXE server's reaches dnsmasq through a DHCP relay on its
    switch; its router is the subnet's first address, the usual place of the switch's SVI.
    """
    if prefix is None:
        return [DhcpSubnet("mgmt", network, settings.gateway, relayed=False)]
    if prefix < network.prefixlen:
        raise StackError(
            f"provider.baremetal.dhcp_subnet_prefix /{prefix} is wider than the management "
            f"network {network}: rack subnets lie inside it (a prefix of {network.prefixlen} "
            "or more)"
        )
    own = ipaddress.ip_network(f"{settings.server}/{prefix}", strict=False)
    used = {
        ipaddress.ip_network(f"{entry.host.address}/{prefix}", strict=False) for entry in entries
    } | {own}
    subnets = []
    for index, subnet in enumerate(sorted(used)):
        assert isinstance(subnet, ipaddress.IPv4Network)
        relayed = subnet != own
        router = str(next(subnet.hosts())) if relayed else settings.gateway
        subnets.append(DhcpSubnet(f"net{index}", subnet, router, relayed))
    return subnets


# curtin's `grub` settings, which subiquity reads from the autoinstall's `storage` section only
# (subiquity/server/controllers/filesystem.py: `self.model.grub = self.ai_data.get("grub")`
# with `autoinstall_key = "storage"`, tags 22.04.2 and 24.04.4.1). `reorder_uefi: false`:
# curtin leaves GRUB's new boot entry first instead of moving BootCurrent, the network entry
# the installer booted from, back in front of it (curtin doc/topics/config.rst, `reorder_uefi`,
# default true; subiquity 22.04 sets no default). The node then boots its disk without the
# PXE server; installs use the BMC's one-time network boot.
GRUB = {"reorder_uefi": False}


def storage_config(disk: OsDisk) -> dict[str, object]:
    """Autoinstall `storage`: the OS disk chosen by `match`, or an mdadm RAID1 over two.

    Without a match, subiquity picks the largest disk, which on an HGX server is a U.2 data
    drive; `size: smallest` with the model and serial globs picks the M.2 boot device.
    """
    return {**_disk_layout(disk), "grub": dict(GRUB)}


def _disk_layout(disk: OsDisk) -> dict[str, object]:
    match: dict[str, object] = {"size": disk.size}
    if disk.model:
        match["model"] = disk.model
    if disk.serial:
        match["serial"] = disk.serial
    if not disk.raid1:
        return {"layout": {"name": "lvm", "match": match}}
    config: list[dict[str, object]] = []
    for index in (0, 1):
        config.append(
            {
                "type": "disk",
                "id": f"os-disk{index}",
                "match": match,
                "ptable": "gpt",
                "wipe": "superblock-recursive",
                "preserve": False,
                "name": "",
                "grub_device": False,
            }
        )
    for index in (0, 1):
        # An ESP on each disk: either can boot alone (subiquity installs GRUB to both).
        config.append(
            {
                "type": "partition",
                "id": f"os-disk{index}-esp",
                "device": f"os-disk{index}",
                "number": 1,
                "size": 1073741824,
                "flag": "boot",
                "grub_device": True,
                "preserve": False,
            }
        )
        config.append(
            {
                "type": "partition",
                "id": f"os-disk{index}-md",
                "device": f"os-disk{index}",
                "number": 2,
                "size": -1,
                "preserve": False,
            }
        )
    config += [
        {
            "type": "raid",
            "id": "os-md0",
            "name": "md0",
            "raidlevel": 1,
            "devices": ["os-disk0-md", "os-disk1-md"],
            "preserve": False,
        },
        {"type": "format", "id": "os-esp0-fs", "volume": "os-disk0-esp", "fstype": "fat32"},
        {"type": "format", "id": "os-esp1-fs", "volume": "os-disk1-esp", "fstype": "fat32"},
        {"type": "format", "id": "os-root-fs", "volume": "os-md0", "fstype": "ext4"},
        {"type": "mount", "id": "os-esp-mount", "device": "os-esp0-fs", "path": "/boot/efi"},
        {"type": "mount", "id": "os-root-mount", "device": "os-root-fs", "path": "/"},
    ]
    return {"config": config, "swap": {"size": 0}}


def subnet_of(address: str, subnets: Sequence[DhcpSubnet]) -> DhcpSubnet:
    """The DHCP subnet (flat segment or rack subnet) a host address lies in."""
    ip = ipaddress.ip_address(address)
    for subnet in subnets:
        if ip in subnet.network:
            return subnet
    raise StackError(f"{address} lies in none of the DHCP subnets ({subnets})")


def installed_network(
    host: BareMetalHost, subnet: DhcpSubnet, settings: PxeSettings
) -> dict[str, object]:
    """The autoinstall `network` (netplan v2): the spec's address, fixed, on the boot NIC.

    subiquity writes this config as the installed system's /etc/netplan/00-installer-config.yaml
    and turns cloud-init's networking off (subiquity/models/network.py, `render`, tags 22.04.2
    and 24.04.4.1), so it is what the node keeps: a static address, the subnet's router and
    the site's DNS, with no DHCP client that would depend on the PXE server for life. The
    address is the same one dnsmasq's static lease gives the installer, so the install itself
    is unchanged. `0.0.0.0/0` rather than netplan's `default` keyword: older netplan lacks it.
    """
    nic: dict[str, object] = {
        "match": {"macaddress": host.mac},
        "dhcp4": False,
        "dhcp6": False,
        "addresses": [f"{host.address}/{subnet.network.prefixlen}"],
        "routes": [{"to": "0.0.0.0/0", "via": subnet.router}],
        "nameservers": {
            "addresses": list(settings.dns),
            **({"search": [settings.domain]} if settings.domain else {}),
        },
    }
    # "pxe" is netplan's id for the NIC, not its name: the match by MAC finds it.
    return {"version": 2, "ethernets": {"pxe": nic}}


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        # Config files, not HTML: escaping would corrupt them.
        autoescape=False,
    )


def render_pxe(
    spec: Cluster,
    settings: PxeSettings,
    *,
    source: str,
    images: Mapping[str, ImageManifest] | None = None,
) -> dict[str, str]:
    """Relative path → file content for the whole cluster (one PXE server serves every stack).

    `images` (profile → image record, `stacks.pxe_images.load_images`): in image mode, the
    nodes of a profile with an archive install it after the stock install (see
    stacks/pxe_images.py); without it, or in push mode, every node gets the stock install.
    """
    if spec.software.os not in PXE_OS:
        raise StackError(
            f"software.os {spec.software.os} cannot be installed over PXE by Myriad: its "
            f"templates drive Ubuntu's autoinstall ({', '.join(PXE_OS)})"
        )
    entries = hosts_for(spec, list(iter_nodes(spec)))
    installs = installs_for(
        spec,
        (entry.node for entry in entries),
        images or {},
        settings.http_base,
        settings.media_base,
        settings.seed_base,
        settings.tls_ca,
    )
    env = _environment()
    network = ipaddress.ip_network(spec.network.addressing.management)
    assert isinstance(network, ipaddress.IPv4Network)  # the spec's Cidr is IPv4 only
    opts = options(spec)
    storage = storage_config(opts.os_disk)
    http = settings.http_base
    common = {
        "cluster": spec.metadata.name,
        "source": source,
        "http": http,
        "os": spec.software.os,
        "images": f"{settings.media_base}/images/{spec.software.os}",
        "domain": settings.domain,
    }
    subnets = dhcp_subnets(entries, network, settings, opts.dhcp_subnet_prefix)
    files = {
        "dnsmasq.conf": env.get_template("dnsmasq.conf.j2").render(
            **common,
            subnets=subnets,
            limits=dnsmasq_limits(len(entries)),
            server=settings.server,
            dns=settings.dns,
            interface=settings.interface,
            tftp_root=settings.tftp_root,
            hosts=entries,
        ),
        "http/boot.ipxe": env.get_template("boot.ipxe.j2").render(**common),
        "nginx.conf": env.get_template("nginx.conf.j2").render(
            # Image archives only where some node installs one (push mode names none).
            **common,
            media_port=settings.media_port,
            folders=MEDIA_FOLDERS if installs else MEDIA_FOLDERS[:1],
        ),
        HOSTS_FILE: json.dumps(
            {
                entry.node.name: {"mac": entry.host.mac, "address": entry.host.address}
                for entry in entries
            },
            indent=1,
            sort_keys=True,
        )
        + "\n",
    }
    for entry in entries:
        node, host = entry.node, entry.host
        identity = {
            "cluster": spec.metadata.name,
            "name": node.name,
            "pool": node.pool,
            "role": node.role,
            "island": node.island,
        }
        per_node = {
            **common,
            "node": node,
            "host": host,
            "admin_user": settings.admin_user,
            "ssh_authorized_keys": list(settings.ssh_authorized_keys),
            "marker": ssh_banner_marker(node.name, spec.software.os),
            "storage": storage,
            "network": installed_network(host, subnet_of(host.address, subnets), settings),
            "callback": f"{http}/installed/{node.name}",
            "node_json": json.dumps(identity, sort_keys=True) + "\n",
            "image": installs.get(node.name),
            "seed_token_mark": SEED_TOKEN_MARK,
            "image_commands": (
                late_commands(node.name, installs[node.name]) if node.name in installs else []
            ),
        }
        files[installer_path(host.mac)] = env.get_template("node.ipxe.j2").render(**per_node)
        folder = f"http/nodes/{node.name}"
        files[f"{folder}/user-data"] = env.get_template("user-data.j2").render(**per_node)
        files[f"{folder}/meta-data"] = env.get_template("meta-data.j2").render(**per_node)
    return files


def bundle_digest(files: Mapping[str, str]) -> str:
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.encode() + b"\0" + files[path].encode() + b"\0")
    return digest.hexdigest()


def write_bundle(files: Mapping[str, str], out: Path) -> None:
    for relative, text in sorted(files.items()):
        atomic_write_text(out / relative, text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m stacks.pxe",
        description="Render dnsmasq, iPXE and autoinstall files for a bare-metal stack.",
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--stack", metavar="ENV", help="read Pulumi.ENV.yaml of this project")
    which.add_argument("--stack-file", type=Path, metavar="FILE", help="read this stack file")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR")
    parser.add_argument(
        "--state",
        type=Path,
        metavar="DIR",
        help="the cluster's state folder, for image mode's image records and seeds "
        "(default: myriad:stateDir, else Myriad's state folder of the spec's cluster)",
    )
    args = parser.parse_args(argv)
    stack_file = args.stack_file or PROJECT_ROOT / f"Pulumi.{args.stack}.yaml"
    try:
        config = StackFileConfig.read(stack_file)
        path = spec_path(config)
        spec = load_spec(path).spec
        if spec.provider.kind != "baremetal":
            raise StackError(f"{stack_file} is a {spec.provider.kind} stack, not baremetal")
        state = args.state or state_folder(config, spec.metadata.name)
        images = load_images(spec, state / "images")
        settings = pxe_settings(config, spec)
        files = render_pxe(spec, settings, source=spec_source(path), images=images)
        write_bundle(files, args.out)
        notes = publish_images(spec, images, state, args.out, settings)
    except SpecError as exc:
        print(exc.render(), file=sys.stderr)
        return exc.exit_code
    except MyriadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"{len(files)} files in {args.out} (sha256 {bundle_digest(files)})")
    return 0


def publish_images(
    spec: Cluster,
    images: Mapping[str, ImageManifest],
    state: Path,
    out: Path,
    settings: PxeSettings,
) -> list[str]:
    """Image mode: the archives and the seeds beside the bundle; what an operator should know."""
    if not images:
        return []
    publish_archives(images, state / "images", out)
    installs = installs_for(
        spec,
        iter_nodes(spec),
        images,
        settings.http_base,
        settings.media_base,
        settings.seed_base,
        settings.tls_ca,
    )
    notes = [
        f"profile {profile} has no image archive in {state / 'images'}: its nodes get the "
        f"stock install (`myriad image build --profile {profile}` builds one)"
        for profile in sorted({pool.profile for pool in spec.pools} - set(images))
    ]
    missing = publish_seeds(state / "seeds", sorted(installs), out)
    if missing:
        shown = ", ".join(missing[:8]) + (
            f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        )
        notes.append(
            f"no seed in {state / 'seeds'} for {shown}: their installs stop at the seed step "
            "until the controller writes one and this command runs again"
        )
    return notes


if __name__ == "__main__":
    raise SystemExit(main())
