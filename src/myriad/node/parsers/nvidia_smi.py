"""Parsers for nvidia-smi: `-q -x` (XML, DTD v11 to v13), plain `-q`, and `nvlink --status`.

The XML is the preferred source: it is well-formed only when complete, so a truncated
capture fails loudly. The plain-text query is accepted for nodes where only that was
captured; it carries the same facts under human-readable names.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import NoReturn
from xml.parsers import expat

from myriad.node.parsers.common import (
    ParseFailure,
    first_line,
    guarded,
    require_text,
    to_int,
)

__all__ = [
    "Gpu",
    "GpuFabric",
    "NvidiaSmiReport",
    "NvlinkGpu",
    "NvlinkLink",
    "NvlinkStatus",
    "PcieLink",
    "parse_nvidia_smi_text",
    "parse_nvidia_smi_xml",
    "parse_nvlink_status",
]

TOOL_XML = "nvidia-smi -q -x"
TOOL_TEXT = "nvidia-smi -q"
TOOL_NVLINK = "nvidia-smi nvlink --status"


@dataclass(frozen=True, slots=True)
class PcieLink:
    """PCIe link of one GPU; None where the driver reports N/A."""

    gen_current: int | None
    gen_max: int | None
    width_current: int | None
    width_max: int | None


@dataclass(frozen=True, slots=True)
class GpuFabric:
    """The GPU's registration with its NVLink fabric: nvidia-smi's "Fabric" section, which
    prints NVML's nvmlGpuFabricInfo (NVML API reference, nvmlGpuFabricInfo_v2_t/v3_t).

    `state` and `status` are kept as printed ("Completed", "In Progress", "Not Supported",
    "N/A"; "Success" or an NVML error such as "Insufficient Resources"): which of them is
    healthy depends on the platform, so the check judges them, not the parser. NVML says
    `status` means something only once `state` is Completed. `clique_id` and `cluster_uuid`
    (drivers from the 550 branch print them) are None where nvidia-smi prints N/A; every
    GPU of one NVLink domain shares both. None throughout: the driver printed no section.
    """

    state: str | None = None
    status: str | None = None
    clique_id: int | None = None
    cluster_uuid: str | None = None
    health_summary: str | None = None


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU as nvidia-smi reports it. Booleans are None where the GPU has no such feature."""

    index: int
    minor_number: int | None
    product_name: str
    uuid: str
    pci_bus_id: str
    memory_total_mib: int | None
    persistence_mode: bool | None
    mig_current: bool | None
    mig_pending: bool | None
    ecc_current: bool | None
    ecc_pending: bool | None
    retired_pages_pending: bool | None
    remapped_rows_pending: bool | None
    remapped_rows_failure: bool | None
    remapped_rows_correctable: int | None
    remapped_rows_uncorrectable: int | None
    pcie: PcieLink
    # The driver's GPU Recovery Action (driver 565 and newer): "None", "Reset", "Reboot",
    # "Drain P2P", "Drain and Reset" (NVIDIA GPU memory error management, "Error Recovery and
    # Response Flags"), kept as printed. None where the driver does not report it.
    recovery_action: str | None = None
    fabric: GpuFabric = GpuFabric()
    # The clock event reasons ("clocks throttle reasons" before driver 535) printed Active,
    # by the XML's name less its prefix ("hw_power_brake_slowdown"), in the order printed;
    # None where the driver printed no such section. NVML's nvmlClocksEventReasons says what
    # each means (docs.nvidia.com/deploy/nvml-api, group nvmlClocksEventReasons).
    clock_events: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class NvidiaSmiReport:
    """Driver-wide facts and the GPUs in the order nvidia-smi lists them (its -i index)."""

    driver_version: str
    cuda_version: str | None
    attached_gpus: int | None
    dtd_version: str | None
    gpus: tuple[Gpu, ...]


@dataclass(frozen=True, slots=True)
class NvlinkLink:
    link: int
    speed_gbps: float | None
    inactive: bool


@dataclass(frozen=True, slots=True)
class NvlinkGpu:
    index: int
    name: str
    uuid: str
    links: tuple[NvlinkLink, ...]
    all_links_inactive: bool

    @property
    def active_links(self) -> int:
        return sum(1 for link in self.links if not link.inactive)


@dataclass(frozen=True, slots=True)
class NvlinkStatus:
    gpus: tuple[NvlinkGpu, ...]


