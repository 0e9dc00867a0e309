"""Storage kinds bring-up cannot mount are rendered as nothing to mount, and the plan says so."""

from __future__ import annotations

from pathlib import Path

from myriad.plan.pipeline import plan_loaded
from myriad.render.role_vars import _storage_vars
from myriad.spec import load_spec_text

STARTER = Path(__file__).resolve().parents[2] / "inventories" / "starter-64" / "cluster.yaml"


def test_weka_is_not_mounted_by_bring_up_and_the_plan_says_so() -> None:
    # The storage_net role takes none, nfs, lustre or beegfs: weka was rendered as is and
    # refused by the role's argument spec at bring-up.
    text = STARTER.read_text().replace("  kind: nfs\n", "  kind: weka\n", 1)
    loaded = load_spec_text(text, "cluster.yaml")
    assert _storage_vars(loaded.spec) == {"storage_net_mount_kind": "none"}
    [finding] = [f for f in plan_loaded(loaded).findings if f.id == "storage-not-mounted"]
    assert finding.severity == "warning" and "/data is left to the site" in finding.message
