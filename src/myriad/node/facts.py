"""One node's gathered document (myriad.node.gather's JSON) turned into typed facts.

Every fact says what became of its probe, so that a check can tell a real difference from
something it could not see:

- `ok`: the tool answered and its output was read (`value` holds the parsed result);
- `missing`: the tool or file is not on the node (a fail where the spec expects it);
- `failed`: the tool ran and reported a problem (exit status, message in `detail`);
- `unreadable`: the output could not be read (a parser's ParseFailure) or the tool timed
  out: the check's result is `error`, never a guess;
- `not-gathered`: the probe was not run on this node (controller-only probes elsewhere).

Nothing here raises for what a node sends: a malformed document makes every fact
unreadable, with the reason.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import sys
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Generic, Literal, TypeVar

from myriad.node.parsers import (
    Bond,
    DockerInfo,
    IbPort,
    IbReport,
    Interface,
    KubeNode,
    MlnxQos,
    NvidiaSmiReport,
    NvlinkStatus,
    ParseFailure,
    SlurmNode,
    SlurmTopology,
    parse_bonding,
    parse_docker_info,
    parse_gres,
    parse_ibstat,
    parse_ip_addr,
    parse_ip_link,
    parse_kubectl_nodes,
    parse_mlnx_qos,
    parse_nvidia_smi_xml,
    parse_nvlink_status,
    parse_scontrol_nodes,
    parse_scontrol_topology,
    parse_sysfs_counters,
    parse_sysfs_infiniband,
)
from myriad.node.parsers.common import first_line
from myriad.node.parsers.kernel_log import XidEvent
from myriad.node.parsers.slurm import Gres

T = TypeVar("T")
U = TypeVar("U")
FactState = Literal["ok", "missing", "failed", "unreadable", "not-gathered"]
SCHEMA = 1


@dataclass(frozen=True, slots=True)
class Fact(Generic[T]):
    state: FactState
    value: T | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.state == "ok"

    def get(self) -> T:
        """The value of an `ok` fact; checks call it only after testing `ok`."""
        if self.state != "ok":
            raise ValueError(f"fact is {self.state}: {self.detail}")
        return self.value  # type: ignore[return-value]

    def map(self, function: Callable[[T], U]) -> Fact[U]:
        if self.state != "ok":
            return Fact(self.state, None, self.detail)
        return Fact("ok", function(self.value))  # type: ignore[arg-type]


def ok(value: T) -> Fact[T]:
    return Fact("ok", value)


NOT_GATHERED: Fact[Any] = Fact("not-gathered", detail="not gathered on this node")


@dataclass(frozen=True, slots=True)
class HcaLink:
    """An RDMA device's PCI function and the network interfaces on it (from sysfs)."""

    pci: str
    netdevs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PciFunction:
    address: str
    vendor: str
    device_class: str | None
    speed_gts: float | None
    width: int | None
    max_speed_gts: float | None
    max_width: int | None
    numa_node: int | None

    @property
    def gen(self) -> int | None:
        return pcie_gen(self.speed_gts)


@dataclass(frozen=True, slots=True)
class Memlock:
    """`ulimit -l` (soft, hard) in a PAM login session, in KiB or "unlimited" as the shell
    prints them, and PID 1's hard limit (`ceiling`), which a container cannot exceed."""

    soft: str
    hard: str
    ceiling: str | None = None


# roles/common/vars/main.yml `__common_hosts_marker`, with {mark} = BEGIN / END.
HOSTS_BEGIN = "# BEGIN MYRIAD MANAGED BLOCK: cluster hosts"
HOSTS_END = "# END MYRIAD MANAGED BLOCK: cluster hosts"


@dataclass(frozen=True, slots=True)
class HostsFile:
    """/etc/hosts split into the common role's managed block (None when there is none)
    and everything else. The block lists every node of the cluster, identical on each:
    it is interned, so 12,500 nodes hold one copy and compare it by identity."""

    block: str | None
    rest: str


