"""Parser for `lldpcli show neighbors -f json` and `-f json0` (lldpd): each local
interface's LLDP neighbour, by chassis name and port.

`-f json0` keeps every value in a list (`"lldp": [{"interface": [{"name": "eno1", ...}]}]`);
`-f json` drops one-element lists and keys things by name (`"interface": {"eno1": {...}}`,
`"chassis": {"LEAF01": {...}}`), and becomes a list again when there are several. Both
come out the same here. Standard library only: this runs on the nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from myriad.node.parsers.common import ParseFailure, guarded, load_json

__all__ = ["LldpNeighbor", "parse_lldp_neighbors"]

TOOL = "lldpcli"


@dataclass(frozen=True, slots=True)
class LldpNeighbor:
    interface: str
    chassis_name: str | None
    chassis_id: str | None
    port_id: str | None
    port_id_type: str | None
    port_descr: str | None


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _value(node: Any) -> str | None:
    """A leaf in either form: "x", {"value": "x"}, [{"value": "x"}]."""
    for item in _items(node):
        if isinstance(item, dict) and "value" in item:
            return str(item["value"])
        if isinstance(item, str):
            return item
    return None


def _named(node: Any) -> list[tuple[str | None, dict[str, Any]]]:
    """Entries that json keys by name ({"eno1": {...}}) or json0 lists ({"name": ...})."""
    out: list[tuple[str | None, dict[str, Any]]] = []
    for item in _items(node):
        if not isinstance(item, dict):
            raise ParseFailure(TOOL, f"expected an object, got {type(item).__name__}")
        if (
            "name" in item
            and isinstance(item["name"], (str, list))
            and ("via" in item or "id" in item or "chassis" in item)
        ):
            out.append((_value(item["name"]), item))
        elif len(item) == 1 and isinstance(next(iter(item.values())), dict):
            name, body = next(iter(item.items()))
            out.append((name, body))
        else:
            out.append((None, item))
    return out


@guarded(TOOL)
def parse_lldp_neighbors(text: object) -> tuple[LldpNeighbor, ...]:
    document = load_json(TOOL, text)
    if not isinstance(document, dict) or "lldp" not in document:
        raise ParseFailure(TOOL, 'no "lldp" object: not `lldpcli show neighbors -f json` output')
    neighbors: list[LldpNeighbor] = []
    for lldp in _items(document["lldp"]):
        if not lldp:
            continue  # no neighbours at all: json0 prints [{}]
        if not isinstance(lldp, dict):
            raise ParseFailure(TOOL, '"lldp" holds neither an object nor a list of objects')
        for interface, body in _named(lldp.get("interface", [])):
            if interface is None:
                raise ParseFailure(TOOL, "an interface without a name")
            chassis_name, chassis = (None, {})
            for name, item in _named(body.get("chassis", [])):
                chassis_name = _value(item["name"]) if name is None and "name" in item else name
                chassis = item
            port: dict[str, Any] = {}
            for item in _items(body.get("port", [])):
                if isinstance(item, dict):
                    port = item
            ids = _items(port.get("id", []))
            port_id = ids[0] if ids and isinstance(ids[0], dict) else {}
            chassis_ids = _items(chassis.get("id", []))
            chassis_id = chassis_ids[0] if chassis_ids and isinstance(chassis_ids[0], dict) else {}
            neighbors.append(
                LldpNeighbor(
                    interface=interface,
                    chassis_name=chassis_name,
                    chassis_id=_value(chassis_id) if chassis_id else None,
                    port_id=_value(port_id) if port_id else None,
                    port_id_type=str(port_id.get("type")) if port_id.get("type") else None,
                    port_descr=_value(port.get("descr")) if "descr" in port else None,
                )
            )
    return tuple(neighbors)
