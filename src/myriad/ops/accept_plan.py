"""Which tests `myriad accept` runs, as Slurm job steps, and what a failure's drain says.

Pure: from the level, the nodes under test, the spec's `accept:` section and the plan's
expected figures (`plan/acceptance.py`), the per-node steps each level runs, in order, each
as the `srun` command line that runs it inside the acceptance's reservation. The group tests
of `full` are not listed here: the slow-node search (`plan/slow_nodes.py`) chooses them as it
goes, through a measuring function that submits each as a step.

- `quick`: `dcgmi diag` at `accept.quick_dcgm_level`; all_reduce_perf inside the node over
  NVLink (a server of one GPU has none); ib_write_bw on every rail to a partner in the same
  leaf group (the next node of the group, the last back to the first).
- `full`: `dcgmi diag` at `accept.full_dcgm_level`, then the search's group tests.
- `burn-in`: `dcgmi diag` at `accept.burn_in_dcgm_level`, then `burn_in_cycle`'s steps
  again and again for `accept.burn_in_s` (DCGM with the GPUs sampled beside it), then the
  full level's search.

quick and full also judge issue #28's fail-slow signals: a GPU sample of each node after its
tests (`gpu_sample_problems`: clocks held by a slowdown reason, a PCIe link below its
maximum) and, on InfiniBand and RoCE fabrics, the port counters read before the tests and
after them (`counter_growth`). `waves` groups the steps that may run side by side.

A node that fails is drained with `myriad-accept: ` and the test with its figure, so `myriad
resume` and the health runner see whose drain it is (the convention of `ops/slurm.py`), and
`accept --nodes-from drained` finds the nodes to re-test by that prefix.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from myriad.node.parsers.common import ParseFailure
from myriad.node.parsers.dcgm import parse_dcgmi_diag
from myriad.node.parsers.infiniband import parse_sysfs_counters
from myriad.node.parsers.nccl_tests import parse_nccl_tests
from myriad.node.parsers.nvidia_smi import NvidiaSmiReport, parse_nvidia_smi_xml
from myriad.node.parsers.nvidia_smi_query import GpuQuerySample, parse_query_gpu_csv
from myriad.node.parsers.perftest import parse_perftest_bw
from myriad.ops.slurm import REMEDY_PREFIX
from myriad.plan.acceptance import Expected, ProfileFigures
from myriad.plan.slow_nodes import AcceptTopology
from myriad.spec.accept import Accept
from myriad.spec.health import DEFAULT_COUNTERS

__all__ = [
    "ACCEPT_PREFIX",
    "BURN_IN_FIELDS",
    "COUNTERS_AFTER",
    "COUNTERS_BEFORE",
    "GPU_SAMPLE",
    "LEVELS",
    "SAMPLED_DIAG",
    "SAMPLES_MARK",
    "SLOWDOWN_REASONS",
    "Level",
    "Step",
    "StepResult",
    "burn_in_cycle",
    "burn_in_sample_problems",
    "counter_growth",
    "counters_step",
    "drain_reason",
    "gpu_sample_problems",
    "gpu_sample_step",
    "held_open",
    "is_accept_drain",
    "judge",
    "judge_counters",
    "node_steps",
    "own_step",
    "rdma_argv",
    "read_counters",
    "release_argv",
    "reservation_argv",
    "reservation_name",
    "sampled_diag",
    "select_nodes",
    "waves",
]

Level = Literal["quick", "full", "burn-in"]
# Which nodes a run tests: all, those accept drained, or those back from repair.
NodesFrom = Literal["all", "drained", "repaired"]
LEVELS: tuple[Level, ...] = ("quick", "full", "burn-in")
ACCEPT_PREFIX = "myriad-accept: "
# nccl-tests' sweep: 8 bytes to the 8 GB the expected figures are stated at (REFERENCE.md:
# operators gate at one large message size, 8-16 GB).
NCCL_ARGS = ("-b", "8", "-e", "8G", "-f", "2")
# A run over several nodes is one MPI job, its ranks wired up by Slurm's PMIx, as validate
# --perf launches all_reduce_perf (validate/perf.py, allreduce_srun); without it each node's
# task would run a test of its own.
MPI_ARGS = ("--mpi=pmix",)

# The clock event reasons that hold a loaded GPU's clocks down for a fault of the node
# (NVML, group nvmlClocksEventReasons; DCGM's field constants say what they indicate): HW
# Slowdown (core clocks cut by a factor of 2 or more: temperature too high, an external
# power brake asserted by the power supply, or power draw too high), HW Thermal Slowdown, HW
# Power Brake Slowdown, SW Thermal Slowdown. Not judged: GPU Idle, the application and
# display clock settings and Sync Boost (configuration, not a fault), and SW Power Cap,
# which is the power limit doing its work under a full load (DCGM's own power test drives
# the GPU to it).
SLOWDOWN_REASONS = (
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sw_thermal_slowdown",
)


@dataclass(frozen=True, slots=True)
class Step:
    """One job step: `test` names it in records and drain reasons; `nodes` the nodes it
    runs on (the first is the one judged: for rdma, the sender); `expected` None where the
    tool's own verdict decides (DCGM); `server` the step to start first, in the background,
    and reap after (ib_write_bw's server side on the partner), empty for none; `group` a
    test of several nodes together, which names no one node when it fails."""

    test: str
    nodes: tuple[str, ...]
    argv: tuple[str, ...]
    expected: Expected | None
    server: tuple[str, ...] = ()
    group: bool = False


def reservation_name(accept: Accept, run_id: str) -> str:
    return f"{accept.reservation_prefix}-{run_id}"


def _srun(
    reservation: str, nodes: Sequence[str], gpus: int, tool: Sequence[str]
) -> tuple[str, ...]:
    return (
        "srun",
        f"--reservation={reservation}",
        f"--nodelist={','.join(nodes)}",
        f"--nodes={len(nodes)}",
        "--ntasks-per-node=1",
        *((f"--gpus-per-node={gpus}",) if gpus else ()),
        *MPI_ARGS[: len(MPI_ARGS) if len(nodes) > 1 else 0],
        *tool,
    )


def _partners(topo: AcceptTopology, nodes: Sequence[str]) -> dict[str, str]:
    chosen = set(nodes)
    partner: dict[str, str] = {}
    for group in topo.leaf_groups():
        members = [name for name in group if name in chosen]
        for i, name in enumerate(members):
            if len(members) > 1:
                partner[name] = members[(i + 1) % len(members)]
    return partner


def node_steps(
    level: Level,
    nodes: Sequence[str],
    topo: AcceptTopology,
    figures: Mapping[str, ProfileFigures],
    accept: Accept,
    reservation: str,
    rail_devices: Sequence[str] = (),
    counter_devices: Sequence[str] = (),
) -> tuple[Step, ...]:
    """The per-node steps of `level` for `nodes`: first the port counters of
    `counter_devices` (quick and full), each node's own tests (node by node,
    in the order given), then the RDMA pairs, then (quick and full) a GPU sample of each
    node, so that `waves` can run each node's own tests and samples beside the others'.
    `rail_devices` names each rail's RDMA device (rail i: `rail_devices[i]`); a rail with no
    name gets no ib_write_bw step, since without `-d` the tool would test the first port.
    Last, the counters again, judged against the first reading (`counter_growth`). The
    burn-in samples in each of its cycles (`burn_in_cycle`) instead, and reads no
    counters."""
    partner = _partners(topo, nodes) if level == "quick" else {}
    own: list[Step] = []
    pairs: list[Step] = []
    for name in nodes:
        fig = figures[topo.node(name).profile]
        diag = ("dcgmi", "diag", "-r", str(accept.dcgm_level(level)), "-j")
        own.append(Step("dcgm diag", (name,), _srun(reservation, (name,), fig.gpus, diag), None))
        if level != "quick":
            continue
        if fig.nvlink is not None:
            nccl = ("all_reduce_perf", *NCCL_ARGS, "-g", str(fig.gpus))
            argv = _srun(reservation, (name,), fig.gpus, nccl)
            own.append(Step("nccl all_reduce, one node", (name,), argv, fig.nvlink))
        other = partner.get(name)
        if other is None or fig.rdma_port is None:
            continue
        for rail, device in enumerate(rail_devices[: topo.rails]):
            # The client, on this node, names its partner; the server side, the same command
            # without the host name, runs on the partner first (perftest(1): the server
            # waits for one client, then exits).
            server, client = rdma_argv(reservation, device, name, other)
            pairs.append(Step(f"rdma rail {rail}", (name, other), client, fig.rdma_port, server))
    samples = [gpu_sample_step(GPU_SAMPLE, name, reservation) for name in nodes]
    before, after = [], []
    if counter_devices:
        before = [counters_step(COUNTERS_BEFORE, n, reservation, counter_devices) for n in nodes]
        after = [counters_step(COUNTERS_AFTER, n, reservation, counter_devices) for n in nodes]
    if level == "burn-in":
        return tuple(own)
    return (*before, *own, *pairs, *samples, *after)


def own_step(step: Step) -> bool:
    """A step of one node alone, with no server side: it may run beside other nodes'."""
    return len(step.nodes) == 1 and not step.server and not step.group


