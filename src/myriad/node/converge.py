#!/usr/bin/python3
"""myriad-converge: a node started from a baked image brings itself up.

Runs on the node, standard library only (`myriad image build` installs this file as
/usr/local/sbin/myriad-converge with a systemd unit that starts it at boot when a seed is
there): the site play against this node alone (connection local), from the seed the
controller made for it — an inventory with this node's variables and the cluster tables, its
health document, monitoring files, the munge key — with the Ansible, roles and playbooks the
image carries. What the controller reads back is one small JSON file: the play's counts, the
failed tasks with their messages, the seconds and CPU seconds it took, and the seed and image
it ran from, so a result is never mistaken for another run's.

    myriad-converge [--seed /var/lib/myriad/seed] [--result /var/lib/myriad/converge/result.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from myriad.node.artefact import NAME
from myriad.node.files import atomic_write_text

HOME = Path("/opt/myriad")
SEED = Path("/var/lib/myriad/seed")
RESULT = Path("/var/lib/myriad/converge/result.json")
IMAGE_RECORD = Path("/etc/myriad/image.json")
# The node package in the image (provision/converge_bundle.py puts it there).
ARTEFACT = NAME
# What a failure message keeps: enough to read the cause, small enough to collect from
# thousands of nodes.
MESSAGE_CHARS = 2000


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Whole or not at all: the controller may read the file at any moment."""
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n", mode=0o644)


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def ansible_command(home: Path, seed: Path) -> list[str]:
    inventory = seed / "inventory"
    command = [
        sys.executable, "-m", "ansible.cli.playbook",
        "-i", str(inventory / "hosts.yml"),
        str(home / "playbooks" / "site.yml"),
        # The health and rdma roles install the node package this program runs from: the image's.
        "-e", f"health_node_artefact={home / ARTEFACT}",
        "-e", f"rdma_node_artefact={home / ARTEFACT}",
    ]  # fmt: skip
    tables = inventory / "cluster_tables.yml"
    if tables.is_file():
        command += ["-e", f"@{tables}"]
    extra = seed / "extravars.json"
    if extra.is_file():
        command += ["-e", f"@{extra}"]
    return command


def ansible_env(home: Path, run_dir: Path) -> dict[str, str]:
    lib = str(home / "lib")
    env = {
        **os.environ,
        "PYTHONPATH": lib,
        "ANSIBLE_COLLECTIONS_PATH": lib,
        "ANSIBLE_ROLES_PATH": str(home / "roles"),
        # One JSON document on stdout: counts and every failed task, read back below.
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCAL_TEMP": str(run_dir / "tmp"),
        # Facts gathered once for the whole play, as the controller's runner does.
        "ANSIBLE_GATHERING": "smart",
        "ANSIBLE_CACHE_PLUGIN": "ansible.builtin.jsonfile",
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(run_dir / "facts"),
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        "HOME": os.environ.get("HOME", "/root"),
    }
    strategies = home / "lib" / "ansible_mitogen" / "plugins" / "strategy"
    if strategies.is_dir():
        # One interpreter for the whole play instead of one per task (the controller's tuning).
        env.update(
            ANSIBLE_STRATEGY_PLUGINS=str(strategies),
            ANSIBLE_STRATEGY="mitogen_linear",
            ANSIBLE_DEPRECATION_WARNINGS="false",
        )
    return env


def failures_of(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each task that failed or found the node unreachable, with its message."""
    found = []
    for play in report.get("plays") or []:
        for task in play.get("tasks") or []:
            name = str((task.get("task") or {}).get("name") or "")
            for result in (task.get("hosts") or {}).values():
                if not isinstance(result, dict):
                    continue
                failed = result.get("failed") and not result.get("ignore_errors")
                if failed or result.get("unreachable"):
                    message = str(result.get("msg") or result.get("stderr") or "failed")
                    found.append(
                        {
                            "task": name,
                            "message": message[:MESSAGE_CHARS],
                            "unreachable": bool(result.get("unreachable")),
                        }
                    )
    return found


def parse_report(stdout: str) -> dict[str, Any]:
    """The json callback's document; anything printed before it (warnings) is skipped."""
    start = stdout.find("{")
    if start < 0:
        return {}
    try:
        report = json.loads(stdout[start:])
    except ValueError:
        return {}
    return report if isinstance(report, dict) else {}


def converge(home: Path, seed: Path, result_path: Path) -> int:
    seed_record = read_json(seed / "seed.json")
    image = read_json(IMAGE_RECORD)
    node = str(seed_record.get("node") or os.uname().nodename)
    run_file = seed / "run.id"
    base = {
        "node": node,
        # Set by whoever started this run (the controller's token; empty at boot).
        "run": run_file.read_text().strip() if run_file.is_file() else "",
        "seed_digest": seed_record.get("digest"),
        "image": image.get("content_hash"),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if not seed_record:
        missing = {"task": "read the seed", "message": f"no seed at {seed}/seed.json"}
        failures = [{**missing, "unreachable": False}]
        write_json(result_path, {**base, "status": "failed", "rc": 2, "failures": failures})
        return 2
    write_json(result_path, {**base, "status": "running"})
    run_dir = result_path.parent
    (run_dir / "tmp").mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        ansible_command(home, seed),
        cwd=str(home),
        env=ansible_env(home, run_dir),
        capture_output=True,
        text=True,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = time.monotonic() - started
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # The whole play's record stays on the node for whoever needs more than the summary.
    (run_dir / "last-run.json").write_text(done.stdout)
    (run_dir / "last-run.stderr").write_text(done.stderr)
    report = parse_report(done.stdout)
    stats = report.get("stats") or {}
    counts: dict[str, Any] = next(iter(stats.values()), {}) if isinstance(stats, dict) else {}
    # Failures a block rescued or a task ignored do not count; the play's own stats say.
    counted = int(counts.get("failures", 0) or 0) + int(counts.get("unreachable", 0) or 0)
    failures = failures_of(report) if counted or done.returncode != 0 else []
    if done.returncode != 0 and not failures:
        # The last line of a traceback or an error says what went wrong.
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        tail = lines[-1][-MESSAGE_CHARS:] if lines else ""
        failures = [{"task": "ansible-playbook", "message": tail or f"exit {done.returncode}",
                     "unreachable": False}]  # fmt: skip
    write_json(
        result_path,
        {
            **base,
            "status": "successful" if done.returncode == 0 else "failed",
            "rc": done.returncode,
            "stats": {k: int(v) for k, v in counts.items() if isinstance(v, int)},
            "failures": failures,
            "seconds": round(seconds, 3),
            "cpu_seconds": round(cpu, 3),
        },
    )
    return 0 if done.returncode == 0 else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Converge this node from its seed.")
    parser.add_argument("--home", type=Path, default=HOME)
    parser.add_argument("--seed", type=Path, default=SEED)
    parser.add_argument("--result", type=Path, default=RESULT)
    args = parser.parse_args(argv)
    return converge(args.home, args.seed, args.result)


if __name__ == "__main__":
    sys.exit(main())
