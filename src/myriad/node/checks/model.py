"""The check model: what a check is, what an expectation is, what evaluating one gives.

Standard library only, like every module of this package (see its README): the node health
runner imports this on the node, where there is no pydantic, rich or Ansible.

- `Check`: one declaration per check, in the subject module it belongs to.
- `Expectation`: plain data (JSON-serialisable) that the controller derives from the spec,
  the plan and the inventory, and that evaluation consumes, on the controller or on a node.
- `Outcome` / `CheckResult`: what evaluating one expectation against a node's facts gives.
- `Context`: what a check's `derive` reads on the controller (spec, plan, inventory
  variables). Its field types are imported for type checkers only: nothing here needs them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from myriad.node.facts import NOT_GATHERED, Fact, FileDigest, JobRun, NodeFacts
from myriad.node.parsers import Gres, KubeNode, SlurmTopology
from myriad.node.parsers.slurm_state import NodeState, parse_node_state

if TYPE_CHECKING:
    from myriad.plan.model import Plan
    from myriad.plan.ports import Port
    from myriad.spec.catalog_models import Catalog
    from myriad.spec.models import Cluster, Pool, Profile

Status = Literal["pass", "fail", "not-applicable", "error"]
STATUSES: tuple[Status, ...] = ("pass", "fail", "not-applicable", "error")
# Lists in a one-line `actual` stop after this many items; the rest is counted.
SHOWN = 4
# The version of the expectation document (NodeExpectations.to_dict); a reader refuses others.
EXPECTATIONS_SCHEMA = 1


# --- results -----------------------------------------------------------------------------


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


def unknown(reason: str) -> Outcome:
    """The fact could not be read: nothing is claimed either way (never a pass)."""
    return Outcome("error", reason)


def unavailable(fact: Fact[Any]) -> Outcome:
    """A fact without a value: missing tools and faults are differences, unreadable is not."""
    if fact.state in ("missing", "failed"):
        return failed(fact.detail)
    return unknown(fact.detail or f"fact {fact.state}")


def listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:SHOWN])
    return shown + (f" (+{len(items) - SHOWN} more)" if len(items) > SHOWN else "")


def verdict(problems: Sequence[str], good: str, unknowns: Sequence[str] = ()) -> Outcome:
    """Fail on any difference; else `error` when some part could not be read; else pass."""
    if problems:
        return failed(listed([*problems, *unknowns]))
    if unknowns:
        return unknown(listed(unknowns))
    return passed(good)


# --- expectations (plain data) -------------------------------------------------------------


class Expect(NamedTuple):
    """What `derive` gives for a check that applies: the expected value (JSON data only:
    str, int, float, bool, None, lists and dicts of them), its spec field and the fix
    (`{node}` is filled in per result)."""

    value: Any
    spec_field: str
    fix: str


class Skip(NamedTuple):
    """What `derive` gives for a check the spec makes meaningless here, and why."""

    spec_field: str
    reason: str


@dataclass(frozen=True, slots=True)
class Expectation:
    check: str
    expected: Any
    spec_field: str
    fix: str = ""
    applies: bool = True
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "expected": self.expected,
            "spec_field": self.spec_field,
            "fix": self.fix,
            "applies": self.applies,
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Expectation:
        return cls(
            check=str(data["check"]),
            expected=data.get("expected"),
            spec_field=str(data.get("spec_field", "")),
            fix=str(data.get("fix", "")),
            applies=bool(data.get("applies", True)),
            reason=str(data.get("reason", "")),
        )


@dataclass(frozen=True, slots=True)
class NodeExpectations:
    """`shared` is one tuple for all the nodes of one kind (pool, Slurm role); `own` is
    this node's (host name, Slurm switch)."""

    node: str
    pool: str
    profile: str
    role: str
    shared: tuple[Expectation, ...]
    own: tuple[Expectation, ...] = ()

    @property
    def expectations(self) -> tuple[Expectation, ...]:
        return self.shared + self.own

    def to_dict(self) -> dict[str, Any]:
        """The node's expectation document, as the node health runner reads it (JSON)."""
        return {
            "schema": EXPECTATIONS_SCHEMA,
            "node": self.node,
            "pool": self.pool,
            "profile": self.profile,
            "role": self.role,
            "expectations": [e.to_dict() for e in self.expectations],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NodeExpectations:
        """Read an expectation document; ValueError (with the reason) when it is not one."""
        if not isinstance(data, Mapping):
            raise ValueError("an expectation document is a JSON object")
        if data.get("schema") != EXPECTATIONS_SCHEMA:
            raise ValueError(
                f"expectation document schema {data.get('schema')!r}, "
                f"expected {EXPECTATIONS_SCHEMA}"
            )
        entries = data.get("expectations")
        if not isinstance(entries, list) or not all(isinstance(e, Mapping) for e in entries):
            raise ValueError("an expectation document needs a list of expectations")
        try:
            shared = tuple(Expectation.from_dict(e) for e in entries)
        except KeyError as exc:
            raise ValueError(f"an expectation without {exc.args[0]!r}") from None
        return cls(
            node=str(data.get("node", "")),
            pool=str(data.get("pool", "")),
            profile=str(data.get("profile", "")),
            role=str(data.get("role", "")),
            shared=shared,
        )


@dataclass(frozen=True, slots=True)
class ClusterExpectations:
    cluster: str
    provider: str
    orchestrator: str
    nodes: tuple[NodeExpectations, ...]
    # Hosts whose gathered facts carry the orchestrator's view, in order of preference.
    controllers: tuple[str, ...]

    def node(self, name: str) -> NodeExpectations:
        for node in self.nodes:
            if node.node == name:
                return node
        raise KeyError(name)


def each(names: Iterable[str], value: Any) -> dict[str, Any]:
    """The same expected value on each of several devices or interfaces."""
    return {"names": list(names), "value": value}


def bringup_fix(tag: str, what: str = "") -> str:
    """The fix that re-applies one role to the node; `{node}` is filled per result."""
    lead = f"{what}; " if what else ""
    return f"{lead}re-run the {tag} role: myriad bringup --tags {tag} --limit {{node}}"


# --- the orchestrator's view, read once from a controller's facts ----------------------------


@dataclass(frozen=True, slots=True)
class SlurmNodeView:
    state: str
    drained: bool
    not_responding: bool
    gres: tuple[Gres, ...]
    reason: str | None
    # The state as Slurm printed it (`IDLE+COMPLETING+NOT_RESPONDING`, `drained*`), read
    # whole by parsers.slurm_state; empty: only the fields above are known.
    raw_state: str = ""

    def node_state(self) -> NodeState:
        if self.raw_state:
            return parse_node_state(self.raw_state)
        flags = {"DRAIN"} if self.drained else set()
        if self.not_responding:
            flags.add("NOT_RESPONDING")
        return parse_node_state("+".join([self.state, *sorted(flags)]))

    def describe(self) -> str:
        why = f" (Reason={self.reason})" if self.reason else ""
        return f"{self.node_state().describe()}{why}"


@dataclass(frozen=True, slots=True)
class ClusterView:
    source: str | None
    slurm_nodes: Fact[Mapping[str, SlurmNodeView]]
    slurm_topology: Fact[SlurmTopology]
    kube_nodes: Fact[Mapping[str, KubeNode]]
    # The controller's own munge key and Slurm files (digests), which every node must equal.
    controller_files: Fact[Mapping[str, FileDigest | None]] = NOT_GATHERED
    # The controller those files are from (also when its orchestrator did not answer).
    files_source: str | None = None
    # The validation job the controller ran (`validate --no-jobs`: not gathered).
    job: Fact[JobRun] = NOT_GATHERED
    # Node -> the one NVLink domain its GPUs report (`clique N of cluster UUID`), None where
    # they report none or several: the trays of a rack compared with each other.
    gpu_domains: Fact[Mapping[str, str | None]] = NOT_GATHERED


# --- the controller's side: what `derive` reads ------------------------------------------


@dataclass(frozen=True, slots=True)
class Context:
    """One kind of node (a pool, and its Slurm role) as the spec, plan and inventory say,
    and for checks `per_node` also the node itself."""

    spec: Cluster
    catalog: Catalog
    plan: Plan
    pool: Pool
    profile: Profile
    # The inventory's variables for the pool's nodes, completed by the roles' defaults.
    variables: Mapping[str, Any]
    compute_ports: Sequence[Port]
    storage_ports: Sequence[Port]
    slurm_controller: bool = False
    # The `slurm_nodes` entry (node set) the node belongs to; None: not a Slurm node.
    slurm_node_set: Mapping[str, Any] | None = None
    node: str = ""
    # The switch the Slurm topology puts the node under (per node).
    switch: str | None = None
    # The rack-scale NVLink domain the node is a tray of: its name (`nvlNN`, as Slurm's
    # blocks and monitoring name it) and its trays (per node; None: not a tray).
    nvlink_domain: tuple[str, tuple[str, ...]] | None = None

    @property
    def p(self) -> str:
        """The spec path of the pool's profile, the stem of most spec fields."""
        return f"profiles.{self.pool.profile}"


# --- a check -------------------------------------------------------------------------------

Evaluate = Callable[[Any, NodeFacts, ClusterView, str], Outcome]


@dataclass(frozen=True, slots=True)
class Check:
    """One check, whole: declared once, in its subject's module (checks/<subject>.py).

    - `derive` (controller): Context → Expect (JSON data) or Skip (not applicable, why);
    - `evaluate` (controller or node): (expected, facts, cluster view, node) → Outcome;
    - `explain`: the expected value in words, the report's `expected` column.
    `per_node` checks are derived for each node (its name, its switch); the others once
    per kind of node and shared.
    """

    id: str
    title: str
    spec_fields: tuple[str, ...]
    derive: Callable[[Context], Expect | Skip]
    evaluate: Evaluate
    explain: Callable[[Any], str] = str
    per_node: bool = False


# --- evaluators several subjects share -----------------------------------------------------


def unit_active(expected: str, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    """A systemd unit is active (`systemctl is-active` of the gatherer's unit list)."""
    if not facts.units.ok:
        return unavailable(facts.units)
    value = facts.units.get().get(expected)
    if value is None:
        return unknown(f"{expected} was not among the units the gatherer asked about")
    return passed(f"{expected} active") if value == "active" else failed(f"{expected} {value}")


def explain_unit(expected: str) -> str:
    return f"{expected} active"


def link_mtu(names: Sequence[str], mtu: int, facts: NodeFacts) -> Outcome:
    """The MTU of network interfaces (`ip -j -d link`)."""
    if not facts.links.ok:
        return unavailable(facts.links)
    links = facts.links.get()
    problems = []
    for name in names:
        link = links.get(name)
        if link is None or link.mtu != mtu:
            problems.append(f"{name} {'missing' if link is None else link.mtu}")
    return verdict(problems, f"MTU {mtu} on {len(names)}")


def between_runs(fact: Fact[Any]) -> Outcome | None:
    """For the node health checks whose facts only the node health runner reads (between
    its runs: kernel log cursor, counter growth): not applicable where nothing read them
    (`myriad validate` on the controller), unavailable when unreadable, else None."""
    if fact.state == "not-gathered":
        return Outcome("not-applicable", "judged on the node by myriad-health, between runs")
    if not fact.ok:
        return unavailable(fact)
    return None