# nvidia-smi prints these instead of a value when a field does not apply or cannot be
# read; bracketed forms ("[N/A]", "[Unknown Error]") come from newer drivers.
_UNAVAILABLE = frozenset(
    {
        "n/a",
        "not supported",
        "unknown error",
        "insufficient permissions",
        "gpu requires reset",
        "gpu is lost",
        "not available",
        "requested functionality has been deprecated",
        "none",
    }
)

_UUID = re.compile(r"GPU-[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_BUS_ID = re.compile(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]")
_DRIVER = re.compile(r"\d+\.\d+(\.\d+)?")
_CLUSTER_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")


def _unavailable(value: str) -> bool:
    stripped = value.strip()
    if stripped.startswith("[") and stripped.endswith("]"):
        return True
    return stripped.lower() in _UNAVAILABLE


def _flag(tool: str, value: str | None, what: str, true: str, false: str) -> bool | None:
    if value is None or _unavailable(value):
        return None
    stripped = value.strip()
    if stripped == true:
        return True
    if stripped == false:
        return False
    raise ParseFailure(tool, f"{what}: expected {true} or {false}, got {stripped!r}")


def _enabled(tool: str, value: str | None, what: str) -> bool | None:
    return _flag(tool, value, what, "Enabled", "Disabled")


def _yes_no(tool: str, value: str | None, what: str) -> bool | None:
    return _flag(tool, value, what, "Yes", "No")


def _optional_int(tool: str, value: str | None, what: str) -> int | None:
    if value is None or _unavailable(value):
        return None
    return to_int(tool, value, what)


def _mib(tool: str, value: str | None, what: str) -> int | None:
    if value is None or _unavailable(value):
        return None
    match = re.fullmatch(r"(\d+) MiB", value.strip())
    if match is None:
        raise ParseFailure(tool, f"{what}: expected '<n> MiB', got {value.strip()!r}")
    return int(match.group(1))


def _width(tool: str, value: str | None, what: str) -> int | None:
    if value is None or _unavailable(value):
        return None
    match = re.fullmatch(r"(\d+)x", value.strip())
    if match is None:
        raise ParseFailure(tool, f"{what}: expected a width like '16x', got {value.strip()!r}")
    return int(match.group(1))


def _recovery_action(value: str | None) -> str | None:
    """The GPU Recovery Action as printed; its healthy value is the word "None", which
    elsewhere in nvidia-smi means "no value", so it is kept, not read as unavailable."""
    if value is None:
        return None
    stripped = value.strip()
    if stripped == "None":
        return stripped
    return None if not stripped or _unavailable(stripped) else stripped


def _checked(tool: str, value: str | None, pattern: re.Pattern[str], what: str) -> str:
    if value is None:
        raise ParseFailure(tool, f"no {what}; the output looks truncated")
    stripped = value.strip()
    if not pattern.fullmatch(stripped):
        raise ParseFailure(tool, f"{what}: unexpected value {stripped!r}")
    return stripped


def _fabric(
    tool: str,
    state: str | None,
    status: str | None,
    clique: str | None,
    cluster: str | None,
    summary: str | None,
) -> GpuFabric:
    def kept(value: str | None) -> str | None:
        return None if value is None else value.strip()

    uuid = None if cluster is None or _unavailable(cluster) else cluster.strip()
    if uuid is not None and not _CLUSTER_UUID.fullmatch(uuid):
        raise ParseFailure(tool, f"Fabric ClusterUUID: unexpected value {uuid!r}")
    return GpuFabric(
        state=kept(state),
        status=kept(status),
        clique_id=_optional_int(tool, clique, "Fabric CliqueId"),
        cluster_uuid=uuid,
        health_summary=kept(summary),
    )


# --- XML ---------------------------------------------------------------------------------


def _forbid(reason: str) -> NoReturn:
    raise ParseFailure(TOOL_XML, reason)


# Characters XML 1.0 forbids. Process names inside <processes> are whatever the process
# set, and nvidia-smi does not escape them: one control character there (seen when
# nvidia-smi runs while processes start) would make the whole document unreadable.
_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")
_PROCESSES = re.compile(r"<processes>.*?</processes>", re.DOTALL)


def _sanitised_processes(text: str) -> str:
    """Drop XML-forbidden characters inside <processes> blocks only: no check reads them,
    and anywhere else such a character still makes the document refused."""
    return _PROCESSES.sub(lambda m: _XML_FORBIDDEN.sub("", m.group()), text)


