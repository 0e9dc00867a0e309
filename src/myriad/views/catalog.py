"""`myriad catalog list|show`: the hardware catalog as tables and entries.

Off a terminal every value is printed whole (plain columns, no wrapping or ellipsis), so a
pipe or a file gets what a terminal shows on a wide screen.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table
from rich.text import Text

from myriad import JSON_FORMAT
from myriad.errors import BadArguments
from myriad.spec.catalog_models import Catalog
from myriad.spec.references import suggestion

# The figures that tell entries of a kind apart; `show` prints all of them.
SUMMARY: dict[str, tuple[str, ...]] = {
    "gpus": (
        "form_factor",
        "memory_gb",
        "board_power_w",
        "bf16_dense_tflops",
        "fp8_dense_tflops",
        "fp4_dense_tflops",
        "nvlink_gbs",
    ),
    "nics": ("speed_gbps", "ports", "pcie_gen", "pcie_lanes", "link_layers"),
    "switches": ("kind", "ports", "port_speed_gbps", "power_w", "rack_units"),
    "servers": ("gpu_model", "gpu_count", "compute_nics", "nvswitch", "max_power_kw"),
    "racks": ("compute_trays", "switch_trays", "gpus", "nvlink_domain_tbs", "max_power_kw"),
    "driver_branches": ("designation", "end_of_life"),
    "cables": ("kind", "speed_gbps", "ends", "part", "lengths_mm", "max_reach_mm"),
}


def kinds() -> list[str]:
    return list(Catalog.model_fields)


def kind(name: str) -> str:
    if name not in kinds():
        raise BadArguments(f"no catalog kind '{name}': the kinds are {', '.join(kinds())}")
    return name


def _entries(catalog: Catalog, kind: str) -> dict[str, BaseModel]:
    entries: dict[str, BaseModel] = getattr(catalog, kind)
    return entries


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, tuple | list):
        return ",".join(_cell(v) for v in value)
    if isinstance(value, dict):
        return " ".join(f"{k}={_cell(v)}" for k, v in value.items())
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def rows(catalog: Catalog, kind: str) -> tuple[list[str], list[list[str]]]:
    """The columns and one row per entry of a kind, sorted by name."""
    fields = SUMMARY.get(kind, ())
    columns = ["name", *fields, "source"]
    table = []
    for name, entry in sorted(_entries(catalog, kind).items()):
        data = entry.model_dump(mode="json")
        table.append([name, *(_cell(data.get(f)) for f in fields), _cell(data.get("source"))])
    return columns, table


def find(catalog: Catalog, name: str) -> tuple[str, dict[str, Any]]:
    """The kind and figures of one entry; an unknown name is refused with what it likely meant."""
    known: list[str] = []
    for kind in kinds():
        entries = _entries(catalog, kind)
        if name in entries:
            return kind, entries[name].model_dump(mode="json")
        known.extend(entries)
    hint = suggestion(name, known, "`myriad catalog list` shows every entry")
    raise BadArguments(f"no catalog entry '{name}': {hint}")


def _plain_table(columns: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in [list(columns), *body]) for i in range(len(columns))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [list(columns), *body]
    ]
    return "\n".join(lines) + "\n"


def print_list(console: Console, catalog: Catalog, selected: Sequence[str]) -> None:
    for kind in selected:
        columns, body = rows(catalog, kind)
        title = f"{kind} ({len(body)})"
        if not console.is_terminal:
            sys.stdout.write(f"{title}\n{_plain_table(columns, body)}\n")
            continue
        table = Table(title=Text(title), title_justify="left")
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in body:
            table.add_row(*(Text(cell) for cell in row))
        console.print(table)


def print_entry(console: Console, name: str, kind: str, entry: dict[str, Any]) -> None:
    lines = [f"{name} ({kind})", *(f"  {key}: {_cell(value)}" for key, value in entry.items())]
    if console.is_terminal:
        console.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)
    else:
        sys.stdout.write("\n".join(lines) + "\n")


def document(kind: str | None, content: dict[str, Any]) -> dict[str, Any]:
    return {"format": JSON_FORMAT, **({"kind": kind} if kind else {}), **content}
