"""myriad-health: the node health runner, run on every node (Slurm's HealthCheckProgram, a
node-problem-detector custom plugin on Kubernetes, or by hand).

Standard library only, like the check code it runs (myriad.node.checks, .facts, .parsers):
the health role copies those modules and this one to the node, nothing else.

One run:
1. reads the node's document (/etc/myriad-health/node.json): its expectations, rendered on
   the controller from the spec exactly as `myriad validate` derives them, and the policy
   (the spec's `health:` section: which checks drain, flap window, paths);
2. gathers the node's facts with the validation gatherer's probes, and what only a runner
   that remembers can read: XID events in the kernel log since its cursor (each judged
   once; a draining one is held until the node reboots or the hold ends), the growth of
   the HCA error counters since the last run, free disk space;
3. evaluates every check (the validation engine's evaluate_node);
4. under Slurm, drains its own node with `Reason="myriad-health: <check> ..."` when a
   draining check fails, and resumes it only when every draining check passes and the
   current reason is its own; a node drained with any other reason is never touched; a node
   it drained flap_limit times within flap_window_s stays drained, and its reason says so;
5. writes the state file (JSON) and the Prometheus textfile, each atomically.

Exit status and one line on stdout follow the node-problem-detector custom plugin
convention: 0 healthy, 1 a draining check fails, 2 the runner could not judge (its
document unreadable).
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from myriad.node import gather as gatherer
from myriad.node.checks import CheckResult, ClusterView, NodeExpectations, evaluate_node
from myriad.node.facts import DiskSpace, Fact, NodeFacts, node_facts, ok
from myriad.node.files import atomic_write_text
from myriad.node.parsers import ParseFailure, parse_scontrol_nodes
from myriad.node.parsers.kernel_log import XidEvent, classify, parse_xid_lines

SCHEMA = 1
CONFIG = "/etc/myriad-health/node.json"
REASON_PREFIX = "myriad-health: "
# Slurm keeps a reason up to this long; longer ones are cut by us, not by Slurm.
REASON_MAX = 240
EXIT_OK, EXIT_PROBLEM, EXIT_UNKNOWN = 0, 1, 2
DEFAULT_POLICY: dict[str, Any] = {
    "orchestrator": "slurm",
    "drain": [],
    "flap_window_s": 3600,
    "flap_limit": 3,
    "xid_hold_s": 0,
    "kernel_log": "/dev/kmsg",
    "state_file": "/var/lib/myriad-health/state.json",
    "metrics_file": "/var/lib/prometheus/node-exporter/myriad_health.prom",
    "infiniband": "",
    "scontrol": "scontrol",
    "probe_timeout_s": 20,
}
BOOT_ID = "/proc/sys/kernel/random/boot_id"
# The orchestrator's view (node state, gres, topology as Slurm or Kubernetes sees the node)
# is read on a controller: `myriad validate` judges those checks; on the node they do not
# apply, rather than being unknown on every node of the cluster.
CONTROLLER_VIEW = "judged from the orchestrator's view by `myriad validate`, not on the node"


class ConfigError(Exception):
    """The node's document cannot be used: the runner cannot judge (exit 2)."""


# --- files ---------------------------------------------------------------------------------


