"""The action map: every XID of NVIDIA's catalog has an action (or an explicit none), the
driver's recovery actions and node health's draining checks each have one, and a bad entry
is reported with its place."""

from __future__ import annotations

from pathlib import Path

import pytest

from myriad.errors import ActionMapError
from myriad.health.actions import LADDER, ActionMap, Finding, load_action_map, read_action_map
from myriad.node.parsers.kernel_log import DRAIN_XIDS, RECORD_XIDS
from myriad.spec.health import DEFAULT_DRAIN

SHIPPED = Path(__file__).resolve().parents[2] / "src/myriad/health/actions.yaml"


@pytest.fixture(scope="module")
def amap() -> ActionMap:
    return load_action_map()


def test_every_catalog_xid_has_an_action_or_an_explicit_none(amap: ActionMap) -> None:
    # The catalog read (docs.nvidia.com/deploy/xid-errors, the spreadsheet of 2025-10-29)
    # numbers every XID from 1 to 172.
    assert amap.last_xid == 172
    assert sorted(amap.xid) == list(range(1, 173))
    for xid, rule in amap.xid.items():
        assert rule.action in LADDER, xid
        assert rule.why, xid
        assert rule.bucket, xid


def test_catalog_buckets_become_their_actions(amap: ActionMap) -> None:
    # Spot checks against the catalog page's rows.
    assert (amap.for_xid(79).bucket, amap.for_xid(79).action) == ("RESTART_BM", "reboot")
    assert (amap.for_xid(95).bucket, amap.for_xid(95).action) == ("RESET_GPU", "reset-gpu")
    assert (amap.for_xid(13).bucket, amap.for_xid(13).action) == ("RESTART_APP", "none")
    assert (amap.for_xid(31).bucket, amap.for_xid(31).action) == ("RESTART_APP", "none")
    assert (amap.for_xid(54).bucket, amap.for_xid(54).action) == (
        "CHECK_MECHANICALS",
        "needs-hardware",
    )
    assert amap.for_xid(48).bucket == "WORKFLOW_XID_48"
    assert amap.for_xid(79).source == "nvidia-xid-catalog"


def test_an_action_other_than_the_buckets_is_myriads_and_says_why(amap: ActionMap) -> None:
    remap = amap.for_xid(63)
    assert (remap.bucket, remap.action, remap.source) == ("IGNORE", "reset-gpu", "myriad")
    assert "reset" in remap.why
    # The catalog gives 162..172 no bucket: each names its own action.
    assert all(amap.for_xid(x).source == "myriad" for x in range(162, 173))


def test_every_xid_node_health_drains_on_has_a_reviewed_way_back(amap: ActionMap) -> None:
    """A node drained for an XID gets an action; where that action is none (the catalog
    says the node is fine), the entry says why, so a drained node is never forgotten."""
    for xid in DRAIN_XIDS:
        rule = amap.for_xid(xid)
        if rule.action == "none":
            assert rule.source == "myriad", f"XID {xid} drains but the map does nothing"


def test_application_xids_ask_nothing_of_the_node(amap: ActionMap) -> None:
    for xid in RECORD_XIDS.keys() - {109}:
        assert amap.for_xid(xid).action == "none", xid
    # The catalog's bucket for 109 (context switch timeout) is RESET_GPU, though node health
    # only records it: the map follows the catalog.
    assert amap.for_xid(109).action == "reset-gpu"


def test_an_xid_newer_than_the_catalog_asks_a_person(amap: ActionMap) -> None:
    assert amap.resolve(Finding("gpu.xid", 400)).action == "needs-hardware"
    assert amap.resolve(Finding("gpu.xid")).action == "needs-hardware"


def test_recovery_actions_as_nvidia_documents_them(amap: ActionMap) -> None:
    act = {v: amap.for_recovery_action(v).action for v in ("None", "Reset", "Reboot")}
    assert act == {"None": "none", "Reset": "reset-gpu", "Reboot": "reboot"}
    assert amap.for_recovery_action("Drain and Reset").action == "reset-gpu"
    assert amap.for_recovery_action("Drain P2P").action == "reset-gpu"
    # A value this map has never seen is not healthy.
    assert amap.for_recovery_action("Recover IMEX Domain").action == "needs-hardware"


