"""An acceptance run's memory: `accept.json` in its run folder `<state>/runs/<stamp>-accept/`.

Rewritten whole (write, fsync, rename) after every judged step, as a roll's state is
(`ops/roll_state.py`), so an acceptance killed at any instant keeps every step it finished
and `--resume` runs only the rest. The record is also the run's report: per node, each test
with its expected and measured figures, and the node's verdict.
"""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from myriad.ops.accept_plan import ACCEPT_PREFIX, Step, StepResult
from myriad.ops.roll_state import read_run_state, write_run_state
from myriad.plan.slow_nodes import Finding, Measurement, SearchResult

__all__ = ["STATE_FILE", "AcceptRun", "step_key", "summary_rows", "to_junit", "unfinished"]

STATE_FILE = "accept.json"
RUN_SUFFIX = "-accept"
VERSION = 1


def step_key(step: Step) -> str:
    """A step's name in the record: its test and nodes, stable across a resume."""
    return f"{step.test}@{','.join(step.nodes)}"


@dataclass
class AcceptRun:
    run_dir: Path
    data: dict[str, Any]

    @property
    def path(self) -> Path:
        return self.run_dir / STATE_FILE

    @classmethod
    def create(
        cls, runs: Path, level: str, nodes: Sequence[str], reservation: str, at: float | None = None
    ) -> AcceptRun:
        moment = time.time() if at is None else at
        run_dir = runs / (time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(moment)) + RUN_SUFFIX)
        run_dir.mkdir(parents=True, exist_ok=False)
        data = {
            "version": VERSION,
            "level": level,
            "reservation": reservation,
            "nodes": list(nodes),
            "steps": {},
            "finished": False,
        }
        run = cls(run_dir, data)
        run.save()
        return run

    @classmethod
    def load(cls, run_dir: Path) -> AcceptRun:
        path = run_dir / STATE_FILE
        return cls(run_dir, read_run_state(path, VERSION, "acceptance state", "run"))

    def save(self) -> None:
        write_run_state(self.path, self.data)

    def done(self, step: Step) -> bool:
        return step_key(step) in self.data["steps"]

    def remaining(self, steps: Sequence[Step]) -> list[Step]:
        """The steps this run has not judged yet, in their order."""
        return [step for step in steps if not self.done(step)]

    def record(self, result: StepResult) -> None:
        step = result.step
        self.data["steps"][step_key(step)] = {
            "test": step.test,
            "nodes": list(step.nodes),
            "passed": result.passed,
            "measured_gbs": result.measured_gbs,
            "expected_gbs": step.expected.gbs if step.expected else None,
            "gate_gbs": step.expected.gate_gbs if step.expected else None,
            "source": step.expected.source if step.expected else None,
            "reason": result.reason,
            "findings": list(result.findings),
            "drains": not step.group,
        }
        self.save()

    @property
    def searched(self) -> bool:
        """Whether the slow-node search ran to its end (a killed one runs again whole)."""
        return "search" in self.data

    def record_search(self, result: SearchResult) -> None:
        """The search's rounds and each finding as a failed record: a node or a link drains
        its node, with the expected and measured figures of the test that named it; a leaf,
        the spines, the core or a group slow only together is kept and drains nothing."""
        self.data["search"] = {
            "rounds": result.rounds,
            "tests": len(result.measurements),
            "findings": len(result.findings),
        }
        for finding in result.findings:
            named_by = _named_by(finding, result.measurements)
            expected = named_by.expected if named_by else None
            self.data["steps"][f"search {finding.kind}@{finding.name}"] = {
                "test": f"search: {finding.kind}",
                "nodes": [finding.node or finding.name],
                "passed": False,
                "measured_gbs": named_by.measured_gbs if named_by else None,
                "expected_gbs": expected.gbs if expected else None,
                "gate_gbs": expected.gate_gbs if expected else None,
                "source": expected.source if expected else None,
                "reason": f"{ACCEPT_PREFIX}search: {finding.kind} {finding.name}: {finding.reason}",
                "drains": finding.kind in ("node", "link") and finding.node is not None,
            }
        self.save()

    def unresolved_nodes(self) -> frozenset[str]:
        """The nodes the search named as unresolved, alone or in a group slow together."""
        return frozenset(
            name
            for record in self.data["steps"].values()
            if record["test"] == "search: unresolved"
            for name in record["nodes"][0].split(",")
        )

    def placeless_failures(self) -> tuple[str, ...]:
        """The reasons of failed records that drain no node under test."""
        nodes = set(self.data["nodes"])
        return tuple(
            str(record["reason"])
            for record in self.data["steps"].values()
            if not record["passed"]
            and (not record.get("drains", True) or record["nodes"][0] not in nodes)
        )

    def finish(self) -> None:
        self.data["finished"] = True
        self.save()

    def verdicts(self) -> dict[str, str | None]:
        """Each node under test: None where every step it was judged by passed, else the
        drain reason of its first failed step. A step judges its first node (an RDMA step's
        sender); its partner is judged by its own steps."""
        verdict: dict[str, str | None] = dict.fromkeys(self.data["nodes"])
        for record in self.data["steps"].values():
            node = record["nodes"][0]
            if not record.get("drains", True) or node not in verdict:
                continue
            if not record["passed"] and verdict[node] is None:
                verdict[node] = record["reason"]
        return verdict


