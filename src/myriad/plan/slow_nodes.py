"""Finding the slow node: topology-aware screening, then bisection, until nodes or links are named.

A collective is as fast as its slowest member, so one bad node or cable drags down every
test it is part of; testing every pair of 12,500 nodes would take 12,499 rounds. Instead,
as NCCL's maintainers advise, test in a bisection manner, following the fabric:

1. **Leaf screen** (one round): every group of nodes under one leaf (a rail-optimized
   fabric's leaf block: the same leaf on every rail) runs one ring all_reduce at once; a
   group at or above its expected figure clears all its nodes and their cables.
2. **Bisection** (one round per halving, all suspect groups in parallel): a group below its
   figure is split in two and each half tested; a half of one node is tested with a cleared
   partner, preferably from its own leaf, each partner in one test a round (a node waits a
   round when partners run short). Halves below go on; a node alone below is a suspect.
3. **Diagnosis** (one round): each suspect runs all_reduce inside itself (NVLink) and
   ib_write_bw on every rail against a cleared partner. NVLink below names the node; some
   rails below name those links (node, rail, leaf port); every rail below names the node;
   only the pair below names the node (its PCIe or GPUDirect path). When every node of a
   leaf has the same rail below, the leaf switch is named too. Where no node was ever
   cleared (most of a lone leaf is slow), a suspect that passes alone is `unresolved`.
4. **Upper tiers** (one round): a ring of one cleared node per leaf block of each island
   (its traffic crosses the spines) and one across islands (it crosses the core); below
   their figure, the island's spines or the core are named.

For one bad node the rounds are 1 + log2(leaf group) + 2, at most log2(nodes) + 3. The
measuring is the caller's: `find_slow` takes a function from a `GroupTest` to the GB/s it
measured (Slurm job steps on a real cluster, stand-ins on the twin, `FaultModel` in tests).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from myriad.plan.acceptance import Expected, ProfileFigures, profile_figures
from myriad.plan.fabric import iter_placements
from myriad.plan.model import Fabric
from myriad.plan.nodes import iter_nodes
from myriad.spec.catalog_models import Catalog
from myriad.spec.models import Cluster

__all__ = [
    "AcceptNode",
    "AcceptTopology",
    "FaultModel",
    "Finding",
    "GroupTest",
    "Measurement",
    "SearchResult",
    "find_slow",
    "rounds_bound",
    "topology",
]

TestKind = Literal["nccl", "nvlink", "rdma"]
Scope = Literal["leaf", "bisect", "node", "rail", "spine", "core"]


@dataclass(frozen=True, slots=True)
class AcceptNode:
    name: str
    profile: str
    island: int
    block: str  # the leaf group: one leaf on every rail (rail-optimized) or NIC 0's leaf
    leaves: tuple[str, ...]  # the leaf switch of each rail


@dataclass(frozen=True, slots=True)
class AcceptTopology:
    nodes: tuple[AcceptNode, ...]
    rails: int
    _by_name: dict[str, AcceptNode] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {node.name: node for node in self.nodes})

    def node(self, name: str) -> AcceptNode:
        return self._by_name[name]

    def leaf_groups(self) -> tuple[tuple[str, ...], ...]:
        groups: dict[str, list[str]] = defaultdict(list)
        for node in self.nodes:
            groups[node.block].append(node.name)
        return tuple(tuple(members) for members in groups.values())

    @property
    def islands(self) -> tuple[int, ...]:
        return tuple(sorted({node.island for node in self.nodes}))


def search_inputs(
    spec: Cluster, catalog: Catalog, fabric: Fabric
) -> tuple[AcceptTopology, dict[str, ProfileFigures]]:
    """What the search needs of a planned cluster: its topology and each GPU profile's
    expected figures."""
    figures = {
        name: profile_figures(name, profile, catalog, margin=spec.accept.margin)
        for name, profile in spec.profiles.items()
        if profile.gpu is not None
    }
    return topology(spec, fabric, catalog), figures


def topology(spec: Cluster, fabric: Fabric, catalog: Catalog) -> AcceptTopology:
    """The compute nodes with their island, leaf group and leaf per rail, from the plan; a
    node with no compute NIC has no place in the fabric and is left out."""
    profiles = {r.name: r.profile for r in iter_nodes(spec) if r.role == "compute"}
    leaves: dict[str, list[str]] = defaultdict(list)
    island: dict[str, int] = {}
    for host, _nic, placement in iter_placements(spec, fabric, catalog):
        leaves[host].append(placement.leaf)
        island[host] = placement.island
    nodes = tuple(
        AcceptNode(host, profiles[host], island[host], f"{island[host]}/{names[0]}", tuple(names))
        for host, names in leaves.items()
    )
    return AcceptTopology(nodes, fabric.rails)


@dataclass(frozen=True, slots=True)
class GroupTest:
    """One test: `nccl` a ring all_reduce over `nodes`; `nvlink` all_reduce inside one node;
    `rdma` ib_write_bw on port `rail` from nodes[0] to nodes[1]."""

    kind: TestKind
    nodes: tuple[str, ...]
    scope: Scope
    rail: int | None = None


@dataclass(frozen=True, slots=True)
class Measurement:
    round: int
    test: GroupTest
    expected: Expected
    measured_gbs: float

    @property
    def passed(self) -> bool:
        return self.expected.passes(self.measured_gbs)

    @property
    def ratio(self) -> float:
        return self.expected.ratio(self.measured_gbs)

    def reason(self) -> str:
        where = f" rail {self.test.rail}" if self.test.rail is not None else ""
        return (
            f"{self.expected.test}{where}: {self.measured_gbs:.4g} GB/s of "
            f"{self.expected.gbs:.4g} expected ({self.ratio:.2f}, "
            f"gate {self.expected.gate_gbs:.4g})"
        )


@dataclass(frozen=True, slots=True)
class Finding:
    kind: Literal["node", "link", "leaf", "spines", "core", "unresolved"]
    name: str
    reason: str
    node: str | None = None
    rail: int | None = None


@dataclass(frozen=True, slots=True)
class SearchResult:
    findings: tuple[Finding, ...]
    rounds: int
    measurements: tuple[Measurement, ...]

    @property
    def bad_nodes(self) -> frozenset[str]:
        return frozenset(f.name for f in self.findings if f.kind == "node")

    @property
    def bad_links(self) -> frozenset[tuple[str, int]]:
        return frozenset(
            (f.node, f.rail)
            for f in self.findings
            if f.kind == "link" and f.node is not None and f.rail is not None
        )

    def rounds_of(self) -> dict[int, list[Measurement]]:
        by_round: dict[int, list[Measurement]] = defaultdict(list)
        for measurement in self.measurements:
            by_round[measurement.round].append(measurement)
        return dict(by_round)

    def projected_seconds(self, cost: Callable[[GroupTest, Expected], float]) -> float:
        """Wall time if each round's tests run at once: the sum of each round's longest."""
        return sum(
            max(cost(m.test, m.expected) for m in tests) for tests in self.rounds_of().values()
        )


# --- the expectation of a test -------------------------------------------------------------


def _expected(
    test: GroupTest, topo: AcceptTopology, figures: Mapping[str, ProfileFigures]
) -> Expected:
    """The figure of the slowest profile among the test's nodes."""
    candidates: list[Expected] = []
    for name in test.nodes:
        profile = figures[topo.node(name).profile]
        figure = {
            "nccl": profile.allreduce,
            "nvlink": profile.nvlink,
            "rdma": profile.rdma_port,
        }[test.kind]
        if figure is None:
            raise ValueError(f"profile {profile.profile} has no figure for a {test.kind} test")
        candidates.append(figure)
    return min(candidates, key=lambda figure: figure.gbs)


