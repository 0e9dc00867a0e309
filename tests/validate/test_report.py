"""The report: counts and verdict, the terminal tables (views), JSON and JUnit XML."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

from myriad import JSON_FORMAT
from myriad.node.checks import CheckResult
from myriad.validate.report import ValidationReport, merge, to_json, to_junit, write_junit
from myriad.views.validation import print_report

RESULTS = (
    CheckResult("ctl01", "node.reachable", "pass", "facts gathered", "gathered in 0.4 s", "pools"),
    CheckResult("ctl01", "time.sync", "pass", "chrony active", "chrony active", "pools"),
    CheckResult(
        "ctl01", "gpu.count", "not-applicable", "", "profile cpu has no GPUs", "profiles.cpu.gpu"
    ),
    CheckResult("node01", "node.reachable", "pass", "facts gathered", "gathered", "pools"),
    CheckResult(
        "node01",
        "nccl.conf",
        "fail",
        "2 settings: NCCL_IB_DISABLE=1, NCCL_SOCKET_IFNAME=^docker,lo",
        "NCCL_IB_DISABLE=0 (expected 1)",
        "network.fabric, software.nccl",
        "re-run the nccl role: myriad bringup --tags nccl --limit node01",
        "--- expected\n+++ node01\n-NCCL_IB_DISABLE=1\n+NCCL_IB_DISABLE=0\n",
    ),
    CheckResult(
        "node01",
        "slurm.node-state",
        "error",
        "idle/allocated/mixed/completing, not drained",
        "Slurm's view unavailable: no controller answered",
        "pools.node",
        "see `scontrol show node node01`",
    ),
    CheckResult(
        "node02",
        "node.reachable",
        "fail",
        "facts gathered",
        'unreachable: Failed to connect <&> "quoted"',
        "pools",
        "check that node02 is up",
    ),
)


def report(results: tuple[CheckResult, ...] = RESULTS) -> ValidationReport:
    return ValidationReport(
        cluster="local",
        spec="inventories/local/cluster.yaml",
        results=results,
        unreachable={"node02": "Failed to connect"},
        gather_seconds=2.5,
        run_dir="/state/runs/x-validate",
        view_source="ctl01",
    )


def test_counts_and_verdict() -> None:
    failing = report()
    assert failing.counts == {"pass": 3, "fail": 2, "not-applicable": 1, "error": 1}
    assert failing.nodes == ["ctl01", "node01", "node02"]
    assert not failing.ok
    passing = report(tuple(r for r in RESULTS if r.status in ("pass", "not-applicable")))
    assert passing.ok
    # An error (could not check) is not a pass either.
    only_error = report(tuple(r for r in RESULTS if r.status != "fail"))
    assert not only_error.ok


def test_summaries_per_check_in_check_order_and_per_node() -> None:
    by_check = report().by_check()
    assert [s.check for s in by_check] == [
        "node.reachable",
        "time.sync",
        "gpu.count",
        "nccl.conf",
        "slurm.node-state",
    ]
    reach = by_check[0]
    assert reach.counts == {"pass": 2, "fail": 1, "not-applicable": 0, "error": 0}
    assert reach.title == "facts gathered from the node"
    nodes = {s.node: s for s in report().by_node()}
    assert nodes["node01"].failing == ("nccl.conf", "slurm.node-state")
    assert nodes["ctl01"].failing == ()


def test_terminal_report_shows_checks_failures_fixes_and_unreachable_nodes() -> None:
    console = Console(record=True, width=220)
    print_report(console, report())
    text = console.export_text()
    assert "Validation of local: facts from 2 of 3 nodes in 2.5 s" in text
    assert "Slurm/Kubernetes view from ctl01" in text
    for piece in (
        "nccl.conf",
        "NCCL_IB_DISABLE=0 (expected 1)",
        "network.fabric, software.nccl",
        "re-run the nccl role: myriad bringup --tags nccl",
        "+NCCL_IB_DISABLE=0",
        "1 unreachable node(s), counted as failures: node02",
        "the cluster differs from its spec: 3 passed, 2 failed, 1 errors, 1 not applicable",
    ):
        assert piece in text, piece
    passing = Console(record=True, width=200)
    print_report(passing, report(RESULTS[:3]))
    assert "the cluster matches its spec" in passing.export_text()


def test_json_carries_every_result_and_the_summary() -> None:
    document = json.loads(to_json(report()))
    assert document["format"] == JSON_FORMAT
    assert document["ok"] is False
    assert document["counts"]["fail"] == 2
    assert document["unreachable"] == {"node02": "Failed to connect"}
    assert len(document["results"]) == len(RESULTS)
    first_fail = next(r for r in document["results"] if r["status"] == "fail")
    assert first_fail == {
        "node": "node01",
        "check": "nccl.conf",
        "status": "fail",
        "expected": RESULTS[4].expected,
        "actual": "NCCL_IB_DISABLE=0 (expected 1)",
        "spec_field": "network.fabric, software.nccl",
        "fix": RESULTS[4].fix,
        "detail": RESULTS[4].detail,
    }
    assert document["checks"][0]["id"] == "node.reachable"


def test_junit_has_one_testcase_per_node_and_check(tmp_path: Path) -> None:
    path = tmp_path / "out" / "validate.xml"
    write_junit(report(), path)
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == (
        "7",
        "2",
        "1",
        "1",
    )
    suites = {suite.get("name"): suite for suite in root}
    assert list(suites) == ["ctl01", "node01", "node02"]
    cases = [(c.get("classname"), c.get("name")) for s in root for c in s]
    assert len(cases) == len(set(cases)) == len(RESULTS)
    nccl = suites["node01"].find("testcase[@name='nccl.conf']")
    assert nccl is not None
    failure = nccl.find("failure")
    assert failure is not None
    assert failure.get("message") == (
        f"expected {RESULTS[4].expected}; actual NCCL_IB_DISABLE=0 (expected 1)"
    )
    assert "fix:        re-run the nccl role" in (failure.text or "")
    assert "+NCCL_IB_DISABLE=0" in (failure.text or "")
    skipped = suites["ctl01"].find("testcase[@name='gpu.count']/skipped")
    assert skipped is not None and "profile cpu has no GPUs" in (skipped.get("message") or "")
    assert suites["node01"].find("testcase[@name='slurm.node-state']/error") is not None
    unreachable = suites["node02"].find("testcase[@name='node.reachable']/failure")
    assert unreachable is not None
    assert '<&> "quoted"' in (unreachable.get("message") or "")
    assert suites["ctl01"].find("testcase[@name='time.sync']/*") is None


def test_junit_text_is_well_formed_even_for_an_empty_run() -> None:
    empty = ValidationReport(cluster="c", spec="s", results=())
    root = ET.fromstring(to_junit(empty))
    assert root.get("tests") == "0" and len(root) == 0


def test_merge_appends_perf_results() -> None:
    perf = ValidationReport(
        cluster="local",
        spec="s",
        results=(
            CheckResult(
                "node01+node02",
                "perf.allreduce-pair",
                "fail",
                ">= 300.0 GB/s",
                "250.0 GB/s",
                "profiles.gpu.nics.compute",
            ),
        ),
    )
    merged = merge([report(), perf])
    assert len(merged.results) == len(RESULTS) + 1
    assert merged.unreachable == {"node02": "Failed to connect"}
    assert merged.gather_seconds == 2.5
    assert merged.by_check()[-1].check == "perf.allreduce-pair"


def test_a_passing_report_is_quiet_unless_verbose() -> None:
    passing = report(RESULTS[:3])
    quiet = Console(record=True, width=200)
    print_report(quiet, passing)
    text = quiet.export_text()
    # No table of checks that all passed or never applied: the summary says it.
    assert "time.sync" not in text and "gpu.count" not in text
    assert "the cluster matches its spec: 2 passed" in text
    assert "--verbose lists every check" in text
    loud = Console(record=True, width=200)
    print_report(loud, passing, verbose=True)
    every = loud.export_text()
    assert "time.sync" in every and "gpu.count" in every


def test_a_failing_report_lists_only_the_checks_that_did_not_pass() -> None:
    console = Console(record=True, width=220)
    print_report(console, report())
    checks = console.export_text().split("Checks", 1)[1].split("Nodes with problems", 1)[0]
    for check in ("node.reachable", "nccl.conf", "slurm.node-state"):
        assert check in checks, check
    for check in ("time.sync", "gpu.count"):
        assert check not in checks, check


def test_the_last_report_is_kept_for_myriad_report(tmp_path: Path) -> None:
    from myriad.errors import ValidateError
    from myriad.validate.report import keep_last, read_last

    assert read_last(tmp_path) is None
    keep_last(report(), tmp_path)
    kept = read_last(tmp_path)
    assert kept is not None and kept["counts"]["fail"] == 2
    assert (tmp_path / "validation" / "last.json").stat().st_mode & 0o777 == 0o600
    (tmp_path / "validation" / "last.json").write_text("{")
    with pytest.raises(ValidateError, match="the kept validation cannot be read"):
        read_last(tmp_path)