def load_config(path: str) -> tuple[NodeExpectations, dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise ConfigError(f"{path}: not a myriad-health document of schema {SCHEMA}")
    try:
        expectations = NodeExpectations.from_dict(document.get("node"))  # type: ignore[arg-type]
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    policy = {**DEFAULT_POLICY, **(document.get("policy") or {})}
    return expectations, policy


def load_state(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            state = json.load(handle)
    except (OSError, ValueError):
        # No state (first run) or a damaged one: start afresh; the counters take a baseline.
        return {}
    return state if isinstance(state, dict) else {}


def boot_id() -> str:
    try:
        with open(BOOT_ID, encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return ""


# --- the kernel log, read with a cursor ------------------------------------------------------


def read_kmsg(path: str, cursor: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """/dev/kmsg from the record after the cursor's sequence number: one record per read()."""
    last = int(cursor.get("seq", -1)) if cursor.get("kind") == "kmsg" else -1
    lines: list[str] = []
    newest = last
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        while True:
            try:
                record = os.read(fd, 8192)
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # overwritten before we read it: go on
                    continue
                if exc.errno == errno.EAGAIN:
                    break
                raise
            if not record:
                break
            head, _, message = record.decode("utf-8", "replace").partition(";")
            fields = head.split(",")
            seq = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else newest + 1
            if seq > last:
                lines.append(message.split("\n", 1)[0])
                newest = max(newest, seq)
    finally:
        os.close(fd)
    return "\n".join(lines), {"kind": "kmsg", "seq": newest}


def read_log_file(path: str, cursor: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """A kernel log file (kern.log, a test's source) from the cursor's offset; a new file
    (another inode, or shorter than the offset: rotated or truncated) is read from the start.
    Only whole lines are taken; a line being written is read next time."""
    info = os.stat(path)
    offset = int(cursor.get("offset", 0)) if cursor.get("kind") == "file" else 0
    if cursor.get("inode") != info.st_ino or info.st_size < offset:
        offset = 0
    with open(path, "rb") as handle:
        handle.seek(offset)
        data = handle.read()
    end = data.rfind(b"\n") + 1
    text = data[:end].decode("utf-8", "replace")
    return text, {"kind": "file", "inode": info.st_ino, "offset": offset + end}


def new_xids(
    source: str, state: Mapping[str, Any], boot: str
) -> tuple[Fact[tuple[XidEvent, ...]], dict[str, Any]]:
    cursor = state.get("kernel_log") or {}
    if cursor.get("boot_id") != boot or cursor.get("source") != source:
        cursor = {}
    try:
        if source == "/dev/kmsg":
            text, cursor = read_kmsg(source, cursor)
        else:
            text, cursor = read_log_file(source, cursor)
    except OSError as exc:
        return Fact("unreadable", detail=f"kernel log {source}: {exc.strerror or exc}"), dict(
            state.get("kernel_log") or {}
        )
    return ok(parse_xid_lines(text)), {**cursor, "boot_id": boot, "source": source}


def held_xids(state: Mapping[str, Any], now: float, boot: str, hold_s: int) -> list[dict[str, Any]]:
    """Draining XIDs of earlier runs still held: this boot's, within the hold (0: no end)."""
    held = []
    for entry in state.get("xid_held") or []:
        if not isinstance(entry, dict) or entry.get("boot_id") != boot:
            continue
        if hold_s and now - float(entry.get("at", 0)) >= hold_s:
            continue
        held.append(entry)
    return held


# --- counters and disks ----------------------------------------------------------------------


def counter_growth(
    current: Fact[Mapping[str, Mapping[str, int | None]]], previous: Mapping[str, Any]
) -> tuple[Fact[Mapping[str, Mapping[str, int]]], dict[str, Any]]:
    """Growth of each counter since the last reading. The first reading is a baseline (0);
    a counter below its last reading was reset (perfquery -R, a reboot) and grew by its
    value; a counter the port does not report (None) is left out, so the check calls it
    unknown."""
    if not current.ok:
        return Fact(current.state, None, current.detail), dict(previous)
    growth: dict[str, dict[str, int]] = {}
    for device, counters in current.get().items():
        before = previous.get(device) or {}
        grown: dict[str, int] = {}
        for name, value in counters.items():
            if value is None:
                continue
            last = before.get(name)
            grown[name] = 0 if last is None else (value - last if value >= last else value)
        growth[device] = grown
    reading = {d: {n: v for n, v in c.items() if v is not None} for d, c in current.get().items()}
    return ok(growth), reading


def disk_space(paths: Sequence[str]) -> Fact[Mapping[str, DiskSpace]]:
    found = {}
    for path in paths:
        try:
            stat = os.statvfs(path)
        except OSError:
            continue  # not read: the check calls it unknown
        if stat.f_blocks:
            free = 100.0 * stat.f_bavail / stat.f_blocks
            found[path] = DiskSpace(path, round(free, 2), stat.f_bavail * stat.f_frsize)
    return ok(found)


def writable(paths: Sequence[str]) -> Fact[Mapping[str, str | None]]:
    """Each path: None when a file could be created and removed under it, else why not."""
    found: dict[str, str | None] = {}
    for path in paths:
        try:
            handle, name = tempfile.mkstemp(dir=path, prefix=".myriad-health-")
            os.close(handle)
            os.unlink(name)
            found[path] = None
        except OSError as exc:
            found[path] = exc.strerror or str(exc)
    return ok(found)


# --- gathering -------------------------------------------------------------------------------


def _expected(expectations: NodeExpectations, check: str) -> Any:
    for e in expectations.expectations:
        if e.check == check and e.applies:
            return e.expected
    return None


def gather(expectations: NodeExpectations, policy: Mapping[str, Any]) -> NodeFacts:
    """The validation gatherer's probes, run here in-process, read as `myriad validate` does."""
    qos: list[str] = []
    for check in ("roce.trust", "roce.pfc", "roce.dscp"):
        value = _expected(expectations, check)
        if isinstance(value, dict):
            qos.extend(n for n in value.get("names", []) if n not in qos)
    mount = _expected(expectations, "storage.mount")
    # The gatherer's own parser, so every option it gains has its default here too.
    args = gatherer.parse_args(
        [
            "--controller=none",
            f"--qos-nics={','.join(qos)}",
            f"--mount={mount['path'] if isinstance(mount, dict) else ''}",
            f"--timeout={float(policy['probe_timeout_s'])}",
        ]
    )
    args.infiniband = policy.get("infiniband") or None
    return node_facts(expectations.node, gatherer.gather(args))


# --- the orchestrator ------------------------------------------------------------------------


@dataclasses.dataclass
class SlurmNodeState:
    drained: bool
    reason: str | None


class Slurm:
    """Reads and changes this node's state with scontrol (as root, as slurmd runs us)."""

    def __init__(self, scontrol: str, timeout: float = 30.0) -> None:
        self.scontrol = scontrol
        self.timeout = timeout

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.scontrol, *args],
            capture_output=True,
            text=True,
            timeout=self.timeout,
            check=False,
        )

    def show(self, node: str) -> SlurmNodeState | str:
        """The node's state, or why it could not be read."""
        if shutil.which(self.scontrol) is None:
            return f"{self.scontrol} not found"
        try:
            done = self._run("show", "node", node, "-o")
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"scontrol show node: {exc}"
        if done.returncode != 0:
            return f"scontrol show node exited {done.returncode}: {done.stderr.strip()[:200]}"
        try:
            nodes = parse_scontrol_nodes(done.stdout)
        except ParseFailure as exc:
            return f"scontrol show node: {exc.reason}"
        for found in nodes:
            if found.name == node:
                return SlurmNodeState(found.drained, found.reason)
        return f"scontrol does not know node {node}"

    def update(self, node: str, *settings: str) -> str | None:
        """None when done, else what went wrong."""
        try:
            done = self._run("update", f"NodeName={node}", *settings)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"scontrol update: {exc}"
        if done.returncode != 0:
            return f"scontrol update exited {done.returncode}: {done.stderr.strip()[:200]}"
        return None


def ours(reason: str | None) -> bool:
    return bool(reason) and str(reason).startswith(REASON_PREFIX)


def bare_reason(reason: str | None) -> str:
    """scontrol shows a reason with its author and time appended: ` [root@2026-01-01T00:00:00]`."""
    text = reason or ""
    if text.endswith("]") and " [" in text:
        text = text[: text.rindex(" [")]
    return text


def describe(result: CheckResult) -> str:
    return f"{result.check} expected {result.expected}, found {result.actual}"


def reason_for(failing: Sequence[CheckResult]) -> str:
    more = f" (+{len(failing) - 1} more)" if len(failing) > 1 else ""
    text = REASON_PREFIX + describe(failing[0]) + more
    return text if len(text) <= REASON_MAX else text[: REASON_MAX - 3] + "..."


# --- one run ---------------------------------------------------------------------------------


@dataclasses.dataclass
class RunOutcome:
    exit_code: int
    line: str
    state: dict[str, Any]


def judge(
    expectations: NodeExpectations,
    policy: Mapping[str, Any],
    state: dict[str, Any],
    facts: NodeFacts,
    now: float,
    boot: str,
) -> tuple[list[CheckResult], dict[str, Any]]:
    """Facts plus what only a runner that remembers can read, evaluated: results, new state."""
    fresh, cursor = new_xids(str(policy["kernel_log"]), state, boot)
    new = fresh.get() if fresh.ok else ()
    held = held_xids(state, now, boot, int(policy["xid_hold_s"]))
    earlier = tuple(XidEvent(int(e["xid"]), str(e["pci"]), str(e["text"])) for e in held)
    held += [{**e.to_dict(), "at": now, "boot_id": boot} for e in new if e.action == "drain"]
    # Unreadable log: the check is unknown (never a pass), whatever was held.
    xids: Fact[tuple[XidEvent, ...]] = ok(new + earlier) if fresh.ok else fresh
    totals: dict[str, int] = dict(state.get("xid_totals") or {})
    for event in new:
        key = f"{event.xid}:{classify(event.xid)}"
        totals[key] = totals.get(key, 0) + 1
    growth, reading = counter_growth(facts.hca_counters, state.get("counters") or {})
    disk = _expected(expectations, "disk.space")
    mount = _expected(expectations, "storage.writable")
    facts = dataclasses.replace(
        facts,
        xid_events=xids,
        hca_counter_growth=growth,
        disk=disk_space(list(disk)) if isinstance(disk, dict) else Fact("not-gathered"),
        writable=writable([mount]) if isinstance(mount, str) else Fact("not-gathered"),
    )
    nothing: Fact[Any] = Fact("not-gathered", detail=CONTROLLER_VIEW)
    view = ClusterView(
        None, nothing, nothing, nothing, controller_files=nothing, job=nothing, gpu_domains=nothing
    )
    results = [
        r._replace(status="not-applicable", actual=CONTROLLER_VIEW, fix="")
        if r.status == "error" and CONTROLLER_VIEW in r.actual
        else r
        for r in evaluate_node(expectations, facts, view)
    ]
    new_state = {
        **state,
        "kernel_log": cursor,
        "xid_held": held,
        "xid_totals": totals,
        "counters": reading,
        "xid_recent": ([*(state.get("xid_recent") or []), *(e.to_dict() for e in new)])[-20:],
    }
    return results, new_state


def act(
    node: str,
    policy: Mapping[str, Any],
    state: dict[str, Any],
    failing: Sequence[CheckResult],
    unknown: Sequence[CheckResult],
    now: float,
    slurm: Slurm | None,
) -> dict[str, Any]:
    """Drain or resume this node under Slurm; the `slurm` part of the state."""
    window, limit = int(policy["flap_window_s"]), int(policy["flap_limit"])
    drains = [t for t in (state.get("drains") or []) if now - float(t) < window]
    record: dict[str, Any] = {"drains": drains}
    if slurm is None:
        return record
    current = slurm.show(node)
    if isinstance(current, str):
        return {**record, "error": current}
    record["reason"] = current.reason
    flapping = len(drains) >= limit
    if current.drained and not ours(current.reason):
        # An administrator's (or another tool's) drain: never touched, whatever we find.
        return {**record, "drained": True, "drained_by": "other", "action": "none"}
    if failing:
        reason = reason_for(failing)
        if flapping:
            reason = _flap_reason(len(drains), window, reason)
        if current.drained and bare_reason(current.reason) == reason:
            return {**record, "drained": True, "drained_by": "myriad-health", "action": "none"}
        if not current.drained:
            drains.append(now)
            if len(drains) >= limit:
                reason = _flap_reason(len(drains), window, reason_for(failing))
        problem = slurm.update(node, "State=DRAIN", f"Reason={reason}")
        action = "drain" if not current.drained else "reason"
        return {
            **record,
            "drains": drains,
            "drained": problem is None or current.drained,
            "drained_by": "myriad-health",
            "action": action if problem is None else "failed",
            "reason": reason,
            **({"error": problem} if problem else {}),
        }
    if not current.drained:
        return {**record, "drained": False, "drained_by": None, "action": "none"}
    # Drained by us, and every draining check that was judged passes.
    if unknown:
        return {
            **record,
            "drained": True,
            "drained_by": "myriad-health",
            "action": "held: " + ", ".join(r.check for r in unknown) + " unknown",
        }
    if flapping:
        reason = _flap_reason(
            len(drains), window, bare_reason(current.reason)[len(REASON_PREFIX) :]
        )
        if "flapping" not in (current.reason or ""):
            slurm.update(node, "State=DRAIN", f"Reason={reason}")
        return {
            **record,
            "drained": True,
            "drained_by": "myriad-health",
            "action": "held: flapping",
            "reason": reason,
        }
    problem = slurm.update(node, "State=RESUME")
    return {
        **record,
        "drained": problem is not None,
        "drained_by": "myriad-health" if problem else None,
        "action": "resume" if problem is None else "failed",
        **({"error": problem} if problem else {}),
    }


def _flap_reason(count: int, window: int, last: str) -> str:
    last = last[len(REASON_PREFIX) :] if last.startswith(REASON_PREFIX) else last
    text = f"{REASON_PREFIX}flapping: drained {count} times in {window} s, stays drained"
    text += f"; last: {last}"
    return text if len(text) <= REASON_MAX else text[: REASON_MAX - 3] + "..."


def metrics(
    results: Sequence[CheckResult],
    drain: frozenset[str],
    state: Mapping[str, Any],
    now: float,
    seconds: float,
) -> str:
    """The Prometheus textfile; the names are a contract with the alert rules."""
    lines = [
        "# HELP myriad_health_check_failed 1 when the check fails on this node, 0 when it passes.",
        "# TYPE myriad_health_check_failed gauge",
    ]
    judged = [r for r in results if r.check != "node.reachable" and r.status != "not-applicable"]
    for r in judged:
        if r.status in ("pass", "fail"):
            action = "drain" if r.check in drain else "warn"
            value = 1 if r.status == "fail" else 0
            labels = f'check="{r.check}",action="{action}"'
            lines.append(f"myriad_health_check_failed{{{labels}}} {value}")
    lines += [
        "# HELP myriad_health_check_unknown 1 when the check's fact could not be read.",
        "# TYPE myriad_health_check_unknown gauge",
    ]
    for r in judged:
        lines.append(f'myriad_health_check_unknown{{check="{r.check}"}} {int(r.status == "error")}')
    slurm = state.get("slurm") or {}
    lines += [
        "# HELP myriad_health_last_run_timestamp_seconds When the last run ended.",
        "# TYPE myriad_health_last_run_timestamp_seconds gauge",
        f"myriad_health_last_run_timestamp_seconds {now:.3f}",
        "# HELP myriad_health_run_duration_seconds How long the last run took.",
        "# TYPE myriad_health_run_duration_seconds gauge",
        f"myriad_health_run_duration_seconds {seconds:.3f}",
        "# HELP myriad_health_node_drained 1 when myriad-health has drained this node.",
        "# TYPE myriad_health_node_drained gauge",
        f"myriad_health_node_drained {int(slurm.get('drained_by') == 'myriad-health')}",
        "# HELP myriad_health_xid_events_total XID events read from the kernel log.",
        "# TYPE myriad_health_xid_events_total counter",
    ]
    for key, count in sorted((state.get("xid_totals") or {}).items()):
        xid, _, action = key.partition(":")
        lines.append(f'myriad_health_xid_events_total{{xid="{xid}",action="{action}"}} {count}')
    return "\n".join(lines) + "\n"


def run(config: str, *, facts: NodeFacts | None = None, now: float | None = None) -> RunOutcome:
    """One run; runs on one node take turns (slurmd's, NPD's, one by hand), so that each
    reads the state the last one wrote (the kernel log cursor, the counters)."""
    started = time.monotonic()
    expectations, policy = load_config(config)
    state_file = str(policy["state_file"])
    os.makedirs(os.path.dirname(state_file) or ".", exist_ok=True)
    with open(state_file + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _run_locked(expectations, policy, started, facts, now)


def _run_locked(
    expectations: NodeExpectations,
    policy: dict[str, Any],
    started: float,
    facts: NodeFacts | None,
    now: float | None,
) -> RunOutcome:
    state = load_state(str(policy["state_file"]))
    boot = boot_id()
    gathered = facts if facts is not None else gather(expectations, policy)
    when = time.time() if now is None else now
    results, new_state = judge(expectations, policy, state, gathered, when, boot)
    drain = frozenset(policy["drain"])
    failing = [r for r in results if r.status == "fail" and r.check in drain]
    warnings = [r for r in results if r.status == "fail" and r.check not in drain]
    unknown = [r for r in results if r.status == "error" and r.check in drain]
    slurm = Slurm(str(policy["scontrol"])) if policy["orchestrator"] == "slurm" else None
    new_state["slurm"] = act(expectations.node, policy, state, failing, unknown, when, slurm)
    new_state["drains"] = new_state["slurm"].pop("drains")
    if new_state["slurm"].get("drained_by") == "myriad-health":
        before = state.get("slurm") or {}
        mine = before.get("drained_by") == "myriad-health" and before.get("since")
        new_state["slurm"]["since"] = before["since"] if mine else when
    seconds = time.monotonic() - started
    new_state.update(
        schema=SCHEMA,
        node=expectations.node,
        last_run=when,
        duration_s=round(seconds, 3),
        interval_s=policy.get("interval_s"),
        healthy=not failing,
        results=[r._asdict() for r in results if r.status != "not-applicable"],
        failing=[describe(r) for r in failing],
        warnings=[describe(r) for r in warnings],
        unknown=[r.check for r in results if r.status == "error"],
    )
    atomic_write_text(Path(policy["state_file"]), json.dumps(new_state, indent=1, sort_keys=True))
    try:
        atomic_write_text(
            Path(policy["metrics_file"]), metrics(results, drain, new_state, when, seconds)
        )
    except OSError as exc:
        new_state["metrics_error"] = str(exc)
    if failing:
        return RunOutcome(EXIT_PROBLEM, reason_for(failing), new_state)
    judged = sum(1 for r in results if r.status != "not-applicable" and r.check != "node.reachable")
    tail = f", {len(warnings)} warning(s): {describe(warnings[0])}" if warnings else ""
    return RunOutcome(EXIT_OK, f"myriad-health: ok, {judged} checks{tail}", new_state)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="myriad-health", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=CONFIG, help=f"the node's document ({CONFIG})")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        outcome = run(args.config)
    except ConfigError as exc:
        sys.stdout.write(f"myriad-health: cannot judge: {exc}\n")
        return EXIT_UNKNOWN
    sys.stdout.write(outcome.line + "\n")
    return outcome.exit_code


if __name__ == "__main__":
    sys.exit(main())