def _safe_xml_root(text: str) -> tuple[ET.Element, str | None]:
    """Parse XML with expat directly so that entity declarations can be refused.

    nvidia-smi output names an external DTD (`<!DOCTYPE nvidia_smi_log SYSTEM
    "nvsmi_device_v12.dtd">`), so a DOCTYPE itself is normal; an internal subset or any
    entity is not, and refusing them rules out entity-expansion attacks from a hostile
    node without needing defusedxml.
    """
    parser = expat.ParserCreate()
    builder = ET.TreeBuilder()
    dtd: list[str | None] = [None]

    def start_doctype(
        name: str, system_id: str | None, public_id: str | None, has_internal_subset: int
    ) -> None:
        if has_internal_subset:
            _forbid("DOCTYPE with an internal subset is refused")
        dtd[0] = system_id

    def entity_decl(*_: object) -> None:
        _forbid("entity declarations are refused")

    def external_entity(*_: object) -> int:
        _forbid("external entities are refused")

    def skipped_entity(name: str, _is_parameter: int) -> None:
        _forbid(f"undefined entity &{name}; is refused")

    parser.StartDoctypeDeclHandler = start_doctype
    parser.EntityDeclHandler = entity_decl
    parser.UnparsedEntityDeclHandler = entity_decl
    parser.ExternalEntityRefHandler = external_entity
    parser.SkippedEntityHandler = skipped_entity
    parser.StartElementHandler = builder.start
    parser.EndElementHandler = builder.end
    parser.CharacterDataHandler = builder.data
    try:
        parser.Parse(text, True)
    except expat.ExpatError as exc:
        raise ParseFailure(TOOL_XML, f"not well-formed XML ({exc})") from None
    return builder.close(), dtd[0]


def _text(element: ET.Element, path: str) -> str | None:
    found = element.find(path)
    if found is None:
        return None
    return (found.text or "").strip()


def _dtd_version(system_id: str | None) -> str | None:
    if system_id is None:
        return None
    match = re.search(r"_(v\d+)\.dtd$", system_id)
    return match.group(1) if match else None


def _xml_remapped(gpu: ET.Element) -> tuple[bool | None, bool | None, int | None, int | None]:
    # GPUs without row remapping (before Ampere) print <remapped_rows>N/A</remapped_rows>.
    remapped = gpu.find("remapped_rows")
    if remapped is None or len(remapped) == 0:
        return None, None, None, None
    t = TOOL_XML
    return (
        _yes_no(t, _text(remapped, "remapped_row_pending"), "remapped_row_pending"),
        _yes_no(t, _text(remapped, "remapped_row_failure"), "remapped_row_failure"),
        _optional_int(t, _text(remapped, "remapped_row_corr"), "remapped_row_corr"),
        _optional_int(t, _text(remapped, "remapped_row_unc"), "remapped_row_unc"),
    )


def _xml_retired_pending(gpu: ET.Element) -> bool | None:
    # pending_retirement replaced pending_blacklist; captures from the transition carry both.
    value = _text(gpu, "retired_pages/pending_retirement")
    if value is None:
        value = _text(gpu, "retired_pages/pending_blacklist")
    return _yes_no(TOOL_XML, value, "retired_pages pending")


# `nvidia-smi -q`'s names for the reasons, as the XML names them.
_TEXT_CLOCK_EVENTS = {
    "Idle": "gpu_idle",
    "Applications Clocks Setting": "applications_clocks_setting",
    "SW Power Cap": "sw_power_cap",
    "HW Slowdown": "hw_slowdown",
    "HW Thermal Slowdown": "hw_thermal_slowdown",
    "HW Power Brake Slowdown": "hw_power_brake_slowdown",
    "Sync Boost": "sync_boost",
    "SW Thermal Slowdown": "sw_thermal_slowdown",
    "Display Clock Setting": "display_clocks_setting",
}


def _active_events(tool: str, reasons: list[tuple[str, str]]) -> tuple[str, ...]:
    """The reasons printed Active; N/A (a reason the GPU does not report) is left out, and
    any other value is no reading of the section."""
    active = []
    for name, value in reasons:
        if value == "Active":
            active.append(name)
        elif value != "Not Active" and not _unavailable(value):
            raise ParseFailure(tool, f"clock event reason {name}: {value!r}, not Active")
    return tuple(active)


