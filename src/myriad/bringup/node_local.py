"""Image mode's bring-up: every node converges itself; the controller hands out seeds and
collects results.

Per node the controller does three things, none of them per task: make the node's seed
(`render.seeds`, written to `<state>/seeds/<node>.tar.gz`, where PXE and cloud user-data pick
it up for nodes that converge at first boot), ship it, and read back the node's
`result.json`. Shipping and reading are one command per node through the way the controller
reaches it — `docker exec -i` locally, `ssh` elsewhere — which unpacks the seed, runs
`systemctl start myriad-converge.service` (a oneshot: it returns when the play has ended) and
prints the result. The results become the same `RunResult` push mode's runner returns, so the
recap, the run record and `--retry-failed` work as they do there.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import os
import subprocess
import tarfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from myriad.bringup.flow import ClusterState, now_stamp, record_finished, record_started
from myriad.bringup.reporting import Reporter
from myriad.errors import FlowError
from myriad.fsutil import atomic_write_bytes, atomic_write_text
from myriad.render.inventory import Inventory
from myriad.render.seeds import SEED_DIR, seed_archive, seed_files
from myriad.runner import TUNED, HostFailure, RunResult, Tuning, new_run_dir

RESULT_PATH = "/var/lib/myriad/converge/result.json"
# Nodes converging at once from one controller: each costs the controller one waiting client
# process, not work, so this bounds processes rather than CPU.
MAX_PARALLEL = 256
MUNGE_KEY_BYTES = 1024
# Where munge reads its key on a Debian/Ubuntu node (the slurm role's __slurm_munge_key_path).
MUNGE_KEY_PATH = "/etc/munge/munge.key"

# Unpack the seed beside the old one and swap, start the play, wait for this run's result
# and print it. The wait polls the result file rather than blocking in `systemctl start`:
# the common role re-executes systemd, which ends every blocked `systemctl start` early.
NODE_SCRIPT = (
    f"set -e; rm -rf {SEED_DIR}.new; mkdir -p -m 0700 {SEED_DIR}.new;"
    f" tar -xzf - -C {SEED_DIR}.new --no-same-owner;"
    f" rm -rf {SEED_DIR}.old; if [ -d {SEED_DIR} ]; then mv {SEED_DIR} {SEED_DIR}.old; fi;"
    f" mv {SEED_DIR}.new {SEED_DIR}; rm -rf {SEED_DIR}.old;"
    f' echo "$MYRIAD_RUN" > {SEED_DIR}/run.id; set +e;'
    " systemctl start --no-block myriad-converge.service;"
    " idle=0; while :; do"
    f'  if grep -qs "\\"run\\": \\"$MYRIAD_RUN\\"" {RESULT_PATH}'
    f'     && ! grep -qs \'"status": "running"\' {RESULT_PATH}; then break; fi;'
    "  case $(systemctl show -p ActiveState --value myriad-converge.service) in"
    "   activating|active|reloading) idle=0;; *) idle=$((idle+1));; esac;"
    # Not running for 10 s and no result of this seed: it will not come; say what there is.
    "  if [ $idle -ge 10 ]; then break; fi;"
    "  sleep 1; done;"
    f" cat {RESULT_PATH}"
)


@dataclass(frozen=True, slots=True)
class NodeResult:
    node: str
    data: Mapping[str, Any]
    # Set when the node could not be reached or gave no readable result.
    problem: str | None = None


# How the controller runs a shell command on a node with the seed on stdin:
# (node, script, stdin bytes, timeout) → (exit code, stdout, stderr).
Transport = Callable[[str, str, bytes, float], tuple[int, str, str]]


def docker_transport(containers: Mapping[str, str]) -> Transport:
    def run(node: str, script: str, stdin: bytes, timeout: float) -> tuple[int, str, str]:
        return _run(["docker", "exec", "-i", containers[node], "sh", "-c", script], stdin, timeout)

    return run


def _run(argv: Sequence[str], stdin: bytes, timeout: float) -> tuple[int, str, str]:
    try:
        done = subprocess.run(list(argv), input=stdin, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, "", f"no result within {timeout:g} s"
    except OSError as exc:
        return 127, "", str(exc)
    return (
        done.returncode,
        done.stdout.decode(errors="replace"),
        done.stderr.decode(errors="replace"),
    )


def munge_key(state: ClusterState) -> bytes:
    """The cluster's munge key, kept by the controller in image mode (generated once)."""
    path = state.root / "secrets" / "munge.key"
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = os.urandom(MUNGE_KEY_BYTES)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(key)
    return key


