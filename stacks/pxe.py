"""The PXE server's side of a bare-metal environment, rendered from the spec's host list.

    python -m stacks.pxe --stack starter-64 --out /srv/myriad-pxe

writes `dnsmasq.conf` and an `http/` folder (iPXE scripts, per-node Ubuntu autoinstall) for
the stack's cluster.yaml and PXE config keys (Pulumi.<env>.yaml). The bare-metal stack renders
the same bundle to check it and exports its digest, so a spec change that changes the PXE
files shows in `pulumi preview`.
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
from myriad.plan.nodes import NodeRecord, iter_nodes
from myriad.provision.redfish import ssh_banner_marker
from myriad.spec import SpecError, load_spec
from myriad.spec.models import BareMetalHost, Cluster
from stacks.interface import StackError
from stacks.settings import (
    PROJECT_ROOT,
    PxeSettings,
    StackFileConfig,
    pxe_settings,
    spec_path,
    spec_source,
)

TEMPLATES = PROJECT_ROOT / "templates" / "pxe"
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


def render_pxe(spec: Cluster, settings: PxeSettings, *, source: str) -> dict[str, str]:
    """Relative path → file content for the whole cluster (one PXE server serves every stack)."""
    if spec.software.os not in PXE_OS:
        raise StackError(
            f"software.os {spec.software.os} cannot be installed over PXE by Myriad: its "
            f"templates drive Ubuntu's autoinstall ({', '.join(PXE_OS)})"
        )
    entries = hosts_for(spec, list(iter_nodes(spec)))
    env = _environment()
    network = ipaddress.ip_network(spec.network.addressing.management)
    http = settings.http_base
    common = {
        "cluster": spec.metadata.name,
        "source": source,
        "http": http,
        "os": spec.software.os,
        "images": f"{http}/images/{spec.software.os}",
        "domain": settings.domain,
    }
    files = {
        "dnsmasq.conf": env.get_template("dnsmasq.conf.j2").render(
            **common,
            network=network,
            gateway=settings.gateway,
            dns=settings.dns,
            interface=settings.interface,
            tftp_root=settings.tftp_root,
            hosts=entries,
        ),
        "http/boot.ipxe": env.get_template("boot.ipxe.j2").render(**common),
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
            "node_json": json.dumps(identity, sort_keys=True) + "\n",
        }
        mac = host.mac.replace(":", "-")
        files[f"http/nodes/{mac}.ipxe"] = env.get_template("node.ipxe.j2").render(**per_node)
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
    args = parser.parse_args(argv)
    stack_file = args.stack_file or PROJECT_ROOT / f"Pulumi.{args.stack}.yaml"
    try:
        config = StackFileConfig.read(stack_file)
        path = spec_path(config)
        spec = load_spec(path).spec
        if spec.provider.kind != "baremetal":
            raise StackError(f"{stack_file} is a {spec.provider.kind} stack, not baremetal")
        files = render_pxe(spec, pxe_settings(config, spec), source=spec_source(path))
        write_bundle(files, args.out)
    except SpecError as exc:
        print(exc.render(), file=sys.stderr)
        return exc.exit_code
    except MyriadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"{len(files)} files in {args.out} (sha256 {bundle_digest(files)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
