"""Shared storage checks: the spec's file system mounted where the spec says (findmnt)."""

from __future__ import annotations

from typing import Any

from myriad.node.checks.model import (
    Check,
    ClusterView,
    Context,
    Expect,
    Outcome,
    Skip,
    bringup_fix,
    failed,
    passed,
    unavailable,
)
from myriad.node.facts import NodeFacts

# The file system types findmnt reports for each storage.kind.
FSTYPES = {
    "nfs": ["nfs", "nfs4"],
    "lustre": ["lustre"],
    "beegfs": ["beegfs"],
    "weka": ["wekafs"],
}


def _derive_mount(c: Context) -> Expect | Skip:
    storage = c.spec.storage
    if storage.kind == "none":
        return Skip("storage.kind", "storage.kind is none")
    source = None
    if storage.kind == "nfs":
        source = f"{storage.server}:{storage.export}"
    elif storage.kind == "lustre":
        source = f"{storage.server}:/{storage.export}"
    return Expect(
        {
            "path": storage.mount,
            "kind": storage.kind,
            "fstypes": FSTYPES[storage.kind],
            "source": source,
        },
        "storage.mount, storage.server, storage.export",
        bringup_fix("storage_net", f"mount {storage.mount}"),
    )


def _evaluate_mount(
    expected: dict[str, Any], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    if not facts.mount.ok:
        return unavailable(facts.mount)
    mount = facts.mount.get()
    if mount is None:
        return failed(f"nothing mounted on {expected['path']}")
    actual = f"{mount.source} ({mount.fstype})"
    if mount.fstype not in expected["fstypes"]:
        return failed(actual)
    source = expected["source"]
    if source is not None and mount.source.rstrip("/") != source.rstrip("/"):
        return failed(actual)
    return passed(actual)


def _explain_mount(expected: dict[str, Any]) -> str:
    source = f"{expected['source']} " if expected["source"] else ""
    return f"{source}({'/'.join(expected['fstypes'])}) on {expected['path']}"


STORAGE_MOUNT = Check(
    id="storage.mount",
    title="shared storage mounted",
    spec_fields=("storage.mount", "storage.server", "storage.export"),
    derive=_derive_mount,
    evaluate=_evaluate_mount,
    explain=_explain_mount,
)
