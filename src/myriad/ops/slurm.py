"""Talking to Slurm on the cluster's controller: node states, drain reasons, running jobs.

Commands run on the first controller of the inventory, reached the way Ansible reaches it
(`docker exec` for the local cluster, `ssh` otherwise, with sudo when the inventory's user
is not root), one command per call and no playbook, so polling a batch's jobs costs one
round trip. The parsers below are pure and tested on their own.

Reason rules (shared with the node health runner):
- the health runner drains with a reason starting `myriad-health: `; `myriad resume`
  refuses such nodes unless forced;
- Myriad's own verbs write `myriad: <verb> by <user>: <text>`, and a roll resumes only
  nodes whose reason is still the one it wrote.
"""

from __future__ import annotations

import getpass
import shlex
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from myriad.errors import OpsError, OpsInputError
from myriad.node.parsers.slurm import expand_hostlist
from myriad.render.inventory import Inventory

HEALTH_PREFIX = "myriad-health: "
# Remediation's drains (myriad.health.remedy.REASON_PREFIX): a node it sent for repair.
REMEDY_PREFIX = "myriad-remedy: "
MYRIAD_PREFIX = "myriad: "
COMMAND_TIMEOUT_S = 60
# How long `up` waits for nodes to re-register with slurmctld before validating them: a few
# of slurmctld's pings (SlurmdTimeout's checks), however slow the machine.
SETTLE_TIMEOUT_S = 120.0
# Jobs in these states hold their nodes: a drained node with one of them is still busy.
BUSY_JOB_STATES = "RUNNING,COMPLETING,CONFIGURING,SUSPENDED,STOPPED"

Runner = Callable[[Sequence[str]], "Completed"]


@dataclass(frozen=True, slots=True)
class Completed:
    rc: int
    stdout: str
    stderr: str


@dataclass(frozen=True, slots=True)
class NodeState:
    name: str
    state: str
    reason: str

    @property
    def drained(self) -> bool:
        """Drain set (draining or drained), whatever else the node is doing."""
        return "drain" in self.state

    @property
    def unavailable(self) -> bool:
        """Out of service: drained, down or failing, whoever put it there."""
        return (
            self.drained
            or any(word in self.state for word in ("down", "fail", "maint", "reboot", "unknown"))
            or self.state.endswith("*")
        )

    @property
    def held_by_health(self) -> bool:
        return self.drained and self.reason.startswith(HEALTH_PREFIX)

    @property
    def held_by_remedy(self) -> bool:
        return self.drained and self.reason.startswith(REMEDY_PREFIX)


@dataclass(frozen=True, slots=True)
class Job:
    job_id: str
    nodes: tuple[str, ...]
    user: str
    name: str


def reason_for(verb: str, text: str, user: str | None = None) -> str:
    """`myriad: roll by root: nvidia driver 550` — who and why, in Slurm's Reason field."""
    who = user or current_user()
    return f"{MYRIAD_PREFIX}{verb} by {who}: {text.strip()}"


def current_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def parse_sinfo(text: str) -> dict[str, NodeState]:
    """`sinfo -h -N -o '%N|%T|%E'`: one line per node (a node in two partitions twice)."""
    nodes: dict[str, NodeState] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        name, state, reason = ([*line.split("|", 2), "", ""])[:3]
        reason = "" if reason.strip() == "none" else reason.strip()
        nodes[name.strip()] = NodeState(name.strip(), state.strip().lower(), reason)
    return nodes


def parse_squeue(text: str) -> list[Job]:
    """`squeue -h -o '%i|%N|%u|%j'`: one line per job, its nodes as a host list."""
    jobs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        job_id, nodelist, user, name = ([*line.split("|", 3), "", "", ""])[:4]
        nodes = tuple(expand_hostlist(nodelist)) if nodelist.strip() else ()
        jobs.append(Job(job_id.strip(), nodes, user.strip(), name.strip()))
    return jobs


def jobs_by_node(jobs: Iterable[Job], nodes: Iterable[str]) -> dict[str, list[Job]]:
    """For each of `nodes`, the jobs that hold it (empty list when none)."""
    wanted: dict[str, list[Job]] = {node: [] for node in nodes}
    for job in jobs:
        for node in job.nodes:
            if node in wanted:
                wanted[node].append(job)
    return wanted


def controller_command(inventory: Inventory) -> list[str]:
    """The argv prefix that runs a command on the first controller as root."""
    controllers = list(inventory.groups.get("controller", ()))
    if not controllers:
        raise OpsError(f"the inventory of {inventory.cluster} has no controller to ask Slurm")
    return host_command(inventory, controllers[0])


