"""`myriad validate SPEC --fabric [--from FILE]`: the discovered fabric against the plan.

The discovered fabric is `ibnetdiscover`'s output: read from FILE, or gathered by running
`ibnetdiscover` (playbooks/fabric.yml) on the first OpenSM node of the spec
(`network.infiniband.sm_nodes`), else on the first compute node: any HCA on the subnet
sees all of it. The result is the `ValidationReport` (so JSON, JUnit and the exit code are
validate's: 0 as planned, 1 a finding) and the lines that describe the comparison; input
that cannot be read raises FabricInputError (2).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from myriad import paths
from myriad.errors import FabricInputError, ValidateError
from myriad.fsutil import atomic_write_text
from myriad.node.parsers.common import ParseFailure
from myriad.node.parsers.ibnetdiscover import parse_ibnetdiscover
from myriad.plan.cabling import iter_cables
from myriad.plan.fabric import iter_switch_tree
from myriad.plan.pipeline import PlanResult, plan_spec
from myriad.validate.cabling import CHECK_OF, SPEEDS, Comparison, compare_fabric, fabric_report
from myriad.validate.fabric_topology import discovered_tree, topology_conf, tree_differences
from myriad.validate.report import ValidationReport, write_junit

DISCOVER_TASK = "Discover the InfiniBand subnet"


@dataclass(frozen=True, slots=True)
class FabricValidation:
    """`validate --fabric`'s result: the report and, for a person, what was compared."""

    report: ValidationReport
    lines: tuple[str, ...]


def check_fabric(
    plan_result: PlanResult, discovered: str, *, source: str, speed_cap: str | None = None
) -> tuple[Comparison, ValidationReport]:
    """The comparison and report for `discovered` (ibnetdiscover's text, from `source`)."""
    loaded = plan_result.loaded
    if plan_result.plan is None or plan_result.has_errors:
        raise ValidateError("the spec has lint errors (see `myriad plan`)")
    fabric = plan_result.plan.fabric
    if fabric is None:
        raise ValidateError("the spec has no compute fabric to compare")
    if loaded.spec.network.fabric != "infiniband":
        raise ValidateError(
            f"network.fabric is {loaded.spec.network.fabric}: ibnetdiscover describes "
            "InfiniBand subnets only (an Ethernet fabric as built is not compared yet)"
        )
    if speed_cap is not None and speed_cap not in SPEEDS:
        raise FabricInputError(f"--speed-cap {speed_cap}: one of {', '.join(SPEEDS)}")
    try:
        topology = parse_ibnetdiscover(discovered)
    except ParseFailure as exc:
        raise FabricInputError(f"{source}: {exc.reason}") from None
    started = time.perf_counter()
    cables = iter_cables(loaded.spec, loaded.catalog, fabric)
    comparison = compare_fabric(cables, topology, speed_cap=speed_cap)
    report = fabric_report(comparison, loaded.spec.metadata.name, loaded.source.file)
    return comparison, ValidationReport(
        cluster=report.cluster,
        spec=report.spec,
        results=report.results,
        evaluate_seconds=time.perf_counter() - started,
        view_source=source,
    )


def fabric_lines(cluster: str, source: str, comparison: Comparison) -> list[str]:
    """The comparison as plain lines: a summary, then each finding and its fix."""
    lines = [
        f"fabric of {cluster} from {source}: {comparison.cables_as_planned:,} of "
        f"{comparison.planned_cables:,} cables as planned "
        f"({comparison.discovered_nodes:,} nodes, {comparison.discovered_links:,} links "
        "discovered)"
    ]
    for finding in comparison.findings:
        lines.append(f"{CHECK_OF[finding.kind]:<17} {finding.kind:<17} {finding.message}")
        lines.append(f"{'':<35} fix: {finding.fix}")
    count = len(comparison.findings)
    lines.append(
        "the fabric is as planned"
        if not count
        else f"{count} finding{'s' if count > 1 else ''}: the fabric differs from its plan"
    )
    return lines


