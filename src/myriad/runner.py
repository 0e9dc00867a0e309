"""Running a playbook through ansible-runner, with settings fit for many nodes.

Every run gets its own folder (mode 0700) under the state directory: ansible-runner's
artifacts (the full event log, stdout) and the fact cache stay there for later reading.
The result says, per host, what happened, and for every failed or unreachable host the
task that failed and its message.
"""

from __future__ import annotations

import logging
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from myriad import paths
from myriad.errors import RunnerError
from myriad.render.tables import TABLE_VARIABLES, tables_file

if TYPE_CHECKING:
    import psutil

log = logging.getLogger(__name__)

# Ansible's default of 5 forks makes a 1,000-node run 200 sequential waves; more forks than
# this costs the controller memory (one Python process each) without making nodes faster.
MAX_FORKS = 100

Status = Literal["successful", "failed", "timeout", "canceled"]
EventHandler = Callable[[Mapping[str, Any]], None]


@dataclass(frozen=True, slots=True)
class HostFailure:
    host: str
    task: str
    message: str
    unreachable: bool
    # The task ran past its timeout (Ansible's TASK_TIMEOUT): a node that stopped answering.
    timed_out: bool = False


@dataclass(frozen=True, slots=True)
class RunResult:
    status: Status
    rc: int
    run_dir: Path
    stats: Mapping[str, Mapping[str, int]]
    failures: tuple[HostFailure, ...]
    changed_hosts: tuple[str, ...]
    seconds: float
    events: tuple[Mapping[str, Any], ...] = field(default=(), repr=False)
    # Set when Ctrl-C or SIGTERM stopped the run: "<task> on <nodes>" it was in.
    interrupted_during: str | None = None

    @property
    def interrupted(self) -> bool:
        return self.interrupted_during is not None

    @property
    def ok(self) -> bool:
        return self.status == "successful" and not self.failures

    def failed_hosts(self) -> list[str]:
        return sorted({f.host for f in self.failures})


def forks_for(hosts: int) -> int:
    return max(5, min(hosts, MAX_FORKS))


def new_run_dir(state_dir: Path, verb: str) -> Path:
    runs = state_dir / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    os.chmod(state_dir, 0o700)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    run_dir = runs / f"{stamp}-{verb}"
    suffix = 1
    while run_dir.exists():
        suffix += 1
        run_dir = runs / f"{stamp}-{verb}-{suffix}"
    run_dir.mkdir(mode=0o700)
    return run_dir


@dataclass(frozen=True, slots=True)
class Tuning:
    """How ansible-runner drives Ansible; `TUNED` for real runs, `ANSIBLE_DEFAULTS` to compare.

    Mitogen keeps one Python interpreter per node for the whole run instead of starting one
    (and re-compiling Ansible's module_utils) for every task on every node: on the local
    cluster that is most of a no-change run's time. It is a third-party strategy plugin, so
    it is used only when importable, and `--no-mitogen` turns it off.
    """

    label: str
    scaled_forks: bool
    pipelining: bool
    fact_cache: bool
    mitogen: bool


TUNED = Tuning("tuned", scaled_forks=True, pipelining=True, fact_cache=True, mitogen=True)
TUNED_WITHOUT_MITOGEN = Tuning(
    "tuned without Mitogen", scaled_forks=True, pipelining=True, fact_cache=True, mitogen=False
)
ANSIBLE_DEFAULTS = Tuning(
    "Ansible defaults", scaled_forks=False, pipelining=False, fact_cache=False, mitogen=False
)


def mitogen_strategy_dir() -> Path | None:
    """The folder of Mitogen's strategy plugins, or None when Mitogen is not installed."""
    try:
        import ansible_mitogen
    except ImportError:
        return None
    return Path(ansible_mitogen.__file__).parent / "plugins" / "strategy"


@dataclass(frozen=True, slots=True)
class Timeouts:
    """How long one task and one connection may take before the node is given up on.

    A frozen node (a paused container, a hung NFS mount) then fails that task and drops
    out of the run; the other nodes go on, and `--retry-failed` finds it among the failed.
    """

    task_s: int | None = None
    connect_s: int | None = None