def munge_key_host(inventory: Inventory) -> str | None:
    """The node whose munge key is the cluster's, as the slurm role picks it."""
    everyone = inventory.group_vars.get("all", {})
    chosen = str(everyone.get("slurm_munge_key_host") or "")
    if chosen:
        return chosen
    controllers = everyone.get("slurm_controllers") or []
    return str(controllers[0]["name"]) if controllers else None


def adopt_live_munge_key(
    state: ClusterState, transport: Transport, key_host: str, timeout_s: float = 60.0
) -> bool:
    """Keep the key host's munge key when it holds one other than the kept copy.

    The key on the nodes is the cluster's: a rotation (playbooks/slurm-munge-rotate.yml)
    replaces it there, and seeds made from the older copy would put the replaced key back.
    A key host that cannot be read (not started yet, no key) leaves the kept copy as it is.
    Returns whether the kept copy changed."""
    kept = munge_key(state)
    code, out, _err = transport(key_host, f"base64 -w0 {MUNGE_KEY_PATH}", b"", timeout_s)
    if code != 0:
        return False
    try:
        live = base64.b64decode(out.strip(), validate=True)
    except (ValueError, binascii.Error):
        return False
    # munge(7) refuses keys under 32 bytes; a shorter read is not a key.
    if len(live) < 32 or live == kept:
        return False
    atomic_write_bytes(state.root / "secrets" / "munge.key", live, mode=0o600)
    return True


def write_seeds(
    inventory: Inventory, state: ClusterState, nodes: Sequence[str], *, slurm: bool
) -> dict[str, Path]:
    """Each node's seed archive, written to `<state>/seeds/<node>.tar.gz` (mode 0600: it holds
    the munge key); their paths. The archives stay on disk: at 12,519 nodes they are 856 MB
    (benchmarks/seeds_scale.py), and a transport reads only the one it sends."""
    key = munge_key(state) if slurm else None
    tables = json.dumps(dict(inventory.tables)).encode() if inventory.tables else b""
    folder = state.root / "seeds"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    written = {}
    for node in nodes:
        health = state.root / "health" / f"{node}.json"
        files = seed_files(
            inventory,
            node,
            tables=tables,
            health_document=health.read_bytes() if health.is_file() else None,
            munge_key=key,
        )
        archive = seed_archive(files)
        target = folder / f"{node}.tar.gz"
        # Every up writes every seed again: no fsync for each of thousands of them.
        atomic_write_bytes(target, archive, mode=0o600, durable=False)
        written[node] = target
    return written


