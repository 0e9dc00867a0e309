"""gpu.mig, gpu.ecc, hca.model, hca.firmware and hca.errors: derived from the spec, evaluated
against real captures from tests/samples (nvidia-smi -q -x of an A100 in MIG mode, a Tesla T4
and two RTX A5000s; ibstat of ConnectX-7, ConnectX-6 VF and mlx5Gen VF nodes; the sysfs tree
of a ConnectX-3 and an iWARP device), the way the node health runner evaluates them: through
the gathered document and the expectation document read back from JSON.

Where a test changes a capture (a counter raised, a MIG mode flipped) it says so; the
captures themselves stay as they are.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from myriad.node.checks import CheckResult, NodeExpectations, evaluate_node, view_of
from myriad.node.checks.fabric import HCA_FAMILIES, IB_ERROR_LIMITS
from myriad.node.facts import node_facts
from myriad.node.facts.hca import IB_ERROR_COUNTERS, sysfs_infiniband
from myriad.node.parsers import ParseFailure, parse_sysfs_counters
from myriad.plan.pipeline import plan_loaded
from myriad.render.inventory import build_inventory
from myriad.validate.expectations import expect, load_role_defaults

from spec_builder import cluster, gpu_profile, load_example

NODE = "gpu01"
A100 = "nvidia-smi-q-x/a100-sxm4-80gb-x4-mig_v12_drv535.54.03.xml"
T4 = "nvidia-smi-q-x/tesla-t4_v11_drv515.105.01.xml"
A5000 = "nvidia-smi-q-x/rtx-a5000-x2_v13_drv590.44.01.xml"
IBSTAT_CX7 = "ibstat/h100-node_cx7-mt4129-ndr400-ib_all-active.txt"
IBSTAT_VF = "ibstat/a100-vm_cx-vf-mt4126_mixed-ethernet-infiniband.txt"
IBSTAT_CX6_VF = "ibstat/azure-ndv4-a100_cx6-vf-mt4124-hdr200_ibpanic-exit255.txt"
SYSFS_IB = "sysfs-infiniband/node_exporter-mlx4_0-i40iw0"
CX7_DEVICES = [f"mlx5_{i}" for i in (0, 1, 4, 5, 6, 7, 8, 9)]


def probe(stdout: str = "", rc: int | None = 0, missing: bool = False) -> dict[str, Any]:
    return {"rc": rc, "stdout": stdout, "stderr": "", "missing": missing, "timed_out": False}


def run(expected: Mapping[str, Any], probes: Mapping[str, Any]) -> dict[str, CheckResult]:
    """Hand-written expectations (plain data, as in a node's expectation document)
    evaluated against one gathered document."""
    document = {
        "schema": 1,
        "node": NODE,
        "expectations": [
            {"check": check, "expected": value, "spec_field": "hand-written", "fix": "fix {node}"}
            for check, value in expected.items()
        ],
    }
    node = NodeExpectations.from_dict(json.loads(json.dumps(document)))
    facts = node_facts(NODE, {"schema": 1, "args": {"units": []}, "probes": dict(probes)})
    return {r.check: r for r in evaluate_node(node, facts, view_of(facts, NODE))}


def outcome(result: CheckResult) -> tuple[str, str]:
    return result.status, result.actual


def each(names: list[str], value: Any) -> dict[str, Any]:
    return {"names": names, "value": value}


# --- derived from the spec ---------------------------------------------------------------


def expectations(loaded: Any, **defaults: Any) -> dict[str, Any]:
    result = plan_loaded(loaded)
    assert result.plan is not None
    inventory = build_inventory(loaded.spec, loaded.catalog, result.plan)
    cluster_expectations = expect(
        loaded.spec, loaded.catalog, result.plan, inventory, {**load_role_defaults(), **defaults}
    )
    node = cluster_expectations.nodes[0]
    return {e.check: e for e in node.expectations}


def test_expectations_follow_the_spec() -> None:
    found = expectations(
        cluster(nodes=2, profile=gpu_profile(gpu="A100-SXM4-80GB", nic="ConnectX-7", nics=2))
    )
    assert found["gpu.mig"].expected == {"capable": True}
    assert found["gpu.ecc"].expected is True
    model = found["hca.model"].expected
    assert model["value"] == {
        "model": "ConnectX-7",
        "ca_types": ["MT4129", "MT4126"],
        "firmware_major": 28,
    }
    assert len(model["names"]) == 2
    assert found["hca.errors"].expected["value"] == IB_ERROR_LIMITS
    # The rdma role's default minimum firmware is empty: nothing to compare against.
    firmware = found["hca.firmware"]
    assert not firmware.applies
    assert firmware.spec_field == "rdma_firmware_min_version"
    # An L40S cannot be partitioned: N/A for MIG is its answer.
    l40s = expectations(cluster(nodes=2, profile=gpu_profile(gpu="L40S", gpus=4, nics=2)))
    assert l40s["gpu.mig"].expected == {"capable": False}


def test_a_minimum_firmware_is_checked_where_the_rdma_role_has_one() -> None:
    loaded = cluster(nodes=2, profile=gpu_profile(nics=2))
    found = expectations(loaded, rdma_firmware_min_version="28.39.1002")
    assert found["hca.firmware"].applies
    assert found["hca.firmware"].expected["value"] == "28.39.1002"


def test_nodes_without_gpus_or_hcas_and_roce_fabrics_are_not_applicable() -> None:
    # The local container cluster: no GPUs, no compute NICs.
    local = expectations(load_example("local"))
    for check in ("gpu.mig", "gpu.ecc", "hca.model", "hca.firmware", "hca.errors"):
        assert not local[check].applies, check
        assert local[check].reason, check
    # A CPU-only pool of a GPU cluster.
    cpu = expectations(cluster(nodes=2, profile=gpu_profile(gpu=None, nic=None)))
    assert cpu["gpu.mig"].reason.endswith("has no GPUs")
    assert cpu["hca.errors"].reason.endswith("has no compute NICs")
    # RoCE ports keep their errors in the Ethernet counters, not the IB PMA's.
    roce = expectations(cluster(nodes=2, profile=gpu_profile(nics=2), fabric="roce"))
    assert roce["hca.model"].applies
    assert not roce["hca.errors"].applies
    assert roce["hca.errors"].reason == "fabric is roce: no IB port counters"


def test_a_nic_model_without_a_known_ca_type_says_why_it_is_not_checked() -> None:
    loaded = cluster(nodes=2, profile=gpu_profile(nic="ConnectX-6-Dx", nics=2), fabric="roce")
    assert expectations(loaded)["hca.model"].applies
    assert "AWS-EFA" not in HCA_FAMILIES
    custom = cluster(
        nodes=2,
        profile=gpu_profile(nic="Homegrown-400", nics=2),
        catalog={
            "nics": {
                "Homegrown-400": {
                    "speed_gbps": 400,
                    "pcie_gen": 5,
                    "link_layers": ["infiniband"],
                    "power_w": 25,
                    "source": "test",
                }
            }
        },
    )
    skip = expectations(custom)["hca.model"]
    assert not skip.applies
    assert skip.reason == "Homegrown-400 reports no CA type Myriad knows; hca.present checks it"


# --- gpu.mig, gpu.ecc against real nvidia-smi -q -x captures --------------------------------


def test_mig_on_an_a100_capture_fails_and_off_passes(sample: Callable[[str], str]) -> None:
    capable = {"capable": True}
    found = run({"gpu.mig": capable}, {"nvidia_smi": probe(sample(A100))})
    assert outcome(found["gpu.mig"]) == ("fail", "GPU 0 MIG on")
    assert found["gpu.mig"].fix == "fix gpu01"
    # The same capture with MIG disabled, then disabled only until the next reset.
    off = sample(A100).replace("<current_mig>Enabled", "<current_mig>Disabled")
    off = off.replace("<pending_mig>Enabled", "<pending_mig>Disabled")
    assert outcome(run({"gpu.mig": capable}, {"nvidia_smi": probe(off)})["gpu.mig"]) == (
        "pass",
        "off on 1 GPUs",
    )
    pending = sample(A100).replace("<current_mig>Enabled", "<current_mig>Disabled")
    assert outcome(run({"gpu.mig": capable}, {"nvidia_smi": probe(pending)})["gpu.mig"]) == (
        "fail",
        "GPU 0 MIG on after reset",
    )
    leaving = sample(A100).replace("<pending_mig>Enabled", "<pending_mig>Disabled")
    assert outcome(run({"gpu.mig": capable}, {"nvidia_smi": probe(leaving)})["gpu.mig"]) == (
        "fail",
        "GPU 0 MIG on, off after reset",
    )


def test_mig_na_is_the_answer_of_a_gpu_without_mig_only(sample: Callable[[str], str]) -> None:
    # The T4 and the A5000s print MIG mode N/A.
    t4 = run({"gpu.mig": {"capable": False}}, {"nvidia_smi": probe(sample(T4))})
    assert outcome(t4["gpu.mig"]) == ("pass", "not supported on 1 GPUs")
    a5000 = run({"gpu.mig": {"capable": False}}, {"nvidia_smi": probe(sample(A5000))})
    assert outcome(a5000["gpu.mig"]) == ("pass", "not supported on 2 GPUs")
    # Where the spec's GPU has MIG, N/A means the driver did not say: unknown, never a pass.
    unsure = run({"gpu.mig": {"capable": True}}, {"nvidia_smi": probe(sample(T4))})
    assert outcome(unsure["gpu.mig"]) == ("error", "GPU 0: MIG mode not reported")


def test_ecc_from_real_captures(sample: Callable[[str], str]) -> None:
    assert outcome(run({"gpu.ecc": True}, {"nvidia_smi": probe(sample(A100))})["gpu.ecc"]) == (
        "pass",
        "on for 1 GPUs",
    )
    assert run({"gpu.ecc": True}, {"nvidia_smi": probe(sample(T4))})["gpu.ecc"].status == "pass"
    # The workstation A5000s run with ECC off.
    assert outcome(run({"gpu.ecc": True}, {"nvidia_smi": probe(sample(A5000))})["gpu.ecc"]) == (
        "fail",
        "GPU 0 ECC off, GPU 1 ECC off",
    )
    # ECC turned off with nvidia-smi -e 0 and not yet reset: off after the next reset.
    pending = sample(A100).replace("<pending_ecc>Enabled", "<pending_ecc>Disabled")
    assert outcome(run({"gpu.ecc": True}, {"nvidia_smi": probe(pending)})["gpu.ecc"]) == (
        "fail",
        "GPU 0 ECC on, off after reset",
    )
    coming = sample(A5000).replace("<pending_ecc>Disabled", "<pending_ecc>Enabled")
    assert run({"gpu.ecc": True}, {"nvidia_smi": probe(coming)})["gpu.ecc"].actual == (
        "GPU 0 ECC off, on after reset, GPU 1 ECC off, on after reset"
    )


def test_gpu_mig_and_ecc_of_a_node_whose_driver_does_not_answer() -> None:
    broken = probe("NVIDIA-SMI has failed because it couldn't communicate with the driver.\n", 9)
    found = run({"gpu.mig": {"capable": True}, "gpu.ecc": True}, {"nvidia_smi": broken})
    for check in ("gpu.mig", "gpu.ecc"):
        assert found[check].status == "fail"
        assert "exited 9" in found[check].actual


# --- hca.model, hca.firmware against real ibstat captures --------------------------------


def cx7(names: list[str]) -> dict[str, Any]:
    model, firmware = HCA_FAMILIES["ConnectX-7"]
    return each(names, {"model": "ConnectX-7", "ca_types": list(model), "firmware_major": firmware})


def test_hca_model_of_a_connectx7_node(sample: Callable[[str], str]) -> None:
    found = run({"hca.model": cx7(CX7_DEVICES)}, {"ibstat": probe(sample(IBSTAT_CX7))})
    assert outcome(found["hca.model"]) == ("pass", "ConnectX-7 on 8 (MT4129 fw 28.41.1000)")
    # The node's BlueField-3 (mlx5_bond_0, MT41692, firmware 32.x) is not a ConnectX-7.
    bond = run({"hca.model": cx7(["mlx5_0", "mlx5_bond_0"])}, {"ibstat": probe(sample(IBSTAT_CX7))})
    assert outcome(bond["hca.model"]) == ("fail", "mlx5_bond_0 MT41692 fw 32.38.3056")


def test_hca_model_behind_shared_vf_ids_is_told_by_the_firmware(
    sample: Callable[[str], str],
) -> None:
    # Every port of this VM is an MT4126 VF; firmware 28.x is ConnectX-7's, 22.x (mlx5_0,
    # the Ethernet port) ConnectX-6 Dx's.
    names = [f"mlx5_{i}" for i in range(9)]
    found = run({"hca.model": cx7(names)}, {"ibstat": probe(sample(IBSTAT_VF))})
    assert outcome(found["hca.model"]) == ("fail", "mlx5_0 MT4126 fw 22.35.2302")
    ib_only = run({"hca.model": cx7(names[1:])}, {"ibstat": probe(sample(IBSTAT_VF))})
    assert outcome(ib_only["hca.model"]) == ("pass", "ConnectX-7 on 8 (MT4126 fw 28.37.1014)")
    # Azure's ConnectX-6 VFs (MT4124, firmware 20.x) against a ConnectX-7 spec, and their own.
    azure = [f"mlx5_{i}" for i in range(8)]
    wrong = run({"hca.model": cx7(azure)}, {"ibstat": probe(sample(IBSTAT_CX6_VF))})
    assert wrong["hca.model"].status == "fail"
    assert wrong["hca.model"].actual.startswith("mlx5_0 MT4124 fw 20.41.1000, mlx5_1 MT4124")
    types, major = HCA_FAMILIES["ConnectX-6"]
    cx6 = each(azure, {"model": "ConnectX-6", "ca_types": list(types), "firmware_major": major})
    right = run({"hca.model": cx6}, {"ibstat": probe(sample(IBSTAT_CX6_VF))})
    assert outcome(right["hca.model"]) == ("pass", "ConnectX-6 on 8 (MT4124 fw 20.41.1000)")


def test_hca_firmware_against_the_minimum(sample: Callable[[str], str]) -> None:
    captured = {"ibstat": probe(sample(IBSTAT_CX7))}
    ok = run({"hca.firmware": each(CX7_DEVICES, "28.39.1002")}, captured)
    assert outcome(ok["hca.firmware"]) == ("pass", "28.41.1000")
    # Compared as numbers: 28.41.1000 is older than 28.41.10000 and than 28.100.0.
    for minimum in ("28.41.10000", "28.100.0"):
        old = run({"hca.firmware": each(CX7_DEVICES[:2], minimum)}, captured)
        assert outcome(old["hca.firmware"]) == ("fail", "mlx5_0 28.41.1000, mlx5_1 28.41.1000")
    equal = run({"hca.firmware": each(["mlx5_0"], "28.41.1000")}, captured)
    assert equal["hca.firmware"].status == "pass"
    bad = run({"hca.firmware": each(["mlx5_0"], "latest")}, captured)
    assert outcome(bad["hca.firmware"]) == (
        "error",
        "rdma_firmware_min_version 'latest' is not a version",
    )


# --- hca.errors from the sysfs tree, read by the gatherer ---------------------------------


def gathered_sysfs(root: Path) -> dict[str, Any]:
    return sysfs_infiniband(str(root))


@pytest.fixture
def sysfs_root(tmp_path: Path, samples_dir: Path) -> Path:
    """The real sysfs capture (ConnectX-3 mlx4_0, iWARP i40iw0) under a fake node root."""
    shutil.copytree(samples_dir / SYSFS_IB, tmp_path / "sys/class/infiniband")
    return tmp_path


def counters_of(root: Path, device: str = "mlx4_0") -> Path:
    return root / "sys/class/infiniband" / device / "ports/1/counters"


def complete(root: Path) -> None:
    """Give mlx4_0's port 1 the counters the kernel has and node_exporter's fixture left out."""
    for name in IB_ERROR_LIMITS:
        path = counters_of(root) / name
        if not path.exists():
            path.write_text("0\n")


def test_the_gatherer_reads_exactly_the_counters_the_check_judges() -> None:
    assert set(IB_ERROR_COUNTERS) == set(IB_ERROR_LIMITS)


def test_error_counters_the_capture_lacks_are_errors(sysfs_root: Path) -> None:
    sysfs = {"sysfs_infiniband": gathered_sysfs(sysfs_root)}
    found = run({"hca.errors": each(["mlx4_0"], IB_ERROR_LIMITS)}, sysfs)
    # node_exporter's fixture keeps 7 of port 1's 12 error counters: the others are unknown.
    assert found["hca.errors"].status == "error"
    assert found["hca.errors"].actual == (
        "mlx4_0 symbol_error, local_link_integrity_errors, excessive_buffer_overrun_errors, "
        "port_rcv_remote_physical_errors, port_rcv_switch_relay_errors, VL15_dropped "
        "not reported"
    )
    # The iWARP device has no Performance Management Agent: every counter reads N/A.
    iwarp = run({"hca.errors": each(["i40iw0"], IB_ERROR_LIMITS)}, sysfs)
    assert outcome(iwarp["hca.errors"]) == ("error", "i40iw0 counters N/A (the port has no PMA)")


def test_error_counters_within_and_beyond_their_limits(sysfs_root: Path) -> None:
    complete(sysfs_root)
    expected = {"hca.errors": each(["mlx4_0"], IB_ERROR_LIMITS)}
    found = run(expected, {"sysfs_infiniband": gathered_sysfs(sysfs_root)})
    # The capture's 5 transmit discards are below the limit of 100, and shown.
    assert outcome(found["hca.errors"]) == (
        "pass",
        "within limits on 1 (mlx4_0 port_xmit_discards 5)",
    )
    counters = counters_of(sysfs_root)
    (counters / "symbol_error").write_text("10\n")
    at_limit = run(expected, {"sysfs_infiniband": gathered_sysfs(sysfs_root)})
    assert at_limit["hca.errors"].status == "pass"
    (counters / "symbol_error").write_text("11\n")
    (counters / "link_downed").write_text("1\n")
    (counters / "port_xmit_discards").write_text("101\n")
    found = run(expected, {"sysfs_infiniband": gathered_sysfs(sysfs_root)})
    assert outcome(found["hca.errors"]) == (
        "fail",
        "mlx4_0 link_downed 1, mlx4_0 symbol_error 11, mlx4_0 port_xmit_discards 101",
    )
    assert found["hca.errors"].fix == "fix gpu01"


def test_hca_model_and_error_counters_without_sysfs(sample: Callable[[str], str]) -> None:
    # ibstat stands in for the port state, but only sysfs has the counters.
    found = run(
        {"hca.model": cx7(CX7_DEVICES), "hca.errors": each(CX7_DEVICES, IB_ERROR_LIMITS)},
        {
            "ibstat": probe(sample(IBSTAT_CX7)),
            "sysfs_infiniband": probe(
                rc=None, missing=True, stdout="/sys/class/infiniband does not exist"
            ),
        },
    )
    assert found["hca.model"].status == "pass"
    assert found["hca.errors"].status == "fail"


def test_sysfs_model_of_the_connectx3_capture(sysfs_root: Path) -> None:
    found = run({"hca.model": cx7(["mlx4_0"])}, {"sysfs_infiniband": gathered_sysfs(sysfs_root)})
    assert outcome(found["hca.model"]) == ("fail", "mlx4_0 MT4099 fw 2.31.5050")


# --- the counter parser ------------------------------------------------------------------


def sample_files(samples_dir: Path) -> dict[str, str]:
    base = samples_dir / SYSFS_IB
    return {
        str(path.relative_to(base)): path.read_text()
        for path in sorted(base.rglob("*"))
        if path.is_file()
    }


def test_counter_parser_reads_the_sysfs_capture(samples_dir: Path) -> None:
    counters = parse_sysfs_counters(sample_files(samples_dir))
    assert counters["mlx4_0"][1]["port_xmit_discards"] == 5
    assert counters["mlx4_0"][1]["port_xmit_wait"] == 4294967295
    assert counters["mlx4_0"][2]["link_downed"] == 0
    assert set(counters["i40iw0"][1].values()) == {None}
    # counters_ext/ holds traffic counters only, and is not read as counters/.
    assert "port_rcv_data_64" not in counters["mlx4_0"][1]


@pytest.mark.parametrize("value", ["-1", "12abc", "", "0x10", "\u00b2"])
def test_counter_parser_refuses_what_is_not_a_count(value: str) -> None:
    with pytest.raises(ParseFailure, match="counter is not a number"):
        parse_sysfs_counters({"mlx5_0/ports/1/counters/symbol_error": value})
