"""`myriad report SPEC --out DIR`: one HTML page an operator opens offline or sends on.

The plan (bill of materials, power and cost, compute and checkpoint figures, lint findings),
the racks and the fabric pictures, and, when the cluster was validated from this machine, the last
validation as a heat map of islands by check subject, and the last `myriad health` (nodes
healthy, drained and by whom, failing checks). One file with its styles and picture
inline: no script, font or image is fetched from anywhere.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from myriad import __version__
from myriad.views.floor_svg import floor_picture
from myriad.views.rack_svg import rack_picture

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2433}
header{background:#1d2433;color:#fff;padding:20px 32px}
header h1{margin:0;font-size:22px} header p{margin:4px 0 0;color:#c4cad6}
main{padding:8px 32px 40px;max-width:1400px}
section{margin-top:28px} h2{font-size:17px;border-bottom:2px solid #e3e7ee;padding-bottom:4px}
.cards{display:flex;flex-wrap:wrap;gap:12px}
.card{border:1px solid #e3e7ee;border-radius:6px;padding:10px 14px;min-width:140px}
.card b{display:block;font-size:20px} .card span{color:#5b6474;font-size:12px}
table{border-collapse:collapse;margin-top:6px}
th,td{padding:4px 10px;border-bottom:1px solid #eef0f4}
th{text-align:left;background:#f6f7f9} td.n{text-align:right;font-variant-numeric:tabular-nums}
.error{color:#b3261e;font-weight:600} .warning{color:#9a6700} .info{color:#0b6bcb}
.accepted{color:#5b6474} .muted{color:#5b6474}
.heat td{text-align:center;min-width:48px}
.figure{overflow:auto;border:1px solid #e3e7ee;border-radius:6px;padding:8px}
"""


def _num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, int | float):
        return f"{value:,.{digits}f}"
    return escape(str(value))


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], numeric: set[int]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _section(anchor: str, title: str, content: str) -> str:
    return f'<section id="{anchor}"><h2>{escape(title)}</h2>{content}</section>'


def _cards(plan: Mapping[str, Any], findings: Sequence[Mapping[str, Any]]) -> str:
    power, compute = plan.get("power") or {}, plan.get("compute") or {}
    errors = sum(1 for f in findings if f.get("severity") == "error")
    warnings = sum(1 for f in findings if f.get("severity") == "warning" and not f.get("accepted"))
    cards = [
        ("GPUs", _num(plan.get("gpus"))),
        ("nodes", _num(plan.get("nodes"))),
        ("IT power, kW", _num(power.get("it_kw"))),
        ("facility power, kW", _num(power.get("facility_kw"))),
        ("energy, USD per year", _num(power.get("cost_usd_per_year"))),
        ("peak dense BF16, PFLOP/s", _num(compute.get("peak_bf16_pflops"), 1)),
        ("lint errors / warnings", f"{errors} / {warnings}"),
    ]
    return (
        '<div class="cards">'
        + "".join(
            f"<div class='card'><b>{value}</b><span>{escape(label)}</span></div>"
            for label, value in cards
        )
        + "</div>"
    )


def _bill_of_materials(plan: Mapping[str, Any]) -> str:
    pools = [
        (
            escape(str(p.get("name"))),
            escape(str(p.get("role"))),
            escape(str(p.get("profile"))),
            _num(p.get("nodes")),
            escape(str(p.get("gpu_model") or "-")),
            _num(p.get("gpus")),
            _num(p.get("compute_nics_per_node")),
            _num(p.get("server_kw"), 2),
        )
        for p in plan.get("pools") or []
    ]
    servers = _table(
        ["pool", "role", "profile", "servers", "GPU", "GPUs", "compute NICs each", "kW each"],
        pools,
        {3, 5, 6, 7},
    )
    fabric = plan.get("fabric")
    if not fabric:
        return servers
    layers = [
        ("leaf switches", fabric.get("leaf_model"), fabric.get("leaves")),
        ("spine switches", fabric.get("spine_model"), fabric.get("spines")),
        ("core switches", fabric.get("spine_model"), fabric.get("core_switches")),
        ("fabric cables", "", fabric.get("cables")),
        (
            "transceivers",
            f"{fabric.get('ports_per_cage', 1)} port(s) per cage",
            fabric.get("transceivers"),
        ),
    ]
    network = _table(
        ["item", "model", "count"],
        [(escape(a), escape(str(b or "")), _num(c)) for a, b, c in layers if c],
        {2},
    )
    return servers + network


