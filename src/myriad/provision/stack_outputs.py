"""The machines a Pulumi stack made, as typed records: its `nodes` output, parsed and checked.

The stack exports `nodes`, a list with one object per machine:

    {"name": "gpu01", "address": "10.0.128.12", "pool": "gpu", "role": "compute",
     "island": 0, "provider": "aws", "ids": {"instance_id": "i-0abc..."},
     "public_address": null}

It is read from `pulumi stack output --json` when the Pulumi CLI is installed, or from a file
saved with that command. With one stack per island, the outputs of all the cluster's stacks
are merged. `match_spec` then checks them against the spec, the other half of the inventory.

A stack that made the cluster's shared file system (FSx for Lustre) also exports `storage`:

    {"kind": "fsx-lustre", "dns_name": "fs-0123....fsx.us-east-1.amazonaws.com",
     "mount_name": "abcdef01", "mount": "/fsx"}

`parse_storage` reads it and `match_storage` checks it against the spec's `storage`.
"""

from __future__ import annotations

import ipaddress
import json
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from myriad.errors import StackOutputsError
from myriad.plan.machines import NODE_KEYS, STORAGE_KEYS, StackNode, StackStorage
from myriad.plan.nodes import iter_nodes
from myriad.spec.models import Cluster, Role

_ROLES: tuple[str, ...] = get_args(Role)
# A DNS name of letters, digits, hyphens and dots (FSx's are fs-<id>.fsx.<region>.amazonaws.com);
# anything else would end up in fstab as a broken source.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_DNS_NAME = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*$")
# FSx's mount name: eight lowercase letters and digits, or `fsx` for SCRATCH_1 file systems.
_MOUNT_NAME = re.compile(r"^[a-z0-9]{1,32}$")
_STORAGE_KINDS = ("fsx-lustre",)


@dataclass(frozen=True, slots=True)
class StackOutputs:
    """What render takes from a stack: its machines and, if it made one, the file system."""

    nodes: list[StackNode]
    storage: StackStorage | None = None


def parse_outputs(outputs: Any, source: str = "stack outputs") -> StackOutputs:
    """`nodes` and the optional `storage` of `pulumi stack output --json`, both checked."""
    return StackOutputs(parse_nodes(outputs, source), parse_storage(outputs, source))


def parse_storage(outputs: Any, source: str = "stack outputs") -> StackStorage | None:
    """The stack's `storage` output, or None when the stack made no file system."""
    if not isinstance(outputs, Mapping):
        raise StackOutputsError(f"{source}: expected a JSON object of stack outputs")
    raw = outputs.get("storage")
    if raw is None:
        return None
    where = f"{source}: storage"
    if raw == "[secret]":
        raise StackOutputsError(f"{where} is marked secret; the stack must export it in the clear")
    if not isinstance(raw, Mapping):
        raise StackOutputsError(f"{where}: expected an object, not {type(raw).__name__}")
    unknown = sorted(set(raw) - set(STORAGE_KEYS))
    missing = [key for key in STORAGE_KEYS if key not in raw]
    if unknown or missing:
        raise StackOutputsError(
            f"{where}: "
            + "; ".join(
                ([f"unknown keys {', '.join(unknown)}"] if unknown else [])
                + ([f"missing keys {', '.join(missing)}"] if missing else [])
            )
            + f" (expected {', '.join(STORAGE_KEYS)})"
        )

    def text(key: str, pattern: re.Pattern[str], what: str) -> str:
        value = raw[key]
        if not isinstance(value, str) or not pattern.match(value):
            raise StackOutputsError(f"{where}.{key}: expected {what}, got {value!r}")
        return value

    kind = raw["kind"]
    if kind not in _STORAGE_KINDS:
        raise StackOutputsError(f"{where}.kind: {kind!r} is not one of {', '.join(_STORAGE_KINDS)}")
    return StackStorage(
        kind=kind,
        dns_name=text("dns_name", _DNS_NAME, "the file system's DNS name"),
        mount_name=text("mount_name", _MOUNT_NAME, "the FSx mount name (e.g. abcdef01)"),
        mount=text("mount", re.compile(r"^/\S*$"), "an absolute path"),
    )