@dataclass(frozen=True, slots=True)
class Mount:
    target: str
    source: str
    fstype: str
    options: str


@dataclass(frozen=True, slots=True)
class TimeSync:
    synchronised: bool
    source: str


@dataclass(frozen=True, slots=True)
class DiskSpace:
    """Free space of the file system a path is on (statvfs: what an unprivileged user gets)."""

    path: str
    free_percent: float
    free_bytes: int


@dataclass(frozen=True, slots=True)
class SinfoNode:
    node: str
    state: str
    gres: tuple[Gres, ...]


@dataclass(frozen=True, slots=True)
class FileDigest:
    """A file's sha256, mode and owner; the content never leaves the node."""

    sha256: str
    mode: str
    owner: str
    group: str


@dataclass(frozen=True, slots=True)
class JobRun:
    """The validation jobs the controller ran, one per node: who ran it, and why not."""

    nodes: tuple[str, ...]
    ran: frozenset[str]
    errors: Mapping[str, str]
    # Nodes not idle when the jobs were submitted (sinfo's state): no job was sent there.
    skipped: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What one node told us. Controller-only facts are `not-gathered` elsewhere."""

    host: str
    hostname: Fact[str]
    gpus: Fact[NvidiaSmiReport]
    nvlink: Fact[NvlinkStatus]
    hcas: Fact[IbReport]
    hca_links: Fact[Mapping[str, HcaLink]]
    pci: Fact[Mapping[str, PciFunction]]
    qos: Mapping[str, Fact[MlnxQos]]
    bonds: Fact[Mapping[str, Bond]]
    links: Fact[Mapping[str, Interface]]
    docker: Fact[DockerInfo]
    docker_daemon: Fact[Mapping[str, Any]]
    containerd: Fact[Mapping[str, str]]
    nccl_conf: Fact[str]
    memlock: Fact[Memlock]
    limits: Fact[Mapping[str, str]]
    units: Fact[Mapping[str, str]]
    modules: Fact[frozenset[str]]
    hosts_file: Fact[HostsFile]
    mount: Fact[Mount | None]
    time: Fact[TimeSync]
    slurm_nodes: Fact[tuple[SlurmNode, ...]] = NOT_GATHERED
    slurm_topology: Fact[SlurmTopology] = NOT_GATHERED
    sinfo: Fact[tuple[SinfoNode, ...]] = NOT_GATHERED
    kube_nodes: Fact[tuple[KubeNode, ...]] = NOT_GATHERED
    # `fi_info -p efa -t FI_EP_RDM`: the RDM domains of the EFA devices (rdmap16s27-rdm, ...).
    efa_domains: Fact[tuple[str, ...]] = NOT_GATHERED
    # Each RDMA device's first port's error counters (sysfs ports/N/counters/), counter ->
    # value, None where the port has no PMA; a device without counter files is absent.
    hca_counters: Fact[Mapping[str, Mapping[str, int | None]]] = NOT_GATHERED
    # Each interface's IPv4 addresses as ADDRESS/PREFIX (`ip -j -4 addr`).
    addresses: Fact[Mapping[str, tuple[str, ...]]] = NOT_GATHERED
    # /etc/munge/munge.key and the Slurm configuration files: path -> digest, None if absent.
    slurm_files: Fact[Mapping[str, FileDigest | None]] = NOT_GATHERED
    # On a Slurm controller asked to run the validation job: which nodes ran it.
    job: Fact[JobRun] = NOT_GATHERED
    # Node health only: the node health runner (myriad.node.health) reads these between its
    # runs; `myriad validate` does not gather them. XID events that count now (new in the
    # kernel log since the last run, and draining ones still held), each HCA's first port's
    # error counter growth since the last run, and the free space of the spec's paths.
    xid_events: Fact[tuple[XidEvent, ...]] = NOT_GATHERED
    hca_counter_growth: Fact[Mapping[str, Mapping[str, int]]] = NOT_GATHERED
    disk: Fact[Mapping[str, DiskSpace]] = NOT_GATHERED
    # Paths the runner tried to write a file under: None writable, else why not.
    writable: Fact[Mapping[str, str | None]] = NOT_GATHERED
    # The node health runner's state file, as it last wrote it (`myriad health` reads it).
    health_state: Fact[Mapping[str, Any]] = NOT_GATHERED
    # /etc/myriad/image.json: the baked image the node was started from (image mode).
    image_record: Fact[Mapping[str, Any]] = NOT_GATHERED
    # The hardware map recorded at bring-up, and the one discovered now (myriad.node.hardware).
    hardware_record: Fact[Mapping[str, Any]] = NOT_GATHERED
    hardware_map: Fact[Mapping[str, Any]] = NOT_GATHERED
    # RoCE ports' GID tables (device -> [[index, gid, type], ...]).
    roce_gids: Fact[Mapping[str, Any]] = NOT_GATHERED
    seconds: float | None = None
    # Each RDMA device's first port (the one the spec's NICs use), read once for the
    # several HCA checks.
    hca_ports: Fact[Mapping[str, IbPort | None]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ports = self.hcas.map(
            lambda report: {d.name: (d.ports[0] if d.ports else None) for d in report.devices}
        )
        object.__setattr__(self, "hca_ports", ports)

    def unit(self, name: str) -> Fact[str]:
        """`systemctl is-active` of one unit: active, inactive, failed, ..."""
        return self.units.map(lambda states: states.get(name, "unknown"))


# --- reading one probe --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Probe:
    rc: int | None
    stdout: str
    stderr: str
    missing: bool
    timed_out: bool


def _probe(raw: object) -> Probe | None:
    if not isinstance(raw, Mapping):
        return None
    rc, stdout, stderr = raw.get("rc"), raw.get("stdout"), raw.get("stderr")
    return Probe(
        rc=rc if isinstance(rc, int) and not isinstance(rc, bool) else None,
        stdout=stdout if isinstance(stdout, str) else "",
        stderr=stderr if isinstance(stderr, str) else "",
        missing=raw.get("missing") is True,
        timed_out=raw.get("timed_out") is True,
    )


def _message(probe: Probe) -> str:
    return first_line(probe.stderr) or first_line(probe.stdout) or "no output"


def read_probe(
    probes: Mapping[str, Any],
    name: str,
    tool: str,
    parse: Callable[[str], T],
    *,
    accept_rc: Callable[[Probe], bool] = lambda p: p.rc == 0,
) -> Fact[T]:
    if name not in probes:
        return Fact("not-gathered", detail=f"{tool} was not gathered on this node")
    probe = _probe(probes[name])
    if probe is None:
        return Fact("unreadable", detail=f"could not read the {tool} probe record")
    if probe.missing:
        return Fact("missing", detail=_message(probe))
    if probe.timed_out:
        return Fact("unreadable", detail=f"{tool} timed out")
    if not accept_rc(probe):
        return Fact("failed", detail=f"{tool} exited {probe.rc}: {_message(probe)}")
    try:
        return Fact("ok", parse(probe.stdout))
    except ParseFailure as exc:
        return Fact("unreadable", detail=f"could not read {tool} output: {exc.reason}")


def _json_object(tool: str, text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseFailure(tool, f"not JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise ParseFailure(tool, "expected a JSON object")
    return data


def _text_files(tool: str) -> Callable[[str], Mapping[str, str]]:
    def parse(text: str) -> Mapping[str, str]:
        data = _json_object(tool, text)
        if not all(isinstance(v, str) for v in data.values()):
            raise ParseFailure(tool, "file contents must be text")
        # Configuration files are the same on most nodes: one copy of each text.
        return {sys.intern(path): sys.intern(text) for path, text in data.items()}

    return parse


# --- the individual readers ---------------------------------------------------------------

_GTS = re.compile(r"(\d+(?:\.\d+)?)\s*GT/s")
# Transfer rate per lane → PCIe generation (PCI-SIG: 2.5, 5, 8, 16, 32, 64 GT/s).
_GENERATIONS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def pcie_gen(speed_gts: float | None) -> int | None:
    return None if speed_gts is None else _GENERATIONS.get(speed_gts)


def _gts(value: object) -> float | None:
    # sysfs writes "16.0 GT/s PCIe" (Linux 5.7+), "16 GT/s" before, "Unknown" for none.
    if not isinstance(value, str):
        return None
    match = _GTS.search(value)
    return float(match.group(1)) if match else None


def _small_int(value: object) -> int | None:
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return None


def _pci(text: str) -> Mapping[str, PciFunction]:
    data = _json_object("pci sysfs", text)
    functions = {}
    for address, entry in data.items():
        if not isinstance(entry, dict):
            raise ParseFailure("pci sysfs", f"{address}: not an object")
        functions[address] = PciFunction(
            address=address,
            vendor=str(entry.get("vendor")),
            device_class=entry.get("class") if isinstance(entry.get("class"), str) else None,
            speed_gts=_gts(entry.get("current_link_speed")),
            width=_small_int(entry.get("current_link_width")),
            max_speed_gts=_gts(entry.get("max_link_speed")),
            max_width=_small_int(entry.get("max_link_width")),
            numa_node=_small_int(entry.get("numa_node")),
        )
    return functions


_IbSysfs = tuple[IbReport, Mapping[str, HcaLink], Mapping[str, Mapping[str, int | None]]]


def _sysfs_ib(text: str) -> _IbSysfs:
    data = _json_object("sysfs infiniband", text)
    files, devices = data.get("files"), data.get("devices")
    if not isinstance(files, dict) or not isinstance(devices, dict):
        raise ParseFailure("sysfs infiniband", "expected files and devices")
    links = {}
    for name, entry in devices.items():
        if not isinstance(entry, dict):
            raise ParseFailure("sysfs infiniband", f"{name}: not an object")
        netdevs = entry.get("netdevs") or []
        links[name] = HcaLink(pci=str(entry.get("pci")), netdevs=tuple(str(n) for n in netdevs))
    # A device directory with no readable files is still a device: the parser needs files.
    report = parse_sysfs_infiniband(files) if files else IbReport(devices=())
    # The first port's counters, as hca_ports holds the first port's state.
    parsed = parse_sysfs_counters(files) if files else {}
    counters = {
        device.name: parsed[device.name][device.ports[0].number]
        for device in report.devices
        if device.ports and device.ports[0].number in parsed.get(device.name, {})
    }
    return report, links, counters


def _bonds(text: str) -> Mapping[str, Bond]:
    data = _text_files("/proc/net/bonding")(text)
    bonds = {}
    for name, content in data.items():
        try:
            bonds[name] = parse_bonding(content)
        except ParseFailure as exc:
            raise ParseFailure("/proc/net/bonding", f"{name}: {exc.reason}") from None
    return bonds


def _links(text: str) -> Mapping[str, Interface]:
    return {link.name: link for link in parse_ip_link(text)}


def _units(names: list[str]) -> Callable[[str], Mapping[str, str]]:
    def parse(text: str) -> Mapping[str, str]:
        states = [line.strip() for line in text.splitlines() if line.strip()]
        if len(states) != len(names):
            raise ParseFailure(
                "systemctl is-active", f"{len(states)} answers for {len(names)} units"
            )
        return dict(zip(names, states, strict=True))

    return parse


def _modules(text: str) -> frozenset[str]:
    return frozenset(line.split()[0] for line in text.splitlines() if line.strip())


def init_memlock(text: str) -> str | None:
    """PID 1's hard memlock limit from /proc/1/limits, in ulimit's words (KiB/unlimited)."""
    for line in text.splitlines():
        if line.startswith("Max locked memory"):
            columns = line.split()
            hard = columns[4] if len(columns) >= 5 else ""
            if hard == "unlimited":
                return hard
            if hard.isdigit():
                return str(int(hard) // 1024)
    return None


def _memlock(text: str) -> Memlock:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # A login shell may print a banner (motd) first; the limits are the last two lines.
    if len(lines) < 2 or not all(re.fullmatch(r"unlimited|\d+", v) for v in lines[-2:]):
        raise ParseFailure("ulimit -l", f"expected two limits, got {text.strip()[:80]!r}")
    return Memlock(soft=lines[-2], hard=lines[-1])


def _hosts(text: str) -> HostsFile:
    lines = text.splitlines()
    try:
        begin, end = lines.index(HOSTS_BEGIN), lines.index(HOSTS_END)
    except ValueError:
        return HostsFile(None, text)
    if end < begin:
        return HostsFile(None, text)
    block = sys.intern("\n".join(lines[begin + 1 : end]))
    return HostsFile(block, "\n".join(lines[:begin] + lines[end + 1 :]))


def _shared(text: str) -> str:
    # Files the roles render alike on every node: one copy for all of them.
    return sys.intern(text)


def _mount(text: str) -> Mount | None:
    if not text.strip():
        return None
    data = _json_object("findmnt", text)
    systems = data.get("filesystems")
    if not isinstance(systems, list) or not systems or not isinstance(systems[0], dict):
        raise ParseFailure("findmnt", "no filesystems list")
    entry = systems[-1]  # the last mount on a mount point is the one that is visible

    def text_of(key: str) -> str:
        value = entry.get(key)
        return value if isinstance(value, str) else ""

    return Mount(text_of("target"), text_of("source"), text_of("fstype"), text_of("options"))


def _chrony(text: str) -> TimeSync:
    fields_ = dict(
        (key.strip(), value.strip())
        for key, sep, value in (line.partition(":") for line in text.splitlines())
        if sep
    )
    leap = fields_.get("Leap status")
    if leap is None:
        raise ParseFailure("chronyc tracking", f"no Leap status line: {first_line(text)!r}")
    return TimeSync(
        synchronised=leap == "Normal", source=f"chrony: {fields_.get('Reference ID', '?')}"
    )


def _timedatectl(text: str) -> TimeSync:
    values = dict(line.partition("=")[::2] for line in text.splitlines() if "=" in line)
    if "NTPSynchronized" not in values:
        raise ParseFailure("timedatectl show", "no NTPSynchronized property")
    return TimeSync(values["NTPSynchronized"] == "yes", "timedatectl")


def _sinfo(text: str) -> tuple[SinfoNode, ...]:
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        columns = line.split()
        if len(columns) != 3:
            raise ParseFailure("sinfo", f"line {number}: expected node, state and gres")
        rows.append(SinfoNode(columns[0], columns[1], parse_gres(columns[2])))
    return tuple(rows)


def parse_fi_info_domains(text: str) -> tuple[str, ...]:
    """The distinct `domain:` values of fi_info's listing, in order (one per EFA device)."""
    domains: list[str] = []
    for line in text.splitlines():
        key, _, value = line.strip().partition(":")
        if key == "domain" and value.strip() and value.strip() not in domains:
            domains.append(value.strip())
    return tuple(domains)