def test_every_check_node_health_drains_on_has_an_entry(amap: ActionMap) -> None:
    assert set(DEFAULT_DRAIN) - set(amap.checks) == set()
    assert amap.resolve(Finding("node.unreachable")).action == "power-cycle"
    assert amap.resolve(Finding("hca.state")).action == "needs-hardware"
    assert amap.resolve(Finding("gpu.xid", 79)).action == "reboot"
    assert amap.resolve(Finding("gpu.recovery-action", "Reset")).action == "reset-gpu"
    # A check that only warns.
    assert amap.resolve(Finding("time.sync")).action == "none"


def test_explain_names(amap: ActionMap) -> None:
    assert [n for n, _ in amap.explain("hca.state")] == ["hca.state"]
    assert len(amap.explain("gpu.xid")) == 172
    assert [n for n, _ in amap.explain("xid:79")] == ["gpu.xid:79"]
    assert [n for n, _ in amap.explain("gpu.recovery-action:Reset")] == [
        "gpu.recovery-action:Reset"
    ]
    assert amap.explain("no.such-check") == []
    assert amap.explain("gpu.xid:abc") == []


def _shipped_with(replace: str, by: str) -> str:
    text = SHIPPED.read_text(encoding="utf-8")
    assert replace in text
    return text.replace(replace, by, 1)


def test_a_bad_action_is_reported_at_its_line() -> None:
    text = _shipped_with(
        "  - {xid: 79, bucket: RESTART_BM,", "  - {xid: 79, bucket: RESTART_BM, action: rebot,"
    )
    with pytest.raises(ActionMapError) as caught:
        read_action_map(text, "map.yaml")
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "xid: 79," in row)
    (problem,) = caught.value.problems
    assert (problem.line, problem.path[-1]) == (line, "why")
    assert "says why" in problem.message


def test_unknown_action_and_unknown_bucket() -> None:
    text = _shipped_with(
        "  - {xid: 79, bucket: RESTART_BM,",
        "  - {xid: 79, bucket: RESTART_BM, why: x, action: rebot,",
    )
    text = text.replace("  - {xid: 80, bucket: RESTART_APP,", "  - {xid: 80, bucket: RESTART,", 1)
    with pytest.raises(ActionMapError) as caught:
        read_action_map(text, "map.yaml")
    messages = [p.message for p in caught.value.problems]
    assert messages == ["unknown action 'rebot'", "unknown bucket 'RESTART'"]
    assert "reset-gpu" in caught.value.problems[0].hint
    assert str(caught.value).startswith("2 problems in the action map:\nmap.yaml:")


def test_a_missing_xid_is_named() -> None:
    text = SHIPPED.read_text(encoding="utf-8")
    lines = [
        row for row in text.splitlines() if not row.startswith(("  - {xid: 5,", "  - {xid: 6,"))
    ]
    with pytest.raises(ActionMapError, match="no entry for XID 5-6"):
        read_action_map("\n".join(lines) + "\n", "map.yaml")


def test_an_xid_the_catalog_gives_no_action_must_name_one() -> None:
    text = SHIPPED.read_text(encoding="utf-8")
    at = text.index("  - xid: 167")
    end = text.index("  - xid: 168")
    text = (
        text[:at] + '  - {xid: 167, bucket: NONE_GIVEN, name: "PCIE_FATAL_TIMEOUT"}\n' + text[end:]
    )
    with pytest.raises(ActionMapError, match="gives this XID no action"):
        read_action_map(text, "map.yaml")


def test_duplicate_xid_and_out_of_range() -> None:
    text = _shipped_with("  - {xid: 80,", "  - {xid: 79,")
    with pytest.raises(ActionMapError) as caught:
        read_action_map(text, "map.yaml")
    assert [p.message for p in caught.value.problems] == ["XID 79 has two entries"]
    text = _shipped_with("  - {xid: 80,", "  - {xid: 980,")
    with pytest.raises(ActionMapError, match=r"XID 980 is not a number in 1\.\.172"):
        read_action_map(text, "map.yaml")


def test_whose_word_each_recovery_action_is(amap: ActionMap) -> None:
    assert amap.for_recovery_action("Reset").source == "nvidia-recovery-action"
    # Quiescing P2P then resetting is Myriad's reading of the driver's "Drain P2P".
    assert amap.for_recovery_action("Drain P2P").source == "myriad"
    assert amap.for_recovery_action("Something New").source == "myriad"
