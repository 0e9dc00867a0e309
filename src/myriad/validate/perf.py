"""`myriad validate --perf`: measured bandwidth against the plan's figures (real clusters).

Two measurements, each gated at GATE_FRACTION of the plan's expectation (REFERENCE.md:
operators gate at 0.90-0.95 x the expected figure at one large message size):

- nccl-tests `all_reduce_perf` from 8 GB to 16 GB, one GPU per rank: on pairs of compute
  nodes with `NCCL_ALGO=Ring` (a bad node shows up in its pair), then across all the
  selected nodes; busbw at the largest size against the plan's inter-node busbw. Launched
  with `srun` from a Slurm controller, or `mpirun` from the first node elsewhere.
- perftest `ib_write_bw` per rail between the nodes of each pair (the second node serves,
  the first sends, every rail at once on its own TCP port), against the plan's RDMA figure
  per NIC port.

Commands and parsers are pure and tested on representative output; running them needs
GPUs, HCAs and the tools on the nodes, so `run_perf` is for real clusters only.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from myriad.node.checks import CheckResult, Status
from myriad.node.parsers import (
    ParseFailure,
    PerftestRow,
    compress_hostlist,
    parse_nccl_tests,
    parse_perftest_bw,
)
from myriad.plan.model import NodeBandwidth
from myriad.plan.ports import ports
from myriad.render.inventory import Inventory
from myriad.runner import TUNED_WITHOUT_MITOGEN, run_playbook
from myriad.spec.loader import LoadedSpec

GATE_FRACTION = 0.9
MIN_BYTES, MAX_BYTES = "8G", "16G"
ALLREDUCE = "all_reduce_perf"
IB_WRITE_BW = "ib_write_bw"
IB_MESSAGE_BYTES = 1 << 20
IB_SECONDS = 10
IB_QPS = 4
IB_FIRST_PORT = 18515
MARK = "=== myriad-perf "


# --- nccl-tests ---------------------------------------------------------------------------
# The table is read by the node package's parser (myriad.node.parsers.nccl_tests), the same one
# `myriad accept` uses; `busbw_gbs` is busbw at the largest message.


def allreduce_srun(
    nodes: Sequence[str],
    gpus_per_node: int,
    *,
    ring: bool,
    mpi: str = "pmix",
    binary: str = ALLREDUCE,
) -> list[str]:
    """One rank per GPU (`-g 1`), the nodes named exactly, NCCL_ALGO=Ring for pairs."""
    export = "ALL,NCCL_ALGO=Ring" if ring else "ALL"
    return [
        "srun",
        f"--nodes={len(nodes)}",
        f"--nodelist={compress_hostlist(nodes)}",
        f"--ntasks-per-node={gpus_per_node}",
        f"--gpus-per-node={gpus_per_node}",
        f"--mpi={mpi}",
        f"--export={export}",
        binary,
        *_size_args(),
    ]


def allreduce_mpirun(
    nodes: Sequence[str], gpus_per_node: int, *, ring: bool, binary: str = ALLREDUCE
) -> list[str]:
    env = ["-x", "NCCL_ALGO=Ring"] if ring else []
    return [
        "mpirun",
        "-np",
        str(len(nodes) * gpus_per_node),
        "-H",
        ",".join(f"{node}:{gpus_per_node}" for node in nodes),
        "--bind-to",
        "numa",
        *env,
        binary,
        *_size_args(),
    ]


def _size_args() -> list[str]:
    return ["-b", MIN_BYTES, "-e", MAX_BYTES, "-f", "2", "-g", "1"]


# --- ib_write_bw ---------------------------------------------------------------------------


def parse_ib_write_bw(text: str) -> PerftestRow:
    """perftest's result at the largest message size (myriad.node.parsers.perftest reads it)."""
    return parse_perftest_bw(text).largest


def ib_write_bw(
    device: str, tcp_port: int, *, gid_index: int | None, server: str | None = None
) -> list[str]:
    """Server side without `server`, client side with the server's address."""
    argv = [
        IB_WRITE_BW,
        "-d",
        device,
        "-i",
        "1",
        "-p",
        str(tcp_port),
        "-s",
        str(IB_MESSAGE_BYTES),
        "-D",
        str(IB_SECONDS),
        "-q",
        str(IB_QPS),
        "-F",
        "--report_gbits",
    ]
    if gid_index is not None:
        argv += ["-x", str(gid_index)]
    return [*argv, server] if server else argv


# --- gates --------------------------------------------------------------------------------------


