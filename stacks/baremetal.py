"""Bare metal: servers behind Redfish BMCs, installed over PXE, one `BareMetalNode` each.

Creating a node flags it on the PXE server (at `myriad:pxeRoot`), sets a one-time network boot
on its BMC and powers it on — or queues it while `provider.baremetal.parallel_installs` nodes
install — and returns: `myriad provision wait` follows the installs. A node is reimaged only
when its token in `myriad:replace` changes (by name, or `island-<n>` for an island), and only
while it is off; a node that is on is never power-cycled. Nodes are protected and retained by
default: removing one from the spec leaves the server as it is unless the stack sets
`myriad:retainNodes false`, and then it is powered off.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi.dynamic

from myriad.plan.nodes import NodeRecord
from myriad.provision.redfish import SECRET_KEYS, RedfishNodeProvider, bmc_base_url
from myriad.spec.models import BareMetalHost, BareMetalOptions, Cluster
from stacks.interface import ProviderResult, StackError, all_records, node_record
from stacks.pxe import HostEntry, bundle_digest, hosts_for, options, render_pxe
from stacks.pxe_images import load_images
from stacks.settings import NAMESPACE, StackSettings, spec_source
from stacks.sharding import StackScope


@dataclass(frozen=True)
class BareMetalNodeArgs:
    node: NodeRecord
    host: BareMetalHost
    os: str
    bmc_username: pulumi.Input[str]
    bmc_password: pulumi.Input[str]
    pxe_root: str
    parallel_installs: int
    boot_mode: str = "UEFI"
    reimage_token: str | None = None
    power_timeout_s: float = 600.0
    request_timeout_s: float = 30.0
    verify_tls: bool = True
    ca_file: str | None = None


class BareMetalNode(pulumi.dynamic.Resource, module="myriad", name="BareMetalNode"):
    """One server behind a Redfish BMC; see `myriad.provision.redfish.RedfishNodeProvider`."""

    system_path: pulumi.Output[str]
    power_state: pulumi.Output[str]
    health: pulumi.Output[str | None]
    install_id: pulumi.Output[str | None]
    install_state: pulumi.Output[str | None]

    def __init__(
        self,
        resource_name: str,
        args: BareMetalNodeArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        props: dict[str, Any] = {
            "name": args.node.name,
            "mac": args.host.mac,
            "bmc_address": args.host.bmc_address,
            "redfish_system": args.host.redfish_system,
            "address": args.host.address,
            "os": args.os,
            "reimage_token": args.reimage_token,
            "pxe_root": args.pxe_root,
            "parallel_installs": args.parallel_installs,
            "boot_mode": args.boot_mode,
            "power_timeout_s": args.power_timeout_s,
            "request_timeout_s": args.request_timeout_s,
            "verify_tls": args.verify_tls,
            "ca_file": args.ca_file,
            "poll_s": 5.0,
            "bmc_username": pulumi.Output.secret(args.bmc_username),
            "bmc_password": pulumi.Output.secret(args.bmc_password),
            # Outputs, filled in by the provider.
            "system_path": None,
            "power_state": None,
            "health": None,
            "install_id": None,
            "install_state": None,
        }
        secret_outputs = pulumi.ResourceOptions(additional_secret_outputs=list(SECRET_KEYS))
        super().__init__(
            RedfishNodeProvider(),
            resource_name,
            props,
            pulumi.ResourceOptions.merge(opts, secret_outputs),
        )


@dataclass(frozen=True)
class BareMetalClusterArgs:
    cluster: str
    os: str
    entries: tuple[HostEntry, ...]
    credentials: pulumi.Output[Any]
    settings: StackSettings
    options: BareMetalOptions


class BareMetalCluster(pulumi.ComponentResource):
    """The bare-metal nodes one stack holds."""

    records: list[dict[str, pulumi.Input[Any]]]

    def __init__(
        self, name: str, args: BareMetalClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("myriad:baremetal:Cluster", name, None, opts)
        settings = args.settings
        username = args.credentials.apply(lambda c: c["username"])
        password = args.credentials.apply(lambda c: c["password"])
        self.records = []
        for entry in args.entries:
            node, host = entry.node, entry.host
            server = BareMetalNode(
                f"{args.cluster}-{node.name}",
                BareMetalNodeArgs(
                    node=node,
                    host=host,
                    os=args.os,
                    bmc_username=username,
                    bmc_password=password,
                    pxe_root=settings.pxe_root,
                    parallel_installs=args.options.parallel_installs,
                    boot_mode=args.options.boot_mode,
                    reimage_token=reimage_token(settings.replace, node),
                    power_timeout_s=settings.power_timeout_s,
                    request_timeout_s=settings.request_timeout_s,
                    verify_tls=settings.bmc_verify_tls,
                    ca_file=settings.bmc_ca_file,
                ),
                opts=pulumi.ResourceOptions(
                    parent=self,
                    protect=settings.protect_nodes,
                    retain_on_delete=settings.retain_nodes,
                ),
            )
            self.records.append(
                node_record(
                    node,
                    provider="baremetal",
                    address=host.address,
                    ids={
                        "bmc": bmc_base_url(host.bmc_address),
                        "system": server.system_path,
                        "mac": host.mac,
                    },
                )
            )
        self.register_outputs({"nodes": len(self.records)})


def reimage_token(tokens: Mapping[str, str], node: NodeRecord) -> str | None:
    """The node's reimage token: its own in `myriad:replace`, and its island's, if any."""
    island = tokens.get(f"island-{node.island}") if node.island is not None else None
    parts = [f"island:{island}" if island else "", tokens.get(node.name, "")]
    return "/".join(p for p in parts if p) or None


def build(spec: Cluster, scope: StackScope, settings: StackSettings) -> ProviderResult:
    provider = spec.provider
    if provider.bmc != "redfish":
        raise StackError(
            f"provider.bmc is {provider.bmc}: Myriad's bare-metal stack drives BMCs over Redfish"
        )
    if not provider.bmc_credentials_secret:
        raise StackError(
            "provider.bmc_credentials_secret is not set: name the Pulumi secret that holds the "
            "BMC username and password (e.g. bmc-admin)"
        )
    if settings.bmc_credentials is None:
        raise StackError(
            f"the BMC credentials {NAMESPACE}:{provider.bmc_credentials_secret} were not read"
        )
    if settings.pxe is None:
        raise StackError(f"the PXE settings ({NAMESPACE}:pxeServer and others) were not read")
    # The whole bundle is rendered, not just this stack's part: it is one PXE server's config.
    # In image mode, the image records decide which nodes install an image (stacks/pxe_images.py).
    images = load_images(spec, settings.state_dir / "images") if settings.state_dir else {}
    pxe = render_pxe(spec, settings.pxe, source=spec_source(settings.spec_path), images=images)
    entries = tuple(hosts_for(spec, scope.nodes))
    cluster = BareMetalCluster(
        f"{spec.metadata.name}-{scope.label}",
        BareMetalClusterArgs(
            cluster=spec.metadata.name,
            os=spec.software.os,
            entries=entries,
            credentials=settings.bmc_credentials,
            settings=settings,
            options=options(spec),
        ),
    )
    return ProviderResult(
        nodes=all_records(cluster.records), outputs={"pxe_sha256": bundle_digest(pxe)}
    )
