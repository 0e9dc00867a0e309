"""Facts that cannot be read, or were cut short, are never read as a smaller healthy node.

Each case starts from a real capture (tests/samples) and changes it the way it goes wrong
in practice: output cut at a line boundary, a GPU missing from one tool's list, NVLink
absent altogether. What these exercise is the parsing and evaluation on the controller;
no GPU, HCA or bond is touched.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from myriad.node.checks.gpu import GPU_NVLINK
from myriad.node.facts import ok
from myriad.node.parsers import ParseFailure
from myriad.node.parsers.bonding import parse_bonding
from myriad.node.parsers.nvidia_smi import parse_nvidia_smi_text, parse_nvlink_status

NVLINK = "nvidia-smi-nvlink/a100-sxm4-80gb-x8_nvlink-status.txt"
SMI_TEXT = "nvidia-smi-q-text/h100-80gb-hbm3-x8_drv535.161.08_nvidia-smi-q.txt"
LACP = "proc-net-bonding/bond0_802.3ad-lacp-fast_layer3+4_one-slave-down_lacp-pdu-details.txt"


def _nvlink_outcome(nvlink_text: str, smi_text: str, expected: int = 12) -> Any:
    # The evaluator reads only these two facts; the rest of NodeFacts does not matter here.
    facts = SimpleNamespace(
        nvlink=ok(parse_nvlink_status(nvlink_text)),
        gpus=ok(parse_nvidia_smi_text(smi_text)),
    )
    return GPU_NVLINK.evaluate(expected, facts, None, "gpu01")  # type: ignore[arg-type]


def _without_gpu(nvlink_text: str, index: int) -> str:
    """The nvlink capture with GPU `index`'s block removed, as when one GPU is not listed."""
    start = nvlink_text.index(f"GPU {index}:")
    end = nvlink_text.index(f"GPU {index + 1}:")
    return nvlink_text[:start] + nvlink_text[end:]


def test_all_gpus_with_all_links_pass(sample: Callable[[str], str]) -> None:
    outcome = _nvlink_outcome(sample(NVLINK), sample(SMI_TEXT))
    assert (outcome.status, outcome.actual) == ("pass", "12 links up on 8 GPUs")


def test_a_gpu_missing_from_nvlink_status_fails(sample: Callable[[str], str]) -> None:
    # Before: "12 links up on 7 GPUs", a pass. nvidia-smi -q lists 8 GPUs (index 0-7).
    outcome = _nvlink_outcome(_without_gpu(sample(NVLINK), 3), sample(SMI_TEXT))
    assert outcome.status == "fail"
    assert "GPU 3: not in nvlink --status" in outcome.actual


def test_empty_nvlink_status_is_no_nvlink_judged_against_the_profile(
    sample: Callable[[str], str],
) -> None:
    outcome = _nvlink_outcome("", sample(SMI_TEXT))
    assert outcome.status == "fail"
    assert "no NVLink on this node" in outcome.actual


def test_nvlink_without_a_readable_gpu_list_is_not_a_pass(sample: Callable[[str], str]) -> None:
    from myriad.node.facts import Fact

    facts = SimpleNamespace(
        nvlink=ok(parse_nvlink_status(sample(NVLINK))),
        gpus=Fact("unreadable", None, "nvidia-smi -q -x: not well-formed XML"),
    )
    outcome = GPU_NVLINK.evaluate(12, facts, None, "gpu01")  # type: ignore[arg-type]
    assert outcome.status == "error"


def test_a_bond_cut_before_its_last_slave_is_truncation(sample: Callable[[str], str]) -> None:
    # The active aggregator (ID 2) says "Number of ports: 1"; its one slave, enp1s0f1, is
    # the second block. Cut before it, the file still reads as a bond of one slave.
    text = sample(LACP)
    cut = text.index("Slave Interface: enp1s0f1")
    with pytest.raises(ParseFailure, match=r"active aggregator 2 has 1 port\(s\) but 0"):
        parse_bonding(text[:cut])
    assert len(parse_bonding(text).slaves) == 2
