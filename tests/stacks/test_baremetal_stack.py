"""The baremetal provider under Pulumi mocks: starter-64 whole, roce-10k split per island.

Exercised: stacks.program.build with the config of Pulumi.starter-64.yaml plus the secret and
keys an operator sets, stacks.baremetal, stacks.pxe. The BareMetalNode's Redfish calls are not
made here (mocks stand in for the engine); test_redfish_provider.py runs them on an emulator.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pulumi
import pytest

from myriad.plan.nodes import iter_nodes
from myriad.provision.stack_outputs import match_spec, parse_nodes
from myriad.spec.models import Cluster
from stacks.interface import StackError
from stacks.program import build
from stacks.pxe import bundle_digest, render_pxe
from stacks.settings import StackFileConfig, pxe_settings, read_settings

from stack_harness import (
    ADMIN_KEY,
    BMC_PASSWORD,
    BMC_USER,
    REPO,
    SECRET_MARK,
    Built,
    run_program,
    spec_with,
    stack_config,
    walk,
)

STARTER = REPO / "inventories/starter-64/cluster.yaml"
ROCE = REPO / "inventories/roce-10k/cluster.yaml"
NODE_TYPE = "pulumi-python:dynamic/myriad:BareMetalNode"
SECRET_KEY = "myriad:bmc-admin"


def operator_config(env: str = "starter-64", **extra: Any) -> dict[str, Any]:
    """The committed stack file plus what an operator sets before `pulumi up`."""
    return {
        **stack_config(env),
        "myriad:sshAuthorizedKeys": [ADMIN_KEY],
        SECRET_KEY: {"username": BMC_USER, "password": BMC_PASSWORD},
        **extra,
    }


def build_stack(spec: Cluster, path: Path = STARTER, **config: Any) -> Built:
    def body() -> dict[str, Any]:
        settings = read_settings(pulumi.Config("myriad"), spec, path)
        result = build(spec, settings)
        return {"nodes": result.nodes, **result.outputs}

    return run_program(body, config=operator_config(**config), secret_keys=(SECRET_KEY,))


@pytest.fixture(scope="module")
def starter_spec() -> Cluster:
    return spec_with(STARTER, hosts=True)


@pytest.fixture(scope="module")
def starter_stack(starter_spec: Cluster) -> Built:
    return build_stack(starter_spec)


def test_one_node_resource_per_server(starter_stack: Built, starter_spec: Cluster) -> None:
    nodes = starter_stack.of_type(NODE_TYPE)
    # Registration order is the engine's business; the set of nodes is the spec's.
    assert sorted(n.inputs["name"] for n in nodes) == sorted(
        r.name for r in iter_nodes(starter_spec)
    )
    assert len(nodes) == 11
    hosts = {h.name: h for h in starter_spec.provider.hosts}
    for node in nodes:
        host = hosts[node.inputs["name"]]
        assert node.name == f"starter-64-{host.name}"
        assert node.inputs["mac"] == host.mac
        assert node.inputs["bmc_address"] == host.bmc_address
        assert node.inputs["address"] == host.address
        assert node.inputs["os"] == starter_spec.software.os
        # What the asynchronous create needs: the PXE server's folder and the install limit.
        assert node.inputs["pxe_root"] == "/srv/myriad-pxe"
        assert node.inputs["parallel_installs"] == 50
        assert node.inputs["boot_mode"] == "UEFI"
        assert node.inputs.get("reimage_token") is None  # no reimage without a token


def test_nodes_are_protected_and_retained_by_default(starter_stack: Built) -> None:
    for node in starter_stack.of_type(NODE_TYPE):
        assert node.protect and node.retain_on_delete


def test_retain_and_protect_follow_the_stack_config(starter_spec: Cluster) -> None:
    built = build_stack(starter_spec, **{"myriad:retainNodes": False, "myriad:protectNodes": False})
    for node in built.of_type(NODE_TYPE):
        assert not node.protect and not node.retain_on_delete


def test_bmc_credentials_are_secret_in_inputs_and_outputs(starter_stack: Built) -> None:
    for node in starter_stack.of_type(NODE_TYPE):
        for key, value in (("bmc_username", BMC_USER), ("bmc_password", BMC_PASSWORD)):
            wrapped = node.inputs[key]
            assert isinstance(wrapped, dict) and SECRET_MARK in wrapped, key
            assert wrapped["value"] == value
        assert set(node.additional_secret_outputs) == {"bmc_username", "bmc_password"}


def test_no_secret_appears_in_the_clear_anywhere(starter_stack: Built) -> None:
    for resource in starter_stack.resources:
        for path, value, secret in walk(resource.inputs):
            if isinstance(value, str) and (BMC_PASSWORD in value or BMC_USER in value):
                assert secret, f"{resource.type} {resource.name}: {path} holds a secret in clear"
    text = json.dumps(starter_stack.outputs)
    assert BMC_PASSWORD not in text and BMC_USER not in text


def test_outputs_are_what_the_inventory_reads(starter_stack: Built, starter_spec: Cluster) -> None:
    nodes = parse_nodes({"nodes": starter_stack.outputs["nodes"]})
    by_name = match_spec(starter_spec, nodes)
    hosts = {h.name: h for h in starter_spec.provider.hosts}
    for name, node in by_name.items():
        assert node.address == hosts[name].address
        assert node.ids == {
            "bmc": hosts[name].bmc_address,
            "system": "/redfish/v1/Systems/1",
            "mac": hosts[name].mac,
        }
        assert node.public_address is None
    assert by_name["gpu01"].island == 0 and by_name["ctl01"].island is None


def test_the_pxe_digest_is_the_rendered_bundles(
    starter_stack: Built, starter_spec: Cluster
) -> None:
    settings = pxe_settings(StackFileConfig(operator_config()), starter_spec)
    files = render_pxe(starter_spec, settings, source="inventories/starter-64/cluster.yaml")
    assert starter_stack.outputs["pxe_sha256"] == bundle_digest(files)


def test_names_are_stable_across_runs(starter_stack: Built, starter_spec: Cluster) -> None:
    again = build_stack(starter_spec)
    assert sorted((r.type, r.name) for r in again.resources) == sorted(
        (r.type, r.name) for r in starter_stack.resources
    )


def test_roce_10k_island_stack_holds_one_island() -> None:
    spec = spec_with(ROCE, hosts=True, edit=_per_island)
    built = build_stack(
        spec,
        ROCE,
        **{
            "myriad:spec": "inventories/roce-10k/cluster.yaml",
            "myriad:pxeServer": "10.0.0.2",
            "myriad:gateway": "10.0.0.1",
            "myriad:island": 3,
        },
    )
    nodes = parse_nodes({"nodes": built.outputs["nodes"]})
    assert len(nodes) == 128
    assert {n.island for n in nodes} == {3}
    assert nodes[0].name == "gpu0385" and nodes[-1].name == "gpu0512"
    match_spec(spec, nodes, require_all=False)


def test_roce_10k_shared_stack_holds_the_rest() -> None:
    spec = spec_with(ROCE, hosts=True, edit=_per_island)
    built = build_stack(
        spec,
        ROCE,
        **{
            "myriad:spec": "inventories/roce-10k/cluster.yaml",
            "myriad:pxeServer": "10.0.0.2",
            "myriad:gateway": "10.0.0.1",
        },
    )
    names = [n["name"] for n in built.outputs["nodes"]]
    assert names == ["ctl01", "ctl02", "ctl03", "login01", "login02", "login03", "login04"]


def test_missing_hosts_are_listed(starter_spec: Cluster) -> None:
    committed = spec_with(STARTER)  # as committed: no host list yet
    with pytest.raises(StackError, match=r"no entry for 11 node\(s\): ctl01, ctl02, login01"):
        build_stack(committed)


def test_ipmi_bmcs_are_refused() -> None:
    def ipmi(data: dict[str, Any]) -> None:
        data["provider"]["bmc"] = "ipmi"

    with pytest.raises(StackError, match="over Redfish"):
        build_stack(spec_with(STARTER, hosts=True, edit=ipmi))


def test_debian_cannot_be_installed_over_pxe() -> None:
    def debian(data: dict[str, Any]) -> None:
        data["software"]["os"] = "debian-12"

    with pytest.raises(StackError, match="Ubuntu's autoinstall"):
        build_stack(spec_with(STARTER, hosts=True, edit=debian))


def test_missing_bmc_secret_says_how_to_set_it(starter_spec: Cluster) -> None:
    def body() -> dict[str, Any]:
        read_settings(pulumi.Config("myriad"), starter_spec, STARTER)
        return {}

    config = operator_config()
    del config[SECRET_KEY]
    with pytest.raises(StackError, match=r"pulumi config set --secret --path 'myriad:bmc-admin"):
        run_program(body, config=config)


def test_a_private_key_in_the_keys_is_refused(starter_spec: Cluster) -> None:
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
    with pytest.raises(StackError, match="is a private key"):
        build_stack(starter_spec, **{"myriad:sshAuthorizedKeys": [key]})


def test_no_keys_means_no_way_in(starter_spec: Cluster) -> None:
    with pytest.raises(StackError, match="sshAuthorizedKeys is empty"):
        build_stack(starter_spec, **{"myriad:sshAuthorizedKeys": []})


def test_pxe_server_outside_the_management_network_is_refused(starter_spec: Cluster) -> None:
    with pytest.raises(StackError, match=r"outside the management network 10\.10\.0\.0/24"):
        build_stack(starter_spec, **{"myriad:pxeServer": "192.0.2.10"})


def _per_island(data: dict[str, Any]) -> None:
    data["provider"]["stack_per_island"] = True


def test_reimage_tokens_come_from_the_replace_config(starter_spec: Cluster) -> None:
    built = build_stack(
        starter_spec,
        **{"myriad:replace": {"gpu03": "2026-12-01", "island-0": "r2"}, "myriad:pxeRoot": "/pxe"},
    )
    tokens = {n.inputs["name"]: n.inputs.get("reimage_token") for n in built.of_type(NODE_TYPE)}
    assert tokens["gpu03"] == "island:r2/2026-12-01"
    assert tokens["gpu01"] == "island:r2"  # the island's token reaches its compute nodes
    assert tokens["ctl01"] is None and tokens["login01"] is None
    assert {n.inputs["pxe_root"] for n in built.of_type(NODE_TYPE)} == {"/pxe"}


def test_install_settings_come_from_the_spec() -> None:
    def tuned(data: dict[str, Any]) -> None:
        data["provider"]["baremetal"] = {"parallel_installs": 200, "boot_mode": "Legacy"}

    built = build_stack(spec_with(STARTER, hosts=True, edit=tuned))
    nodes = built.of_type(NODE_TYPE)
    assert {(n.inputs["parallel_installs"], n.inputs["boot_mode"]) for n in nodes} == {
        (200, "Legacy")
    }


def test_a_relative_pxe_root_is_refused(starter_spec: Cluster) -> None:
    with pytest.raises(StackError, match="pxeRoot must be an absolute path"):
        build_stack(starter_spec, **{"myriad:pxeRoot": "srv/pxe"})
