"""Parsers for HCA state: `ibstat`, sysfs /sys/class/infiniband, and `ibv_devinfo` [-v].

All three describe the same devices in different words, so they share one result type.
Port states are kept as printed and also as their IBTA numbers (state 4 = ACTIVE,
physical state 5 = LinkUp), which is what checks compare across tools.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from myriad.node.parsers.common import (
    ParseFailure,
    first_line,
    guarded,
    normalize_guid,
    require_text,
    to_int,
)

__all__ = [
    "IbDevice",
    "IbPort",
    "IbReport",
    "parse_ibstat",
    "parse_ibv_devinfo",
    "parse_sysfs_counters",
    "parse_sysfs_infiniband",
]

TOOL_IBSTAT = "ibstat"
TOOL_SYSFS = "sysfs infiniband"
TOOL_IBV = "ibv_devinfo"

ACTIVE = 4
LINK_UP = 5

# Names each tool prints for the IBTA port states, compared with spaces, dashes and
# underscores removed and a PORT_ prefix dropped (ibv_devinfo prints PORT_ACTIVE).
_STATE_CODES = {
    "nop": 0,
    "down": 1,
    "init": 2,
    "initializing": 2,
    "armed": 3,
    "active": 4,
    "activedefer": 5,
}
_PHYS_STATE_CODES = {
    "nostatechange": 0,
    "sleep": 1,
    "polling": 2,
    "disabled": 3,
    "portconfigurationtraining": 4,
    "linkup": 5,
    "linkerrorrecovery": 6,
    "phytest": 7,
}
_LINK_LAYERS = frozenset({"InfiniBand", "Ethernet", "Unknown"})


@dataclass(frozen=True, slots=True)
class IbPort:
    number: int
    state: str
    state_code: int | None
    phys_state: str | None
    phys_state_code: int | None
    rate_gbps: float | None
    link_layer: str
    width: str | None = None
    lid: int | None = None
    sm_lid: int | None = None
    port_guid: str | None = None
    active_mtu: int | None = None

    @property
    def active(self) -> bool:
        return self.state_code == ACTIVE

    @property
    def link_up(self) -> bool:
        return self.phys_state_code == LINK_UP


@dataclass(frozen=True, slots=True)
class IbDevice:
    name: str
    ca_type: str | None
    firmware: str | None
    hardware_version: str | None
    node_guid: str | None
    system_image_guid: str | None
    board_id: str | None
    ports: tuple[IbPort, ...]


@dataclass(frozen=True, slots=True)
class IbReport:
    """Devices in output order, and error lines the tool printed among them (ibpanic)."""

    devices: tuple[IbDevice, ...]
    errors: tuple[str, ...] = ()


def _code(table: Mapping[str, int], name: str) -> int | None:
    key = re.sub(r"[\s_-]", "", name.lower())
    if key.startswith("port") and key not in table:
        key = key[len("port") :]
    return table.get(key)


def _link_layer(tool: str, value: str | None, where: str) -> str:
    if value is None:
        raise ParseFailure(tool, f"{where}: no link layer; the output looks truncated")
    if value not in _LINK_LAYERS:
        raise ParseFailure(tool, f"{where}: unknown link layer {value!r}")
    return value


def _rate(tool: str, value: str, where: str) -> float:
    if not re.fullmatch(r"\d+(\.\d+)?", value):
        raise ParseFailure(tool, f"{where}: rate is not a number: {value!r}")
    return float(value)


def _optional(value: str | None) -> str | None:
    return value if value else None


# --- ibstat ------------------------------------------------------------------------------

_CA_HEADER = re.compile(r"CA '([^']+)'")
_PORT_HEADER = re.compile(r"Port (\d+):")
_IB_FIELD = re.compile(r"([A-Za-z][A-Za-z ]*?):\s*(.*)")
# infiniband-diags reports failures through ibpanic()/ibwarn(); when they land in the
# captured stream they follow the devices that were read fine.
_IB_ERROR = re.compile(r"(?:ibpanic|ibwarn|ibstat):\s.*")


@dataclass(slots=True)
class _CaBuilder:
    name: str
    fields: dict[str, str] = field(default_factory=dict)
    ports: list[tuple[int, dict[str, str]]] = field(default_factory=list)


def _ibstat_port(ca: str, number: int, fields: dict[str, str]) -> IbPort:
    t = TOOL_IBSTAT
    where = f"{ca} port {number}"
    # Link layer is the last line ibstat prints for a port: without it the port was cut.
    link_layer = _link_layer(t, fields.get("Link layer"), where)
    for required in ("State", "Physical state", "Rate"):
        if required not in fields:
            raise ParseFailure(t, f"{where}: no {required} line")
    lid = fields.get("Base lid")
    sm_lid = fields.get("SM lid")
    return IbPort(
        number=number,
        state=fields["State"],
        state_code=_code(_STATE_CODES, fields["State"]),
        phys_state=fields["Physical state"],
        phys_state_code=_code(_PHYS_STATE_CODES, fields["Physical state"]),
        rate_gbps=_rate(t, fields["Rate"], where),
        link_layer=link_layer,
        lid=to_int(t, lid, f"{where} Base lid") if lid is not None else None,
        sm_lid=to_int(t, sm_lid, f"{where} SM lid") if sm_lid is not None else None,
        port_guid=normalize_guid(t, fields.get("Port GUID", "")),
    )


def _ibstat_device(ca: _CaBuilder) -> IbDevice:
    t = TOOL_IBSTAT
    declared = ca.fields.get("Number of ports")
    if declared is None:
        raise ParseFailure(t, f"{ca.name}: no 'Number of ports' line")
    if to_int(t, declared, f"{ca.name} Number of ports") != len(ca.ports):
        raise ParseFailure(
            t, f"{ca.name}: declares {declared} ports but lists {len(ca.ports)}; truncated?"
        )
    return IbDevice(
        name=ca.name,
        ca_type=_optional(ca.fields.get("CA type")),
        firmware=_optional(ca.fields.get("Firmware version")),
        hardware_version=_optional(ca.fields.get("Hardware version")),
        node_guid=normalize_guid(t, ca.fields.get("Node GUID", "")),
        system_image_guid=normalize_guid(t, ca.fields.get("System image GUID", "")),
        board_id=None,
        ports=tuple(_ibstat_port(ca.name, n, f) for n, f in ca.ports),
    )


@guarded(TOOL_IBSTAT)
def parse_ibstat(text: str) -> IbReport:
    """Parse `ibstat` (all CAs, or one): per CA its ports' state, rate and link layer."""
    body = require_text(TOOL_IBSTAT, text)
    cas: list[_CaBuilder] = []
    errors: list[str] = []
    for number, raw in enumerate(body.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if header := _CA_HEADER.fullmatch(line):
            cas.append(_CaBuilder(header.group(1)))
        elif not cas or _IB_ERROR.fullmatch(line):
            if not _IB_ERROR.fullmatch(line):
                raise ParseFailure(TOOL_IBSTAT, f"not ibstat output: {first_line(body)!r}")
            errors.append(line)
        elif port := _PORT_HEADER.fullmatch(line):
            cas[-1].ports.append((int(port.group(1)), {}))
        elif kv := _IB_FIELD.fullmatch(line):
            # ibstat prints every CA field before the first port, so a field belongs to
            # the CA until a "Port N:" line opens a port, whatever its name.
            ca = cas[-1]
            target = ca.ports[-1][1] if ca.ports else ca.fields
            target.setdefault(kv.group(1), kv.group(2).strip())
        else:
            raise ParseFailure(TOOL_IBSTAT, f"line {number}: unexpected line {line!r}")
    if not cas:
        raise ParseFailure(TOOL_IBSTAT, f"no CA in the output: {first_line(body)!r}")
    return IbReport(devices=tuple(_ibstat_device(ca) for ca in cas), errors=tuple(errors))


# --- sysfs -------------------------------------------------------------------------------

_SYSFS_PREFIXES = ("/sys/class/infiniband/", "sys/class/infiniband/", "/")
_SYSFS_STATE = re.compile(r"(\d+):\s*(\S.*)")
_SYSFS_RATE = re.compile(r"(\d+(?:\.\d+)?) Gb/sec(?: \((\S+)(?: (\S+))?\))?")
_SYSFS_DEVICE_ATTRS = frozenset(
    {"fw_ver", "hca_type", "board_id", "node_guid", "sys_image_guid", "hw_rev"}
)
_SYSFS_PORT_ATTRS = frozenset({"state", "phys_state", "rate", "link_layer", "lid", "sm_lid"})


def _sysfs_state(value: str, where: str) -> tuple[str, int]:
    match = _SYSFS_STATE.fullmatch(value)
    if match is None:
        raise ParseFailure(TOOL_SYSFS, f"{where}: expected '<n>: <NAME>', got {value!r}")
    return match.group(2), int(match.group(1))


def _sysfs_int(value: str | None, where: str) -> int | None:
    if value is None:
        return None
    # lid and sm_lid are printed in hex (0x16).
    if not re.fullmatch(r"0x[0-9a-fA-F]+|\d+", value):
        raise ParseFailure(TOOL_SYSFS, f"{where}: not a number: {value!r}")
    return int(value, 0)


def _sysfs_port(device: str, number: int, attrs: dict[str, str]) -> IbPort:
    where = f"{device} port {number}"
    if "state" not in attrs:
        raise ParseFailure(TOOL_SYSFS, f"{where}: no state file")
    state, state_code = _sysfs_state(attrs["state"], f"{where} state")
    phys_state: str | None = None
    phys_code: int | None = None
    if "phys_state" in attrs:
        phys_state, phys_code = _sysfs_state(attrs["phys_state"], f"{where} phys_state")
    rate: float | None = None
    width: str | None = None
    if "rate" in attrs:
        match = _SYSFS_RATE.fullmatch(attrs["rate"])
        if match is None:
            raise ParseFailure(TOOL_SYSFS, f"{where}: unexpected rate {attrs['rate']!r}")
        rate, width = float(match.group(1)), match.group(2)
    return IbPort(
        number=number,
        state=state,
        state_code=state_code,
        phys_state=phys_state,
        phys_state_code=phys_code,
        rate_gbps=rate,
        link_layer=_link_layer(TOOL_SYSFS, attrs.get("link_layer"), where),
        width=width,
        lid=_sysfs_int(attrs.get("lid"), f"{where} lid"),
        sm_lid=_sysfs_int(attrs.get("sm_lid"), f"{where} sm_lid"),
    )


def _sysfs_relative(path: str) -> list[str]:
    for prefix in _SYSFS_PREFIXES:
        if path.startswith(prefix):
            path = path[len(prefix) :]
            break
    return [part for part in path.split("/") if part]


@guarded(TOOL_SYSFS)
def parse_sysfs_infiniband(files: Mapping[str, str]) -> IbReport:
    """Read /sys/class/infiniband from a mapping of path to file content.

    Paths are relative to /sys/class/infiniband (`mlx5_0/ports/1/state`); absolute
    paths are accepted too. Files the parser does not use (counters) are ignored.
    """
    if not isinstance(files, Mapping) or not files:
        raise ParseFailure(TOOL_SYSFS, "no sysfs files given")
    devices: dict[str, dict[str, str]] = {}
    ports: dict[str, dict[int, dict[str, str]]] = {}
    for path, content in files.items():
        if not isinstance(path, str) or not isinstance(content, str):
            raise ParseFailure(TOOL_SYSFS, f"entry {path!r}: path and content must be text")
        parts = _sysfs_relative(path)
        value = content.strip()
        if len(parts) == 2 and parts[1] in _SYSFS_DEVICE_ATTRS:
            devices.setdefault(parts[0], {})[parts[1]] = value
        elif len(parts) == 4 and parts[1] == "ports" and parts[3] in _SYSFS_PORT_ATTRS:
            number = to_int(TOOL_SYSFS, parts[2], f"{path} port number")
            devices.setdefault(parts[0], {})
            ports.setdefault(parts[0], {}).setdefault(number, {})[parts[3]] = value
    if not devices:
        raise ParseFailure(TOOL_SYSFS, "no /sys/class/infiniband/<device> files among those given")
    return IbReport(
        devices=tuple(_sysfs_device(n, a, ports.get(n, {})) for n, a in devices.items())
    )


def _sysfs_device(name: str, attrs: dict[str, str], ports: dict[int, dict[str, str]]) -> IbDevice:
    t = TOOL_SYSFS
    return IbDevice(
        name=name,
        ca_type=_optional(attrs.get("hca_type")),
        firmware=_optional(attrs.get("fw_ver")),
        hardware_version=_optional(attrs.get("hw_rev")),
        node_guid=normalize_guid(t, attrs.get("node_guid", "")),
        system_image_guid=normalize_guid(t, attrs.get("sys_image_guid", "")),
        board_id=_optional(attrs.get("board_id")),
        ports=tuple(_sysfs_port(name, n, ports[n]) for n in sorted(ports)),
    )


# The value a port without a Performance Management Agent gives for every counter
# (iWARP devices such as i40iw: "N/A (no PMA)").
_NO_PMA = re.compile(r"N/A\b.*")


@guarded(TOOL_SYSFS)
def parse_sysfs_counters(files: Mapping[str, str]) -> dict[str, dict[int, dict[str, int | None]]]:
    """The port counters among sysfs files (`mlx5_0/ports/1/counters/symbol_error`):
    device -> port -> counter -> value, None where the port has no PMA ("N/A (no PMA)").

    Other files are ignored; a device or port without counter files is absent."""
    counters: dict[str, dict[int, dict[str, int | None]]] = {}
    for path, content in files.items():
        if not isinstance(path, str) or not isinstance(content, str):
            raise ParseFailure(TOOL_SYSFS, f"entry {path!r}: path and content must be text")
        parts = _sysfs_relative(path)
        if len(parts) != 5 or parts[1] != "ports" or parts[3] != "counters":
            continue
        value = content.strip()
        number = to_int(TOOL_SYSFS, parts[2], f"{path} port number")
        if _NO_PMA.fullmatch(value):
            reading: int | None = None
        elif re.fullmatch(r"[0-9]+", value):
            reading = int(value)
        else:
            raise ParseFailure(TOOL_SYSFS, f"{path}: counter is not a number: {value!r}")
        counters.setdefault(parts[0], {}).setdefault(number, {})[parts[4]] = reading
    return counters


# --- ibv_devinfo -------------------------------------------------------------------------

_HCA_ID = re.compile(r"hca_id:\s*(\S+)")
_IBV_PORT = re.compile(r"port:\s*(\d+)")
_IBV_FIELD = re.compile(r"(\w+):\s+(\S.*)")
_IBV_CODED = re.compile(r"(\S.*?) \((\d+)\)")
_IBV_DEVICE_KEYS = frozenset(
    {"fw_ver", "node_guid", "sys_image_guid", "vendor_part_id", "hw_ver", "board_id"}
)


@dataclass(slots=True)
class _HcaBuilder:
    name: str
    fields: dict[str, str] = field(default_factory=dict)
    in_ports: bool = False
    ports: list[tuple[int, dict[str, str]]] = field(default_factory=list)


def _coded(value: str | None, where: str) -> tuple[str, int] | None:
    """Split ibv_devinfo's `NAME (n)` values; a value without its code was cut short."""
    if value is None:
        return None
    match = _IBV_CODED.fullmatch(value)
    if match is None:
        raise ParseFailure(TOOL_IBV, f"{where}: expected 'NAME (n)', got {value!r}")
    return match.group(1), int(match.group(2))


def _ibv_port(hca: str, number: int, fields: dict[str, str]) -> IbPort:
    t = TOOL_IBV
    where = f"{hca} port {number}"
    link_layer = _link_layer(t, fields.get("link_layer"), where)
    state = _coded(fields.get("state"), f"{where} state")
    if state is None:
        raise ParseFailure(t, f"{where}: no state line")
    phys = _coded(fields.get("phys_state"), f"{where} phys_state")
    mtu = _coded(fields.get("active_mtu"), f"{where} active_mtu")
    width = _coded(fields.get("active_width"), f"{where} active_width")
    lid, sm_lid = fields.get("port_lid"), fields.get("sm_lid")
    return IbPort(
        number=number,
        state=state[0],
        state_code=state[1],
        phys_state=phys[0] if phys else None,
        phys_state_code=phys[1] if phys else None,
        rate_gbps=None,
        link_layer=link_layer,
        width=width[0] if width else None,
        lid=to_int(t, lid, f"{where} port_lid") if lid is not None else None,
        sm_lid=to_int(t, sm_lid, f"{where} sm_lid") if sm_lid is not None else None,
        active_mtu=to_int(t, mtu[0], f"{where} active_mtu") if mtu else None,
    )


def _ibv_device(hca: _HcaBuilder) -> IbDevice:
    t = TOOL_IBV
    # The device fields come before "Device ports:"; a device without ports was cut.
    if not hca.ports:
        raise ParseFailure(t, f"{hca.name}: no ports listed; the output looks truncated")
    return IbDevice(
        name=hca.name,
        ca_type=_optional(hca.fields.get("vendor_part_id")),
        firmware=_optional(hca.fields.get("fw_ver")),
        hardware_version=_optional(hca.fields.get("hw_ver")),
        node_guid=normalize_guid(t, hca.fields.get("node_guid", "")),
        system_image_guid=normalize_guid(t, hca.fields.get("sys_image_guid", "")),
        board_id=_optional(hca.fields.get("board_id")),
        ports=tuple(_ibv_port(hca.name, n, f) for n, f in hca.ports),
    )


def _ibv_line(hca: _HcaBuilder, line: str) -> None:
    if line == "Device ports:":
        hca.in_ports = True
        return
    if hca.in_ports:
        if port := _IBV_PORT.fullmatch(line):
            hca.ports.append((int(port.group(1)), {}))
            return
        kv = _IBV_FIELD.fullmatch(line)
        if kv is not None and hca.ports:
            hca.ports[-1][1].setdefault(kv.group(1), kv.group(2).strip())
        return
    # Verbose output interleaves capability flag lists and free text with the fields;
    # only the named device fields matter here.
    kv = _IBV_FIELD.fullmatch(line)
    if kv is not None and kv.group(1) in _IBV_DEVICE_KEYS:
        hca.fields.setdefault(kv.group(1), kv.group(2).strip())


@guarded(TOOL_IBV)
def parse_ibv_devinfo(text: str) -> IbReport:
    """Parse `ibv_devinfo` or `ibv_devinfo -v` (any device or port selection)."""
    body = require_text(TOOL_IBV, text)
    hcas: list[_HcaBuilder] = []
    for raw in body.splitlines():
        line = raw.strip()
        if not line:
            continue
        if header := _HCA_ID.fullmatch(line):
            hcas.append(_HcaBuilder(header.group(1)))
        elif not hcas:
            raise ParseFailure(TOOL_IBV, f"not ibv_devinfo output: {line!r}")
        else:
            _ibv_line(hcas[-1], line)
    return IbReport(devices=tuple(_ibv_device(hca) for hca in hcas))