def waves(steps: Sequence[Step]) -> tuple[Step | tuple[Step, ...], ...]:
    """`steps` for `ops/accept.py`'s `carry_out`: each run of consecutive own steps as one
    wave (a tuple), which runs every node's steps beside the others' (each node's in their
    order); a step of several nodes, or with a server side, alone, as it measures a link
    that the others' traffic would share."""
    out: list[Step | tuple[Step, ...]] = []
    wave: list[Step] = []
    for step in steps:
        if own_step(step):
            wave.append(step)
            continue
        if wave:
            out.append(tuple(wave))
            wave = []
        out.append(step)
    if wave:
        out.append(tuple(wave))
    return tuple(out)


# The node health runner's per-run growth limits (spec/health.py), as plain names.
COUNTER_LIMITS: Mapping[str, int] = {str(name): limit for name, limit in DEFAULT_COUNTERS.items()}
COUNTERS_BEFORE = "ib counters before"
COUNTERS_AFTER = "ib counters after"


# The node health runner's document on each node (node/health.py, CONFIG): its policy's
# `infiniband` replaces /sys/class/infiniband where set (the twin's nodes point it at a capture).
HEALTH_CONFIG = "/etc/myriad-health/node.json"
_IB_ROOT = """import json
try:
    policy = json.load(open(%r))["policy"]
except (OSError, ValueError, KeyError, TypeError):
    policy = {}
print(policy.get("infiniband") or "/sys/class/infiniband")"""