def _xml_clock_events(gpu: ET.Element) -> tuple[str, ...] | None:
    for section, prefix in (
        ("clocks_event_reasons", "clocks_event_reason_"),
        ("clocks_throttle_reasons", "clocks_throttle_reason_"),  # drivers before 535
    ):
        found = gpu.find(section)
        if found is not None:
            reasons = [
                (child.tag.removeprefix(prefix), (child.text or "").strip()) for child in found
            ]
            return _active_events(TOOL_XML, reasons)
    return None


def _xml_gpu(index: int, gpu: ET.Element) -> Gpu:
    t = TOOL_XML
    link = "pci/pci_gpu_link_info/"
    bus_id = _text(gpu, "pci/pci_bus_id") or gpu.get("id")
    pending, failure, corr, unc = _xml_remapped(gpu)
    return Gpu(
        index=index,
        minor_number=_optional_int(t, _text(gpu, "minor_number"), "minor_number"),
        product_name=_checked(t, _text(gpu, "product_name"), re.compile(r".+"), "product_name"),
        uuid=_checked(t, _text(gpu, "uuid"), _UUID, "uuid"),
        pci_bus_id=_checked(t, bus_id, _BUS_ID, "pci_bus_id"),
        memory_total_mib=_mib(t, _text(gpu, "fb_memory_usage/total"), "fb_memory_usage"),
        persistence_mode=_enabled(t, _text(gpu, "persistence_mode"), "persistence_mode"),
        mig_current=_enabled(t, _text(gpu, "mig_mode/current_mig"), "current_mig"),
        mig_pending=_enabled(t, _text(gpu, "mig_mode/pending_mig"), "pending_mig"),
        ecc_current=_enabled(t, _text(gpu, "ecc_mode/current_ecc"), "current_ecc"),
        ecc_pending=_enabled(t, _text(gpu, "ecc_mode/pending_ecc"), "pending_ecc"),
        retired_pages_pending=_xml_retired_pending(gpu),
        remapped_rows_pending=pending,
        remapped_rows_failure=failure,
        remapped_rows_correctable=corr,
        remapped_rows_uncorrectable=unc,
        pcie=PcieLink(
            gen_current=_optional_int(t, _text(gpu, link + "pcie_gen/current_link_gen"), "gen"),
            gen_max=_optional_int(t, _text(gpu, link + "pcie_gen/max_link_gen"), "gen"),
            width_current=_width(t, _text(gpu, link + "link_widths/current_link_width"), "width"),
            width_max=_width(t, _text(gpu, link + "link_widths/max_link_width"), "width"),
        ),
        recovery_action=_recovery_action(_text(gpu, "gpu_recovery_action")),
        fabric=_fabric(
            t,
            _text(gpu, "fabric/state"),
            _text(gpu, "fabric/status"),
            _text(gpu, "fabric/cliqueId"),
            _text(gpu, "fabric/clusterUuid"),
            _text(gpu, "fabric/health/summary"),
        ),
        clock_events=_xml_clock_events(gpu),
    )


@guarded(TOOL_XML)
def parse_nvidia_smi_xml(text: str) -> NvidiaSmiReport:
    """Parse `nvidia-smi -q -x`. GPUs keep document order, which is nvidia-smi's index."""
    body = require_text(TOOL_XML, text)
    if not body.lstrip().startswith("<"):
        raise ParseFailure(TOOL_XML, f"not XML: {first_line(body)!r}")
    root, system_id = _safe_xml_root(_sanitised_processes(body))
    if root.tag != "nvidia_smi_log":
        raise ParseFailure(TOOL_XML, f"root element is <{root.tag}>, not <nvidia_smi_log>")
    driver = _checked(TOOL_XML, _text(root, "driver_version"), _DRIVER, "driver_version")
    cuda = _text(root, "cuda_version")
    return NvidiaSmiReport(
        driver_version=driver,
        cuda_version=None if cuda is None or _unavailable(cuda) else cuda,
        attached_gpus=_optional_int(TOOL_XML, _text(root, "attached_gpus"), "attached_gpus"),
        dtd_version=_dtd_version(system_id),
        gpus=tuple(_xml_gpu(i, gpu) for i, gpu in enumerate(root.findall("gpu"))),
    )


# --- plain text --------------------------------------------------------------------------

