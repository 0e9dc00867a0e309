"""Image mode: each node runs its profile's current baked image.

`myriad image build` records each profile's current image in the cluster's state folder; the
inventory carries it to the pool's nodes (`myriad_image`), and each image carries its own
record in /etc/myriad/image.json. A node started from an older image of its profile (the
image was rebuilt, the node was not rolled onto it) runs other packages than its peers."""

from __future__ import annotations

from typing import Any

from myriad.node.checks.model import (
    Check,
    ClusterView,
    Context,
    Expect,
    Outcome,
    Skip,
    failed,
    passed,
    unavailable,
)
from myriad.node.facts import NodeFacts

IMAGE_FIX = (
    "start {node} from its profile's current image: `myriad up SPEC` recreates a local node "
    "from it; elsewhere reinstall or relaunch the node, or roll it with `myriad replace`"
)


def _derive_current(c: Context) -> Expect | Skip:
    image = c.variables.get("myriad_image")
    if not isinstance(image, dict) or not image.get("content_hash"):
        return Skip("bringup.mode", "push mode, or no image built for this profile yet")
    expected = {"content_hash": image["content_hash"], "tag": image.get("tag", "")}
    return Expect(expected, "bringup.mode", IMAGE_FIX)


def _evaluate_current(
    expected: dict[str, Any], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    record = facts.image_record
    if record.state == "missing":
        return failed("no /etc/myriad/image.json: not started from a baked image")
    if not record.ok:
        return unavailable(record)
    found = record.get()
    found_hash = str(found.get("content_hash") or "")
    if found_hash == expected["content_hash"]:
        return passed(f"{found.get('tag', '')} ({found_hash[:12]})")
    return failed(
        f"{found.get('tag') or 'an image'} ({found_hash[:12] or 'no hash'})",
        f"the profile's current image is {expected['tag']} ({expected['content_hash'][:12]})",
    )


IMAGE_CURRENT = Check(
    id="image.current",
    title="node runs its profile's current image",
    spec_fields=("bringup.mode",),
    derive=_derive_current,
    evaluate=_evaluate_current,
    explain=lambda expected: f"image {expected['tag']} ({expected['content_hash'][:12]})",
)
