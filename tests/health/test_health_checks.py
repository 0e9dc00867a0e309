"""The node health checks (gpu.xid, hca.counter-growth, disk.space) as `myriad validate`
and the runner evaluate them: not applicable where nothing read their facts between runs
(the controller), unknown (error, never pass) where the fact could not be read, and the
fail / pass each fact gives."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from myriad.node.checks import BY_ID, view_of
from myriad.node.facts import DiskSpace, Fact, NodeFacts, ok, unreadable
from myriad.node.parsers.kernel_log import XidEvent

BLANK = unreadable("node02", "not used here")
UNREADABLE: Fact[Any] = Fact("unreadable", detail="kernel log /dev/kmsg: Permission denied")
GROWTH = {"names": ["mlx5_0", "mlx5_1"], "value": {"link_downed": 0, "symbol_error": 10}}


def evaluate(check: str, expected: Any, facts: NodeFacts) -> tuple[str, str]:
    outcome = BY_ID[check].evaluate(expected, facts, view_of(facts, "node02"), "node02")
    return outcome.status, outcome.actual


@pytest.mark.parametrize(
    ("check", "expected", "field"),
    [
        ("gpu.xid", {"hold_s": 0}, "xid_events"),
        ("hca.counter-growth", GROWTH, "hca_counter_growth"),
        ("disk.space", {"/": 5}, "disk"),
        ("storage.writable", "/data", "writable"),
    ],
)
def test_on_the_controller_not_applicable_and_unreadable_is_unknown(
    check: str, expected: Any, field: str
) -> None:
    gathered = replace(BLANK, **{field: Fact("not-gathered", detail="not gathered")})
    assert evaluate(check, expected, gathered) == (
        "not-applicable",
        "judged on the node by myriad-health, between runs",
    )
    broken = replace(BLANK, **{field: UNREADABLE})
    assert evaluate(check, expected, broken) == ("error", UNREADABLE.detail)


def test_xid() -> None:
    facts = replace(
        BLANK,
        xid_events=ok(
            (
                XidEvent(13, "0000:cb:00", "Graphics SM Warp Exception"),
                XidEvent(13, "0000:cb:00", "Graphics Exception"),
                XidEvent(79, "0000:44:00", "GPU has fallen off the bus"),
                XidEvent(79, "0000:44:00", "GPU has fallen off the bus"),
                XidEvent(119, "0000:9b:00", "Timeout after 45s"),
            )
        ),
    )
    assert evaluate("gpu.xid", {"hold_s": 0}, facts) == (
        "fail",
        "XID 79 on 0000:44:00 (GPU has fallen off the bus) x2, XID 119 on 0000:9b:00 "
        "(GSP RPC timeout)",
    )
    quiet = replace(BLANK, xid_events=ok((XidEvent(13, "0000:cb:00", ""),) * 3))
    assert evaluate("gpu.xid", {"hold_s": 0}, quiet) == ("pass", "recorded only: XID 13 x3")
    assert evaluate("gpu.xid", {"hold_s": 0}, replace(BLANK, xid_events=ok(()))) == (
        "pass",
        "no XID",
    )
    assert BY_ID["gpu.xid"].explain({"hold_s": 600}) == (
        "no draining XID (held 600 s); application XIDs recorded"
    )


def test_counter_growth() -> None:
    grew = {
        "mlx5_0": {"link_downed": 1, "symbol_error": 10},
        "mlx5_1": {"link_downed": 0, "symbol_error": 11},
    }
    facts = replace(BLANK, hca_counter_growth=ok(grew))
    assert evaluate("hca.counter-growth", GROWTH, facts) == (
        "fail",
        "mlx5_0 link_downed +1, mlx5_1 symbol_error +11",
    )
    quiet = {
        "mlx5_0": {"link_downed": 0, "symbol_error": 10},
        "mlx5_1": {"link_downed": 0, "symbol_error": 0},
    }
    assert evaluate("hca.counter-growth", GROWTH, replace(BLANK, hca_counter_growth=ok(quiet))) == (
        "pass",
        "no growth above limits on 2",
    )
    # A device without counters, a counter not reported: unknown, never quiet.
    partial = {"mlx5_0": {"link_downed": 0}}
    assert evaluate(
        "hca.counter-growth", GROWTH, replace(BLANK, hca_counter_growth=ok(partial))
    ) == (
        "error",
        "mlx5_0 symbol_error not reported, mlx5_1 no counters",
    )


def test_disk_space() -> None:
    disks = {"/": DiskSpace("/", 41.5, 10**11), "/tmp": DiskSpace("/tmp", 3.25, 10**9)}
    facts = replace(BLANK, disk=ok(disks))
    assert evaluate("disk.space", {"/": 5, "/tmp": 5}, facts) == ("fail", "/tmp 3.2% free")
    assert evaluate("disk.space", {"/": 5}, facts) == ("pass", "free: / 42%")
    assert evaluate("disk.space", {"/": 5, "/scratch": 5}, facts) == ("error", "/scratch not read")
    assert BY_ID["disk.space"].explain({"/": 5, "/tmp": 10}) == "free at least / 5%, /tmp 10%"


def test_storage_writable(tmp_path: Path) -> None:
    from myriad.node.health import writable

    tried = writable([str(tmp_path), str(tmp_path / "gone")])
    assert tried.get() == {str(tmp_path): None, str(tmp_path / "gone"): "No such file or directory"}
    assert list(tmp_path.iterdir()) == []  # the probe file is removed again
    facts = replace(BLANK, writable=tried)
    assert evaluate("storage.writable", str(tmp_path), facts) == ("pass", f"{tmp_path} writable")
    assert evaluate("storage.writable", str(tmp_path / "gone"), facts) == (
        "fail",
        f"{tmp_path / 'gone'}: No such file or directory",
    )
    assert evaluate("storage.writable", "/scratch", facts) == ("error", "/scratch not tried")