def _time(probes: Mapping[str, Any]) -> Fact[TimeSync]:
    chrony = read_probe(probes, "chrony_tracking", "chronyc tracking", _chrony)
    if chrony.ok or chrony.state != "missing":
        return chrony
    return read_probe(probes, "timedatectl", "timedatectl show", _timedatectl)


def _hcas(
    probes: Mapping[str, Any],
) -> tuple[
    Fact[IbReport],
    Fact[Mapping[str, HcaLink]],
    Fact[Mapping[str, Mapping[str, int | None]]],
]:
    sysfs = read_probe(probes, "sysfs_infiniband", "sysfs infiniband", _sysfs_ib)
    if sysfs.ok:
        report, links, counters = sysfs.get()
        return ok(report), ok(links), ok(counters)
    # Without sysfs (never on Linux with RDMA devices, but a sandbox may hide it) ibstat
    # still tells state and rate; the PCI mapping and the counters are then unknown.
    ibstat = read_probe(probes, "ibstat", "ibstat", parse_ibstat)
    missing: Fact[Any] = Fact(sysfs.state, None, sysfs.detail)
    return (ibstat if ibstat.ok else missing), missing, missing


def unreadable(host: str, reason: str) -> NodeFacts:
    """A node whose document could not be used at all: every fact says why."""
    broken: Fact[Any] = Fact("unreadable", detail=reason)
    values: dict[str, Any] = {
        f.name: broken for f in fields(NodeFacts) if f.init and f.name not in ("host", "seconds")
    }
    values["qos"] = {}
    return NodeFacts(host=host, **values)


