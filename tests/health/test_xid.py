"""The XID reader and classifier against real kernel log lines (tests/samples/kernel-log,
sources in tests/samples/SOURCES.md): every prefix a reader adds, the catalog's drain and
record classes, and lines that are no XID at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from myriad.node.parsers.kernel_log import DRAIN_XIDS, classify, parse_xid_lines

LOGS = Path(__file__).resolve().parents[1] / "samples" / "kernel-log"


def read(name: str) -> str:
    return (LOGS / name).read_text()


def test_dmesg_ctime_lines_of_one_job_are_application_faults() -> None:
    events = parse_xid_lines(read("gpud-pr46_dmesg-ctime_h100_xid13-xid109.txt"))
    # Five lines, one of them a peermem message: four XIDs.
    assert [(e.xid, e.pci) for e in events] == [
        (13, "0000:cb:00"),
        (13, "0000:cb:00"),
        (13, "0000:cb:00"),
        (109, "0000:cb:00"),
    ]
    assert {e.action for e in events} == {"record"}
    assert events[0].text.startswith("pid='<unknown>', name=<unknown>, Graphics SM Warp")
    assert events[3].text.endswith("errorString CTX SWITCH TIMEOUT, Info 0x58005")


def test_gsp_rpc_timeouts_drain() -> None:
    events = parse_xid_lines(read("gpud-pr500_kmsg-scan_xid119-gsp-rpc-timeout.txt"))
    assert len(events) == 5
    assert {(e.xid, e.pci, e.action) for e in events} == {(119, "0000:9b:00", "drain")}
    assert events[0].describe() == "XID 119 on 0000:9b:00 (GSP RPC timeout)"


def test_journal_lines_xid45_are_recorded_not_drained() -> None:
    events = parse_xid_lines(
        read("open-gpu-kernel-modules-1150_journal_xid45-after-xid145-149.txt")
    )
    assert [e.xid for e in events] == [45] * 7
    assert sorted({e.pci for e in events}) == [
        "0000:97:00",
        "0000:ba:00",
        "0000:dc:00",
        "0000:ed:00",
    ]
    # "caused by previous Xid 149" names another XID in the text: only the leading one counts.
    assert all(e.action == "record" for e in events)


def test_uptime_prefixed_lines() -> None:
    events = parse_xid_lines(read("bumblebee-677_dmesg_xid32-xid31.txt"))
    assert [(e.xid, e.action) for e in events] == [(32, "record"), (32, "record"), (31, "record")]


def test_fallen_off_the_bus() -> None:
    events = parse_xid_lines(read("nvsentinel-155_dmesg_fallen-off-bus-xid79.txt"))
    # The multi-line "fallen off the bus" message without an XID is not one; the XID 79 is.
    assert [(e.xid, e.pci, e.action) for e in events] == [(79, "0000:44:00", "drain")]
    assert events[0].text == "GPU has fallen off the bus"


def test_kmsg_record_prefix_and_degraded_text() -> None:
    # /dev/kmsg: "<prio>,<seq>,<usec>,<flags>;<message>"; a truncated and an empty line.
    text = (
        "4,1234,5678901,-;NVRM: Xid (PCI:0000:3b:00): 48, pid=77, name=python, DBE\n"
        "NVRM: Xid (PCI:0000:3b\n"
        "\n"
        "NVRM: Xid (PCI:0000:3b:00): 94\n"
    )
    events = parse_xid_lines(text)
    assert [(e.xid, e.text, e.action) for e in events] == [
        (48, "pid=77, name=python, DBE", "drain"),
        (94, "", "drain"),
    ]
    assert parse_xid_lines("") == ()


@pytest.mark.parametrize(
    ("xid", "action"),
    [(79, "drain"), (48, "drain"), (74, "drain"), (119, "drain"), (120, "drain"), (94, "drain"),
     (95, "drain"), (63, "drain"), (64, "drain"), (13, "record"), (31, "record"), (43, "record"),
     (45, "record"), (999, "record")],
)  # fmt: skip
def test_classes_follow_the_catalog(xid: int, action: str) -> None:
    assert classify(xid) == action


def test_application_faults_never_drain() -> None:
    assert {13, 31, 43, 45}.isdisjoint(DRAIN_XIDS)
