"""Gathering: playbooks/facts.yml through ansible-runner, one JSON document per node.

The playbook runs myriad.node.gather on every node at once (Ansible's forks, strategy free);
each node's document arrives in the `runner_on_ok` event of its one task and is turned into
typed facts right there, so the control node holds parsed facts, not thousands of raw
documents. Unreachable nodes and nodes whose gatherer failed are recorded with Ansible's
message; a node the run never reported on is recorded too, never silently dropped.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from myriad import paths
from myriad.node import artefact
from myriad.node.facts import NodeFacts, decode, node_facts, unreadable
from myriad.runner import TUNED_WITHOUT_MITOGEN, run_playbook

# The gatherer ships inside the node package, which is built from the installed package for
# each run (so every wheel and install has it); the play is handed its path and never looks
# for it in a checkout.
GATHER_TASK = "Run the fact gatherer on the node"
DEFAULT_PROBE_TIMEOUT_S = 20
# Ansible's connection errors run to several hundred characters on one line; a report
# row needs the start of it, the full text stays in the run's event log.
MESSAGE_LIMIT = 160


@dataclass(frozen=True, slots=True)
class Gathered:
    facts: Mapping[str, NodeFacts]
    unreachable: Mapping[str, str]
    failed: Mapping[str, str]
    seconds: float
    run_dir: Path | None


def document_of(event: Mapping[str, Any]) -> tuple[str, NodeFacts] | None:
    """The facts a `runner_on_ok` event of the gathering task carries, if it is one."""
    if event.get("event") != "runner_on_ok":
        return None
    data = event.get("event_data") or {}
    host = data.get("host")
    result = data.get("res") or {}
    if not host or "stdout" not in result:
        return None
    try:
        document = decode(str(result.get("stdout") or ""))
    except ValueError as exc:
        return host, unreadable(host, str(exc))
    try:
        return host, node_facts(host, document)
    except Exception as exc:  # a reader bug must cost one node its facts, not the whole run
        return host, unreadable(host, f"internal error reading the facts: {exc!r}")


def collect(
    events: Sequence[Mapping[str, Any]], hosts: Sequence[str]
) -> tuple[dict[str, NodeFacts], dict[str, str], dict[str, str]]:
    """Facts, unreachable and failed hosts from a run's events (pure; used by `gather`)."""
    collector = _Collector()
    for event in events:
        collector.add(event)
    return collector.finish(hosts)


class _Collector:
    def __init__(self) -> None:
        self.facts: dict[str, NodeFacts] = {}
        self.unreachable: dict[str, str] = {}
        self.failed: dict[str, str] = {}

    def add(self, event: Mapping[str, Any]) -> None:
        found = document_of(event)
        if found is not None:
            self.facts[found[0]] = found[1]
            return
        kind = event.get("event")
        data = event.get("event_data") or {}
        host = data.get("host")
        if not host or kind not in ("runner_on_unreachable", "runner_on_failed"):
            return
        result = data.get("res") or {}
        message = str(
            result.get("msg") or result.get("stderr") or result.get("stdout") or kind
        ).strip()
        first = message.splitlines()[0] if message else kind
        if len(first) > MESSAGE_LIMIT:
            first = first[: MESSAGE_LIMIT - 3] + "..."
        if kind == "runner_on_unreachable":
            self.unreachable[host] = first
        else:
            self.failed[host] = first

    def finish(
        self, hosts: Sequence[str]
    ) -> tuple[dict[str, NodeFacts], dict[str, str], dict[str, str]]:
        for host in hosts:
            if host not in self.facts and host not in self.unreachable and host not in self.failed:
                self.unreachable[host] = "no result from the gathering run"
        return self.facts, self.unreachable, self.failed


@contextmanager
def node_artefact() -> Iterator[Path]:
    """The node package (myriad-node.pyz) as a file Ansible can copy to the nodes, made from
    the installed package for this run: the same file the health role installs."""
    with tempfile.TemporaryDirectory(prefix="myriad-gather-") as folder:
        yield artefact.write(Path(folder) / artefact.NAME)


def gather(
    inventory_dir: Path,
    run_dir: Path,
    hosts: Sequence[str],
    *,
    limit: Sequence[str] | None = None,
    on_event: Callable[[Mapping[str, Any]], None] | None = None,
    probe_timeout_s: int = DEFAULT_PROBE_TIMEOUT_S,
    timeout_s: int = 3600,
    job_nodes: Sequence[str] = (),
) -> Gathered:
    """Run the gathering playbook against `hosts` (the inventory's, or --limit's)."""
    collector = _Collector()

    def handle(event: Mapping[str, Any]) -> None:
        collector.add(event)
        if on_event is not None:
            on_event(event)

    start = time.monotonic()
    with node_artefact() as program:
        outcome = run_playbook(
            paths.playbook("facts.yml"),
            inventory_dir / "hosts.yml",
            run_dir,
            hosts=len(hosts),
            limit=limit,
            extravars={
                "myriad_node_artefact": str(program),
                "myriad_probe_timeout": probe_timeout_s,
                # The Slurm controller runs one bounded job across these (empty: none).
                "myriad_validate_job_nodes": list(job_nodes),
            },
            on_event=handle,
            timeout_s=timeout_s,
            # One task per node: a persistent interpreter would cost more to start than it
            # saves.
            tuning=TUNED_WITHOUT_MITOGEN,
        )
    # A failure the events did not carry (a timeout of the whole run) still names the host.
    for failure in outcome.failures:
        target = collector.unreachable if failure.unreachable else collector.failed
        if failure.host not in collector.facts:
            target.setdefault(failure.host, failure.message)
    facts, unreachable, failed = collector.finish(hosts)
    return Gathered(facts, unreachable, failed, time.monotonic() - start, run_dir)