def _power(plan: Mapping[str, Any]) -> str:
    power = plan.get("power") or {}
    rows = [
        ("GPUs", _num(power.get("gpu_kw"), 1) + " kW"),
        ("servers", _num(power.get("server_kw"), 1) + " kW"),
        ("switches", _num(power.get("switch_kw"), 1) + " kW"),
        ("IT power", _num(power.get("it_kw"), 1) + " kW"),
        ("facility power", _num(power.get("facility_kw"), 1) + " kW"),
        ("energy per year", _num(power.get("energy_mwh_per_year")) + " MWh"),
        ("cost per year", "$" + _num(power.get("cost_usd_per_year"))),
        ("racks", _num(power.get("racks"))),
    ]
    basis = escape(str(power.get("basis", "")))
    not_counted = ", ".join(escape(str(n)) for n in power.get("not_counted") or [])
    notes = f"<p class='muted'>{basis}" + (f"; not counted: {not_counted}" if not_counted else "")
    return _table(["", "value"], rows, {1}) + notes + "</p>"


def _compute(plan: Mapping[str, Any]) -> str:
    compute, checkpoint = plan.get("compute") or {}, plan.get("checkpoint")
    rows = [
        ("peak dense BF16", _num(compute.get("peak_bf16_pflops"), 1) + " PFLOP/s"),
        (
            "peak dense FP8",
            "-"
            if compute.get("peak_fp8_pflops") is None
            else _num(compute.get("peak_fp8_pflops"), 1) + " PFLOP/s",
        ),
    ]
    if compute.get("workload_from_spec"):
        rows.append(
            (
                f"train {_num(compute.get('params_billion'))}B params on "
                f"{_num(compute.get('tokens_billion'))}B tokens",
                f"{_num(compute.get('training_days'), 1)} days at "
                f"{_num((compute.get('mfu') or 0) * 100)}% MFU",
            )
        )
    html = _table(["", "value"], rows, {1})
    if checkpoint:
        stalls = [
            (
                escape(str(s.get("strategy"))),
                _num(s.get("seconds"), 1) + " s",
                escape(str(s.get("limited_by"))),
            )
            for s in checkpoint.get("stalls") or []
        ]
        html += (
            f"<p>Checkpoint of {_num(checkpoint.get('params_billion'))}B params "
            f"({_num(checkpoint.get('size_gb'))} GB), chosen: "
            f"{escape(str(checkpoint.get('chosen')))}</p>"
            + _table(["strategy", "blocks training", "limited by"], stalls, {1})
        )
    return html


def _findings(findings: Sequence[Mapping[str, Any]]) -> str:
    if not findings:
        return "<p>No lint findings.</p>"
    rows = []
    for f in findings:
        severity = str(f.get("severity"))
        css = "accepted" if f.get("accepted") else severity
        note = f"accepted: {f['accepted']}" if f.get("accepted") else f"→ {f.get('suggestion', '')}"
        rows.append(
            (
                f"<span class='{css}'>{escape(severity)}</span>",
                escape(str(f.get("id"))),
                escape(str(f.get("location"))),
                f"{escape(str(f.get('message')))}<br><span class='muted'>{escape(note)}</span>",
            )
        )
    return _table(["severity", "rule", "where", "finding"], rows, set())


def _heat_colour(share: float) -> str:
    if share == 0:
        return "#d7f0dc"
    if share < 0.05:
        return "#fff1c2"
    return "#f7c6c2"


def _validation(validation: Mapping[str, Any], islands: Mapping[str, str]) -> str:
    counts = validation.get("counts") or {}
    verdict = "matches its spec" if validation.get("ok") else "differs from its spec"
    summary = (
        f"<p>The cluster {verdict}: {_num(counts.get('pass'))} passed, "
        f"{_num(counts.get('fail'))} failed, {_num(counts.get('error'))} errors, "
        f"{_num(counts.get('not-applicable'))} not applicable, over "
        f"{_num(validation.get('nodes'))} nodes.</p>"
    )
    # Islands (or roles, for nodes outside islands) by check subject: failures over checks run.
    cells: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    failures = []
    for result in validation.get("results") or []:
        status = result.get("status")
        if status == "not-applicable":
            continue
        group = islands.get(str(result.get("node")), "other")
        subject = str(result.get("check", "")).split(".", 1)[0]
        cell = cells[(group, subject)]
        cell[1] += 1
        if status in ("fail", "error"):
            cell[0] += 1
            failures.append(result)
    groups = sorted({g for g, _ in cells}, key=lambda g: (not g.startswith("island"), g))
    subjects = sorted({s for _, s in cells})
    rows = []
    for group in groups:
        row = [f"<th>{escape(group)}</th>"]
        for subject in subjects:
            bad, total = cells.get((group, subject), [0, 0])
            if total == 0:
                row.append("<td class='muted'>·</td>")
                continue
            row.append(
                f"<td style='background:{_heat_colour(bad / total)}' "
                f"title='{bad} of {total} failed'>{bad}/{total}</td>"
            )
        rows.append("<tr>" + "".join(row) + "</tr>")
    head = "<tr><th></th>" + "".join(f"<th>{escape(s)}</th>" for s in subjects) + "</tr>"
    heat = f"<table class='heat'><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
    worst = _table(
        ["node", "check", "expected", "actual", "fix"],
        [
            tuple(
                escape(str(r.get(k) or "")) for k in ("node", "check", "expected", "actual", "fix")
            )
            for r in failures[:50]
        ],
        set(),
    )
    more = f"<p class='muted'>{len(failures) - 50:,} more in `myriad validate --json`</p>"
    return summary + heat + (worst if failures else "") + (more if len(failures) > 50 else "")