_BANNER = re.compile(r"=+NVSMI LOG=+")
_GPU_HEADER = re.compile(r"GPU (" + _BUS_ID.pattern + r")")
_FIELD = re.compile(r"(?P<key>[^:]+?)\s*:\s?(?P<value>.*)")

_Path = tuple[str, ...]


def _text_sections(body: str) -> tuple[dict[_Path, str], list[tuple[str, dict[_Path, str]]]]:
    """Split `nvidia-smi -q` into the header fields and one field map per GPU block.

    Nesting is by indentation, so a field is addressed by its path of section names,
    e.g. ("PCI", "GPU Link Info", "Link Width", "Current"). The first occurrence of a
    path wins: repeated blocks (processes) hold nothing the checks read.
    """
    header: dict[_Path, str] = {}
    gpus: list[tuple[str, dict[_Path, str]]] = []
    current = header
    stack: list[tuple[int, str]] = []
    for raw in body.splitlines():
        if not raw.strip() or _BANNER.fullmatch(raw.strip()):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        line = raw.strip()
        gpu = _GPU_HEADER.fullmatch(line) if indent == 0 else None
        if gpu is not None:
            current = {}
            gpus.append((gpu.group(1), current))
            stack = []
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = tuple(name for _, name in stack)
        field = _FIELD.fullmatch(line)
        if field is None or not field.group("value").strip():
            stack.append((indent, field.group("key") if field else line))
            continue
        current.setdefault((*path, field.group("key")), field.group("value").strip())
    return header, gpus


def _text_gpu(index: int, bus_id: str, fields: dict[_Path, str]) -> Gpu:
    t = TOOL_TEXT

    def get(*path: str) -> str | None:
        return fields.get(path)

    link = ("PCI", "GPU Link Info")
    retired = get("Retired Pages", "Pending Page Retirement")
    if retired is None:
        retired = get("Retired Pages", "Pending Page Blacklist")
    return Gpu(
        index=index,
        minor_number=_optional_int(t, get("Minor Number"), "Minor Number"),
        product_name=_checked(t, get("Product Name"), re.compile(r".+"), "Product Name"),
        uuid=_checked(t, get("GPU UUID"), _UUID, "GPU UUID"),
        pci_bus_id=_checked(t, get("PCI", "Bus Id") or bus_id, _BUS_ID, "Bus Id"),
        memory_total_mib=_mib(t, get("FB Memory Usage", "Total"), "FB Memory Usage"),
        persistence_mode=_enabled(t, get("Persistence Mode"), "Persistence Mode"),
        mig_current=_enabled(t, get("MIG Mode", "Current"), "MIG Mode"),
        mig_pending=_enabled(t, get("MIG Mode", "Pending"), "MIG Mode"),
        ecc_current=_enabled(t, get("ECC Mode", "Current"), "ECC Mode"),
        ecc_pending=_enabled(t, get("ECC Mode", "Pending"), "ECC Mode"),
        retired_pages_pending=_yes_no(t, retired, "Retired Pages"),
        remapped_rows_pending=_yes_no(t, get("Remapped Rows", "Pending"), "Remapped Rows"),
        remapped_rows_failure=_yes_no(
            t, get("Remapped Rows", "Remapping Failure Occurred"), "Remapped Rows"
        ),
        remapped_rows_correctable=_optional_int(
            t, get("Remapped Rows", "Correctable Error"), "Remapped Rows"
        ),
        remapped_rows_uncorrectable=_optional_int(
            t, get("Remapped Rows", "Uncorrectable Error"), "Remapped Rows"
        ),
        pcie=PcieLink(
            gen_current=_optional_int(t, get(*link, "PCIe Generation", "Current"), "PCIe gen"),
            gen_max=_optional_int(t, get(*link, "PCIe Generation", "Max"), "PCIe gen"),
            width_current=_width(t, get(*link, "Link Width", "Current"), "Link Width"),
            width_max=_width(t, get(*link, "Link Width", "Max"), "Link Width"),
        ),
        recovery_action=_recovery_action(get("GPU Recovery Action")),
        fabric=_fabric(
            t,
            get("Fabric", "State"),
            get("Fabric", "Status"),
            get("Fabric", "CliqueId"),
            get("Fabric", "ClusterUUID"),
            get("Fabric", "Health", "Summary"),
        ),
        clock_events=_text_clock_events(fields),
    )