def counters_step(
    test: str, node: str, reservation: str, devices: Sequence[str], config: str = HEALTH_CONFIG
) -> Step:
    """The port counters of `devices` on `node`, as `grep -rH .` prints sysfs files (one
    `PATH:VALUE` a line), read before the node's tests and after them, the two judged
    together by `counter_growth`. They are read where node health reads them: under its
    document's `infiniband` root where `config` sets one, else /sys/class/infiniband."""
    find_root = shlex.quote(_IB_ROOT % config)
    dirs = " ".join(f"{shlex.quote(device)}/ports/*/counters/" for device in devices)
    script = (
        f"r=$(python3 -I -S -c {find_root} 2>/dev/null) || r=/sys/class/infiniband; "
        f'cd "$r" && grep -rH . {dirs}'
    )
    argv = _srun(reservation, (node,), 0, ("sh", "-c", script))
    return Step(test, (node,), argv, None)


def read_counters(output: str) -> dict[str, dict[int, dict[str, int | None]]]:
    """`counters_step`'s output as `parse_sysfs_counters` reads sysfs; no counter at all is
    no reading."""
    files = {}
    for line in output.splitlines():
        path, sep, value = line.partition(":")
        if sep:
            files[path] = value
    counters = parse_sysfs_counters(files)
    if not counters:
        raise ParseFailure("sysfs port counters", "no port counter in the output")
    return counters


def counter_growth(
    before: Mapping[str, Mapping[int, Mapping[str, int | None]]],
    after: Mapping[str, Mapping[int, Mapping[str, int | None]]],
    limits: Mapping[str, int] = COUNTER_LIMITS,
) -> list[str]:
    """The error counters that grew during the run by more than `limits` allows (the node
    health runner's per-run limits, spec/health.py): each with its readings and growth. A
    counter read before and not after, or the reverse, is no reading of it and is named; one
    read neither time (a port without it, or without a PMA: "N/A (no PMA)") is left out."""
    problems = []
    for device in sorted(set(before) | set(after)):
        for port in sorted(set(before.get(device, {})) | set(after.get(device, {}))):
            then = before.get(device, {}).get(port, {})
            now = after.get(device, {}).get(port, {})
            for counter, limit in limits.items():
                first, last = then.get(counter), now.get(counter)
                if first is None and last is None:
                    continue
                where = f"{device} port {port} {counter}"
                if first is None or last is None:
                    problems.append(f"{where} not read both before and after")
                elif last - first > limit:
                    problems.append(
                        f"{where} {first} -> {last} (+{last - first}, at most +{limit} expected)"
                    )
    return problems


