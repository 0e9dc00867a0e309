"""What a fact module declares: the probes a fact needs and the pure reader of their output.

    Probe     a name in the gatherer's document and what runs on the node to fill it
              (`command`, `file`, `files`, or any function of the gather Options)
    Declared  a fact: its NodeFacts field, its probes, and `read`: the probe records
              (a Reading) -> the fact's value, pure
    fact()    the common case: one probe, one parser of its stdout

The gatherer runs every declared probe (myriad.node.gather); the reader side reads every
declared fact from the document (myriad.node.facts.read); the registry collects both.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from myriad.node.facts.fact import Fact
from myriad.node.facts.probe import at, read_file, read_files, run
from myriad.node.parsers import ParseFailure
from myriad.node.parsers.common import first_line

if TYPE_CHECKING:
    from myriad.node.facts.probe import Record

T = TypeVar("T")


# --- the gatherer's side: probes ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Options:
    """What the gatherer was asked for (its command line), as the probes read it."""

    root: str = "/"
    timeout: float = 20.0
    controller: str = "none"
    units: tuple[str, ...] = ()
    qos_nics: tuple[str, ...] = ()
    mount: str = ""
    job_nodes: tuple[str, ...] = ()
    job_timeout: float = 60.0
    # Replaces /sys/class/infiniband (the node health runner's tests read a capture).
    infiniband: str | None = None
    # The member of a probe family being run (`mlnx_qos:eth4` -> "eth4").
    item: str = ""


def _always(options: Options) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class Probe:
    """One entry of the gatherer's document. With `each`, a family: one entry per item,
    named NAME:ITEM, `collect` seeing the item as `options.item`."""

    name: str
    collect: Callable[[Options], Record]
    when: Callable[[Options], bool] = _always
    each: Callable[[Options], Sequence[str]] | None = None

    def instances(self, options: Options) -> dict[str, Callable[[], Record]]:
        """Entry name -> zero-argument callable, for what `options` asks for."""
        if not self.when(options):
            return {}
        if self.each is None:
            return {self.name: lambda: self.collect(options)}
        return {
            f"{self.name}:{item}": (lambda o: lambda: self.collect(o))(replace(options, item=item))
            for item in self.each(options)
        }


def command(name: str, *argv: str, when: Callable[[Options], bool] = _always) -> Probe:
    """A probe that runs a command (bounded by the per-probe timeout)."""
    return Probe(name, lambda o: run(list(argv), o.timeout), when)


def file(name: str, path: str) -> Probe:
    """A probe that reads one file of the node."""
    return Probe(name, lambda o: read_file(at(o.root, path)))


def files(name: str, *patterns: str) -> Probe:
    """A probe that reads the files matching `patterns`, as JSON path -> content."""
    return Probe(name, lambda o: read_files(o.root, list(patterns)))


def controller_is(kind: str) -> Callable[[Options], bool]:
    """For the probes only a controller is asked to run (the orchestrator's view)."""
    return lambda o: o.controller == kind


# --- the reader's side: one probe's record ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProbeRecord:
    rc: int | None
    stdout: str
    stderr: str
    missing: bool
    timed_out: bool


def probe_record(raw: object) -> ProbeRecord | None:
    if not isinstance(raw, Mapping):
        return None
    rc, stdout, stderr = raw.get("rc"), raw.get("stdout"), raw.get("stderr")
    return ProbeRecord(
        rc=rc if isinstance(rc, int) and not isinstance(rc, bool) else None,
        stdout=stdout if isinstance(stdout, str) else "",
        stderr=stderr if isinstance(stderr, str) else "",
        missing=raw.get("missing") is True,
        timed_out=raw.get("timed_out") is True,
    )


def message(probe: ProbeRecord) -> str:
    return first_line(probe.stderr) or first_line(probe.stdout) or "no output"


def rc_zero(probe: ProbeRecord) -> bool:
    return probe.rc == 0


def read_probe(
    probes: Mapping[str, Any],
    name: str,
    tool: str,
    parse: Callable[[str], T],
    *,
    accept_rc: Callable[[ProbeRecord], bool] = rc_zero,
) -> Fact[T]:
    if name not in probes:
        return Fact("not-gathered", detail=f"{tool} was not gathered on this node")
    probe = probe_record(probes[name])
    if probe is None:
        return Fact("unreadable", detail=f"could not read the {tool} probe record")
    if probe.missing:
        return Fact("missing", detail=message(probe))
    if probe.timed_out:
        return Fact("unreadable", detail=f"{tool} timed out")
    if not accept_rc(probe):
        return Fact("failed", detail=f"{tool} exited {probe.rc}: {message(probe)}")
    try:
        return Fact("ok", parse(probe.stdout))
    except ParseFailure as exc:
        return Fact("unreadable", detail=f"could not read {tool} output: {exc.reason}")


@dataclass(slots=True)
class Reading:
    """One node's document as the readers see it: its probe records and what the gatherer
    was asked for (`args`). A probe several facts read is parsed once (`read`)."""

    probes: Mapping[str, Any]
    args: Mapping[str, Any]
    _read: dict[tuple[Any, ...], Fact[Any]] = field(default_factory=dict)

    def read(
        self,
        name: str,
        tool: str,
        parse: Callable[[str], T],
        *,
        accept_rc: Callable[[ProbeRecord], bool] = rc_zero,
    ) -> Fact[T]:
        key = (name, tool, parse, accept_rc)
        if key not in self._read:
            self._read[key] = read_probe(self.probes, name, tool, parse, accept_rc=accept_rc)
        return self._read[key]


# --- a fact -------------------------------------------------------------------------------------


def _broken(reason: str) -> Fact[Any]:
    return Fact("unreadable", detail=reason)


@dataclass(frozen=True, slots=True)
class Declared(Generic[T]):
    """One fact: the NodeFacts field `name`, the probes it needs, its reader.

    `read` is pure (a Reading -> the value); `unusable` is the value when the document as a
    whole cannot be read. A fact with no probes is filled by whoever reads it between
    runs (the node health runner); the document gives it `not-gathered`."""

    name: str
    probes: tuple[Probe, ...]
    read: Callable[[Reading], T]
    unusable: Callable[[str], Any] = _broken


def fact(
    name: str,
    probe: Probe,
    tool: str,
    parse: Callable[[str], T],
    *,
    accept_rc: Callable[[ProbeRecord], bool] = rc_zero,
) -> Declared[Fact[T]]:
    """A fact read from one probe's stdout by `parse`; `tool` names it in every detail."""
    return Declared(name, (probe,), lambda r: r.read(probe.name, tool, parse, accept_rc=accept_rc))


# --- parsers several facts share ------------------------------------------------------------------


def json_object(tool: str, text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseFailure(tool, f"not JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise ParseFailure(tool, "expected a JSON object")
    return data


def json_of(tool: str) -> Callable[[str], Mapping[str, Any]]:
    return lambda text: json_object(tool, text)


def text_files(tool: str) -> Callable[[str], Mapping[str, str]]:
    """A `files` probe's stdout: node path -> content."""

    def parse(text: str) -> Mapping[str, str]:
        data = json_object(tool, text)
        if not all(isinstance(v, str) for v in data.values()):
            raise ParseFailure(tool, "file contents must be text")
        # Configuration files are the same on most nodes: one copy of each text.
        return {sys.intern(path): sys.intern(text) for path, text in data.items()}

    return parse


def json_fact(name: str, probe: Probe, tool: str, what: str) -> Declared[Fact[Mapping[str, Any]]]:
    """A fact that is a JSON object the node holds (a record file, a discovery)."""
    return fact(name, probe, tool, json_of(what))