def _text_clock_events(fields: dict[_Path, str]) -> tuple[str, ...] | None:
    for section in ("Clocks Event Reasons", "Clocks Throttle Reasons"):
        reasons = [
            (_TEXT_CLOCK_EVENTS.get(path[-1], path[-1]), value)
            for path, value in fields.items()
            if len(path) == 2 and path[0] == section
        ]
        if reasons:
            return _active_events(TOOL_TEXT, reasons)
    return None


@guarded(TOOL_TEXT)
def parse_nvidia_smi_text(text: str) -> NvidiaSmiReport:
    """Parse plain `nvidia-smi -q` into the same report as the XML, where fields exist."""
    body = require_text(TOOL_TEXT, text)
    if not any(_BANNER.fullmatch(line.strip()) for line in body.splitlines()[:5]):
        # Without the banner this is an error message (no driver, no devices), not a query.
        raise ParseFailure(TOOL_TEXT, f"not nvidia-smi -q output: {first_line(body)!r}")
    header, blocks = _text_sections(body)
    if not blocks:
        raise ParseFailure(TOOL_TEXT, "no GPU block; the output looks truncated")
    driver = _checked(TOOL_TEXT, header.get(("Driver Version",)), _DRIVER, "Driver Version")
    cuda = header.get(("CUDA Version",))
    gpus = tuple(_text_gpu(i, bus, fields) for i, (bus, fields) in enumerate(blocks))
    attached = _optional_int(TOOL_TEXT, header.get(("Attached GPUs",)), "Attached GPUs")
    if attached is not None and attached != len(blocks):
        # Text output cut at a line boundary still parses: its own count tells.
        raise ParseFailure(
            TOOL_TEXT,
            f"Attached GPUs says {attached} but {len(blocks)} GPU block(s) follow; the "
            "output looks truncated",
        )
    return NvidiaSmiReport(
        driver_version=driver,
        cuda_version=None if cuda is None or _unavailable(cuda) else cuda,
        attached_gpus=attached,
        dtd_version=None,
        gpus=gpus,
    )


# --- nvlink --status ---------------------------------------------------------------------

_NVLINK_GPU = re.compile(r"GPU (\d+): (.+) \(UUID: (" + _UUID.pattern + r")\)")
_NVLINK_LINK = re.compile(r"Link (\d+): (?:(\d+(?:\.\d+)?) GB/s|(<inactive>))")
_ALL_INACTIVE = re.compile(r".*all links are inactive.*", re.IGNORECASE)


@dataclass(slots=True)
class _NvlinkBuilder:
    index: int
    name: str
    uuid: str
    links: list[NvlinkLink]
    all_inactive: bool = False

    def build(self) -> NvlinkGpu:
        return NvlinkGpu(
            index=self.index,
            name=self.name,
            uuid=self.uuid,
            links=tuple(self.links),
            all_links_inactive=self.all_inactive,
        )


@guarded(TOOL_NVLINK)
def parse_nvlink_status(text: str) -> NvlinkStatus:
    """Parse `nvidia-smi nvlink --status`: per GPU, each link's speed or `<inactive>`.

    Empty output is what nvidia-smi prints on a node without NVLink: no GPUs, which the
    check judges against whether the profile has NVLink (not an unreadable fact).
    """
    if isinstance(text, str) and not text.strip():
        return NvlinkStatus(gpus=())
    body = require_text(TOOL_NVLINK, text)
    gpus: list[_NvlinkBuilder] = []
    for number, raw in enumerate(body.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if header := _NVLINK_GPU.fullmatch(line):
            gpus.append(_NvlinkBuilder(int(header.group(1)), header.group(2), header.group(3), []))
            continue
        if not gpus:
            raise ParseFailure(TOOL_NVLINK, f"line {number}: expected a GPU header: {line!r}")
        if link := _NVLINK_LINK.fullmatch(line):
            speed = link.group(2)
            gpus[-1].links.append(
                NvlinkLink(
                    link=int(link.group(1)),
                    speed_gbps=float(speed) if speed is not None else None,
                    inactive=link.group(3) is not None,
                )
            )
        elif _ALL_INACTIVE.fullmatch(line):
            gpus[-1].all_inactive = True
        else:
            raise ParseFailure(TOOL_NVLINK, f"line {number}: unexpected line {line!r}")
    return NvlinkStatus(gpus=tuple(gpu.build() for gpu in gpus))