def _envvars(run_dir: Path, tuning: Tuning, timeouts: Timeouts = Timeouts()) -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    env = {
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_ROLES_PATH": str(paths.roles_dir()),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "false",
        "ANSIBLE_HOST_KEY_CHECKING": "true",
        "ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks",
    }
    if timeouts.task_s:
        env["ANSIBLE_TASK_TIMEOUT"] = str(timeouts.task_s)
    if timeouts.connect_s:
        env["ANSIBLE_TIMEOUT"] = str(timeouts.connect_s)
    if tuning.pipelining:
        # One SSH (or docker exec) round trip per task instead of several.
        env["ANSIBLE_PIPELINING"] = "true"
    if tuning.fact_cache:
        # Facts gathered once per run folder, not once per play.
        env.update(
            {
                "ANSIBLE_GATHERING": "smart",
                "ANSIBLE_CACHE_PLUGIN": "ansible.builtin.jsonfile",
                "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(run_dir / "facts"),
                "ANSIBLE_CACHE_PLUGIN_TIMEOUT": "7200",
            }
        )
    strategies = mitogen_strategy_dir() if tuning.mitogen else None
    if strategies is not None:
        env.update(
            {
                "ANSIBLE_STRATEGY_PLUGINS": str(strategies),
                "ANSIBLE_STRATEGY": "mitogen_linear",
                # ansible-core warns on every play that third-party strategies are deprecated;
                # the warning says nothing an operator can act on.
                "ANSIBLE_DEPRECATION_WARNINGS": "false",
            }
        )
    elif tuning.mitogen:
        log.warning("Mitogen is not installed; running Ansible's own linear strategy")
    return env


def run_playbook(
    playbook: Path,
    inventory: Path,
    run_dir: Path,
    *,
    hosts: int,
    limit: Sequence[str] | None = None,
    tags: Sequence[str] | None = None,
    extravars: Mapping[str, Any] | None = None,
    on_event: EventHandler | None = None,
    timeout_s: int = 3600,
    tuning: Tuning = TUNED,
    keep_events: bool = False,
    check: bool = False,
    timeouts: Timeouts = Timeouts(),
) -> RunResult:
    """Run `playbook` against `inventory`; never raises for failed hosts, only for setup.

    An inventory rendered with cluster-wide tables (`cluster_tables.yml` beside hosts.yml)
    gets them as an extra-vars file on every run; `extravars` may not set those names.
    `check` runs Ansible in check mode with diffs (nothing changes on the nodes). Ctrl-C
    or SIGTERM during the run stops ansible-playbook and every process it started (Mitogen's
    workers included) and returns a result whose `interrupted_during` says where it was.
    """
    import ansible_runner  # heavy: imported only when a playbook runs

    cmdline = _cmdline(inventory, extravars or {}, check=check)
    failures: list[HostFailure] = []
    changed: set[str] = set()
    kept: list[Mapping[str, Any]] = []
    where = _Whereabouts()

    def handle(event: Mapping[str, Any]) -> bool:
        _collect(event, failures, changed)
        where.follow(event)
        if keep_events:
            kept.append(event)
        if on_event is not None:
            on_event(event)
        return True

    start = time.monotonic()
    with _interruptible() as stop:
        try:
            runner = ansible_runner.run(
                private_data_dir=str(run_dir),
                playbook=str(playbook),
                inventory=str(inventory),
                limit=",".join(limit) if limit else None,
                tags=",".join(tags) if tags else None,
                extravars=dict(extravars or {}),
                forks=forks_for(hosts) if tuning.scaled_forks else 5,
                envvars=_envvars(run_dir, tuning, timeouts),
                cmdline=cmdline,
                settings={
                    "job_timeout": timeout_s,
                    "suppress_ansible_output": True,
                    # How often the cancel callback is asked while Ansible is quiet.
                    "pexpect_timeout": 1,
                },
                event_handler=handle,
                cancel_callback=stop.requested,
                quiet=True,
            )
        except Exception as exc:  # ansible-runner raises plain exceptions for setup problems
            raise RunnerError(f"ansible-runner could not start {playbook.name}: {exc}") from exc
    seconds = time.monotonic() - start
    stats = _stats(runner.stats or {})
    for host in stats.get("failures", {}):
        if not any(f.host == host for f in failures):
            failures.append(HostFailure(host, "(unknown task)", "failed", unreachable=False))
    log.debug("%s finished %s in %.1fs", playbook.name, runner.status, seconds)
    return RunResult(
        status=runner.status,
        rc=runner.rc,
        run_dir=run_dir,
        stats=_per_host(stats),
        failures=tuple(failures),
        changed_hosts=tuple(sorted(changed)),
        seconds=seconds,
        events=tuple(kept),
        interrupted_during=where.describe() if stop.signal is not None else None,
    )


def _cmdline(inventory: Path, extravars: Mapping[str, Any], *, check: bool) -> str | None:
    """ansible-playbook's options beyond ansible-runner's own: the tables file, check mode."""
    clash = sorted(set(extravars) & set(TABLE_VARIABLES))
    if clash:
        raise RunnerError(
            f"extra vars {', '.join(clash)}: cluster-wide tables come only from the rendered "
            "inventory's cluster_tables.yml (change the spec and render again)"
        )
    options = []
    tables = tables_file(inventory)
    if tables is not None:
        # Extra vars: read once per run, merged into no host's inventory variables. Absolute:
        # ansible-playbook runs in ansible-runner's project folder, not here.
        options += ["-e", f"@{tables.absolute()}"]
    if check:
        options += ["--check", "--diff"]
    return shlex.join(options) if options else None