def discover_host(plan_result: PlanResult) -> str:
    """Where `ibnetdiscover` runs: the first OpenSM node, else the first compute node."""
    spec = plan_result.loaded.spec
    infiniband = spec.network.infiniband
    sm_nodes = list(infiniband.sm_nodes) if infiniband is not None else []
    if sm_nodes:
        return str(sm_nodes[0])
    for pool in spec.pools_with_role("compute"):
        return pool.hostname(1)
    raise ValidateError("no compute node to run ibnetdiscover on: give --from FILE")


def discovered_text(events: Sequence[Mapping[str, Any]], host: str) -> str:
    """ibnetdiscover's stdout from the gathering run's events, or why there is none."""
    for event in events:
        data = event.get("event_data") or {}
        if data.get("host") != host or data.get("task") != DISCOVER_TASK:
            continue
        result = data.get("res") or {}
        if event.get("event") == "runner_on_ok":
            return str(result.get("stdout") or "")
        if event.get("event") in ("runner_on_failed", "runner_on_unreachable"):
            message = result.get("msg") or result.get("stderr") or "failed"
            raise ValidateError(f"ibnetdiscover on {host}: {' '.join(str(message).split())}")
    raise ValidateError(f"ibnetdiscover on {host}: the run reported nothing")


def _gather(spec_path: Path, stack: str | None, stack_outputs: Path | None) -> tuple[str, str]:
    from myriad.bringup.flow import cluster_state
    from myriad.provision.resolve import resolve_cluster
    from myriad.render.writer import write_inventory
    from myriad.runner import TUNED_WITHOUT_MITOGEN, new_run_dir, run_playbook

    cluster = resolve_cluster(spec_path, stack=stack, stack_outputs=stack_outputs)
    host = discover_host(cluster.result)
    state = cluster_state(cluster.loaded.spec.metadata.name).root
    inventory_dir = state / "inventory"
    write_inventory(cluster.inventory, inventory_dir)
    run_dir = new_run_dir(state, "fabric")
    result = run_playbook(
        paths.playbook("fabric.yml"),
        inventory_dir / "hosts.yml",
        run_dir,
        hosts=1,
        limit=[host],
        keep_events=True,
        tuning=TUNED_WITHOUT_MITOGEN,
        timeout_s=600,
    )
    return discovered_text(result.events, host), f"ibnetdiscover on {host}"


def _write_topology(plan_result: PlanResult, discovered: str, path: Path) -> list[str]:
    """Write topology.conf from the discovered fabric; lines saying where its tree differs."""
    loaded = plan_result.loaded
    found = discovered_tree(parse_ibnetdiscover(discovered))
    atomic_write_text(path, topology_conf(found))
    differences = tree_differences(iter_switch_tree(loaded.spec, loaded.catalog), found)
    head = f"topology.conf from the discovered fabric written to {path}"
    if not differences:
        return [f"{head}; its tree is the planned one"]
    return [f"{head}; where its tree differs from the plan:", *differences]


def run_validate_fabric(
    spec_path: Path,
    *,
    from_file: Path | None,
    stack: str | None = None,
    stack_outputs: Path | None = None,
    junit: Path | None = None,
    speed_cap: str | None = None,
    topology_conf: Path | None = None,
) -> FabricValidation:
    if from_file is not None:
        try:
            text = from_file.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise FabricInputError(f"--from {from_file}: {exc.strerror}") from None
        source = str(from_file)
    else:
        text, source = _gather(spec_path, stack, stack_outputs)
    plan_result = plan_spec(spec_path)
    comparison, report = check_fabric(plan_result, text, source=source, speed_cap=speed_cap)
    lines = fabric_lines(report.cluster, source, comparison)
    if topology_conf is not None:
        lines.extend(_write_topology(plan_result, text, topology_conf))
    if junit is not None:
        write_junit(report, junit)
    return FabricValidation(report, tuple(lines))
