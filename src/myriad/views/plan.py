"""The plan and its lint findings as terminal tables (rich)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from myriad.plan.diff import Change
from myriad.plan.lints import Finding
from myriad.plan.model import Plan, Power
from myriad.plan.pipeline import PlanResult
from myriad.spec.loader import LoadedSpec

_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _num(value: float, digits: int = 1) -> str:
    return f"{value:,.{digits}f}"


def _seconds(value: float) -> str:
    if value == float("inf"):
        return "never"
    return f"{value:,.1f} s" if value >= 1 else f"{value * 1000:,.1f} ms"


def _plain(*cells: str | Text) -> list[Text]:
    """Cells as text, never markup: names from the spec ('[/]', '[ocp]') print as written."""
    return [cell if isinstance(cell, Text) else Text(cell) for cell in cells]


def _kv_table(title: str, rows: Sequence[tuple[str, str]]) -> Table:
    table = Table(
        title=Text(title), title_justify="left", show_header=False, box=None, pad_edge=False
    )
    table.add_column(style="bold")
    table.add_column(justify="right")
    for key, value in rows:
        table.add_row(*_plain(key, value))
    return table


def pools_table(plan: Plan) -> Table:
    table = Table(title=Text(f"Cluster {plan.cluster}"), title_justify="left")
    for column in ("pool", "role", "profile", "nodes", "GPUs", "GPU", "NICs/node", "kW/server"):
        table.add_column(
            column, justify="right" if column[0].isupper() or "/" in column else "left"
        )
    for pool in plan.pools:
        table.add_row(
            *_plain(
                pool.name,
                pool.role,
                pool.profile,
                f"{pool.nodes:,}",
                f"{pool.gpus:,}",
                pool.gpu_model or "-",
                str(pool.compute_nics_per_node),
                _num(pool.server_kw, 2),
            )
        )
    table.add_row("total", "", "", f"{plan.nodes:,}", f"{plan.gpus:,}", "", "", "", style="bold")
    return table


def fabric_table(plan: Plan) -> Table | None:
    fabric = plan.fabric
    if fabric is None:
        return None
    islands = len(fabric.islands)
    return _kv_table(
        "Fabric",
        [
            ("topology", f"{fabric.layout}, {fabric.fabric}, {fabric.tiers} tier(s)"),
            (
                "switches",
                f"{fabric.leaf_model} leaves, {fabric.spine_model} spines, radix {fabric.radix}",
            ),
            (
                "endpoints",
                f"{fabric.endpoints:,} at {fabric.endpoint_speed_gbps} Gb/s, "
                f"{fabric.rails} rail(s)",
            ),
            (
                "islands",
                f"{islands:,} of up to {fabric.island_nodes:,} nodes, "
                f"inside {fabric.island_oversubscription:g}:1, "
                f"inter-island {fabric.inter_island_oversubscription:g}:1",
            ),
            (
                "leaf / spine / core switches",
                f"{fabric.leaves:,} / {fabric.spines:,} / {fabric.core_switches:,}"
                + (
                    f" (+ {fabric.spare_leaves:,} / {fabric.spare_spines:,} / "
                    f"{fabric.spare_core:,} spare)"
                    if fabric.spare_leaves or fabric.spare_spines or fabric.spare_core
                    else ""
                ),
            ),
            (
                "links node-leaf / leaf-spine / spine-core",
                f"{fabric.node_links:,} / {fabric.leaf_spine_links:,} / "
                f"{fabric.spine_core_links:,}",
            ),
            (
                "cables / transceivers",
                f"{fabric.cables:,} / {fabric.transceivers:,} "
                f"({fabric.ports_per_cage} switch port(s) per cage)",
            ),
            ("injection per node", f"{_num(fabric.injection_gbps_per_node, 0)} Gb/s"),
            (
                "bisection",
                f"{_num(fabric.bisection_gbps / 1000, 1)} Tb/s "
                f"(island {_num(fabric.island_bisection_gbps / 1000, 1)} Tb/s)",
            ),
            ("switch power", f"{_num(fabric.switch_kw)} kW"),
        ],
    )


def power_table(plan: Plan, usd_per_kwh: float, pue: float) -> Table:
    power = plan.power
    return _kv_table(
        "Power and cost",
        [
            ("GPUs", f"{_num(power.gpu_kw)} kW"),
            ("servers / switches", f"{_num(power.server_kw)} kW / {_num(power.switch_kw)} kW"),
            *(
                [
                    (
                        "other switches / storage",
                        f"{_num(power.other_switch_kw)} kW / {_num(power.storage_kw)} kW",
                    )
                ]
                if power.other_switch_kw or power.storage_kw
                else []
            ),
            ("IT power", f"{_num(power.it_kw)} kW"),
            ("facility power", f"{_num(power.facility_kw)} kW (PUE {pue:g})"),
            ("energy per year", f"{_num(power.energy_mwh_per_year, 0)} MWh"),
            ("cost per year", f"${_num(power.cost_usd_per_year, 0)} at ${usd_per_kwh:g}/kWh"),
            (
                "racks",
                f"{power.racks:,} ({power.server_racks:,} servers, {power.servers_per_rack} "
                f"per rack; {power.switch_racks:,} switches; {power.storage_racks:,} storage)",
            ),
            *((("rows", rows),) if (rows := _rows(power)) else ()),
            ("server figure", power.basis),
            *(("not counted", item) for item in power.not_counted),
        ],
    )


def _rows(power: Power) -> str:
    """Where the layout stands the racks: server rows first, then the network rows."""
    per_row = power.racks_per_row
    servers = -(-power.server_racks // per_row)
    network = -(-(power.switch_racks + power.storage_racks) // per_row)
    if not servers + network:
        return ""

    def span(first: int, last: int) -> str:
        return f"R{first:02d}" if first == last else f"R{first:02d}-R{last:02d}"

    parts = []
    if servers:
        parts.append(f"{span(1, servers)} servers")
    if network:
        parts.append(f"{span(servers + 1, servers + network)} network")
    return f"{servers + network:,}, {per_row} racks each; " + ", ".join(parts)


def bandwidth_table(plan: Plan) -> Table | None:
    # A profile with neither compute NICs nor several GPUs has no figure worth a row.
    rows = [r for r in plan.bandwidth if r.nic_model or r.intra_node_busbw_gbs is not None]
    if not rows:
        return None
    table = Table(title="Expected bandwidth per node (GB/s)", title_justify="left")
    for column in (
        "profile",
        "NIC",
        "line",
        "PCIe slot",
        "RDMA/NIC",
        "intra busbw",
        "inter busbw",
        "limited by",
    ):
        table.add_column(
            column, justify="left" if column in ("profile", "NIC", "limited by") else "right"
        )
    for row in rows:
        table.add_row(
            *_plain(
                row.profile,
                row.nic_model or "-",
                _num(row.nic_line_gbs),
                _num(row.pcie_slot_gbs),
                _num(row.per_nic_rdma_gbs),
                "-" if row.intra_node_busbw_gbs is None else _num(row.intra_node_busbw_gbs),
                "-" if row.inter_node_busbw_gbs is None else _num(row.inter_node_busbw_gbs),
                row.limited_by,
            )
        )
    return table


def nvlink_table(plan: Plan) -> Table | None:
    """One row per compute pool whose GPUs share NVLink: its domains, their size and what each
    rack of a rack-scale system draws and needs."""
    if not any(item.system is not None for item in plan.nvlink):
        # Servers whose NVLink stops at their own GPUs: the pools table says it all.
        return None
    table = Table(title="NVLink domains", title_justify="left")
    for column in ("pool", "system", "domains", "nodes each", "GPUs each", "NVLink", "rack"):
        table.add_column(column, justify="left" if column in ("pool", "system") else "right")
    for item in plan.nvlink:
        domains = f"{item.domains:,}"
        if item.partial_nodes:
            domains += f" (last: {item.partial_nodes} nodes)"
        rack = "-"
        if item.rack_kw is not None:
            rack = f"{_num(item.rack_kw, 0)} kW, {item.cooling}, {item.switch_trays_per_domain} sw"
        table.add_row(
            *_plain(
                item.pool,
                item.system or "server (NVSwitch)",
                domains,
                str(item.nodes_per_domain),
                str(item.gpus_per_domain),
                f"{_num(item.domain_tbs)} TB/s",
                rack,
            )
        )
    return table


def compute_table(plan: Plan) -> Table:
    compute = plan.compute
    fp8 = "-" if compute.peak_fp8_pflops is None else f"{_num(compute.peak_fp8_pflops)} PFLOP/s"
    fp4 = "-" if compute.peak_fp4_pflops is None else f"{_num(compute.peak_fp4_pflops)} PFLOP/s"
    days = "-" if compute.training_days is None else f"{_num(compute.training_days)} days"
    rows = [
        ("peak dense BF16", f"{_num(compute.peak_bf16_pflops)} PFLOP/s"),
        ("peak dense FP8", fp8),
    ]
    if compute.peak_fp4_pflops is not None:
        rows.append(("peak dense FP4", fp4))
    if compute.workload_from_spec:
        rows.append(
            (
                f"train {compute.params_billion:g}B params on {compute.tokens_billion:g}B tokens",
                f"{days} at {compute.mfu:.0%} MFU ({compute.precision}) on "
                f"{compute.gpus:,} compute GPUs",
            )
        )
    else:
        # A training time for a model nobody named would read as a promise.
        rows.append(("training time", "add a workload: section (params_billion, tokens_billion)"))
    return _kv_table("Compute", rows)


def checkpoint_table(plan: Plan) -> Table | None:
    checkpoint = plan.checkpoint
    if checkpoint is None:
        return None
    table = Table(
        title=f"Checkpoint of {checkpoint.params_billion:g}B params "
        f"({_num(checkpoint.size_gb, 0)} GB)",
        title_justify="left",
    )
    table.add_column("strategy")
    table.add_column("blocks training", justify="right")
    table.add_column("limited by")
    for stall in checkpoint.stalls:
        style = "bold" if stall.strategy == checkpoint.chosen else ""
        table.add_row(
            *_plain(stall.strategy, _seconds(stall.seconds), stall.limited_by), style=style
        )
    return table


def findings_table(loaded: LoadedSpec, findings: Sequence[Finding]) -> Table | Text:
    if not findings:
        return Text("No lint findings.", style="green")
    table = Table(title="Lint findings", title_justify="left", show_lines=True)
    table.add_column("severity")
    table.add_column("id")
    table.add_column("line", justify="right")
    table.add_column("finding")
    for finding in findings:
        note = (
            ("accepted: " + finding.accepted, "green")
            if finding.accepted
            else (f"→ {finding.suggestion}", "dim")
        )
        table.add_row(
            Text(
                finding.severity,
                style="dim" if finding.accepted else _SEVERITY_STYLE[finding.severity],
            ),
            *_plain(finding.id, finding.location(loaded).rsplit(":", 2)[-2]),
            Text.assemble(finding.message, "\n", note),
        )
    return table


def print_plan(console: Console, result: PlanResult) -> None:
    loaded, plan, findings = result.loaded, result.plan, result.findings
    facility = loaded.spec.facility
    parts: list[Table | Text | None] = (
        []
        if plan is None
        else [
            pools_table(plan),
            nvlink_table(plan),
            fabric_table(plan),
            power_table(plan, facility.usd_per_kwh, facility.pue),
            bandwidth_table(plan),
            compute_table(plan),
            checkpoint_table(plan),
        ]
    )
    parts.append(findings_table(loaded, findings))
    for part in parts:
        if part is not None:
            console.print(part)
            console.print()
    errors = sum(1 for f in findings if f.severity == "error")
    warnings = sum(1 for f in findings if f.severity == "warning" and not f.accepted)
    accepted = sum(1 for f in findings if f.accepted)
    summary = f"{errors} error(s), {warnings} warning(s)" + (
        f", {accepted} accepted" if accepted else ""
    )
    console.print(Text(summary, style="bold red" if errors else "bold green"))


def _figure(value: float | str | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return _num(value, 0 if abs(value) >= 100 else 1)
    return f"{value:,}" if isinstance(value, int) else value


def diff_table(old: str, changes: Sequence[Change]) -> Table:
    table = Table(title=Text(f"Changes against {old}"), title_justify="left")
    for column, justify in (("what", "left"), ("before", "right"), ("after", "right")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    table.add_column("change", justify="right")
    for change in changes:
        delta = change.delta
        shown = "" if delta is None else f"{'+' if delta > 0 else ''}{_figure(delta)}"
        style = "" if delta is None else ("green" if delta < 0 else "yellow")
        table.add_row(
            *_plain(change.what, _figure(change.before), _figure(change.after)),
            Text(shown, style=style),
        )
    return table
