"""A validation run's results: the report object, JSON and JUnit XML, and the kept last one.

The report is what `myriad validate` (and the last phase of `myriad up`) returns; the terminal
tables are `myriad.views.validation`'s. JSON carries every result; JUnit XML has one testcase
per node and check, so a CI system lists each difference by node.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from myriad import JSON_FORMAT
from myriad.errors import ValidateError
from myriad.fsutil import atomic_write_text
from myriad.node.checks import CHECK_ORDER, STATUSES, TITLES, CheckResult, Status


@dataclass(frozen=True, slots=True)
class CheckSummary:
    check: str
    title: str
    spec_fields: tuple[str, ...]
    counts: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class NodeSummary:
    node: str
    counts: Mapping[str, int]
    failing: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ValidationReport:
    cluster: str
    spec: str
    results: tuple[CheckResult, ...]
    unreachable: Mapping[str, str] = field(default_factory=dict)
    gather_failed: Mapping[str, str] = field(default_factory=dict)
    gather_seconds: float | None = None
    evaluate_seconds: float | None = None
    run_dir: str | None = None
    view_source: str | None = None

    @property
    def counts(self) -> dict[str, int]:
        counted = Counter(result.status for result in self.results)
        return {status: counted.get(status, 0) for status in STATUSES}

    @property
    def nodes(self) -> list[str]:
        return list(dict.fromkeys(result.node for result in self.results))

    @property
    def ok(self) -> bool:
        """Nothing failed and nothing could not be checked."""
        return not any(r.status in ("fail", "error") for r in self.results)

    def problems(self) -> list[CheckResult]:
        return [r for r in self.results if r.status in ("fail", "error")]

    def by_check(self) -> list[CheckSummary]:
        counts: dict[str, Counter[str]] = {}
        fields: dict[str, dict[str, None]] = {}
        for result in self.results:
            counts.setdefault(result.check, Counter())[result.status] += 1
            fields.setdefault(result.check, {})[result.spec_field] = None
        return [
            CheckSummary(
                check,
                TITLES.get(check, check),
                tuple(fields[check]),
                {status: counts[check].get(status, 0) for status in STATUSES},
            )
            for check in sorted(counts, key=lambda c: (CHECK_ORDER.get(c, len(CHECK_ORDER)), c))
        ]

    def by_node(self) -> list[NodeSummary]:
        counts: dict[str, Counter[str]] = {}
        failing: dict[str, list[str]] = {}
        for result in self.results:
            counts.setdefault(result.node, Counter())[result.status] += 1
            if result.status in ("fail", "error"):
                failing.setdefault(result.node, []).append(result.check)
        return [
            NodeSummary(
                node,
                {status: counts[node].get(status, 0) for status in STATUSES},
                tuple(failing.get(node, ())),
            )
            for node in counts
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "spec": self.spec,
            "ok": self.ok,
            "counts": self.counts,
            "nodes": len(self.nodes),
            "unreachable": dict(self.unreachable),
            "gather_failed": dict(self.gather_failed),
            "gather_seconds": self.gather_seconds,
            "evaluate_seconds": self.evaluate_seconds,
            "run_dir": self.run_dir,
            "orchestrator_view_from": self.view_source,
            "checks": [
                {
                    "id": s.check,
                    "title": s.title,
                    "spec_fields": list(s.spec_fields),
                    **s.counts,
                }
                for s in self.by_check()
            ],
            "results": [result._asdict() for result in self.results],
        }


# --- JSON and JUnit --------------------------------------------------------------------------


def to_json(report: ValidationReport) -> str:
    """The report as the document `validate --json` prints and `keep_last` keeps."""
    return json.dumps({"format": JSON_FORMAT, **report.to_dict()}, indent=2) + "\n"


def _message(result: CheckResult) -> str:
    return f"expected {result.expected}; actual {result.actual}"


def _body(result: CheckResult) -> str:
    lines = [
        f"expected:   {result.expected}",
        f"actual:     {result.actual}",
        f"spec field: {result.spec_field}",
        f"fix:        {result.fix}",
    ]
    if result.detail:
        lines += ["", result.detail]
    return "\n".join(lines)


_JUNIT_TAG: dict[Status, str] = {"fail": "failure", "error": "error"}


def _suite(cluster: str, node: str, results: Sequence[CheckResult]) -> ET.Element:
    counted = Counter(r.status for r in results)
    suite = ET.Element(
        "testsuite",
        {
            "name": node,
            "tests": str(len(results)),
            "failures": str(counted["fail"]),
            "errors": str(counted["error"]),
            "skipped": str(counted["not-applicable"]),
        },
    )
    for result in results:
        case = ET.SubElement(
            suite, "testcase", {"classname": f"{cluster}.{node}", "name": result.check}
        )
        if result.status in ("fail", "error"):
            element = ET.SubElement(
                case, _JUNIT_TAG[result.status], {"message": _message(result), "type": result.check}
            )
            element.text = _body(result)
        elif result.status == "not-applicable":
            ET.SubElement(case, "skipped", {"message": f"not applicable: {result.actual}"})
    return suite


def to_junit(report: ValidationReport) -> str:
    by_node: dict[str, list[CheckResult]] = {}
    for result in report.results:
        by_node.setdefault(result.node, []).append(result)
    counts = report.counts
    root = ET.Element(
        "testsuites",
        {
            "name": f"myriad validate {report.cluster}",
            "tests": str(len(report.results)),
            "failures": str(counts["fail"]),
            "errors": str(counts["error"]),
            "skipped": str(counts["not-applicable"]),
        },
    )
    for node, results in by_node.items():
        root.append(_suite(report.cluster, node, results))
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


def write_junit(report: ValidationReport, path: Path) -> None:
    from myriad.fsutil import atomic_write_text

    atomic_write_text(path, to_junit(report))


def merge(reports: Iterable[ValidationReport]) -> ValidationReport:
    """One report from several (the node checks and --perf), in order."""
    reports = list(reports)
    first = reports[0]
    return ValidationReport(
        cluster=first.cluster,
        spec=first.spec,
        results=tuple(r for report in reports for r in report.results),
        unreachable={k: v for report in reports for k, v in report.unreachable.items()},
        gather_failed={k: v for report in reports for k, v in report.gather_failed.items()},
        gather_seconds=first.gather_seconds,
        evaluate_seconds=first.evaluate_seconds,
        run_dir=first.run_dir,
        view_source=first.view_source,
    )


# --- the last report, kept for `myriad report` ------------------------------------------------

LAST_REPORT = Path("validation") / "last.json"


def keep_last(report: ValidationReport, state_root: Path) -> None:
    """The cluster's latest validation, whole, beside its other state (replaced each run)."""
    atomic_write_text(state_root / LAST_REPORT, to_json(report), mode=0o600)


def read_last(state_root: Path) -> dict[str, Any] | None:
    """The kept report, or None when the cluster was never validated from this machine."""
    return read_kept(state_root / LAST_REPORT, "validation")


def read_kept(path: Path, what: str) -> dict[str, Any] | None:
    """A document a verb keeps in the cluster's state; None when it never ran here."""
    try:
        document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as exc:
        raise ValidateError(f"{path}: the kept {what} cannot be read ({exc})") from exc
    return document
