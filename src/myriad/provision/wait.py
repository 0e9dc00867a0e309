"""Following bare-metal installs after `pulumi up` has started them: `myriad provision wait`.

The provider's `create` returns once a node is flagged and powered on (or queued), so Pulumi
is not held for the length of an install, and hundreds of nodes install at once. This wait
does the rest, from the install records under `<pxe root>/state/nodes/` (see
`myriad.provision.pxe_state`):

- a node `installing` or `installed` is probed on SSH until its banner carries the installed
  system's marker, then it is `up` and no longer flagged;
- a node `queued` is powered on (one-time network boot) as soon as fewer than
  `parallel_installs` nodes are installing;
- a node past `install_timeout_minutes` since its install started is `failed`, and its flag
  is taken away so that a later reboot does not reinstall it unannounced.

Everything it learns goes to the records at once, so a wait that is killed and run again
carries on where it stopped: finished nodes are not probed again, and deadlines keep counting
from each install's start.
"""

from __future__ import annotations

import concurrent.futures
import os
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from myriad.errors import RedfishError, WaitError
from myriad.provision.pxe_state import FINISHED, POWERING_ON, STATES, InstallRecord, PxeState
from myriad.provision.redfish import (
    BmcCredentials,
    NodeTarget,
    power_on_queued,
    probe_ssh,
    ssh_banner_marker,
)

DEFAULT_PXE_ROOT = Path("/srv/myriad-pxe")


@dataclass(frozen=True, slots=True)
class WaitNode:
    name: str
    address: str
    os: str
    bmc_address: str
    redfish_system: str | None = None


@dataclass(frozen=True, slots=True)
class WaitSettings:
    parallel_installs: int
    timeout_s: float
    poll_s: float = 15.0
    ssh_port: int = 22
    probe_timeout_s: float = 5.0
    workers: int = 64


@dataclass(frozen=True, slots=True)
class Progress:
    counts: Mapping[str, int]
    total: int
    elapsed_s: float
    changed: Sequence[InstallRecord]

    def line(self) -> str:
        shown = ", ".join(f"{self.counts.get(s, 0)} {s}" for s in STATES if self.counts.get(s))
        return f"[{self.elapsed_s:6.0f}s] {shown} of {self.total}"


@dataclass(frozen=True, slots=True)
class WaitResult:
    records: Sequence[InstallRecord]

    def summary(self) -> str:
        failed = f"; failed: {', '.join(r.name for r in self.failed)}" if self.failed else ""
        return f"{len(self.up)} of {len(self.records)} nodes up{failed}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "up": len(self.up),
            "failed": [r.name for r in self.failed],
            "nodes": [
                {"name": r.name, "state": r.state, "detail": r.detail, "install_id": r.install_id}
                for r in self.records
            ],
        }

    @property
    def failed(self) -> list[InstallRecord]:
        return [r for r in self.records if r.state == "failed"]

    @property
    def up(self) -> list[InstallRecord]:
        return [r for r in self.records if r.state == "up"]


Starter = Callable[[WaitNode], None]