def parse_nodes(outputs: Any, source: str = "stack outputs") -> list[StackNode]:
    """`outputs` is the object `pulumi stack output --json` prints; its `nodes` are parsed."""
    if not isinstance(outputs, Mapping):
        raise StackOutputsError(f"{source}: expected a JSON object of stack outputs")
    if "nodes" not in outputs:
        known = ", ".join(sorted(outputs)) or "none"
        raise StackOutputsError(
            f"{source}: no `nodes` output (outputs: {known}); was `pulumi up` run for this stack?"
        )
    raw = outputs["nodes"]
    if raw == "[secret]":
        raise StackOutputsError(
            f"{source}: `nodes` is marked secret; the stack must export it in the clear"
        )
    if not isinstance(raw, list):
        raise StackOutputsError(f"{source}: `nodes` must be a list, not {type(raw).__name__}")
    return [_parse_node(item, f"{source}: nodes[{index}]") for index, item in enumerate(raw)]


def _parse_node(raw: Any, where: str) -> StackNode:
    if not isinstance(raw, Mapping):
        raise StackOutputsError(f"{where}: expected an object")
    unknown = sorted(set(raw) - set(NODE_KEYS))
    if unknown:
        raise StackOutputsError(f"{where}: unknown keys {', '.join(unknown)}")

    def text(key: str) -> str:
        value = raw.get(key)
        if not isinstance(value, str) or not value:
            raise StackOutputsError(f"{where}.{key}: expected a non-empty string, got {value!r}")
        return value

    name = text("name")
    where = f"{where} ({name})"
    address = text("address")
    _check_ip(address, f"{where}.address")
    role = text("role")
    if role not in _ROLES:
        raise StackOutputsError(f"{where}.role: {role!r} is not one of {', '.join(_ROLES)}")
    island = raw.get("island")
    if island is not None and (not isinstance(island, int) or isinstance(island, bool)):
        raise StackOutputsError(f"{where}.island: expected an integer or null, got {island!r}")
    ids = raw.get("ids", {})
    if not isinstance(ids, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in ids.items()
    ):
        raise StackOutputsError(f"{where}.ids: expected an object of strings")
    public = raw.get("public_address")
    if public is not None:
        if not isinstance(public, str):
            raise StackOutputsError(f"{where}.public_address: expected a string or null")
        _check_ip(public, f"{where}.public_address")
    return StackNode(
        name=name,
        address=address,
        pool=text("pool"),
        role=role,  # type: ignore[arg-type]  # checked against Role above
        island=island,
        provider=text("provider"),
        ids=dict(ids),
        public_address=public,
    )


def _check_ip(value: str, where: str) -> None:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise StackOutputsError(f"{where}: {value!r} is not an IP address") from None


def load_saved(path: Path) -> list[StackNode]:
    """Nodes from a file saved with `pulumi stack output --json > FILE`."""
    return load_saved_outputs(path).nodes