def gate(
    node: str,
    check: str,
    measured_gbs: float | None,
    expected_gbs: float,
    spec_field: str,
    *,
    problem: str = "",
    fraction: float = GATE_FRACTION,
) -> CheckResult:
    floor = fraction * expected_gbs
    expected = f">= {floor:.1f} GB/s ({fraction:.0%} of the planned {expected_gbs:.1f} GB/s)"
    fix = (
        "compare with `myriad validate` node checks (HCA rate, PCIe links, NVLink); rerun "
        "with NCCL_DEBUG=INFO to see the transports NCCL chose"
    )
    if measured_gbs is None:
        return CheckResult(node, check, "error", expected, problem or "no result", spec_field, fix)
    actual = f"{measured_gbs:.1f} GB/s ({measured_gbs / expected_gbs:.0%} of plan)"
    status: Status = "pass" if measured_gbs >= floor else "fail"
    return CheckResult(
        node, check, status, expected, actual, spec_field, "" if status == "pass" else fix
    )


def sections(text: str) -> dict[str, str]:
    """Split a script's output at `=== myriad-perf <name> ===` markers."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith(MARK) and line.rstrip().endswith("==="):
            current = found.setdefault(line[len(MARK) :].rstrip(" ="), [])
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines) + "\n" for name, lines in found.items()}


# --- scripts -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PerfPlan:
    """What --perf runs, decided from spec + plan + inventory."""

    launcher: str
    launch_host: str
    nodes: tuple[str, ...]
    gpus_per_node: int
    pairs: tuple[tuple[str, str], ...]
    rails: tuple[str, ...]
    gid_index: int | None
    bandwidth: NodeBandwidth
    nic_ports: int


def _background(name: str, argv: Sequence[str], log: str) -> str:
    return f"( {shlex.join(argv)} ) > {log}/{name} 2>&1 &"


def _dump(names: Sequence[str], log: str) -> str:
    return "\n".join(f"echo '{MARK}{n} ==='; cat {log}/{n}" for n in names)


def allreduce_script(perf: PerfPlan) -> str:
    """Pairs at once (disjoint nodes), then the whole selection; outputs between markers."""
    build = allreduce_srun if perf.launcher == "srun" else allreduce_mpirun
    pair_names = [f"allreduce {a}+{b}" for a, b in perf.pairs]
    lines = ["#!/bin/bash", "log=$(mktemp -d)"]
    lines += [
        _background(f"p{i}", build(pair, perf.gpus_per_node, ring=True), "$log")
        for i, pair in enumerate(perf.pairs)
    ]
    lines.append("wait")
    lines.append(_background("all", build(perf.nodes, perf.gpus_per_node, ring=False), "$log"))
    lines.append("wait")
    for i, name in enumerate(pair_names):
        lines.append(f"echo '{MARK}{name} ==='; cat $log/p{i}")
    lines.append(f"echo '{MARK}allreduce all ==='; cat $log/all")
    lines.append('rm -rf "$log"')
    return "\n".join(lines) + "\n"


def ib_server_script(perf: PerfPlan) -> str:
    """Start one server per rail in the background and return: each serves one client
    and exits, or is stopped by `timeout` if no client comes."""
    limit = IB_SECONDS * 12
    servers = [
        f"timeout {limit} "
        + shlex.join(ib_write_bw(device, IB_FIRST_PORT + rail, gid_index=perf.gid_index))
        + " &"
        for rail, device in enumerate(perf.rails)
    ]
    detached = shlex.quote(" ".join([*servers, "wait"]))
    return f"#!/bin/bash\nsetsid bash -c {detached} > /dev/null 2>&1 < /dev/null &\n"


def ib_client_script(perf: PerfPlan, server_address: str) -> str:
    lines = ["#!/bin/bash", "log=$(mktemp -d)", "sleep 3  # the servers start listening"]
    names = []
    for rail, device in enumerate(perf.rails):
        argv = ib_write_bw(
            device, IB_FIRST_PORT + rail, gid_index=perf.gid_index, server=server_address
        )
        names.append(device)
        lines.append(_background(device, argv, "$log"))
    lines += ["wait", _dump(names, "$log"), 'rm -rf "$log"']
    return "\n".join(lines) + "\n"


def perf_plan(
    loaded: LoadedSpec,
    bandwidth: Sequence[NodeBandwidth],
    inventory: Inventory,
    selected: Sequence[str],
) -> PerfPlan | None:
    """The GPU compute nodes among `selected` and how to reach them; None without two."""
    spec, catalog = loaded.spec, loaded.catalog
    gpu_pools = [
        pool
        for pool in spec.pools_with_role("compute")
        if spec.profiles[pool.profile].gpu is not None
    ]
    if not gpu_pools:
        return None
    pool = gpu_pools[0]  # one shape per run: figures differ between profiles
    chosen = set(selected)
    nodes = tuple(n for n in pool.hostnames() if n in chosen)
    if len(nodes) < 2:
        return None
    profile = spec.profiles[pool.profile]
    assert profile.gpu is not None
    figures = next(b for b in bandwidth if b.profile == pool.profile)
    compute = ports(profile, catalog, "compute", spec.network.fabric)
    group = profile.nics.compute
    nic_ports = 1 if group is None else catalog.nics[group.model].ports
    controllers = list(inventory.groups.get("controller", ()))
    slurm = spec.software.orchestrator == "slurm" and controllers
    return PerfPlan(
        launcher="srun" if slurm else "mpirun",
        launch_host=controllers[0] if slurm else nodes[0],
        nodes=nodes,
        gpus_per_node=profile.gpu.count,
        pairs=tuple(zip(nodes[0::2], nodes[1::2], strict=False)),
        rails=tuple(p.device for p in compute) if spec.network.fabric != "ethernet" else (),
        gid_index=spec.network.roce_qos.gid_index if spec.network.fabric == "roce" else None,
        bandwidth=figures,
        nic_ports=nic_ports,
    )


def results_from_output(perf: PerfPlan, outputs: Mapping[str, str]) -> list[CheckResult]:
    """Gate every measurement; `outputs` maps section names to their text."""
    results: list[CheckResult] = []
    busbw = perf.bandwidth.inter_node_busbw_gbs
    field = f"profiles.{perf.bandwidth.profile}.nics.compute (plan: inter-node busbw)"
    names = [(f"allreduce {a}+{b}", f"{a}+{b}") for a, b in perf.pairs]
    names.append(("allreduce all", compress_hostlist(perf.nodes)))
    for section, node in names:
        check = "perf.allreduce-pair" if section != "allreduce all" else "perf.allreduce-all"
        if busbw is None:
            continue
        measured, problem = _measure(outputs.get(section), parse_nccl_tests, "busbw_gbs")
        results.append(gate(node, check, measured, busbw, field, problem=problem))
    per_port = perf.bandwidth.per_nic_rdma_gbs / max(perf.nic_ports, 1)
    rdma_field = f"profiles.{perf.bandwidth.profile}.nics.compute (plan: RDMA per port)"
    for client, _server in perf.pairs:
        for device in perf.rails:
            text = outputs.get(f"{client} {device}")
            measured, problem = _measure(text, parse_ib_write_bw, "average_gbs")
            check = f"perf.ib-write-bw[{device}]"
            results.append(gate(client, check, measured, per_port, rdma_field, problem=problem))
    return results


def _measure(text: str | None, parse: Any, attribute: str) -> tuple[float | None, str]:
    if text is None:
        return None, "the test produced no output"
    try:
        return float(getattr(parse(text), attribute)), ""
    except ParseFailure as exc:
        return None, f"could not read the output: {exc.reason}"


# --- running (real clusters) ----------------------------------------------------------------


def _playbook(plays: list[dict[str, Any]], path: Path) -> Path:
    path.write_text(yaml.safe_dump(plays, sort_keys=False), encoding="utf-8")
    return path


def _script_play(name: str, hosts: Sequence[str], script: str) -> dict[str, Any]:
    task: dict[str, Any] = {
        "name": name,
        "ansible.builtin.script": {"cmd": script, "executable": "/bin/bash"},
        "changed_when": False,
    }
    return {"name": name, "hosts": ",".join(hosts), "gather_facts": False, "tasks": [task]}


def run_perf(
    perf: PerfPlan, inventory: Inventory, inventory_dir: Path, run_dir: Path
) -> list[CheckResult]:
    """Run the measurements through Ansible from generated scripts in `run_dir`."""
    scripts = run_dir / "perf"
    scripts.mkdir(parents=True, exist_ok=True)
    plays = []
    allreduce = scripts / "allreduce.sh"
    allreduce.write_text(allreduce_script(perf), encoding="utf-8")
    if perf.rails:
        (scripts / "ib_server.sh").write_text(ib_server_script(perf), encoding="utf-8")
        servers = [server for _client, server in perf.pairs]
        plays.append(
            _script_play("Start ib_write_bw servers", servers, str(scripts / "ib_server.sh"))
        )
        for client, server in perf.pairs:
            address = str(inventory.host_vars[server].get("myriad_address", server))
            path = scripts / f"ib_client_{client}.sh"
            path.write_text(ib_client_script(perf, address), encoding="utf-8")
        # One play: every pair's client runs at the same time, each from its own script.
        clients = [client for client, _server in perf.pairs]
        plays.append(
            _script_play(
                "Run ib_write_bw clients",
                clients,
                str(scripts) + "/ib_client_{{ inventory_hostname }}.sh",
            )
        )
    plays.append(_script_play("Run all_reduce_perf", [perf.launch_host], str(allreduce)))
    outputs: dict[str, str] = {}

    def collect(event: Mapping[str, Any]) -> None:
        if event.get("event") != "runner_on_ok":
            return
        data = event.get("event_data") or {}
        stdout = str((data.get("res") or {}).get("stdout") or "")
        for name, text in sections(stdout).items():
            key = name if name.startswith("allreduce") else f"{data.get('host')} {name}"
            outputs[key] = text

    run_playbook(
        _playbook(plays, scripts / "perf.yml"),
        inventory_dir / "hosts.yml",
        run_dir,
        hosts=len(perf.nodes) + 1,
        on_event=collect,
        tuning=TUNED_WITHOUT_MITOGEN,
    )
    return results_from_output(perf, outputs)