def _health(health: Mapping[str, Any]) -> str:
    nodes = list(health.get("nodes") or [])
    unhealthy = [n for n in nodes if not n.get("healthy")]
    drained = [n for n in nodes if n.get("drained")]
    by_runner = sum(1 for n in drained if n.get("drained_by") == "myriad-health")
    stale = sum(1 for n in nodes if n.get("stale"))
    summary = (
        f"<p>{_num(len(nodes) - len(unhealthy))} of {_num(len(nodes))} compute nodes healthy; "
        f"{_num(len(drained))} drained ({_num(by_runner)} by myriad-health, "
        f"{_num(len(drained) - by_runner)} by someone else), {_num(stale)} with a stale or "
        "missing last run.</p>"
    )
    if not unhealthy:
        return summary
    rows = [
        tuple(
            escape(cell)
            for cell in (
                str(n.get("node", "")),
                "unreachable" if not n.get("reachable") else str(n.get("drained_by") or ""),
                str(n.get("reason") or ""),
                ", ".join(n.get("failing") or []),
                "stale" if n.get("stale") else "",
            )
        )
        for n in unhealthy[:50]
    ]
    table = _table(["node", "drained by", "reason", "failing checks", "last run"], rows, set())
    more = f"<p class='muted'>{len(unhealthy) - 50:,} more in `myriad health --json`</p>"
    return summary + table + (more if len(unhealthy) > 50 else "")


def render_report(
    plan_document: Mapping[str, Any],
    description: str,
    fabric_svg: str | None,
    validation: Mapping[str, Any] | None,
    islands: Mapping[str, str],
    health: Mapping[str, Any] | None = None,
) -> str:
    """The page. `plan_document` is `myriad plan --json`'s; `islands` names each node's
    island (or role), for the validation heat map; `health` is `myriad health --json`'s."""
    plan = plan_document.get("plan") or {}
    findings = plan_document.get("findings") or []
    cluster = escape(str(plan.get("cluster", "cluster")))
    parts = [
        _section("summary", "Summary", _cards(plan, findings)),
        _section("bom", "Bill of materials", _bill_of_materials(plan)),
        _section("power", "Power and cost", _power(plan)),
        _section("compute", "Compute and checkpoints", _compute(plan)),
        _section("findings", "Lint findings", _findings(findings)),
    ]
    racks = rack_picture(plan.get("power") or {}, plan.get("fabric"))
    if racks:
        floor = floor_picture(plan.get("power") or {})
        parts.append(
            _section(
                "racks",
                "Racks",
                f"<div class='figure'>{racks}</div><div class='figure'>{floor}</div>",
            )
        )
    if fabric_svg:
        parts.append(_section("fabric", "Fabric", f"<div class='figure'>{fabric_svg}</div>"))
    if validation is not None:
        parts.append(_section("validation", "Last validation", _validation(validation, islands)))
    else:
        parts.append(
            _section(
                "validation",
                "Last validation",
                "<p class='muted'>Not validated from this machine yet: run "
                "<code>myriad validate</code>, then this report again.</p>",
            )
        )
    parts.append(
        _section(
            "health",
            "Node health",
            _health(health)
            if health is not None
            else "<p class='muted'>No node health from this machine yet: with a "
            "<code>health:</code> section in the spec, run <code>myriad health</code>, then "
            "this report again.</p>",
        )
    )
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{cluster}: Myriad report</title><style>{_STYLE}</style></head><body>"
        f"<header><h1>{cluster}</h1><p>{escape(description)} · spec "
        f"{escape(str(plan_document.get('spec', '')))} · myriad {escape(__version__)}</p></header>"
        f"<main>{''.join(parts)}</main></body></html>\n"
    )