def converge_nodes(
    seeds: Mapping[str, Path],
    transport: Transport,
    run_dir: Path,
    *,
    timeout_s: float,
    on_result: Callable[[NodeResult], None] | None = None,
) -> RunResult:
    """Every node converges itself at once; their results as one `RunResult`."""
    start = time.monotonic()
    # Names this run's results: a seed that did not change gives a result like the last one.
    run_id = uuid.uuid4().hex

    def one(node: str) -> NodeResult:
        archive = seeds[node].read_bytes()
        script = f"MYRIAD_RUN={run_id}; {NODE_SCRIPT}"
        code, out, err = transport(node, script, archive, timeout_s)
        outcome = _read_result(node, code, out, err, archive_digest(archive), run_id)
        if on_result is not None:
            on_result(outcome)
        return outcome

    workers = max(1, min(MAX_PARALLEL, len(seeds)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(one, sorted(seeds)))
    seconds = time.monotonic() - start
    atomic_write_text(
        run_dir / "results.json",
        json.dumps({r.node: {**r.data, "problem": r.problem} for r in results}, indent=2) + "\n",
    )
    return fold(results, run_dir, seconds)


def archive_digest(archive: bytes) -> str:
    """The seed digest inside an archive's seed.json (what the node's result echoes)."""
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as opened:
        member = opened.extractfile("seed.json")
        assert member is not None
        return str(json.loads(member.read())["digest"])


def _read_result(node: str, code: int, out: str, err: str, digest: str, run_id: str) -> NodeResult:
    start = out.find("{")
    try:
        data = json.loads(out[start:]) if start >= 0 else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        reason = (err.strip().splitlines() or [f"exit {code}"])[-1]
        return NodeResult(node, {}, f"no result from the node: {reason}")
    if data.get("run") != run_id or data.get("seed_digest") != digest:
        return NodeResult(
            node,
            data,
            "the node did not run this seed (myriad-converge.service "
            "did not start: `systemctl status myriad-converge` on the node)",
        )
    if data.get("status") == "running":
        return NodeResult(
            node,
            data,
            "myriad-converge stopped before it finished (see "
            "/var/lib/myriad/converge/ and `journalctl -u myriad-converge`)",
        )
    return NodeResult(node, data)


def fold(results: Sequence[NodeResult], run_dir: Path, seconds: float) -> RunResult:
    """Nodes' results as a runner `RunResult`: stats in Ansible's names (`dark`: unreachable)."""
    stats: dict[str, dict[str, int]] = {}
    failures: list[HostFailure] = []
    changed = []
    for result in results:
        counts = {k: int(v) for k, v in dict(result.data.get("stats") or {}).items()}
        if "unreachable" in counts:
            counts["dark"] = counts.pop("unreachable")
        if result.problem is not None:
            counts["dark"] = counts.get("dark", 0) + 1
            failures.append(HostFailure(result.node, "myriad-converge", result.problem, True))
        elif result.data.get("status") != "successful":
            for failure in result.data.get("failures") or [{"task": "?", "message": "failed"}]:
                failures.append(
                    HostFailure(
                        result.node,
                        str(failure.get("task") or "?"),
                        str(failure.get("message") or "failed").strip().splitlines()[0]
                        if str(failure.get("message") or "").strip()
                        else "failed",
                        bool(failure.get("unreachable")),
                    )
                )
            counts.setdefault("failures", max(1, counts.get("failures", 0)))
        if counts.get("changed"):
            changed.append(result.node)
        stats[result.node] = counts
    return RunResult(
        status="successful" if not failures else "failed",
        rc=0 if not failures else 2,
        run_dir=run_dir,
        stats=stats,
        failures=tuple(failures),
        changed_hosts=tuple(sorted(changed)),
        seconds=seconds,
    )


def require_results(outcome: RunResult) -> None:
    if not outcome.stats:
        raise FlowError("no node converged: check the seeds and the nodes' images")


def run_image_mode(
    inventory: Inventory,
    state: ClusterState,
    console: Console,
    reporter: Reporter,
    transport: Transport,
    *,
    slurm: bool,
    timeout_s: float,
    limit: Sequence[str] | None = None,
    tuning: Tuning = TUNED,
) -> RunResult:
    """Seeds out, each node's site play on the node, results back; recorded like push mode."""
    run_dir = new_run_dir(state.root, "converge")
    hosts = list(limit) if limit else list(inventory.hosts)
    started_at = now_stamp()
    record_started(state, hosts, tuning, run_dir, started_at)
    with reporter.phase("seeds") as notes:
        key_host = munge_key_host(inventory) if slurm else None
        if key_host is not None and adopt_live_munge_key(state, transport, key_host):
            notes.append(f"munge key: {key_host}'s, which replaced the kept copy (rotated)")
        seeds = write_seeds(inventory, state, hosts, slurm=slurm)
        size = sum(path.stat().st_size for path in seeds.values())
        notes.append(f"{len(seeds)} seeds, {size // 1024} KiB")
    with reporter.phase("node-local converge") as notes:
        outcome = converge_nodes(seeds, transport, run_dir, timeout_s=timeout_s)
        notes.append(f"{len(outcome.stats)} nodes, {len(outcome.changed_hosts)} changed")
    reporter.recap(outcome, hosts)
    console.print(f"Each node's result: {run_dir / 'results.json'}")
    record_finished(state, outcome, run_dir, tuning, started_at, hosts, outcome.status)
    require_results(outcome)
    return outcome
