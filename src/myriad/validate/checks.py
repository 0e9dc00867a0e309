"""Compare each node's facts with its expectations: pure, in memory, linear in nodes.

Every (node, check) pair yields one CheckResult: `pass`, `fail` (the node differs from the
spec, or a tool the spec needs is missing or reports a fault), `not-applicable` (the spec
makes the check meaningless for this node; the reason is the `actual`), or `error` (the
facts could not be read, so nothing is claimed either way).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from operator import attrgetter
from typing import Any, Literal, NamedTuple

from myriad.validate.expectations import (
    CHECK_TITLES,
    GPU_MEMORY_HIGH,
    GPU_MEMORY_LOW,
    BondExpect,
    ClusterExpectations,
    DeviceLinks,
    Driver,
    Each,
    Expectation,
    GpuModelExpect,
    GresExpect,
    HostsBlock,
    Link,
    MountExpect,
    NodeExpectations,
    NvidiaRuntime,
    SessionLimit,
)
from myriad.validate.facts import Fact, NodeFacts
from myriad.validate.parsers import Gres, KubeNode, SlurmTopology

Status = Literal["pass", "fail", "not-applicable", "error"]
STATUSES: tuple[Status, ...] = ("pass", "fail", "not-applicable", "error")
REACHABLE = "node.reachable"
CHECK_ORDER = {check: i for i, check in enumerate((REACHABLE, *CHECK_TITLES))}
# Lists in a one-line `actual` stop after this many items; the rest is counted.
SHOWN = 4


# CheckResult and Outcome are NamedTuples, not frozen dataclasses: a frozen dataclass sets
# each field through object.__setattr__, and half a million results (12,500 nodes) made
# that the largest single cost of evaluating a cluster. They are just as immutable.
class CheckResult(NamedTuple):
    node: str
    check: str
    status: Status
    expected: str
    actual: str
    spec_field: str
    fix: str = ""
    detail: str = ""


class Outcome(NamedTuple):
    status: Status
    actual: str
    detail: str = ""


def passed(actual: str) -> Outcome:
    return Outcome("pass", actual)


def failed(actual: str, detail: str = "") -> Outcome:
    return Outcome("fail", actual, detail)


def unavailable(fact: Fact[Any]) -> Outcome:
    """A fact without a value: missing tools and faults are differences, unreadable is not."""
    if fact.state in ("missing", "failed"):
        return failed(fact.detail)
    return Outcome("error", fact.detail)


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:SHOWN])
    return shown + (f" (+{len(items) - SHOWN} more)" if len(items) > SHOWN else "")


def _verdict(problems: Sequence[str], good: str) -> Outcome:
    return failed(_listed(problems)) if problems else passed(good)


# --- the orchestrator's view, read once from a controller's facts ----------------------------


@dataclass(frozen=True, slots=True)
class SlurmNodeView:
    state: str
    drained: bool
    not_responding: bool
    gres: tuple[Gres, ...]
    reason: str | None

    def describe(self) -> str:
        flags = "+DRAIN" if self.drained else ""
        star = "*" if self.not_responding else ""
        why = f" (Reason={self.reason})" if self.reason else ""
        return f"{self.state}{flags}{star}{why}"


@dataclass(frozen=True, slots=True)
class ClusterView:
    source: str | None
    slurm_nodes: Fact[Mapping[str, SlurmNodeView]]
    slurm_topology: Fact[SlurmTopology]
    kube_nodes: Fact[Mapping[str, KubeNode]]


def _from_sinfo(facts: NodeFacts) -> Fact[Mapping[str, SlurmNodeView]]:
    # sinfo's %T: "idle", "mixed-", "down*", "drained" (IDLE+DRAIN), "draining" (busy+DRAIN),
    # or with flags after "+"; "*" marks a node that does not respond.
    busy_drain = {"DRAINED": "IDLE", "DRAINING": "MIXED"}

    def view(rows: Sequence[Any]) -> Mapping[str, SlurmNodeView]:
        nodes = {}
        for row in rows:
            raw = row.state.upper()
            base = raw.split("+")[0].rstrip("*~#!%$@^-")
            nodes[row.node] = SlurmNodeView(
                state=busy_drain.get(base, base),
                drained="DRAIN" in raw,
                not_responding="*" in raw,
                gres=row.gres,
                reason=None,
            )
        return nodes

    return facts.sinfo.map(view)


def _slurm_nodes(facts: NodeFacts) -> Fact[Mapping[str, SlurmNodeView]]:
    scontrol: Fact[Mapping[str, SlurmNodeView]] = facts.slurm_nodes.map(
        lambda nodes: {
            n.name: SlurmNodeView(n.state, n.drained, n.not_responding, n.gres, n.reason)
            for n in nodes
        }
    )
    if scontrol.ok:
        return scontrol
    # sinfo reads the same controller state; it answers when only scontrol's output is odd.
    fallback = _from_sinfo(facts)
    return fallback if fallback.ok else scontrol


def cluster_view(
    expectations: ClusterExpectations, facts: Mapping[str, NodeFacts], unreachable: Iterable[str]
) -> ClusterView:
    """The orchestrator's view from the first controller that answered it."""
    down = set(unreachable)
    slurm: Fact[Mapping[str, SlurmNodeView]] = Fact("unreadable", detail="no controller answered")
    topology: Fact[SlurmTopology] = Fact("unreadable", detail="no controller answered")
    kube: Fact[Mapping[str, KubeNode]] = Fact("unreadable", detail="no controller answered")
    tried = []
    for name in expectations.controllers:
        node = facts.get(name)
        if node is None:
            tried.append(f"{name} {'unreachable' if name in down else 'not gathered'}")
            continue
        if expectations.orchestrator == "slurm":
            slurm, topology = _slurm_nodes(node), node.slurm_topology
            if slurm.ok:
                return ClusterView(name, slurm, topology, kube)
            tried.append(f"{name}: {slurm.detail}")
        else:
            kube = node.kube_nodes.map(lambda nodes: {n.name: n for n in nodes})
            if kube.ok:
                return ClusterView(name, slurm, topology, kube)
            tried.append(f"{name}: {kube.detail}")
    reason = "no controller answered (" + "; ".join(tried) + ")" if tried else "no controllers"
    nothing: Fact[Any] = Fact("unreadable", detail=reason)
    return ClusterView(None, nothing, nothing, nothing)


