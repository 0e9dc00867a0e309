"""`myriad remedy`'s power cycle from the spec to the BMC: the bare-metal spec's host entry
(its BMC address and Redfish system) and MYRIAD_BMC_USERNAME / MYRIAD_BMC_PASSWORD make the
pass's BMC client (myriad.ops.remedy.default_actuators), which power-cycles the node on
sushy-tools' emulator; the node really goes Off and comes back On."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from myriad.errors import OpsError
from myriad.ops.remedy import default_actuators
from myriad.plan.nodes import iter_nodes
from myriad.plan.pipeline import plan_loaded
from myriad.provision.redfish import BmcCredentials, RedfishClient
from myriad.render.inventory import build_inventory
from myriad.spec import load_spec
from myriad.spec.health import Remediation

from conftest import Emulator

REPO = Path(__file__).resolve().parents[2]


def two_gpu_spec(path: Path, bmc_url: str) -> Path:
    """starter-64 with two GPU nodes, every host's BMC the emulator (gpu01 and gpu02 are its
    systems; the head nodes' entries are never used)."""
    data = yaml.safe_load((REPO / "inventories/starter-64/cluster.yaml").read_text())
    for pool in data["pools"]:
        if pool["name"] == "gpu":
            pool["count"] = 2
    data["network"]["addressing"]["management"] = "127.0.0.0/16"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    names = [node.name for node in iter_nodes(load_spec(path).spec)]
    data["provider"]["hosts"] = [
        {
            "name": name,
            "mac": f"02:00:00:00:01:{index:02x}",
            "bmc_address": bmc_url,
            "redfish_system": name,
            "address": f"127.0.1.{index}",
        }
        for index, name in enumerate(names, start=1)
    ]
    data["health"] = {"remediation": {}}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_the_pass_power_cycles_the_specs_host_through_its_bmc(
    redfish_emulator: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = plan_loaded(load_spec(two_gpu_spec(tmp_path / "cluster.yaml", redfish_emulator.url)))
    assert result.plan is not None
    spec = result.loaded.spec
    cluster = SimpleNamespace(
        spec=spec, inventory=build_inventory(spec, result.loaded.catalog, result.plan)
    )
    assert spec.health is not None and spec.health.remediation == Remediation()
    # No credentials in the environment: no BMC client, and the pass says so when it acts.
    monkeypatch.delenv("MYRIAD_BMC_USERNAME", raising=False)
    monkeypatch.delenv("MYRIAD_BMC_PASSWORD", raising=False)
    assert default_actuators(cluster, spec.health.remediation).power_cycle is None
    monkeypatch.setenv("MYRIAD_BMC_USERNAME", redfish_emulator.username)
    monkeypatch.setenv("MYRIAD_BMC_PASSWORD", redfish_emulator.password)
    act = default_actuators(cluster, spec.health.remediation)
    assert act.power_cycle is not None and act.hook is None

    bmc = RedfishClient(
        redfish_emulator.url,
        BmcCredentials(redfish_emulator.username, redfish_emulator.password),
        timeout_s=5,
    )
    path = bmc.system_path("gpu01")
    if bmc.system(path).power_state != "On":
        bmc.reset(path, "On")
        bmc.wait_for_power(path, "On", timeout_s=15, poll_s=0.1)
    assert act.power_cycle("gpu01") == "ForceRestart"
    bmc.wait_for_power(path, "Off", timeout_s=15, poll_s=0.05)
    bmc.wait_for_power(path, "On", timeout_s=15, poll_s=0.1)
    # A node the spec has no host entry for is named.
    with pytest.raises(OpsError, match="gpu99: no bare-metal host entry"):
        act.power_cycle("gpu99")
