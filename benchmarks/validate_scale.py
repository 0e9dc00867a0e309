"""Evaluate every check for 12,500 generated nodes (the h100-100k example); time and memory.

Target (issue #7): evaluating the checks of 12,500 nodes' facts in under 2 s. The facts are
generated as typed facts, distinct objects per node (8 GPUs, 18 NVLink links each, 9 HCAs,
PCIe functions, QoS per rail, ...), as `myriad.node.facts` would make them from what
the nodes sent; one node in a hundred carries a drift so that failures are exercised too.
The controller's view holds all 12,500 Kubernetes nodes. Parsing one node's gathered
document is measured apart (it happens while gathering, as each document arrives).

Run: .venv/bin/python benchmarks/validate_scale.py
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import time
import tracemalloc
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from conditions import measured

from myriad.node.checks import (
    CheckResult,
    ClusterExpectations,
    NodeExpectations,
    evaluate,
)
from myriad.node.facts import (
    Fact,
    HcaLink,
    HostsFile,
    Memlock,
    Mount,
    NodeFacts,
    PciFunction,
    TimeSync,
    node_facts,
    ok,
)
from myriad.node.gather import DEFAULT_UNITS
from myriad.node.parsers import (
    Bond,
    BondSlave,
    Gpu,
    IbDevice,
    IbPort,
    IbReport,
    Interface,
    KubeNode,
    MlnxQos,
    NvidiaSmiReport,
    NvlinkGpu,
    NvlinkLink,
    NvlinkStatus,
    PcieLink,
)
from myriad.plan.pipeline import PlanResult, plan_loaded
from myriad.render.inventory import Inventory, build_inventory
from myriad.spec import load_spec
from myriad.validate.expectations import expect, load_role_defaults

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "inventories" / "h100-100k" / "cluster.yaml"
SAMPLES = ROOT / "tests" / "samples"
DRIFT_EVERY = 100
MISSING: Fact[Any] = Fact("missing", detail="not installed")
LIMITS = "*  -  memlock  unlimited\nroot  -  memlock  unlimited\n"


def _expected(node: NodeExpectations) -> dict[str, Any]:
    return {e.check: e.expected for e in node.expectations if e.applies}


def _gpus(name: str, count: int, driver: str, drift: bool) -> NvidiaSmiReport:
    gpus = tuple(
        Gpu(
            index=i,
            minor_number=i,
            product_name="NVIDIA H100 80GB HBM3",
            uuid=f"GPU-{hash((name, i)) & 0xFFFFFFFF:08x}-0000-0000-0000-{i:012x}",
            pci_bus_id=f"00000000:{0x18 + i:02X}:00.0",
            memory_total_mib=81559,
            persistence_mode=not (drift and i == 3),
            mig_current=False,
            mig_pending=False,
            ecc_current=True,
            ecc_pending=True,
            retired_pages_pending=None,
            remapped_rows_pending=False,
            remapped_rows_failure=False,
            remapped_rows_correctable=0,
            remapped_rows_uncorrectable=0,
            pcie=PcieLink(gen_current=1, gen_max=5, width_current=16, width_max=16),
        )
        for i in range(count)
    )
    return NvidiaSmiReport(driver, "12.8", count, "12.0", gpus)


def _nvlink(report: NvidiaSmiReport, links: int, drift: bool) -> NvlinkStatus:
    return NvlinkStatus(
        tuple(
            NvlinkGpu(
                gpu.index,
                gpu.product_name,
                gpu.uuid,
                tuple(
                    NvlinkLink(link, 26.562, drift and gpu.index == 5 and link == 17)
                    for link in range(links)
                ),
                False,
            )
            for gpu in report.gpus
        )
    )


def _bond(expected: dict[str, Any]) -> Bond:
    """The storage bond as /proc/net/bonding shows it on a healthy node."""
    members = tuple(
        BondSlave(name, "up", expected["speed_mbps"], "full", 0, None, 1)
        for name in expected["slaves"]
    )
    return Bond(
        None,
        expected["mode"],
        "IEEE 802.3ad Dynamic link aggregation",
        "layer3+4",
        "up",
        100,
        0,
        0,
        "fast",
        1,
        None,
        None,
        members,
    )


def node_facts_for(node: NodeExpectations, drift: bool) -> NodeFacts:
    """What a healthy (or, with `drift`, slightly broken) H100 node of the example reports."""
    e = _expected(node)
    name = node.node
    devices: list[str] = e.get("hca.present", [])
    pci_of = {d: f"0000:{0x20 + i:02x}:00.0" for i, d in enumerate(devices)}
    for device, _link in e.get("nic.pcie", []):
        pci_of.setdefault(device, f"0000:{0x40 + len(pci_of):02x}:00.0")
    rate = e["hca.rate"]["value"] if "hca.rate" in e else 0
    hcas = IbReport(
        tuple(
            IbDevice(
                device,
                "MT4129",
                "28.41.1000",
                "0",
                f"0x{hash((name, device)) & 0xFFFFFFFFFFFF:016x}",
                None,
                "MT_0000000838",
                (
                    IbPort(
                        1,
                        "ACTIVE" if not (drift and device == "mlx5_2") else "DOWN",
                        4 if not (drift and device == "mlx5_2") else 1,
                        "LinkUp",
                        5,
                        float(rate),
                        "Ethernet",
                    ),
                ),
            )
            for device in pci_of
        )
    )
    rails = e.get("roce.trust")
    netdevs = rails["names"] if rails else ()
    qos = {
        netdev: ok(
            MlnxQos(
                "OS controlled",
                "dscp",
                (3,),
                None,
                {dscp: dscp >> 3 for dscp in range(64)},
                7,
                (),
            )
        )
        for netdev in netdevs
    }
    bond = e.get("bond.mode")
    interfaces = {
        netdev: Interface(
            i + 2, netdev, 9000, "UP", ("UP", "LOWER_UP"), None, None, None, "ether", None
        )
        for i, netdev in enumerate([*netdevs, *([bond["name"]] if bond else [])])
    }
    driver = e.get("gpu.driver") or {"branch": "580", "version": None}
    version = driver["version"] or f"{driver['branch']}.95.05"
    gpus = _gpus(name, e["gpu.count"], version, drift) if "gpu.count" in e else None
    hosts = e["hosts.file"]
    units = {unit: "active" for unit in DEFAULT_UNITS}
    return NodeFacts(
        host=name,
        hostname=ok(name),
        gpus=ok(gpus) if gpus else MISSING,
        nvlink=ok(_nvlink(gpus, e["gpu.nvlink"], drift)) if gpus and "gpu.nvlink" in e else MISSING,
        hcas=ok(hcas),
        hca_links=ok({d: HcaLink(p, ()) for d, p in pci_of.items()}),
        pci=ok(
            {
                p: PciFunction(p, "0x15b3", "0x020000", 32.0, 16, 32.0, 16, 0)
                for p in pci_of.values()
            }
        ),
        qos=qos,
        bonds=ok({bond["name"]: _bond(bond)}) if bond else MISSING,
        # Each rail holds the address the plan gives it (`ip -j -4 addr`).
        addresses=ok({netdev: (address,) for netdev, address in e.get("roce.address", {}).items()}),
        links=ok(interfaces),
        docker=MISSING,
        docker_daemon=MISSING,
        containerd=ok(
            {
                "/etc/containerd/conf.d/kubernetes-cri.toml": (
                    'default_runtime_name = "nvidia"\n'
                    '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
                )
            }
        ),
        nccl_conf=ok(e["nccl.conf"]) if "nccl.conf" in e else MISSING,
        memlock=ok(Memlock("unlimited", "unlimited", "unlimited")),
        limits=ok({"/etc/security/limits.d/90-myriad.conf": LIMITS}),
        units=ok(units),
        modules=ok(frozenset({"nvidia", "nvidia_peermem", "mlx5_core", "mlx5_ib"})),
        # The node's copy of the managed block: equal to, not the same object as, the
        # expected one until facts.py interns it (as it does for gathered documents).
        hosts_file=ok(HostsFile(hosts["text"], f"127.0.0.1 localhost\n127.0.1.1 {name}\n")),
        mount=ok(Mount("/lustre", "10.32.0.2@tcp:/scratch", "lustre", "rw,flock")),
        time=ok(TimeSync(True, "chrony: 0A000001")),
        seconds=1.2,
    )


def kube_view(expectations: ClusterExpectations) -> tuple[KubeNode, ...]:
    nodes = []
    for node in expectations.nodes:
        if node.role not in ("controller", "compute"):
            continue
        gpus = 8 if node.role == "compute" else None
        nodes.append(
            KubeNode(node.node, True, "True", "KubeletReady", False, gpus, gpus, "v1.31.4", {}, ())
        )
    return tuple(nodes)


def generate(
    result: PlanResult, inventory: Inventory
) -> tuple[ClusterExpectations, dict[str, NodeFacts]]:
    assert result.plan is not None
    expectations = expect(
        result.loaded.spec, result.loaded.catalog, result.plan, inventory, load_role_defaults()
    )
    facts: dict[str, NodeFacts] = {}
    for i, node in enumerate(expectations.nodes):
        facts[node.node] = node_facts_for(node, drift=i % DRIFT_EVERY == DRIFT_EVERY - 1)
    first = expectations.controllers[0]
    controller = facts[first]
    facts[first] = replace(controller, kube_nodes=ok(kube_view(expectations)))
    return expectations, facts


def parse_one_document() -> float | None:
    """Seconds to read one GPU node's gathered document (real nvidia-smi capture inside)."""
    xml = SAMPLES / "nvidia-smi-q-x" / "rtx-a5000-x2_v13_drv590.44.01.xml"
    if not xml.is_file():
        return None
    probe = {"rc": 0, "stdout": xml.read_text(), "stderr": "", "missing": False, "timed_out": False}
    document = json.loads(
        json.dumps({"schema": 1, "args": {"units": []}, "probes": {"nvidia_smi": probe}})
    )
    start = time.perf_counter()
    for _ in range(20):
        node_facts("gpu00001", document)
    return (time.perf_counter() - start) / 20