def wait_for_installs(
    pxe: PxeState,
    nodes: Mapping[str, WaitNode],
    settings: WaitSettings,
    *,
    start: Starter | None,
    report: Callable[[Progress], None],
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> WaitResult:
    """Follow every node of `nodes` that has an install record until each is up or failed."""
    began = clock()
    # Slots a stopped wait claimed but may not have powered on: power them on now (a node
    # already on is left alone, so doing it twice is harmless).
    unstarted = [
        r
        for r in pxe.records()
        if r.name in nodes and r.state == "installing" and r.detail == POWERING_ON
    ]
    with concurrent.futures.ThreadPoolExecutor(max_workers=settings.workers) as pool:
        while True:
            records = {r.name: r for r in pxe.records() if r.name in nodes}
            pending = [r for r in records.values() if r.state not in FINISHED]
            changed = _probe(pxe, pool, pending, nodes, settings, clock())
            changed += _start_queued(pxe, pool, nodes, settings, start, unstarted)
            unstarted = []
            records = {r.name: r for r in pxe.records() if r.name in nodes}
            counts: Counter[str] = Counter(r.state for r in records.values())
            report(Progress(dict(counts), len(records), clock() - began, changed))
            if all(r.state in FINISHED for r in records.values()):
                return WaitResult(sorted(records.values(), key=lambda r: r.name))
            sleep(settings.poll_s)


def _probe(
    pxe: PxeState,
    pool: concurrent.futures.ThreadPoolExecutor,
    pending: Sequence[InstallRecord],
    nodes: Mapping[str, WaitNode],
    settings: WaitSettings,
    now: float,
) -> list[InstallRecord]:
    probing = [r for r in pending if r.state in ("installing", "installed")]

    def look(record: InstallRecord) -> tuple[InstallRecord, bool, str]:
        node = nodes[record.name]
        ok, seen = probe_ssh(
            node.address,
            settings.ssh_port,
            banner_marker=ssh_banner_marker(node.name, node.os),
            timeout_s=settings.probe_timeout_s,
        )
        return record, ok, seen

    changed: list[InstallRecord] = []
    for record, ok, seen in pool.map(look, probing):
        if ok:
            changed.append(pxe.advance(record.name, "up", seen))
        elif now - record.started > settings.timeout_s:
            changed.append(
                pxe.advance(
                    record.name,
                    "failed",
                    f"not up {settings.timeout_s / 60:g} min after its install started "
                    f"(last: {seen}); no longer flagged",
                )
            )
    return changed


def _start_queued(
    pxe: PxeState,
    pool: concurrent.futures.ThreadPoolExecutor,
    nodes: Mapping[str, WaitNode],
    settings: WaitSettings,
    start: Starter | None,
    unstarted: Sequence[InstallRecord] = (),
) -> list[InstallRecord]:
    queued = [r for r in pxe.records() if r.name in nodes and r.state == "queued"]
    claimed: list[InstallRecord] = list(unstarted)
    for record in queued:
        started = pxe.claim_slot(record.name, limit=settings.parallel_installs)
        if started is None:
            break
        claimed.append(started)
    if claimed and start is None:
        raise WaitError(
            f"{len(claimed)} queued node(s) need powering on, which needs the BMC credentials: "
            "set MYRIAD_BMC_USERNAME and MYRIAD_BMC_PASSWORD"
        )

    def power_on(record: InstallRecord) -> InstallRecord:
        assert start is not None
        try:
            start(nodes[record.name])
        except RedfishError as exc:
            return pxe.advance(record.name, "failed", f"could not power on: {exc}")
        return pxe.advance(record.name, "installing", "powered on by the wait")

    return list(pool.map(power_on, claimed))


# The command: `myriad provision wait SPEC --stack ENV`.


def stack_pxe_root(stack_file: Path) -> Path:
    """`myriad:pxeRoot` of a Pulumi.<env>.yaml, or the default the stack uses too."""
    try:
        document = yaml.safe_load(stack_file.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise WaitError(f"{stack_file}: no such stack file") from None
    except (OSError, yaml.YAMLError) as exc:
        raise WaitError(f"{stack_file}: cannot read: {exc}") from None
    config = document.get("config") if isinstance(document, Mapping) else None
    value = config.get("myriad:pxeRoot") if isinstance(config, Mapping) else None
    if value is None:
        return DEFAULT_PXE_ROOT
    if not isinstance(value, str) or not value:
        raise WaitError(f"{stack_file}: myriad:pxeRoot must be a folder path")
    return Path(value)


def pxe_root_for(stack: str | None, pxe_root: Path | None) -> Path:
    """`--pxe-root`, else the stack file's `myriad:pxeRoot`, else the default."""
    if pxe_root is not None:
        return pxe_root
    if stack is None:
        return DEFAULT_PXE_ROOT
    from myriad.paths import project_root

    return stack_pxe_root(project_root() / f"Pulumi.{stack}.yaml")


def bmc_credentials_from_env(env: Mapping[str, str] = os.environ) -> BmcCredentials | None:
    user, password = env.get("MYRIAD_BMC_USERNAME"), env.get("MYRIAD_BMC_PASSWORD")
    return BmcCredentials(user, password) if user and password else None


def starter(credentials: BmcCredentials | None, **client: Any) -> Starter | None:
    if credentials is None:
        return None

    def start(node: WaitNode) -> None:
        power_on_queued(
            NodeTarget(
                name=node.name,
                bmc_address=node.bmc_address,
                credentials=credentials,
                address=node.address,
                os=node.os,
                redfish_system=node.redfish_system,
                **client,
            )
        )

    return start


def run(
    spec_path: Path,
    *,
    pxe_root: Path,
    poll_s: float,
    ssh_port: int,
    print_line: Callable[[str], None],
    env: Mapping[str, str] = os.environ,
) -> WaitResult:
    """The command's body: follows the installs to their end, telling each change."""
    from myriad.spec import load_spec
    from myriad.spec.models import BareMetalOptions

    spec = load_spec(spec_path).spec
    provider = spec.provider
    if provider.kind != "baremetal":
        raise WaitError(f"{spec_path}: provider kind is {provider.kind}; only baremetal installs")
    options = provider.baremetal or BareMetalOptions()
    nodes = {
        host.name: WaitNode(
            host.name, host.address, spec.software.os, host.bmc_address, host.redfish_system
        )
        for host in provider.hosts
    }
    pxe = PxeState(pxe_root)
    known = [r for r in pxe.records() if r.name in nodes]
    if not known:
        raise WaitError(
            f"no install records for {spec.metadata.name}'s hosts in {pxe.state_dir}: "
            "`pulumi up` starts the installs, then this follows them"
        )
    settings = WaitSettings(
        parallel_installs=options.parallel_installs,
        timeout_s=options.install_timeout_minutes * 60.0,
        poll_s=poll_s,
        ssh_port=ssh_port,
    )
    last: list[str] = []

    def report(progress: Progress) -> None:
        for record in progress.changed:
            suffix = f": {record.detail}" if record.state == "failed" else ""
            print_line(f"{record.name} {record.state}{suffix}")
        line = progress.line()
        if not last or line.split("]", 1)[1] != last[-1].split("]", 1)[1] or progress.changed:
            print_line(line)
            last.append(line)

    return wait_for_installs(
        pxe,
        nodes,
        settings,
        start=starter(bmc_credentials_from_env(env)),
        report=report,
    )
