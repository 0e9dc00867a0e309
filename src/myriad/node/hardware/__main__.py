"""python3 -m myriad.node.hardware: the node's hardware map, its check, its capture, its rules.

    map      [--sysfs /sys] [--expect FILE]   print the map (and the assignment) as JSON
    check    [--sysfs /sys] --expect FILE     exit 2 with one line per problem, 0 when none

--pinned: map and check under the names the pinning rules give (rules), not the current ones.
    capture  [--sysfs /sys]                   print the tree discovery reads (tests/samples)
    rules    [--sysfs /sys]                   print the udev rules pinning RDMA names
    topology [--sysfs /sys] --expect FILE     print NCCL's topology (the nccl role's shape)

FILE is the JSON `myriad.plan.ports.hardware_expectation` writes for the node's profile.
`check` runs before any firmware or naming change: its exit code stops the role.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from myriad.node.hardware.discover import discover
from myriad.node.hardware.naming import kernel_names, udev_rules, with_names
from myriad.node.hardware.profile import assign
from myriad.node.hardware.sysfs import Sysfs
from myriad.node.hardware.topology import nccl_topology
from myriad.node.hardware.tree import capture


def _expectation(path: str | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            loaded = json.load(f)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"myriad.node.hardware: cannot read {path}: {exc}") from None
    if not isinstance(loaded, dict):
        raise SystemExit(f"myriad.node.hardware: {path}: expected a JSON object")
    return loaded


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m myriad.node.hardware")
    parser.add_argument("command", choices=("map", "check", "capture", "rules", "topology"))
    parser.add_argument("--sysfs", default="/sys")
    parser.add_argument("--expect")
    parser.add_argument("--pinned", action="store_true")
    args = parser.parse_args(argv)
    expected = _expectation(args.expect)
    if args.command == "capture":
        sys.stdout.write(capture(args.sysfs, (f"captured from {args.sysfs}",)))
        return 0
    models = (expected or {}).get("models") or {}
    hw = discover(Sysfs(args.sysfs), models)
    if args.command == "rules":
        sys.stdout.write(udev_rules(kernel_names(hw)))
        return 0
    if args.pinned:
        hw = with_names(hw, dict(kernel_names(hw)))
    if args.command in ("check", "topology") and expected is None:
        parser.error(f"{args.command} needs --expect FILE")
    result = assign(hw, expected) if expected is not None else None
    if args.command == "map":
        record: dict[str, Any] = hw.to_json()
        if result is not None:
            record["assignment"] = result.to_json()
        json.dump(record, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    assert result is not None
    if args.command == "topology":
        json.dump(nccl_topology(hw, result.compute, expected or {}), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    for problem in result.problems:
        print(problem, file=sys.stderr)
    return 2 if result.problems else 0


if __name__ == "__main__":
    sys.exit(main())