def count(results: list[CheckResult]) -> Mapping[str, int]:
    counted: dict[str, int] = {}
    for result in results:
        counted[result.status] = counted.get(result.status, 0) + 1
    return counted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="evaluation runs; the best counts")
    args = parser.parse_args()
    start = time.perf_counter()
    result = plan_loaded(load_spec(SPEC))
    assert result.plan is not None
    inventory = build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)
    plan_seconds = time.perf_counter() - start
    start = time.perf_counter()
    expectations, facts = generate(result, inventory)
    generate_seconds = time.perf_counter() - start
    start = time.perf_counter()
    expect(result.loaded.spec, result.loaded.catalog, result.plan, inventory, load_role_defaults())
    expect_seconds = time.perf_counter() - start
    best = float("inf")
    results: list[CheckResult] = []
    for _ in range(args.repeat):
        results = []
        gc.collect()
        start = time.perf_counter()
        results = evaluate(expectations, facts, {})
        best = min(best, time.perf_counter() - start)
    gc.collect()
    tracemalloc.start()
    evaluate(expectations, facts, {})
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    parse = parse_one_document()
    counted = count(results)
    print(f"nodes                       {len(expectations.nodes):>10,}")
    print(f"checks evaluated            {len(results):>10,}  {dict(sorted(counted.items()))}")
    print(f"plan + inventory            {plan_seconds:>10.2f} s")
    print(f"expectations (spec → nodes) {expect_seconds:>10.2f} s")
    print(f"facts generated             {generate_seconds:>10.2f} s  (not part of the target)")
    print(f"evaluate all checks         {best:>10.2f} s  (target < 2 s; best of {args.repeat})")
    print(f"  per node                  {best / len(expectations.nodes) * 1e6:>10.1f} µs")
    print(f"peak memory of evaluation   {peak / 2**20:>10.1f} MiB (tracemalloc)")
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"process max RSS             {maxrss:>10.1f} MiB (facts of 12,500 nodes included)")
    if parse is not None:
        print(f"read one gathered document  {parse * 1e3:>10.2f} ms (2-GPU nvidia-smi -q -x)")


if __name__ == "__main__":
    raise SystemExit(measured(main))