def host_command(inventory: Inventory, host: str) -> list[str]:
    """The argv prefix that runs a command on `host` as root, the way Ansible reaches it."""
    variables: Mapping[str, object] = {
        **inventory.group_vars.get("all", {}),
        **inventory.host_vars.get(host, {}),
    }
    target = str(variables.get("ansible_host") or host)
    if variables.get("ansible_connection") == "docker":
        return ["docker", "exec", target]
    user = variables.get("ansible_user")
    argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=15"]
    if variables.get("ansible_port"):
        argv += ["-p", str(variables["ansible_port"])]
    argv.append(f"{user}@{target}" if user else target)
    if user and user != "root":
        argv += ["sudo", "-n"]
    return argv


class Slurm:
    """scontrol, sinfo, squeue and scancel on the controller."""

    def __init__(self, prefix: Sequence[str], run: Runner | None = None) -> None:
        self.prefix = list(prefix)
        self._run = run or self._subprocess

    @classmethod
    def of(cls, inventory: Inventory) -> Slurm:
        return cls(controller_command(inventory))

    def _subprocess(self, argv: Sequence[str]) -> Completed:
        remote = self.prefix[0] == "ssh"
        command = [*self.prefix, shlex.join(argv)] if remote else [*self.prefix, *argv]
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            where = shlex.join(command)
            raise OpsError(f"could not reach the controller ({where}): {exc}") from exc
        return Completed(done.returncode, done.stdout, done.stderr)

    def run(self, *argv: str) -> str:
        done = self._run(argv)
        if done.rc != 0:
            message = (done.stderr or done.stdout).strip().splitlines()
            raise OpsError(
                f"`{shlex.join(argv)}` on the controller failed (exit {done.rc}): "
                f"{message[-1] if message else 'no output'}"
            )
        return done.stdout

    def nodes(self, names: Sequence[str] | None = None) -> dict[str, NodeState]:
        argv = ["sinfo", "-h", "-N", "-o", "%N|%T|%E"]
        if names:
            argv += ["-n", ",".join(names)]
        return parse_sinfo(self.run(*argv))

    def jobs(self, names: Sequence[str] | None = None) -> list[Job]:
        argv = ["squeue", "-h", "-t", BUSY_JOB_STATES, "-o", "%i|%N|%u|%j"]
        if names:
            argv += ["-w", ",".join(names)]
        return parse_squeue(self.run(*argv))

    def drain(self, names: Sequence[str], reason: str) -> None:
        self.run("scontrol", "update", f"NodeName={','.join(names)}", "State=DRAIN",
                 f"Reason={reason}")  # fmt: skip

    def resume(self, names: Sequence[str]) -> None:
        self.run("scontrol", "update", f"NodeName={','.join(names)}", "State=RESUME")

    def reboot(self, names: Sequence[str], reason: str) -> None:
        """Reboot through slurmctld (its RebootProgram) once each node's jobs end, and
        return the nodes to service when slurmd registers again (slurm.conf(5) RebootProgram,
        scontrol(1) reboot)."""
        self.run("scontrol", "reboot", "ASAP", "nextstate=RESUME", f"reason={reason}",
                 ",".join(names))  # fmt: skip

    def cancel(self, job_ids: Sequence[str]) -> None:
        self.run("scancel", *job_ids)


def check_names(names: Sequence[str], known: Sequence[str], cluster: str) -> None:
    """Every name must be a compute node of the cluster: exit 2 naming the first stranger."""
    if not names:
        raise OpsInputError("no nodes given: name them, comma-separated (node01,node02)")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise OpsInputError(
            f"{', '.join(unknown)}: not a compute node of cluster {cluster} "
            f"(its compute nodes: {', '.join(known) or 'none'})"
        )


def settling(states: Mapping[str, NodeState], names: Sequence[str]) -> list[str]:
    """Nodes slurmctld has not heard from yet: not listed, `*` (not responding) or unknown.

    Right after slurmd or munge restarts, a node re-registers within a ping interval; judging
    it before then reports a healthy node as failed."""
    return [
        name
        for name in names
        if name not in states
        or states[name].state.endswith("*")
        or states[name].state.startswith("unknown")
    ]


def wait_settled(
    slurm: Slurm,
    names: Sequence[str],
    *,
    timeout_s: float = SETTLE_TIMEOUT_S,
    poll_s: float = 3.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Wait, at most `timeout_s`, until every node answers slurmctld; the ones that still
    do not (judged as they are by validation, which says why)."""
    deadline = clock() + timeout_s
    while True:
        waiting = settling(slurm.nodes(names), names)
        if not waiting or clock() >= deadline:
            return waiting
        sleep(poll_s)