def judge_counters(step: Step, before: str | None, after: str) -> StepResult:
    """`COUNTERS_AFTER` judged against the node's `COUNTERS_BEFORE` output; either unread is
    a failure that says so."""
    try:
        if before is None:
            raise ParseFailure("sysfs port counters", "no reading from before the tests")
        problems = counter_growth(read_counters(before), read_counters(after))
    except ParseFailure as exc:
        return StepResult(step, False, None, f"{ACCEPT_PREFIX}{step.test} could not read: {exc}")
    reason = drain_reason(step, None, problems) if problems else None
    return StepResult(step, not problems, None, reason, tuple(problems))


# Seconds a step's shell waits after a large output before it exits. On the twin's Slurm
# 22.05 the tail of an 8-GPU `nvidia-smi -q -x` (176,177 bytes) was lost in 11 of 30 steps
# whose task exited right after writing it (srun's own output, `-u` and `--output` alike);
# held open by `held_open`, it arrived whole in 30 of 30. slurmstepd closes a step's
# IO once its tasks have exited (mgr.c `_wait_for_io` -> io.c `io_close_all`, tag
# slurm-22-05-8-1). Output cut short still fails its test as `could not read`.
IO_DRAIN_S = 1


def held_open(command: str) -> tuple[str, ...]:
    """`command` in a shell that waits `IO_DRAIN_S` before exiting with its status."""
    return ("sh", "-c", f"{command}; s=$?; sleep {IO_DRAIN_S}; exit $s")


def gpu_sample_step(test: str, node: str, reservation: str) -> Step:
    """`nvidia-smi -q -x` on `node`, judged by `gpu_sample_problems`; some 20 KB a GPU, so
    the shell is held open (`held_open`)."""
    argv = _srun(reservation, (node,), 0, held_open("nvidia-smi -q -x"))
    return Step(test, (node,), argv, None)


GPU_SAMPLE = "gpu sample"


SAMPLED_DIAG = "dcgm diag, sampled"
SAMPLES_MARK = "==myriad-gpu-samples=="
# How often the burn-in samples its GPUs (seconds between nvidia-smi calls): some 700 rows
# a GPU an hour, a few hundred bytes each with the header, read back through srun's output
# at the cycle's end.
BURN_IN_SAMPLE_S = 5
# The fields sampled (`nvidia-smi --help-query-gpu`, driver 590: the H100 capture's list).
# The clock reasons by their old names, which drivers before 535 know and later ones
# still answer to ("clocks_event_reasons.hw_slowdown" or "clocks_throttle_reasons...").
# XIDs are not among them: no --query-gpu field reports one; the kernel log does (node
# health's gpu.xid check).
BURN_IN_FIELDS = (
    "timestamp",
    "index",
    "temperature.gpu",
    "power.draw",
    "clocks.current.sm",
    "clocks.max.sm",
    "utilization.gpu",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "ecc.errors.uncorrected.volatile.total",
    *(f"clocks_throttle_reasons.{reason}" for reason in ("gpu_idle", *SLOWDOWN_REASONS)),
)


def sampled_diag(level: int, every_s: float = BURN_IN_SAMPLE_S) -> tuple[str, ...]:
    """`dcgmi diag -r LEVEL -j` with the GPUs sampled beside it, in one shell on the node: a
    loop runs `nvidia-smi --query-gpu=BURN_IN_FIELDS --format=csv` into a scratch file every
    `every_s` seconds until DCGM ends, and the rows follow DCGM's output after
    `SAMPLES_MARK`; the exit status is DCGM's. The loop stops at a flag file, not a signal:
    a background job of a non-interactive shell ignores SIGINT (POSIX, "Asynchronous
    Lists"), so `nvidia-smi -l`'s own loop, which Ctrl+C ends, could not be stopped that way
    (the test of this shell found it), and a process killed mid-write could lose the rows it
    buffered. Each call prints its header; the parser skips the repeats. An hour's rows run
    to hundreds of KB, so the shell waits `IO_DRAIN_S` before it exits (`held_open`)."""
    query = f"nvidia-smi --query-gpu={','.join(BURN_IN_FIELDS)} --format=csv"
    script = (
        "f=$(mktemp) || exit 97; "
        f'(while [ ! -e "$f.stop" ]; do {query} >>"$f" 2>&1; sleep {every_s:g}; done) & p=$!; '
        f'dcgmi diag -r {level} -j; rc=$?; touch "$f.stop"; wait "$p"; '
        f'echo {SAMPLES_MARK}; cat "$f"; rm -f "$f" "$f.stop"; sleep {IO_DRAIN_S}; exit "$rc"'
    )
    return ("sh", "-c", script)