def _named_by(finding: Finding, measurements: Sequence[Measurement]) -> Measurement | None:
    """The failed test whose figures a finding reports: a link's ib_write_bw on its rail; a
    node's NVLink test, else a rail, else the pair it was bisected into; a tier's ring."""
    failed = [m for m in measurements if not m.passed]
    if finding.kind == "link":
        chosen = [m for m in failed if m.test.kind == "rdma" and m.test.nodes[0] == finding.node
                  and m.test.rail == finding.rail]  # fmt: skip
    elif finding.kind == "node":
        mine = [m for m in failed if m.test.nodes[0] == finding.node]
        chosen = sorted(mine, key=lambda m: ("nvlink", "rdma", "nccl").index(m.test.kind))
    elif finding.kind in ("spines", "core"):
        scope = "core" if finding.kind == "core" else "spine"
        chosen = [m for m in failed if m.test.scope == scope]
    else:
        chosen = []
    return chosen[0] if chosen else None


def unfinished(runs: Path) -> Path | None:
    """The newest acceptance run folder whose run did not finish, if any."""
    if not runs.is_dir():
        return None
    for folder in sorted(runs.glob(f"*{RUN_SUFFIX}"), reverse=True):
        path = folder / STATE_FILE
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError:
            return folder
        if not data.get("finished"):
            return folder
    return None


def summary_rows(run: AcceptRun) -> list[dict[str, Any]]:
    """One row per judged step, failures first, then by node and test: what a summary table
    and `--json` show (test, node, expected, measured, ratio, passed, reason, findings)."""
    rows = []
    for record in run.data["steps"].values():
        expected, measured = record["expected_gbs"], record["measured_gbs"]
        ratio = measured / expected if expected and measured is not None else None
        findings = record.get("findings", [])  # runs recorded before findings were kept
        rows.append({**record, "node": record["nodes"][0], "ratio": ratio, "findings": findings})
    return sorted(rows, key=lambda r: (r["passed"], r["node"], r["test"]))


def to_junit(run: AcceptRun, cluster: str) -> str:
    """The run as JUnit XML, a suite per node and a case per test, as `validate --junit`
    writes (validate/report.py): a failed test's message is its drain reason, its text the
    expected and measured figures, each fail-slow finding on a line of its own, or, for a test
    with no figure (DCGM, output that could not be read), the reason again."""
    by_node: dict[str, list[dict[str, Any]]] = {node: [] for node in run.data["nodes"]}
    for row in summary_rows(run):
        by_node.setdefault(row["node"], []).append(row)
    failures = sum(1 for rows in by_node.values() for r in rows if not r["passed"])
    root = ET.Element(
        "testsuites",
        {
            "name": f"myriad accept {cluster} {run.data['level']}",
            "tests": str(sum(len(rows) for rows in by_node.values())),
            "failures": str(failures),
        },
    )
    for node, rows in by_node.items():
        suite = ET.SubElement(
            root,
            "testsuite",
            {
                "name": node,
                "tests": str(len(rows)),
                "failures": str(sum(1 for r in rows if not r["passed"])),
            },
        )
        for row in sorted(rows, key=lambda r: r["test"]):
            case = ET.SubElement(
                suite, "testcase", {"classname": f"{cluster}.{node}", "name": row["test"]}
            )
            if not row["passed"]:
                failure = ET.SubElement(
                    case, "failure", {"message": row["reason"] or "", "type": row["test"]}
                )
                failure.text = _failure_text(row)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _failure_text(row: dict[str, Any]) -> str:
    if row["findings"]:
        return "\n".join(row["findings"])
    if row["expected_gbs"] is None:
        return str(row["reason"] or "")
    return (
        f"expected: {row['expected_gbs']} GB/s (gate {row['gate_gbs']}, {row['source']})\n"
        f"measured: {row['measured_gbs']} GB/s"
    )