def decode(text: str) -> object:
    """The gatherer's stdout → its document, unwrapping --compress; ValueError if unusable."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the gatherer's output is not JSON ({exc.msg})") from None
    if isinstance(document, dict) and document.get("encoding") == "gzip+base64":
        try:
            raw = gzip.decompress(base64.b64decode(str(document.get("data")), validate=True))
            return json.loads(raw)
        # binascii.Error, JSONDecodeError and UnicodeDecodeError are ValueErrors.
        except (ValueError, OSError, EOFError, zlib.error) as exc:
            raise ValueError(f"the gatherer's compressed output is damaged ({exc})") from None
    return document


def node_facts(host: str, document: object) -> NodeFacts:
    """Typed facts from one gathered document; never raises for what the node sent."""
    if not isinstance(document, Mapping):
        return unreadable(host, "the gatherer's output is not a JSON object")
    if document.get("schema") != SCHEMA:
        return unreadable(
            host, f"gatherer document schema {document.get('schema')!r}, expected {SCHEMA}"
        )
    probes = document.get("probes")
    args = document.get("args") if isinstance(document.get("args"), Mapping) else {}
    if not isinstance(probes, Mapping):
        return unreadable(host, "the gatherer's document has no probes")
    units = [str(u) for u in args.get("units", [])] if isinstance(args, Mapping) else []
    hcas, hca_links, hca_counters = _hcas(probes)
    qos = {
        name.split(":", 1)[1]: read_probe(probes, name, f"mlnx_qos -i {name[9:]}", parse_mlnx_qos)
        for name in probes
        if name.startswith("mlnx_qos:")
    }
    seconds = document.get("seconds")
    return NodeFacts(
        host=host,
        hostname=read_probe(probes, "hostname", "hostname", str.strip),
        gpus=read_probe(probes, "nvidia_smi", "nvidia-smi -q -x", parse_nvidia_smi_xml),
        nvlink=read_probe(probes, "nvlink", "nvidia-smi nvlink --status", parse_nvlink_status),
        hcas=hcas,
        hca_links=hca_links,
        hca_counters=hca_counters,
        pci=read_probe(probes, "pci", "pci sysfs", _pci),
        qos=qos,
        bonds=read_probe(probes, "bonding", "/proc/net/bonding", _bonds),
        links=read_probe(probes, "ip_link", "ip -j -d link", _links),
        addresses=read_probe(probes, "ip_addr", "ip -j -4 addr", parse_ip_addr),
        docker=read_probe(probes, "docker_info", "docker info", parse_docker_info),
        docker_daemon=read_probe(
            probes, "docker_daemon_json", "/etc/docker/daemon.json", _json_of("daemon.json")
        ),
        containerd=read_probe(
            probes, "containerd_config", "containerd config", _text_files("containerd config")
        ),
        nccl_conf=read_probe(probes, "nccl_conf", "/etc/nccl.conf", _shared),
        efa_domains=read_probe(probes, "fi_info_efa", "fi_info -p efa", parse_fi_info_domains),
        memlock=_with_ceiling(
            read_probe(probes, "memlock_session", "ulimit -l in su -", _memlock),
            read_probe(probes, "init_limits", "/proc/1/limits", init_memlock),
        ),
        limits=read_probe(probes, "limits", "limits.d", _text_files("limits.d")),
        # systemctl is-active exits 3 when any unit is not active; the states are still read.
        units=read_probe(
            probes, "units", "systemctl is-active", _units(units), accept_rc=_has_stdout
        ),
        modules=read_probe(probes, "modules", "/proc/modules", _modules),
        hosts_file=read_probe(probes, "hosts", "/etc/hosts", _hosts),
        # findmnt exits 1 with no output when nothing is mounted there: an answer, not a fault.
        mount=read_probe(probes, "findmnt", "findmnt", _mount, accept_rc=lambda p: p.rc in (0, 1)),
        time=_time(probes),
        slurm_nodes=read_probe(
            probes, "scontrol_nodes", "scontrol show node", parse_scontrol_nodes
        ),
        slurm_topology=read_probe(
            probes, "scontrol_topology", "scontrol show topology", parse_scontrol_topology
        ),
        sinfo=read_probe(probes, "sinfo", "sinfo -N", _sinfo),
        kube_nodes=read_probe(probes, "kubectl_nodes", "kubectl get nodes", parse_kubectl_nodes),
        slurm_files=read_probe(probes, "slurm_files", "Slurm file digests", _file_digests),
        job=read_probe(probes, "srun_job", "srun (validation job)", _job(args or {})),
        health_state=read_probe(
            probes, "health_state", "myriad-health state", _json_of("myriad-health state")
        ),
        image_record=read_probe(
            probes, "image_record", "/etc/myriad/image.json", _json_of("the image record")
        ),
        hardware_record=read_probe(
            probes, "hardware_record", "/etc/myriad/hardware.json", _json_of("the hardware map")
        ),
        hardware_map=read_probe(
            probes, "hardware_map", "hardware discovery", _json_of("the hardware map")
        ),
        roce_gids=read_probe(probes, "roce_gids", "RoCE GID tables", _json_of("the GID tables")),
        seconds=float(seconds) if isinstance(seconds, (int, float)) else None,
    )


def _file_digests(text: str) -> Mapping[str, FileDigest | None]:
    found: dict[str, FileDigest | None] = {}
    for path, entry in _json_object("Slurm file digests", text).items():
        if entry is None:
            found[path] = None
            continue
        if not isinstance(entry, Mapping) or "error" in entry:
            why = entry.get("error") if isinstance(entry, Mapping) else entry
            raise ParseFailure("Slurm file digests", f"{path}: {why}")
        values = [entry.get(key) for key in ("sha256", "mode", "owner", "group")]
        if not all(isinstance(v, str) and v for v in values):
            raise ParseFailure("Slurm file digests", f"{path}: incomplete record {entry!r}")
        found[path] = FileDigest(*(str(v) for v in values))
    return found


def _job(args: Mapping[str, Any]) -> Callable[[str], JobRun]:
    asked = args.get("job_nodes") if isinstance(args, Mapping) else None
    nodes = tuple(str(n) for n in asked) if isinstance(asked, list) else ()

    def parse(text: str) -> JobRun:
        ran, errors, skipped = set(), {}, {}
        for node, raw in _json_object("srun (validation job)", text).items():
            if isinstance(raw, Mapping) and isinstance(raw.get("skipped"), str):
                skipped[node] = str(raw["skipped"])
                continue
            record = _probe(raw)
            if record is None:
                raise ParseFailure("srun (validation job)", f"{node}: not a probe record")
            if record.rc == 0 and record.stdout.strip():
                ran.add(node)
            elif record.timed_out:
                errors[node] = "srun timed out"
            else:
                errors[node] = f"srun exited {record.rc}: {_message(record)}"
        return JobRun(nodes, frozenset(ran), errors, skipped)

    return parse


def _with_ceiling(memlock: Fact[Memlock], ceiling: Fact[str | None]) -> Fact[Memlock]:
    if not memlock.ok or not ceiling.ok:
        return memlock
    value = memlock.get()
    return ok(Memlock(value.soft, value.hard, ceiling.get()))


def _has_stdout(probe: Probe) -> bool:
    return bool(probe.stdout.strip())


def _json_of(tool: str) -> Callable[[str], Mapping[str, Any]]:
    return lambda text: _json_object(tool, text)