def burn_in_sample_problems(samples: Sequence[GpuQuerySample]) -> list[str]:
    """What the burn-in's samples show wrong, GPU by GPU, each with its figures: clocks held
    by a slowdown reason in any sample (the first such sample's temperature, power and SM
    clock against its maximum), uncorrected ECC errors that grew from the first sample to
    the last, a PCIe gen below its maximum in a sample of a busy GPU (no GPU Idle reason)."""
    problems = []
    for index in sorted({s.index for s in samples}):
        mine = [s for s in samples if s.index == index]
        where = f"GPU {index}"
        held = [s for s in mine if set(s.reasons_active) & set(SLOWDOWN_REASONS)]
        if held:
            first = held[0]
            reasons = [r for r in SLOWDOWN_REASONS if r in first.reasons_active]
            problems.append(
                f"{where} clocks held by {', '.join(reasons)} in {len(held)} of {len(mine)} "
                f"samples (expected none); first at {first.timestamp}: {_figures(first)}"
            )
        counts = [
            s.ecc_uncorrected_volatile for s in mine if s.ecc_uncorrected_volatile is not None
        ]
        if counts and counts[-1] > counts[0]:
            problems.append(
                f"{where} uncorrected ECC errors {counts[0]} -> {counts[-1]} during the burn-in "
                "(expected no growth)"
            )
        slow = [
            s
            for s in mine
            if "gpu_idle" not in s.reasons_active
            and s.pcie_gen is not None
            and s.pcie_gen_max is not None
            and s.pcie_gen < s.pcie_gen_max
        ]
        if slow:
            problems.append(
                f"{where} PCIe gen {slow[0].pcie_gen} of {slow[0].pcie_gen_max} under load in "
                f"{len(slow)} of {len(mine)} samples"
            )
    return problems


def _figures(sample: GpuQuerySample) -> str:
    def shown(value: float | None, unit: str) -> str:
        return "-" if value is None else f"{value:g} {unit}"

    return (
        f"{shown(sample.temperature_c, 'C')}, {shown(sample.power_w, 'W')}, SM "
        f"{shown(sample.sm_mhz, 'MHz')} of {shown(sample.sm_max_mhz, 'MHz')}"
    )


def _judge_sampled_diag(step: Step, output: str) -> StepResult:
    """DCGM's verdict and the samples' together; samples missing or unread fail the step."""
    diag_part, mark, samples_part = output.partition(SAMPLES_MARK)
    if not mark:
        raise ParseFailure("burn-in GPU samples", "no samples after DCGM's output")
    diag = parse_dcgmi_diag(diag_part)
    problems = burn_in_sample_problems(parse_query_gpu_csv(samples_part.strip()))
    failed = [test.name for test in diag.failed] + problems
    reason = drain_reason(step, None, failed) if failed else None
    return StepResult(step, not failed, None, reason, tuple(problems))


