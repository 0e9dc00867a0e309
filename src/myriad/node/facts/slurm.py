"""Slurm: the controller's view (`scontrol show node`, `scontrol show topology`, `sinfo`),
the validation jobs a controller runs, and the digests of the files every node must share."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from myriad.node.facts.declare import (
    Declared,
    Probe,
    Reading,
    command,
    controller_is,
    fact,
    json_object,
    message,
    probe_record,
)
from myriad.node.facts.fact import Fact
from myriad.node.facts.probe import as_json, at, record, run
from myriad.node.parsers import (
    ParseFailure,
    parse_gres,
    parse_scontrol_nodes,
    parse_scontrol_topology,
)
from myriad.node.parsers.slurm import Gres

if TYPE_CHECKING:
    from myriad.node.facts.probe import Record

# Files whose sameness across nodes Slurm needs: the munge key (a credential made on one
# node must decode on every other) and the configuration slurmctld and slurmd both read.
SLURM_FILES = (
    "/etc/munge/munge.key",
    "/etc/slurm/slurm.conf",
    "/etc/slurm/gres.conf",
    "/etc/slurm/cgroup.conf",
    "/etc/slurm/topology.conf",
)
# How many of the per-node validation jobs are submitted at once.
JOB_PARALLEL = 32


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


# --- probes -----------------------------------------------------------------------------------


def _owner(uid: int, table: str) -> str:
    try:
        if table == "passwd":
            import pwd

            return pwd.getpwuid(uid).pw_name
        import grp

        return grp.getgrgid(uid).gr_name
    except (KeyError, ImportError):
        return str(uid)


def file_digests(root: str, paths: list[str]) -> Record:
    """Each file's sha256, mode and owner as JSON (null: absent); never its content."""
    import hashlib
    import stat

    found: dict[str, Any] = {}
    for path in paths:
        full = at(root, path)
        try:
            info = os.stat(full)
            digest = hashlib.sha256()
            with open(full, "rb") as handle:
                for chunk in iter(lambda: handle.read(65536), b""):
                    digest.update(chunk)
        except FileNotFoundError:
            found[path] = None
            continue
        except OSError as exc:
            found[path] = {"error": f"{type(exc).__name__}: {exc.strerror}"}
            continue
        found[path] = {
            "sha256": digest.hexdigest(),
            "mode": format(stat.S_IMODE(info.st_mode), "04o"),
            "owner": _owner(info.st_uid, "passwd"),
            "group": _owner(info.st_gid, "group"),
        }
    return as_json(found)


def srun_jobs(nodes: list[str], timeout: float) -> Record:
    """A tiny job on each of `nodes` (one `hostname -s` there), bounded in time.

    One job per node, so a broken node fails only itself. --immediate makes srun give up
    when the node cannot be allocated instead of queueing; --time bounds the job in Slurm;
    the timeout bounds srun itself. stdout: JSON node -> that srun's record."""
    wait = max(1, int(timeout) - 5)

    def one(node: str) -> Record:
        return run(
            [
                "srun", f"--immediate={wait}", "--time=1", "--nodes=1", "--ntasks=1",
                "--nodelist=" + node, "--job-name=myriad-validate", "hostname", "-s",
            ],
            timeout,
        )  # fmt: skip

    # Only idle nodes take the job: a busy node proves itself with the jobs it runs, and a
    # job queued behind them would only time out. Others are recorded with their state.
    states = run(["sinfo", "-h", "-N", "-n", ",".join(nodes), "-o", "%n %T"], timeout)
    seen: dict[str, str] = {}
    for line in states["stdout"].splitlines() if states["rc"] == 0 else []:
        parts = line.split()
        if len(parts) == 2:
            seen[parts[0]] = parts[1]
    free = [n for n in nodes if seen.get(n, "idle") == "idle"]
    with ThreadPoolExecutor(max_workers=max(1, min(JOB_PARALLEL, len(free) or 1))) as pool:
        outcomes = list(pool.map(one, free))
    records: dict[str, Any] = {node: outcomes[i] for i, node in enumerate(free)}
    records.update({n: {"skipped": seen[n]} for n in nodes if n not in records})
    if free and all(records[n].get("missing") for n in free):
        return record(None, stderr="srun: command not found", missing=True)
    return as_json(records)


SLURM = controller_is("slurm")
SRUN = Probe(
    "srun_job",
    lambda o: srun_jobs(list(o.job_nodes), o.job_timeout),
    when=lambda o: SLURM(o) and bool(o.job_nodes),
)

# --- readers ----------------------------------------------------------------------------------


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


def _file_digests(text: str) -> Mapping[str, FileDigest | None]:
    found: dict[str, FileDigest | None] = {}
    for path, entry in json_object("Slurm file digests", text).items():
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
    asked = args.get("job_nodes")
    nodes = tuple(str(n) for n in asked) if isinstance(asked, list) else ()

    def parse(text: str) -> JobRun:
        ran, errors, skipped = set(), {}, {}
        for node, raw in json_object("srun (validation job)", text).items():
            if isinstance(raw, Mapping) and isinstance(raw.get("skipped"), str):
                skipped[node] = str(raw["skipped"])
                continue
            outcome = probe_record(raw)
            if outcome is None:
                raise ParseFailure("srun (validation job)", f"{node}: not a probe record")
            if outcome.rc == 0 and outcome.stdout.strip():
                ran.add(node)
            elif outcome.timed_out:
                errors[node] = "srun timed out"
            else:
                errors[node] = f"srun exited {outcome.rc}: {message(outcome)}"
        return JobRun(nodes, frozenset(ran), errors, skipped)

    return parse


def _read_job(r: Reading) -> Fact[JobRun]:
    return r.read(SRUN.name, "srun (validation job)", _job(r.args))


SLURM_NODES = fact(
    "slurm_nodes",
    command("scontrol_nodes", "scontrol", "show", "node", "-o", when=SLURM),
    "scontrol show node",
    parse_scontrol_nodes,
)
SLURM_TOPOLOGY = fact(
    "slurm_topology",
    command("scontrol_topology", "scontrol", "show", "topology", when=SLURM),
    "scontrol show topology",
    parse_scontrol_topology,
)
SINFO = fact(
    "sinfo", command("sinfo", "sinfo", "-N", "-h", "-o", "%n %T %G", when=SLURM), "sinfo -N", _sinfo
)
# /etc/munge/munge.key and the Slurm configuration files: path -> digest, None if absent.
SLURM_FILES_FACT = fact(
    "slurm_files",
    Probe("slurm_files", lambda o: file_digests(o.root, list(SLURM_FILES))),
    "Slurm file digests",
    _file_digests,
)
# On a Slurm controller asked to run the validation job: which nodes ran it.
JOB: Declared[Fact[JobRun]] = Declared("job", (SRUN,), _read_job)
