#!/usr/bin/env python3
"""Gather one node's facts for `myriad validate` and print them as ONE JSON document.

Shipped to every node in the node package (myriad.node.artefact) and run there by
playbooks/facts.yml, in-process by myriad-health, so it uses the standard library only and
runs on the oldest Python 3 a supported node has (Ubuntu 22.04: 3.10).

The probes are the ones the fact declarations name (myriad.node.facts: each fact module
declares its facts' probes and readers; the registry collects them): nothing here lists
them. Each probe's record is raw (myriad.node.facts.probe); the readers on the Myriad side
read the text, so one reader serves every node and a reader fix needs no redeploy. A tool
that is missing or hangs does not stop the other probes, which run in parallel so that one
slow tool does not add to the next.

With --compress the document is gzipped and base64-encoded inside a small JSON wrapper
({"schema", "encoding": "gzip+base64", "data"}).

Exit status: 0 whenever the document was printed, whatever the probes found.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from myriad.node.facts.declare import Options
from myriad.node.facts.probe import record
from myriad.node.facts.read import SCHEMA
from myriad.node.facts.registry import PROBES
from myriad.node.facts.units import DEFAULT_UNITS

if TYPE_CHECKING:
    from collections.abc import Callable

    from myriad.node.facts.probe import Record

DEFAULT_TIMEOUT_S = 20.0
__all__ = ["DEFAULT_UNITS", "gather", "main", "parse_args", "probes"]


def options(args: argparse.Namespace) -> Options:
    return Options(
        root=args.root,
        timeout=args.timeout,
        controller=args.controller,
        units=tuple(args.units),
        qos_nics=tuple(args.qos_nics),
        mount=args.mount,
        job_nodes=tuple(args.job_nodes),
        job_timeout=args.job_timeout,
        infiniband=getattr(args, "infiniband", None),
    )


def probes(args: argparse.Namespace) -> dict[str, Callable[[], Record]]:
    """Document entry -> zero-argument callable: every declared probe `args` asks for."""
    chosen = options(args)
    table: dict[str, Callable[[], Record]] = {}
    for probe in PROBES:
        table.update(probe.instances(chosen))
    return table


def _safe(probe: Callable[[], Record]) -> Record:
    try:
        return probe()
    except Exception as exc:  # one broken probe must not cost the node its other facts
        return record(None, stderr=f"probe failed: {type(exc).__name__}: {exc}")


def gather(args: argparse.Namespace) -> dict[str, Any]:
    started = time.time()
    table = probes(args)
    with ThreadPoolExecutor(max_workers=min(16, len(table))) as pool:
        futures = {name: pool.submit(_safe, probe) for name, probe in table.items()}
        results = {name: future.result() for name, future in futures.items()}
    return {
        "schema": SCHEMA,
        "host": socket.gethostname(),
        "started": started,
        "seconds": round(time.time() - started, 3),
        # What was asked for: `units` answers come back in this order.
        "args": {
            "controller": args.controller,
            "qos_nics": args.qos_nics,
            "units": args.units,
            "mount": args.mount,
            "job_nodes": args.job_nodes,
        },
        "probes": results,
    }


def _names(value: str) -> list[str]:
    return [item for item in value.replace(",", " ").split() if item]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--controller",
        choices=("slurm", "kubernetes", "none"),
        default="none",
        help="also ask the orchestrator for the cluster's view (run on controllers)",
    )
    parser.add_argument("--qos-nics", type=_names, default=[], help="netdevs for mlnx_qos")
    parser.add_argument("--units", type=_names, default=list(DEFAULT_UNITS))
    parser.add_argument("--mount", default="", help="storage mount point to look up")
    parser.add_argument(
        "--job-nodes", type=_names, default=[], help="with --controller slurm: run a job here"
    )
    parser.add_argument("--job-timeout", type=float, default=60.0, help="the job's bound, s")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="per probe, s")
    parser.add_argument("--compress", action="store_true", help="print the document gzipped")
    parser.add_argument("--root", default="/", help="read the node's files under ROOT (tests)")
    return parser.parse_args(argv)


def encode(document: dict[str, Any], compress: bool) -> str:
    text = json.dumps(document, sort_keys=True)
    if not compress:
        return text
    # nvidia-smi's XML shrinks about tenfold: less to carry over SSH, to keep in Ansible's
    # event log and in the control node's memory for thousands of nodes.
    packed = base64.b64encode(gzip.compress(text.encode("utf-8"), 6)).decode("ascii")
    return json.dumps({"schema": SCHEMA, "encoding": "gzip+base64", "data": packed})


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    sys.stdout.write(encode(gather(args), args.compress) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