def burn_in_cycle(
    cycle: int,
    nodes: Sequence[str],
    topo: AcceptTopology,
    figures: Mapping[str, ProfileFigures],
    accept: Accept,
    reservation: str,
) -> tuple[Step, ...]:
    """One cycle of the burn-in, repeated until `accept.burn_in_s` has passed: `dcgmi diag`
    at `accept.burn_in_dcgm_level` on each node (its stress tests load the GPUs) with the
    GPUs sampled all through it (`sampled_diag`, judged by `burn_in_sample_problems`), all_reduce
    over each leaf group (traffic on every rail of the group's leaf), then `nvidia-smi -q -x`
    on each node after them, judged by `gpu_sample_problems`. A group's all_reduce below its figure
    fails the run without naming a node: the full level's search finds which."""
    chosen = set(nodes)
    steps: list[Step] = []
    for name in nodes:
        fig = figures[topo.node(name).profile]
        argv = _srun(reservation, (name,), fig.gpus, sampled_diag(accept.burn_in_dcgm_level))
        steps.append(Step(f"burn-in {cycle}: {SAMPLED_DIAG}", (name,), argv, None))
    for group in topo.leaf_groups():
        members = tuple(name for name in group if name in chosen)
        found = [figures[topo.node(n).profile] for n in members]
        ring = [f.allreduce for f in found if f.allreduce is not None]
        if len(members) < 2 or len(ring) < len(members):
            continue
        gpus = min(f.gpus for f in found)
        tool = ("all_reduce_perf", *NCCL_ARGS, "-g", str(gpus))
        expected = min(ring, key=lambda figure: figure.gbs)
        argv = _srun(reservation, members, gpus, tool)
        steps.append(Step(f"burn-in {cycle}: nccl all_reduce", members, argv, expected, group=True))
    steps.extend(gpu_sample_step(f"burn-in {cycle}: {GPU_SAMPLE}", n, reservation) for n in nodes)
    return tuple(steps)


def gpu_sample_problems(report: NvidiaSmiReport) -> list[str]:
    """What a GPU sample shows wrong, each with what was expected and what was read: a row
    remapping that failed or waits for a reset, retired pages pending, a recovery action the
    driver asks for (NVIDIA GPU memory error management), and issue #28's fail-slow signals,
    a PCIe link narrower or slower than its maximum and clocks held by a slowdown reason.

    The link's generation is judged only where the same sample shows the GPU busy (no GPU
    Idle reason): an idle GPU steps its link down to save power (the A5000 capture, idle,
    reads gen 1 of 4), so a gen read at idle says nothing of how the link trained. Its width
    is judged at any time."""
    problems = []
    for gpu in report.gpus:
        where = f"GPU {gpu.index}"
        if gpu.remapped_rows_failure:
            problems.append(f"{where} row remapping failed")
        if gpu.remapped_rows_pending:
            problems.append(f"{where} remapped rows pending a reset")
        if gpu.retired_pages_pending:
            problems.append(f"{where} retired pages pending")
        if gpu.recovery_action not in (None, "None"):
            problems.append(f"{where} recovery action {gpu.recovery_action}")
        width, widest = gpu.pcie.width_current, gpu.pcie.width_max
        if width is not None and widest is not None and width < widest:
            problems.append(f"{where} PCIe x{width} of x{widest}")
        events = gpu.clock_events or ()
        gen, newest = gpu.pcie.gen_current, gpu.pcie.gen_max
        busy = gpu.clock_events is not None and "gpu_idle" not in events
        if busy and gen is not None and newest is not None and gen < newest:
            problems.append(f"{where} PCIe gen {gen} of {newest} under load")
        held = [reason for reason in SLOWDOWN_REASONS if reason in events]
        if held:
            problems.append(f"{where} clocks held by {', '.join(held)} (expected none)")
    return problems