# --- evaluators ------------------------------------------------------------------------------

Evaluator = Callable[[Any, NodeFacts, ClusterView, str], Outcome]


def _unit(expected: str, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.units.ok:
        return unavailable(facts.units)
    value = facts.units.get().get(expected, "unknown")
    return passed(f"{expected} active") if value == "active" else failed(f"{expected} {value}")


def _host_name(expected: str, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.hostname.ok:
        return unavailable(facts.hostname)
    name = facts.hostname.get()
    return passed(name) if name.split(".")[0] == expected else failed(name)


def _hosts_file(expected: HostsBlock, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.hosts_file.ok:
        return unavailable(facts.hosts_file)
    hosts = facts.hosts_file.get()
    count = len(expected.entries)
    # The common role writes the same block everywhere: identity (interned) or one compare.
    if hosts.block is expected.text or hosts.block == expected.text:
        return passed(f"all {count} hosts in the managed block")
    names_of: dict[str, set[str]] = {}
    listed: list[tuple[str, tuple[str, ...]]] = []
    for source in (hosts.block or "", hosts.rest):
        for line in source.splitlines():
            fields = line.split("#", 1)[0].split()
            if len(fields) >= 2:
                names_of.setdefault(fields[0], set()).update(fields[1:])
                if source is hosts.block:
                    listed.append((fields[0], tuple(fields[1:])))
    problems = [
        f"missing {address} {names[0]}"
        for address, names in expected.entries
        if not set(names) <= names_of.get(address, set())
    ]
    wanted = set(expected.entries)
    problems += [f"not in the spec: {a} {' '.join(n)}" for a, n in listed if (a, n) not in wanted]
    where = "" if hosts.block is not None else " (no managed block: listed elsewhere)"
    return _verdict(problems, f"all {count} hosts listed{where}")


def _time_synchronised(expected: bool, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.time.ok:
        return unavailable(facts.time)
    sync = facts.time.get()
    return (
        passed(f"synchronised ({sync.source})")
        if sync.synchronised
        else failed(f"not synchronised ({sync.source})")
    )


_UNLIMITED = {"unlimited", "infinity", "-1"}


def _limit(value: str) -> str:
    return "unlimited" if value.lower() in _UNLIMITED else value


def _limits_memlock(expected: str, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.limits.ok:
        return unavailable(facts.limits)
    return _memlock_lines(tuple(sorted(facts.limits.get().items())), _limit(expected))


@lru_cache(maxsize=256)
def _memlock_lines(files: tuple[tuple[str, str], ...], want: str) -> Outcome:
    """Nodes share their limits files (the texts are interned): read each set once."""
    covered: dict[str, set[str]] = {"*": set(), "root": set()}
    problems = []
    # pam_limits: a line for root applies to root only, `*` to everyone else; any memlock
    # line for either that sets another value than the spec's leaves some session short,
    # and each needs both its soft and hard limit set ("-" sets both).
    for path, text in files:
        for line in text.splitlines():
            fields = line.split("#", 1)[0].split()
            if len(fields) != 4 or fields[2] != "memlock" or fields[0] not in covered:
                continue
            if fields[1] in ("-", "soft", "hard"):
                if _limit(fields[3]) != want:
                    problems.append(f"{path}: {' '.join(fields)}")
                else:
                    covered[fields[0]] |= {"soft", "hard"} if fields[1] == "-" else {fields[1]}
    problems += [
        f"no memlock line for {domain}"
        if not kinds
        else f"no {'hard' if 'soft' in kinds else 'soft'} memlock line for {domain}"
        for domain, kinds in covered.items()
        if len(kinds) < 2
    ]
    return _verdict(problems, f"memlock {want} for * and root")


def _memlock_session(
    expected: SessionLimit, facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    if not facts.memlock.ok:
        return unavailable(facts.memlock)
    limits = facts.memlock.get()
    soft, hard = _limit(limits.soft), _limit(limits.hard)
    actual = f"soft {soft}, hard {hard}"
    want = _limit(expected.value)
    if soft == want and hard == want:
        return passed(actual)
    ceiling = _limit(limits.ceiling) if limits.ceiling is not None else None
    if expected.container and ceiling not in (None, "unlimited") and soft == hard == ceiling:
        # The container engine caps PID 1 and nothing inside may raise it (no
        # CAP_SYS_RESOURCE in the host's namespace); limits.memlock checks the node's part.
        return Outcome(
            "not-applicable",
            f"{actual} KiB: the container engine's ceiling, which a container cannot raise",
        )
    return failed(actual)


# GPUs ------------------------------------------------------------------------------------


def _gpu_count(expected: int, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.gpus.ok:
        return unavailable(facts.gpus)
    count = len(facts.gpus.get().gpus)
    return passed(str(count)) if count == expected else failed(str(count))


def _gpu_model(expected: GpuModelExpect, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.gpus.ok:
        return unavailable(facts.gpus)
    names = sorted({gpu.product_name for gpu in facts.gpus.get().gpus})
    # nvidia-smi names the part ("NVIDIA H100 80GB HBM3"), the catalog its family and form
    # ("H100-SXM5-80GB"): the family must appear, and "PCIe" exactly for PCIe cards.
    wrong = [
        name
        for name in names
        if expected.token not in name.lower() or ("pcie" in name.lower()) != expected.pcie
    ]
    if not names:
        return failed("no GPUs")
    return failed(_listed(wrong)) if wrong else passed(_listed(names))


def _gpu_memory(expected: int, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.gpus.ok:
        return unavailable(facts.gpus)
    nominal = expected * 1024
    low, high = GPU_MEMORY_LOW * nominal, GPU_MEMORY_HIGH * nominal
    short = []
    sizes = set()
    for gpu in facts.gpus.get().gpus:
        mib = gpu.memory_total_mib
        sizes.add(f"{mib} MiB" if mib is not None else "unknown")
        if mib is None or not low <= mib <= high:
            short.append(f"GPU {gpu.index}: {mib} MiB")
    return _verdict(short, _listed(sorted(sizes)))


def _gpu_driver(expected: Driver, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.gpus.ok:
        return unavailable(facts.gpus)
    version = facts.gpus.get().driver_version
    return passed(version) if expected.matches(version) else failed(version)


def _gpu_persistence(expected: bool, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.gpus.ok:
        return unavailable(facts.gpus)
    off = [f"GPU {g.index} off" for g in facts.gpus.get().gpus if g.persistence_mode is not True]
    return _verdict(off, "on for every GPU")


def _gpu_health(expected: bool, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.gpus.ok:
        return unavailable(facts.gpus)
    problems = []
    for gpu in facts.gpus.get().gpus:
        if gpu.remapped_rows_failure:
            problems.append(f"GPU {gpu.index}: row remapping failed")
        if gpu.remapped_rows_pending:
            problems.append(f"GPU {gpu.index}: remap pending")
        if gpu.retired_pages_pending:
            problems.append(f"GPU {gpu.index}: page retirement pending")
    return _verdict(problems, "no pending or failed remaps")


# 12,500 nodes x 8 GPUs x 18 links: attrgetter keeps the loop over links in C.
_INACTIVE = attrgetter("inactive")


def _gpu_nvlink(expected: int, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.nvlink.ok:
        return unavailable(facts.nvlink)
    status = facts.nvlink.get()
    if not status.gpus:
        return failed("no GPUs listed")
    short = [
        f"GPU {gpu.index}: {gpu.active_links}/{expected} up"
        for gpu in status.gpus
        if len(gpu.links) != expected or any(map(_INACTIVE, gpu.links))
    ]
    return _verdict(short, f"{expected} links up on {len(status.gpus)} GPUs")


def _gpu_pcie(expected: Link, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.gpus.ok:
        return unavailable(facts.gpus)
    slow = []
    seen = set()
    for gpu in facts.gpus.get().gpus:
        # GPUs drop the link's speed when idle; the max generation the GPU and its slot can
        # train to is what a missing riser lane or a Gen4 slot lowers.
        gen = gpu.pcie.gen_max or gpu.pcie.gen_current
        width = gpu.pcie.width_current or gpu.pcie.width_max
        seen.add(f"Gen{gen} x{width}")
        if gen is None or width is None or gen < expected.gen or width < expected.width:
            slow.append(f"GPU {gpu.index}: Gen{gen} x{width}")
    return _verdict(slow, _listed(sorted(seen)))


def _peermem(expected: str, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.modules.ok:
        return unavailable(facts.modules)
    loaded = expected in facts.modules.get()
    return passed(f"{expected} loaded") if loaded else failed(f"{expected} not loaded")


# HCAs and NICs -----------------------------------------------------------------------------


def _hca_present(
    expected: tuple[str, ...], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    if not facts.hcas.ok:
        return unavailable(facts.hcas)
    present = {device.name for device in facts.hcas.get().devices}
    missing = [name for name in expected if name not in present]
    return _verdict([f"{m} missing" for m in missing], f"{len(expected)} present")


def _hca_state(
    expected: tuple[str, ...], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    ports = facts.hca_ports
    if not ports.ok:
        return unavailable(ports)
    problems = []
    for name in expected:
        port = ports.get().get(name)
        if port is None:
            problems.append(f"{name} missing")
        elif not (port.active and port.link_up):
            problems.append(f"{name} {port.state}/{port.phys_state}")
    return _verdict(problems, f"{len(expected)} ACTIVE/LinkUp")


def _hca_each(attribute: str, unit: str) -> Evaluator:
    def evaluate(expected: Each, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
        ports = facts.hca_ports
        if not ports.ok:
            return unavailable(ports)
        problems = []
        for name in expected.names:
            port = ports.get().get(name)
            value = None if port is None else getattr(port, attribute)
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if value != expected.value:
                problems.append(f"{name} {'missing' if port is None else f'{value}{unit}'}")
        return _verdict(problems, f"{expected.value}{unit} on {len(expected.names)}")

    return evaluate


def _nic_pcie(expected: DeviceLinks, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    for fact in (facts.hca_links, facts.pci):
        if not fact.ok:
            return unavailable(fact)
    links, functions = facts.hca_links.get(), facts.pci.get()
    problems = []
    for device, want in expected.links:
        link = links.get(device)
        function = None if link is None else functions.get(link.pci)
        if function is None:
            problems.append(f"{device} not found on the PCIe bus")
        elif (function.gen or 0) < want.gen or (function.width or 0) < want.width:
            problems.append(f"{device} Gen{function.gen} x{function.width}")
    return _verdict(problems, f"{len(expected.links)} at {expected.links[0][1]} or better")


# RoCE -----------------------------------------------------------------------------------


def _qos_of(facts: NodeFacts, netdev: str) -> tuple[Any, str | None, Outcome | None]:
    """A NIC's QoS, or the problem to list (tool missing), or the outcome (unreadable)."""
    qos = facts.qos.get(netdev)
    if qos is not None and qos.state == "ok":
        return qos.value, None, None
    if qos is None:
        return None, None, Outcome("error", f"mlnx_qos -i {netdev} was not gathered")
    outcome = unavailable(qos)
    if outcome.status == "error":
        return None, None, outcome
    return None, f"{netdev}: {qos.detail}", None


def _qos_each(read: Callable[[Any, Any], Any], show: Callable[[Any], str]) -> Evaluator:
    """Compare `read(qos, expected value)` with the expected value on every RoCE NIC."""

    def evaluate(expected: Each, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
        problems = []
        for netdev in expected.names:
            qos, problem, outcome = _qos_of(facts, netdev)
            if outcome is not None:
                return outcome
            if problem is not None:
                problems.append(problem)
                continue
            value = read(qos, expected.value)
            if value != expected.value:
                problems.append(f"{netdev}: {show(value)}")
        return _verdict(problems, f"{show(expected.value)} on {len(expected.names)}")

    return evaluate


def _pfc_value(qos: Any) -> Any:
    enabled = qos.pfc_enabled
    return enabled[0] if len(enabled) == 1 else enabled


def _show_pfc(value: Any) -> str:
    return f"PFC on {value}" if isinstance(value, int) else f"PFC on {list(value) or 'none'}"


def _show_dscp(pairs: Iterable[tuple[int, int | None]]) -> str:
    return ", ".join(f"{dscp}→{priority}" for dscp, priority in pairs)


def _dscp_pairs(qos: Any, expected: tuple[tuple[int, int], ...]) -> tuple[tuple[int, Any], ...]:
    """The NIC's priority for each DSCP the spec maps, in the spec's order."""
    return tuple((dscp, qos.dscp_to_priority.get(dscp)) for dscp, _ in expected)


def _link_mtu(expected: Each, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.links.ok:
        return unavailable(facts.links)
    links = facts.links.get()
    problems = []
    for name in expected.names:
        link = links.get(name)
        if link is None or link.mtu != expected.value:
            problems.append(f"{name} {'missing' if link is None else link.mtu}")
    return _verdict(problems, f"MTU {expected.value} on {len(expected.names)}")


# bonds and storage -------------------------------------------------------------------------


def _bond(expected: BondExpect, facts: NodeFacts) -> tuple[Any, Outcome | None]:
    if not facts.bonds.ok:
        if facts.bonds.state == "missing":
            return None, failed(f"{expected.name} does not exist (bonding not loaded)")
        return None, unavailable(facts.bonds)
    bond = facts.bonds.get().get(expected.name)
    if bond is None:
        return None, failed(f"{expected.name} does not exist")
    return bond, None


def _bond_mode(expected: BondExpect, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    bond, problem = _bond(expected, facts)
    if problem is not None:
        return problem
    return passed(bond.mode) if bond.mode == expected.mode else failed(bond.mode)


def _bond_slaves(expected: BondExpect, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    bond, problem = _bond(expected, facts)
    if problem is not None:
        return problem
    slaves = {slave.name: slave for slave in bond.slaves}
    problems = [f"{name} not in the bond" for name in expected.slaves if name not in slaves]
    problems += [f"{s.name} {s.mii_status}" for s in bond.slaves if not s.up]
    problems += [f"{name} not expected" for name in slaves if name not in expected.slaves]
    return _verdict(problems, f"{len(expected.slaves)} members up")


def _bond_speed(expected: BondExpect, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    bond, problem = _bond(expected, facts)
    if problem is not None:
        return problem
    slow = [
        f"{s.name} {s.speed_mbps} Mb/s" for s in bond.slaves if s.speed_mbps != expected.speed_mbps
    ]
    return _verdict(slow, f"{expected.speed_mbps} Mb/s each")


def _bond_mtu(expected: BondExpect, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    return _link_mtu(Each((expected.name,), expected.mtu), facts, view, node)


def _mount(expected: MountExpect, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.mount.ok:
        return unavailable(facts.mount)
    mount = facts.mount.get()
    if mount is None:
        return failed(f"nothing mounted on {expected.path}")
    actual = f"{mount.source} ({mount.fstype})"
    if mount.fstype not in expected.fstypes:
        return failed(actual)
    if expected.source is not None and mount.source.rstrip("/") != expected.source.rstrip("/"):
        return failed(actual)
    return passed(actual)


# runtime, NCCL ---------------------------------------------------------------------------


def _runtime_engine(expected: str, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    return _unit(expected, facts, view, node)


_NVIDIA_RUNTIME = re.compile(r"runtimes\.(?:\"nvidia\"|nvidia)\]")
_NVIDIA_DEFAULT = re.compile(r"default_runtime_name\s*=\s*\"nvidia\"")


def _runtime_nvidia(
    expected: NvidiaRuntime, facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    if expected.engine == "docker":
        if not facts.docker.ok:
            return unavailable(facts.docker)
        info = facts.docker.get()
        actual = f"runtimes {_listed(sorted(info.runtime_names))}, default {info.default_runtime}"
        good = "nvidia" in info.runtime_names and (
            not expected.default or info.default_runtime == "nvidia"
        )
        return passed(actual) if good else failed(actual)
    if not facts.containerd.ok:
        return unavailable(facts.containerd)
    text = "\n".join(facts.containerd.get().values())
    has = bool(_NVIDIA_RUNTIME.search(text))
    default = bool(_NVIDIA_DEFAULT.search(text))
    actual = "nvidia runtime " + ("present" if has else "absent")
    actual += ", default " + ("nvidia" if default else "another runtime")
    return passed(actual) if has and (default or not expected.default) else failed(actual)


def _settings(text: str) -> dict[str, str]:
    pairs = {}
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and "=" in stripped:
            key, _, value = stripped.partition("=")
            pairs[key.strip()] = value.strip()
    return pairs


def _nccl_conf(expected: str, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.nccl_conf.ok:
        if facts.nccl_conf.state == "missing":
            return failed("/etc/nccl.conf does not exist")
        return unavailable(facts.nccl_conf)
    actual = facts.nccl_conf.get()
    if actual is expected or actual == expected:
        return passed("identical to the expected file")
    want, have = _settings(expected), _settings(actual)
    problems = [
        f"{k}={have[k]} (expected {want[k]})" for k in want if k in have and have[k] != want[k]
    ]
    problems += [f"{k} missing (expected {want[k]})" for k in want if k not in have]
    problems += [f"{k}={have[k]} not expected" for k in have if k not in want]
    diff = "".join(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            "expected /etc/nccl.conf",
            f"{node}:/etc/nccl.conf",
        )
    )
    return failed(_listed(problems) or "same settings, other text (comments or spacing)", diff)


# Slurm and Kubernetes ---------------------------------------------------------------------


def _slurm_node(view: ClusterView, node: str) -> SlurmNodeView | Outcome:
    """The node as Slurm sees it, or the outcome when Slurm cannot say."""
    if not view.slurm_nodes.ok:
        return Outcome("error", f"Slurm's view unavailable: {view.slurm_nodes.detail}")
    found = view.slurm_nodes.get().get(node)
    if found is None:
        return failed(f"{node} unknown to Slurm (controller {view.source})")
    return found


def _slurm_state(
    expected: tuple[str, ...], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    found = _slurm_node(view, node)
    if isinstance(found, Outcome):
        return found
    good = found.state in expected and not found.drained and not found.not_responding
    return passed(found.describe()) if good else failed(found.describe())


def _slurm_gres(
    expected: tuple[GresExpect, ...], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    found = _slurm_node(view, node)
    if isinstance(found, Outcome):
        return found
    have = {(g.name, g.type, g.count) for g in found.gres}
    want = {(g.name, g.type, g.count) for g in expected}
    shown = ",".join(":".join(str(p) for p in g if p is not None) for g in sorted(have, key=str))
    return passed(shown) if want <= have else failed(shown or "no Gres")


def _slurm_topology(expected: str, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not view.slurm_topology.ok:
        return Outcome("error", f"Slurm's topology unavailable: {view.slurm_topology.detail}")
    leaf = view.slurm_topology.get().leaf_of(node)
    if leaf is None:
        return failed("under no switch")
    return passed(leaf) if leaf == expected else failed(leaf)


def _kube_node(view: ClusterView, node: str) -> KubeNode | Outcome:
    if not view.kube_nodes.ok:
        return Outcome("error", f"Kubernetes' view unavailable: {view.kube_nodes.detail}")
    found = view.kube_nodes.get().get(node)
    if found is None:
        return failed(f"{node} is not a Kubernetes node")
    return found


def _k8s_ready(expected: bool, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    found = _kube_node(view, node)
    if isinstance(found, Outcome):
        return found
    actual = f"Ready={found.ready_status}" + (
        f" ({found.ready_reason})" if found.ready_reason else ""
    )
    return passed(actual) if found.ready else failed(actual)


def _k8s_gpus(expected: int, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    found = _kube_node(view, node)
    if isinstance(found, Outcome):
        return found
    count = found.gpu_allocatable
    return passed(str(count)) if count == expected else failed(f"{count}")


EVALUATORS: dict[str, Evaluator] = {
    "host.name": _host_name,
    "hosts.file": _hosts_file,
    "time.sync": _unit,
    "time.synchronised": _time_synchronised,
    "limits.memlock": _limits_memlock,
    "limits.memlock-session": _memlock_session,
    "gpu.count": _gpu_count,
    "gpu.model": _gpu_model,
    "gpu.memory": _gpu_memory,
    "gpu.driver": _gpu_driver,
    "gpu.persistence": _gpu_persistence,
    "gpu.health": _gpu_health,
    "gpu.fabricmanager": _unit,
    "gpu.nvlink": _gpu_nvlink,
    "gpu.pcie": _gpu_pcie,
    "gpudirect.peermem": _peermem,
    "hca.present": _hca_present,
    "hca.state": _hca_state,
    "hca.rate": _hca_each("rate_gbps", " Gb/s"),
    "hca.link-layer": _hca_each("link_layer", ""),
    "nic.pcie": _nic_pcie,
    "roce.trust": _qos_each(lambda qos, _: qos.trust, lambda value: f"trust {value}"),
    "roce.pfc": _qos_each(lambda qos, _: _pfc_value(qos), _show_pfc),
    "roce.dscp": _qos_each(_dscp_pairs, _show_dscp),
    "roce.mtu": _link_mtu,
    "bond.mode": _bond_mode,
    "bond.slaves": _bond_slaves,
    "bond.speed": _bond_speed,
    "bond.mtu": _bond_mtu,
    "storage.mount": _mount,
    "runtime.engine": _runtime_engine,
    "runtime.nvidia": _runtime_nvidia,
    "nccl.conf": _nccl_conf,
    "slurm.munge": _unit,
    "slurm.slurmd": _unit,
    "slurm.slurmctld": _unit,
    "slurm.node-state": _slurm_state,
    "slurm.gres": _slurm_gres,
    "slurm.topology": _slurm_topology,
    "k8s.kubelet": _unit,
    "k8s.node-ready": _k8s_ready,
    "k8s.gpu-allocatable": _k8s_gpus,
}


# --- how an expected value is written --------------------------------------------------------


def describe(check: str, expected: Any) -> str:
    if isinstance(expected, str) and check == "nccl.conf":
        settings = _settings(expected)
        return f"{len(settings)} settings: " + ", ".join(f"{k}={v}" for k, v in settings.items())
    if check in ("time.sync", "gpu.fabricmanager", "runtime.engine") or check.startswith(
        ("slurm.munge", "slurm.slurmd", "slurm.slurmctld", "k8s.kubelet")
    ):
        return f"{expected} active"
    if isinstance(expected, HostsBlock):
        shown = _listed([f"{a} {' '.join(n)}" for a, n in expected.entries])
        return f"{len(expected.entries)} hosts: {shown}"
    if isinstance(expected, GpuModelExpect):
        return expected.model
    if check == "gpu.memory":
        return f"{expected} GB per GPU"
    if check in ("gpu.persistence",):
        return "on for every GPU"
    if check == "gpu.health":
        return "no pending or failed remaps"
    if check == "gpu.nvlink":
        return f"{expected} links up per GPU"
    if check == "gpu.pcie":
        return f"{expected} per GPU"
    if check == "gpudirect.peermem":
        return f"{expected} loaded"
    if check in ("hca.present", "hca.state"):
        suffix = "" if check == "hca.present" else " ACTIVE/LinkUp"
        return _listed(list(expected)) + suffix
    if isinstance(expected, Each):
        value = expected.value
        if check == "roce.dscp":
            value = _show_dscp(value)
        elif check == "roce.pfc":
            value = _show_pfc(value)
        unit = " Gb/s" if check == "hca.rate" else ""
        return f"{value}{unit} on {_listed(list(expected.names))}"
    if isinstance(expected, DeviceLinks):
        return ", ".join(f"{d} {link}" for d, link in expected.links[:SHOWN]) + (
            f" (+{len(expected.links) - SHOWN} more)" if len(expected.links) > SHOWN else ""
        )
    if isinstance(expected, BondExpect):
        return {
            "bond.mode": f"{expected.name} {expected.mode}",
            "bond.slaves": f"{expected.name}: {', '.join(expected.slaves)} up",
            "bond.speed": f"{expected.speed_mbps} Mb/s per member",
            "bond.mtu": f"{expected.name} MTU {expected.mtu}",
        }[check]
    if isinstance(expected, MountExpect):
        source = f"{expected.source} " if expected.source else ""
        return f"{source}({'/'.join(expected.fstypes)}) on {expected.path}"
    if isinstance(expected, NvidiaRuntime):
        return f"nvidia runtime in {expected.engine}" + (" (default)" if expected.default else "")
    if check == "slurm.node-state":
        return "/".join(expected).lower() + ", not drained"
    if check == "slurm.gres":
        return ",".join(str(g) for g in expected)
    if check == "slurm.topology":
        return f"under switch {expected}"
    if check == "k8s.node-ready":
        return "Ready=True"
    if isinstance(expected, SessionLimit):
        ceiling = " (or a container engine's ceiling)" if expected.container else ""
        return f"memlock {expected.value}{ceiling}"
    if check == "limits.memlock":
        return f"memlock {expected}"
    if check == "time.synchronised":
        return "synchronised"
    return str(expected)


# --- evaluation ------------------------------------------------------------------------------


def reachable_result(node: str, seconds: float | None) -> CheckResult:
    took = f" in {seconds:.1f} s" if seconds is not None else ""
    return CheckResult(node, REACHABLE, "pass", "facts gathered", f"gathered{took}", "pools")


def unreachable_result(node: str, message: str, *, gathered: bool = False) -> CheckResult:
    """A node without facts: unreachable (fail), or the gatherer itself failed (error)."""
    if gathered:
        return CheckResult(
            node,
            REACHABLE,
            "error",
            "facts gathered",
            f"the gatherer failed: {message}",
            "pools",
            "run it by hand to see why: python3 gather_node.py (needs python3 on the node)",
        )
    return CheckResult(
        node,
        REACHABLE,
        "fail",
        "facts gathered",
        f"unreachable: {message}",
        "pools",
        f"check that {node} is up and reachable: ansible {node} -m ansible.builtin.ping",
    )


# An expectation ready to evaluate: itself, its evaluator (None: not applicable) and the
# text of its expected value. Worked out once per tuple of shared expectations.
Prepared = list[tuple[Expectation, Evaluator | None, str]]


def prepare(expectations: Sequence[Expectation]) -> Prepared:
    return [
        (e, EVALUATORS[e.check], describe(e.check, e.expected)) if e.applies else (e, None, "")
        for e in expectations
    ]


def evaluate_node(
    expectations: NodeExpectations,
    facts: NodeFacts,
    view: ClusterView,
    shared: Prepared | None = None,
) -> list[CheckResult]:
    """Every check of one node; `shared` is prepare(expectations.shared), made once per pool."""
    node = expectations.node
    results = [reachable_result(node, facts.seconds)]
    append = results.append
    ready = shared if shared is not None else prepare(expectations.shared)
    for exp, evaluator, text in (*ready, *prepare(expectations.own)):
        if evaluator is None:
            append(CheckResult(node, exp.check, "not-applicable", "", exp.reason, exp.spec_field))
            continue
        status, actual, detail = evaluator(exp.expected, facts, view, node)
        fix = exp.fix.replace("{node}", node) if status in ("fail", "error") else ""
        append(CheckResult(node, exp.check, status, text, actual, exp.spec_field, fix, detail))
    return results


def evaluate(
    expectations: ClusterExpectations,
    facts: Mapping[str, NodeFacts],
    unreachable: Mapping[str, str],
    gather_failed: Mapping[str, str] | None = None,
) -> list[CheckResult]:
    """All results, node by node in spec order; nodes without facts get one failing result."""
    failed_to_gather = gather_failed or {}
    view = cluster_view(expectations, facts, unreachable)
    prepared: dict[int, Prepared] = {}
    results: list[CheckResult] = []
    for node in expectations.nodes:
        found = facts.get(node.node)
        if found is not None:
            shared = prepared.get(id(node.shared))
            if shared is None:
                shared = prepared[id(node.shared)] = prepare(node.shared)
            results.extend(evaluate_node(node, found, view, shared))
        elif node.node in failed_to_gather:
            results.append(
                unreachable_result(node.node, failed_to_gather[node.node], gathered=True)
            )
        elif node.node in unreachable:
            results.append(unreachable_result(node.node, unreachable[node.node]))
    return results