def load_saved_outputs(path: Path) -> StackOutputs:
    """Nodes and storage from a file saved with `pulumi stack output --json > FILE`."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StackOutputsError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise StackOutputsError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise StackOutputsError(f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
    return parse_outputs(document, str(path))


def pulumi_cli() -> str | None:
    return shutil.which("pulumi")


def read_stack(stack: str, *, cwd: Path, timeout_s: float = 120.0) -> list[StackNode]:
    """Nodes of `stack`, through `pulumi stack output --json` run in the project at `cwd`."""
    return read_stack_outputs(stack, cwd=cwd, timeout_s=timeout_s).nodes


def read_stack_outputs(stack: str, *, cwd: Path, timeout_s: float = 120.0) -> StackOutputs:
    """Nodes and storage of `stack`, through `pulumi stack output --json` at `cwd`."""
    cli = pulumi_cli()
    if cli is None:
        raise StackOutputsError(
            "the Pulumi CLI is not installed here; install it, or save the outputs where it is "
            f"(`pulumi stack output --json -s {stack} > {stack}.json`) and pass that file"
        )
    command = [cli, "stack", "output", "--json", "--stack", stack, "--non-interactive"]
    try:
        done = subprocess.run(
            command, cwd=cwd, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        raise StackOutputsError(
            f"`pulumi stack output` for stack {stack} did not finish within {timeout_s:g}s; "
            "is the state backend reachable (pulumi whoami)?"
        ) from None
    except OSError as exc:
        raise StackOutputsError(f"cannot run {cli}: {exc}") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise StackOutputsError(
            f"`pulumi stack output` for stack {stack} failed (exit {done.returncode}): "
            + " / ".join(tail)
        )
    try:
        document = json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        raise StackOutputsError(f"stack {stack}: the CLI printed no JSON ({exc.msg})") from None
    return parse_outputs(document, f"stack {stack}")


def merge(stacks: Iterable[tuple[str, Sequence[StackNode]]]) -> list[StackNode]:
    """One list from several stacks (one per island); a node in two stacks is an error."""
    seen: dict[str, str] = {}
    merged: list[StackNode] = []
    for source, nodes in stacks:
        for node in nodes:
            if node.name in seen:
                raise StackOutputsError(
                    f"{node.name} is in both {seen[node.name]} and {source}; each node belongs "
                    "to exactly one stack"
                )
            seen[node.name] = source
            merged.append(node)
    return merged


def match_spec(
    spec: Cluster, nodes: Sequence[StackNode], *, require_all: bool = True
) -> dict[str, StackNode]:
    """The stack's nodes by name, after checking each against the spec's node of that name.

    Every difference is reported at once. With `require_all`, a spec node that no stack made
    is a difference too (a partial set is fine while island stacks are still coming up).
    """
    expected = {record.name: record for record in iter_nodes(spec)}
    by_name: dict[str, StackNode] = {}
    problems: list[str] = []
    for node in nodes:
        record = expected.get(node.name)
        if record is None:
            problems.append(f"{node.name}: in the stack but not in the spec")
            continue
        if node.name in by_name:
            problems.append(f"{node.name}: listed twice")
            continue
        by_name[node.name] = node
        for what, got, want in (
            ("pool", node.pool, record.pool),
            ("role", node.role, record.role),
            ("island", node.island, record.island),
            ("provider", node.provider, spec.provider.kind),
        ):
            if got != want:
                problems.append(
                    f"{node.name}: {what} is {got!r} in the stack, {want!r} in the spec"
                )
    if require_all:
        missing = [name for name in expected if name not in by_name]
        if missing:
            shown = ", ".join(missing[:10]) + (
                f" and {len(missing) - 10} more" if len(missing) > 10 else ""
            )
            problems.append(f"not made by any stack yet: {shown}")
    if problems:
        raise StackOutputsError(
            "the stack outputs do not match the spec (run `pulumi up` for the stack, or fix the "
            "spec):\n  " + "\n  ".join(problems)
        )
    return by_name


def match_storage(spec: Cluster, storage: StackStorage | None, source: str) -> None:
    """The stack's file system against the spec's `storage`: same kind, same mount point.

    A stack that made no file system passes here; whether the spec needs one is the caller's
    question (a partial set of island stacks may not include the stack that holds it).
    """
    if storage is None:
        return
    if spec.storage.kind != storage.kind:
        raise StackOutputsError(
            f"{source}: storage: the stack made a {storage.kind} file system but the spec's "
            f"storage.kind is {spec.storage.kind} (run `pulumi up` for the stack, or fix the spec)"
        )
    if storage.mount != spec.storage.mount:
        raise StackOutputsError(
            f"{source}: storage.mount is {storage.mount!r} in the stack, "
            f"{spec.storage.mount!r} in the spec (run `pulumi up` for the stack, or fix the spec)"
        )