def rdma_argv(
    reservation: str, device: str, client: str, server: str
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """ib_write_bw's two sides on `device`, each an srun step: the server's, to start first
    on `server`, and the client's on `client`, which connects to it."""
    tool = ("ib_write_bw", "--report_gbits", "-d", device)
    return (
        _srun(reservation, (server,), 0, tool),
        _srun(reservation, (client,), 0, (*tool, server)),
    )


def drain_reason(step: Step, measured_gbs: float | None, failed: Sequence[str] = ()) -> str:
    """The drain reason of a node that failed `step`: the figure against its gate, or the
    DCGM tests that failed."""
    if step.expected is None or measured_gbs is None:
        what = ", ".join(failed) if failed else "no result"
        return f"{ACCEPT_PREFIX}{step.test} failed: {what}"
    exp = step.expected
    return (
        f"{ACCEPT_PREFIX}{step.test} {measured_gbs:.1f} GB/s < {1 - exp.margin:.2f} x "
        f"{exp.gbs:.1f} GB/s expected"
    )


def is_accept_drain(reason: str | None) -> bool:
    return bool(reason) and str(reason).startswith(ACCEPT_PREFIX)


def select_nodes(
    compute: Sequence[str],
    reasons: Mapping[str, str | None],
    *,
    nodes_from: NodesFrom = "all",
    limit: Sequence[str] = (),
) -> tuple[str, ...]:
    """The nodes under test: every compute node, those `accept` drained, or those
    remediation sent for repair (`myriad resume` tests them before they return); narrowed
    to `limit` where given (a name `limit` names that is not a compute node is an error)."""
    unknown = sorted(set(limit) - set(compute))
    if unknown:
        raise ValueError(f"--limit names nodes that are not compute nodes: {', '.join(unknown)}")
    chosen = [n for n in compute if not limit or n in limit]
    if nodes_from == "drained":
        chosen = [n for n in chosen if is_accept_drain(reasons.get(n))]
    elif nodes_from == "repaired":
        chosen = [n for n in chosen if str(reasons.get(n) or "").startswith(REMEDY_PREFIX)]
    return tuple(chosen)


@dataclass(frozen=True, slots=True)
class StepResult:
    """A step judged: `measured_gbs` the figure read from its output (None for DCGM, or
    output that could not be read), `reason` the drain reason where it failed, `findings`
    each fail-slow signal the step found (a GPU sample's, the counters'), one line each with
    what was expected and what was read, for the report to list one by one (the drain
    reason, one line in Slurm, joins them)."""

    step: Step
    passed: bool
    measured_gbs: float | None
    reason: str | None
    findings: tuple[str, ...] = ()

    @property
    def ratio(self) -> float | None:
        if self.measured_gbs is None or self.step.expected is None:
            return None
        return self.measured_gbs / self.step.expected.gbs


def judge(step: Step, output: str) -> StepResult:
    """Read a step's output with the node parsers and judge it. Output that cannot be read
    (cut short, damaged, empty) fails with `could not read` and the parser's words, never
    passes. nccl-tests is judged at its largest message (the better of out of place and in
    place, as nccl-tests' own average takes both), ib_write_bw at its largest message."""
    try:
        if step.test == COUNTERS_BEFORE:
            read_counters(output)
            return StepResult(step, True, None, None)
        if step.test.endswith(SAMPLED_DIAG):
            return _judge_sampled_diag(step, output)
        if step.expected is None and step.test.endswith(GPU_SAMPLE):
            problems = gpu_sample_problems(parse_nvidia_smi_xml(output))
            reason = drain_reason(step, None, problems) if problems else None
            return StepResult(step, not problems, None, reason, tuple(problems))
        if step.expected is None:
            diag = parse_dcgmi_diag(output)
            failed = [test.name for test in diag.failed]
            reason = None if diag.passed else drain_reason(step, None, failed)
            return StepResult(step, diag.passed, None, reason)
        if step.test.startswith("rdma"):
            measured = parse_perftest_bw(output).largest.average_gbs
        else:
            measured = parse_nccl_tests(output).rows[-1].best_busbw_gbs
    except ParseFailure as exc:
        return StepResult(step, False, None, f"{ACCEPT_PREFIX}{step.test} could not read: {exc}")
    passed = measured >= step.expected.gate_gbs
    return StepResult(step, passed, measured, None if passed else drain_reason(step, measured))


def reservation_argv(name: str, nodes: Sequence[str], duration_s: int) -> tuple[str, ...]:
    """`scontrol create reservation` on the nodes under test, from now, for the run's time.

    MAINT marks it as maintenance, which Slurm's accounting keeps apart from idle time;
    IGNORE_JOBS lets it be created while jobs still run on the nodes (scontrol(1),
    "Reservations"; slurm.schedmd.com/reservations.html); the caller waits for those jobs
    before the first step. Users=root: the steps run as root from the controller. Duration
    is in minutes, rounded up.
    """
    minutes = max(1, -(-duration_s // 60))
    return (
        "scontrol",
        "create",
        "reservation",
        f"ReservationName={name}",
        f"Nodes={','.join(nodes)}",
        "StartTime=now",
        f"Duration={minutes}",
        "Users=root",
        "Flags=MAINT,IGNORE_JOBS",
    )


def release_argv(name: str) -> tuple[str, ...]:
    """`scontrol delete reservation`: the nodes go back to users when accept ends."""
    return ("scontrol", "delete", f"ReservationName={name}")
