"""The acceptance stand-ins print what the real parsers read, with the profile's figures."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from accept_stubs import dcgm_output, ib_write_bw_output, nccl_output, standin_script
from myriad.node.parsers.dcgm import parse_dcgmi_diag
from myriad.node.parsers.nccl_tests import parse_nccl_tests
from myriad.node.parsers.perftest import parse_perftest_bw


def test_nccl_busbw_becomes_the_profiles() -> None:
    real = parse_nccl_tests(nccl_output(338.82))  # the capture's own figure: factor 1
    assert real.rows[-1].busbw_gbs == pytest.approx(338.82)
    assert real.avg_busbw_gbs == pytest.approx(70.742)
    slow = parse_nccl_tests(nccl_output(169.41))  # half of 338.82
    assert slow.rows[-1].busbw_gbs == pytest.approx(169.41)
    assert slow.rows[-1].in_place_busbw_gbs == pytest.approx(337.35 / 2, abs=0.01)
    assert slow.avg_busbw_gbs == pytest.approx(70.742 / 2, abs=0.001)
    assert len(slow.rows) == len(real.rows) and len(slow.ranks) == len(real.ranks)


def test_ib_write_bw_average_becomes_the_profiles() -> None:
    run = parse_perftest_bw(ib_write_bw_output(200.0))
    assert run.largest.average_gbps == pytest.approx(200.0)
    assert run.roce and run.bidirectional
    slow = parse_perftest_bw(ib_write_bw_output(50.0))
    assert slow.largest.average_gbps == pytest.approx(50.0)


def test_dcgm_fails_the_named_test_only() -> None:
    assert parse_dcgmi_diag(dcgm_output()).passed
    diag = parse_dcgmi_diag(dcgm_output("Persistence Mode"))
    assert not diag.passed
    assert [t.name for t in diag.failed] == ["Persistence Mode"]
    with pytest.raises(ValueError, match="no test 'Memtest'"):
        dcgm_output("Memtest")


def test_standin_prints_the_rendered_file(tmp_path: Path) -> None:
    out = tmp_path / "all_reduce.txt"
    out.write_text(nccl_output(100.0))
    script = tmp_path / "all_reduce_perf"
    script.write_text(standin_script("all_reduce_perf", str(out)))
    os.chmod(script, 0o755)
    printed = subprocess.run([str(script)], capture_output=True, text=True, check=True).stdout
    assert parse_nccl_tests(printed).rows[-1].busbw_gbs == pytest.approx(100.0)