class _Whereabouts:
    """The task the run is in and the hosts still running it, from the events."""

    def __init__(self) -> None:
        self.task = ""
        self.running: set[str] = set()

    def follow(self, event: Mapping[str, Any]) -> None:
        kind = event.get("event")
        data = event.get("event_data") or {}
        if kind == "playbook_on_task_start":
            self.task, self.running = str(data.get("task") or "?"), set()
        elif kind == "runner_on_start" and data.get("host"):
            self.task = str(data.get("task") or self.task)
            self.running.add(str(data["host"]))
        elif str(kind).startswith("runner_on_") and data.get("host"):
            self.running.discard(str(data["host"]))

    def describe(self) -> str:
        if not self.task:
            return "the start of the run (no task had begun)"
        nodes = ", ".join(sorted(self.running)) or "no node (between tasks)"
        return f'"{self.task}" on {nodes}'


class _Stop:
    """What the signal handler saw; ansible-runner polls `requested` while it runs."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self.workers: list[psutil.Process] | None = None

    def requested(self) -> bool:
        if self.signal is not None and self.workers is None:
            # Taken before ansible-runner kills ansible-playbook's process group: workers
            # that left the group (Mitogen's, in their own sessions) are found by parentage
            # only while their parents still live.
            self.workers = _below(os.getpid())
        return self.signal is not None


@contextmanager
def _interruptible() -> Iterator[_Stop]:
    stop = _Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop  # signal handlers belong to the main thread; there is nothing to route
        return

    def on_signal(number: int, frame: object) -> None:
        stop.signal = number

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if stop.signal is not None:
            stop.requested()
            end_processes(stop.workers or [])


def _below(pid: int) -> list[psutil.Process]:
    import psutil  # in the bringup extra, with ansible-runner; planning never stops processes

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (children, theirs, ...), by parentage."""
    return [process.pid for process in _below(pid)]


# How long SIGKILLed processes get to be reaped before end_processes returns.
_KILL_WAIT_S = 1.0


def end_processes(targets: Sequence[int | psutil.Process], grace_s: float = 3.0) -> None:
    """SIGTERM, then SIGKILL whatever is left after `grace_s`.

    Give `psutil.Process` objects taken while the processes lived where you can: psutil
    checks a process's start time before signalling it, so a PID the kernel has handed to
    another process since is left alone (a bare PID is only checked now).
    """
    import psutil

    processes: list[psutil.Process] = []
    for target in targets:
        if isinstance(target, psutil.Process):
            processes.append(target)
        elif target > 0:
            with suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                processes.append(psutil.Process(target))
    for process in processes:
        with suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            process.terminate()
    # wait_procs reaps those that are our children; the others are done once they exit.
    _, alive = psutil.wait_procs(processes, timeout=grace_s)
    for process in alive:
        with suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            process.kill()
    psutil.wait_procs(alive, timeout=_KILL_WAIT_S)


def _alive(pid: int) -> bool:
    """Whether `pid` still runs; a zombie does not (one that is our child is reaped)."""
    import psutil

    try:
        process = psutil.Process(pid)
        if process.status() != psutil.STATUS_ZOMBIE:
            return True
        with suppress(psutil.TimeoutExpired):
            process.wait(timeout=0)
    except psutil.NoSuchProcess:
        pass
    except psutil.AccessDenied:
        return True
    return False


def _collect(event: Mapping[str, Any], failures: list[HostFailure], changed: set[str]) -> None:
    kind = event.get("event")
    data = event.get("event_data") or {}
    host = data.get("host")
    if kind in ("runner_on_failed", "runner_on_unreachable") and host:
        if kind == "runner_on_failed" and data.get("ignore_errors"):
            return
        result = data.get("res") or {}
        message = str(result.get("msg") or result.get("stderr") or result.get("reason") or "")
        failures.append(
            HostFailure(
                host=host,
                task=str(data.get("task") or "?"),
                message=message.strip().splitlines()[0] if message.strip() else kind,
                unreachable=kind == "runner_on_unreachable",
                timed_out=bool(result.get("timedout")),
            )
        )
    elif kind == "runner_on_ok" and host and (data.get("res") or {}).get("changed"):
        changed.add(host)


def _stats(raw: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    return {key: dict(value) for key, value in raw.items() if isinstance(value, Mapping)}


def _per_host(stats: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """ansible's {stat: {host: n}} turned into {host: {stat: n}} for a recap table."""
    hosts: dict[str, dict[str, int]] = {}
    for stat, counts in stats.items():
        for host, count in counts.items():
            hosts.setdefault(host, {})[stat] = count
    return hosts