# --- the search ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Search:
    topo: AcceptTopology
    figures: Mapping[str, ProfileFigures]
    measure: Callable[[GroupTest], float]
    measurements: list[Measurement] = field(default_factory=list)
    rounds: int = 0
    cleared: set[str] = field(default_factory=set)

    def run(self, tests: Sequence[GroupTest]) -> list[Measurement]:
        if not tests:
            return []
        self.rounds += 1
        done = [
            Measurement(
                self.rounds, test, _expected(test, self.topo, self.figures), self.measure(test)
            )
            for test in tests
        ]
        self.measurements.extend(done)
        return done

    def partners(self, busy: Iterable[str]) -> _Partners:
        return _Partners(self.topo, sorted(self.cleared - set(busy)))


class _Partners:
    """Cleared nodes handed out once each per round, from the asker's own leaf first."""

    def __init__(self, topo: AcceptTopology, free: Sequence[str]) -> None:
        self.topo = topo
        self.by_block: dict[str, list[str]] = defaultdict(list)
        for name in reversed(free):
            self.by_block[topo.node(name).block].append(name)
        self.blocks = [block for block in self.by_block]

    def take(self, for_node: str) -> str | None:
        own = self.by_block.get(self.topo.node(for_node).block)
        if own:
            return own.pop()
        while self.blocks:
            pool = self.by_block[self.blocks[-1]]
            if pool:
                return pool.pop()
            self.blocks.pop()
        return None


def _halves(group: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    middle = len(group) // 2
    return group[:middle], group[middle:]


def _bisect(
    search: _Search, failing: list[tuple[str, ...]]
) -> tuple[list[str], set[str], list[Finding]]:
    """Halve slow groups until single nodes; returns the suspects, those of them never
    tested beside a cleared node (no partner was left), and groups slow only together."""
    suspects: list[str] = []
    unresolved: list[Finding] = []
    pending = [g for g in failing if len(g) > 1]
    # A node alone needs a cleared partner; while cleared nodes are short it waits a round.
    waiting = [g[0] for g in failing if len(g) == 1]
    while pending or waiting:
        busy = {name for group in pending for name in group} | set(waiting)
        partners = search.partners(busy)
        tests: list[tuple[tuple[str, ...], GroupTest]] = []
        deferred: list[str] = []
        for half in [h for group in pending for h in _halves(group)] + [(w,) for w in waiting]:
            if len(half) > 1:
                tests.append((half, GroupTest("nccl", half, "bisect")))
            elif (partner := partners.take(half[0])) is not None:
                tests.append((half, GroupTest("nccl", (half[0], partner), "bisect")))
            else:
                deferred.append(half[0])
        if not tests:
            # No cleared node anywhere: the diagnosis alone must decide.
            return suspects + deferred, set(deferred), unresolved
        done = search.run([test for _, test in tests])
        slow = {half for (half, _), m in zip(tests, done, strict=True) if not m.passed}
        tested = {half for half, _ in tests}
        following: list[tuple[str, ...]] = []
        for group in pending:
            a, b = _halves(group)
            if {a, b} <= tested and not {a, b} & slow:
                unresolved.append(
                    Finding("unresolved", ",".join(group), "slow together, each half passes")
                )
        for half, _ in tests:
            if half not in slow:
                search.cleared.update(half)
            elif len(half) == 1:
                suspects.append(half[0])
            else:
                following.append(half)
        pending, waiting = following, deferred
    return suspects, set(), unresolved


def _diagnose(search: _Search, suspects: list[str], unpaired: set[str]) -> list[Finding]:
    partners = search.partners(suspects)
    tests: list[GroupTest] = []
    for index, name in enumerate(suspects):
        tests.append(GroupTest("nvlink", (name,), "node"))
        # With no cleared node left (every group was slow), another suspect stands in:
        # a rail below then names this end, which may be the partner's fault too.
        partner = partners.take(name)
        if partner is None and len(suspects) > 1:
            partner = suspects[(index + 1) % len(suspects)]
        if partner is not None:
            tests.extend(
                GroupTest("rdma", (name, partner), "rail", rail)
                for rail in range(search.topo.rails)
            )
    done = search.run(tests)
    by_node: dict[str, list[Measurement]] = defaultdict(list)
    for measurement in done:
        by_node[measurement.test.nodes[0]].append(measurement)
    pair_tests = {
        m.test.nodes[0]: m for m in search.measurements if m.test.scope == "bisect" and not m.passed
    }
    findings: list[Finding] = []
    for name in suspects:
        nvlink = [m for m in by_node[name] if m.test.kind == "nvlink" and not m.passed]
        rails = [m for m in by_node[name] if m.test.kind == "rdma"]
        slow_rails = [m for m in rails if not m.passed]
        if nvlink:
            findings.append(Finding("node", name, nvlink[0].reason(), node=name))
        if rails and len(slow_rails) == len(rails):
            findings.append(
                Finding("node", name, "every rail: " + slow_rails[0].reason(), node=name)
            )
        elif slow_rails:
            node = search.topo.node(name)
            for m in slow_rails:
                rail = m.test.rail
                assert rail is not None
                findings.append(
                    Finding(
                        "link", f"{name} rail {rail} -> {node.leaves[rail]}", m.reason(), name, rail
                    )
                )
        if not nvlink and not slow_rails and name in unpaired:
            findings.append(
                Finding("unresolved", name, "no cleared partner; NVLink and every rail pass alone")
            )
        elif not nvlink and not slow_rails:
            pair = pair_tests.get(name)
            why = pair.reason() if pair is not None else "its leaf group's all_reduce"
            findings.append(
                Finding("node", name, f"{why}; NVLink and every rail pass alone", node=name)
            )
    # Findings are unique per (kind, name): a node named by NVLink and by every rail is one.
    return list({(f.kind, f.name): f for f in findings}.values())


def _whole_leaves(search: _Search, findings: list[Finding]) -> list[Finding]:
    """A leaf switch whose every node has its link below on that rail."""
    slow: dict[tuple[str, int], set[str]] = defaultdict(set)
    for finding in findings:
        if finding.kind == "link" and finding.node is not None and finding.rail is not None:
            slow[(search.topo.node(finding.node).leaves[finding.rail], finding.rail)].add(
                finding.node
            )
    on_leaf: dict[tuple[str, int], set[str]] = defaultdict(set)
    for node in search.topo.nodes:
        for rail, leaf in enumerate(node.leaves):
            on_leaf[(leaf, rail)].add(node.name)
    return [
        Finding(
            "leaf", leaf, f"every one of its {len(nodes)} links on rail {rail} below its figure"
        )
        for (leaf, rail), nodes in slow.items()
        if len(nodes) > 1 and nodes == on_leaf[(leaf, rail)]
    ]


def _upper_tiers(search: _Search) -> list[Finding]:
    by_block: dict[str, list[str]] = defaultdict(list)
    for node in search.topo.nodes:
        if node.name in search.cleared:
            by_block[node.block].append(node.name)
    islands: dict[int, list[list[str]]] = defaultdict(list)
    for names in by_block.values():
        islands[search.topo.node(names[0]).island].append(names)
    tests: list[tuple[str, GroupTest]] = []
    for island, blocks in sorted(islands.items()):
        if len(blocks) > 1:
            ring = tuple(names[0] for names in blocks)
            tests.append((f"spines of island {island}", GroupTest("nccl", ring, "spine")))
    if len(islands) > 1:
        # The second cleared node of each block, so the core ring shares no node with the
        # spine rings and runs in the same round.
        ring = tuple(
            names[1] if len(names) > 1 else names[0]
            for blocks in islands.values()
            for names in blocks
        )
        tests.append(("core", GroupTest("nccl", ring, "core")))
    done = search.run([test for _, test in tests])
    return [
        Finding("core" if name == "core" else "spines", name, m.reason())
        for (name, _), m in zip(tests, done, strict=True)
        if not m.passed
    ]


def find_slow(
    topo: AcceptTopology,
    figures: Mapping[str, ProfileFigures],
    measure: Callable[[GroupTest], float],
) -> SearchResult:
    """Name the nodes, links, leaves and tiers below their figures; see the module's doc."""
    search = _Search(topo, figures, measure)
    groups = topo.leaf_groups()
    screened = search.run([GroupTest("nccl", g, "leaf") for g in groups if len(g) > 1])
    failing = [m.test.nodes for m in screened if not m.passed]
    for m in screened:
        if m.passed:
            search.cleared.update(m.test.nodes)
    failing.extend(g for g in groups if len(g) == 1)
    suspects, unpaired, unresolved = _bisect(search, failing)
    findings = _diagnose(search, suspects, unpaired) if suspects else []
    findings += _whole_leaves(search, findings)
    findings += _upper_tiers(search)
    return SearchResult(tuple(findings + unresolved), search.rounds, tuple(search.measurements))


# --- a model of faults, for tests, the benchmark and the twin's stand-ins --------------------


@dataclass(frozen=True, slots=True)
class FaultModel:
    """What each test measures when some parts run at a fraction of their speed.

    A ring is as fast as its slowest member: a slow node (GPU, NVLink, PCIe) or a slow link
    (one node's cable on one rail: NCCL spreads its channels over the rails and waits for the
    slowest) lowers every all_reduce it is in. A node's NVLink test sees only the node; an
    ib_write_bw on one rail only the two links of that rail. `tiers` slows the rings that
    cross an island's spines ("island:N") or the core ("core").
    """

    topo: AcceptTopology
    figures: Mapping[str, ProfileFigures]
    nodes: Mapping[str, float] = field(default_factory=dict)
    links: Mapping[tuple[str, int], float] = field(default_factory=dict)
    tiers: Mapping[str, float] = field(default_factory=dict)

    def _link(self, name: str) -> float:
        return min((self.links.get((name, r), 1.0) for r in range(self.topo.rails)), default=1.0)

    def measure(self, test: GroupTest) -> float:
        expected = _expected(test, self.topo, self.figures).gbs
        if test.kind == "nvlink":
            return expected * self.nodes.get(test.nodes[0], 1.0)
        if test.kind == "rdma":
            assert test.rail is not None
            return expected * min(self.links.get((n, test.rail), 1.0) for n in test.nodes)
        factor = min(min(self.nodes.get(n, 1.0), self._link(n)) for n in test.nodes)
        members = [self.topo.node(n) for n in test.nodes]
        islands = {m.island for m in members}
        if len(islands) > 1:
            factor = min(factor, self.tiers.get("core", 1.0))
        for island in islands:
            blocks = {m.block for m in members if m.island == island}
            if len(blocks) > 1:
                factor = min(factor, self.tiers.get(f"island:{island}", 1.0))
        return expected * factor


def rounds_bound(nodes: int) -> int:
    """The most rounds a single bad node may take: log2(nodes) + 3 (screen, diagnosis, tiers)."""
    return math.ceil(math.log2(max(nodes, 2))) + 3
