"""The burn-in's GPU samples: `nvidia-smi --query-gpu ... --format=csv -l 5` beside DCGM's
stress, read from a real capture (tests/samples/nvidia-smi-query-gpu: an H100 under gpu-burn,
driver 590) and judged at the cycle's end. The figures in the expected lines are the
capture's own: 59 C, 631.95 W, SM 1980 of 1980 MHz, PCIe gen 5 of 5, 0 uncorrected ECC."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from accept_fakes import QUERY_GPU, Controller, gpu_query_samples
from accept_stubs import dcgm_output, gpu_twin_spec
from myriad.node.parsers.common import ParseFailure
from myriad.node.parsers.nvidia_smi_query import parse_query_gpu_csv
from myriad.ops.accept_cluster import accept
from myriad.ops.accept_plan import (
    SAMPLED_DIAG,
    SAMPLES_MARK,
    Step,
    burn_in_sample_problems,
    judge,
    sampled_diag,
)

ROOT = Path(__file__).resolve().parents[2]
STEP = Step(f"burn-in 0: {SAMPLED_DIAG}", ("n1",), (), None)
HEADER, ROW = QUERY_GPU.read_text().splitlines()


def test_the_capture_reads_with_its_figures() -> None:
    (sample,) = parse_query_gpu_csv(QUERY_GPU.read_text())
    assert sample.timestamp == "2026/07/14 08:12:53.353" and sample.index == 0
    assert (sample.temperature_c, sample.power_w) == (59.0, 631.95)
    assert (sample.sm_mhz, sample.sm_max_mhz, sample.utilization_pct) == (1980.0, 1980.0, 100.0)
    assert (sample.pcie_gen, sample.pcie_gen_max) == (5, 5)
    assert sample.ecc_uncorrected_volatile == 0 and sample.reasons_active == ()
    assert burn_in_sample_problems([sample]) == []


def test_a_header_again_is_skipped_and_damage_is_no_reading() -> None:
    assert len(parse_query_gpu_csv(f"{HEADER}\n{ROW}\n{HEADER}\n{ROW}\n")) == 2
    with pytest.raises(ParseFailure, match="cut short"):
        parse_query_gpu_csv(f"{HEADER}\n{ROW}\n{ROW[: len(ROW) // 2]}\n")
    with pytest.raises(ParseFailure, match="no header"):
        parse_query_gpu_csv(f"{ROW}\n")
    with pytest.raises(ParseFailure, match="no sample"):
        parse_query_gpu_csv(f"{HEADER}\n")
    with pytest.raises(ParseFailure, match="is not a number"):
        parse_query_gpu_csv(f"{HEADER}\n{ROW.replace('631.95 W', 'hot W', 1)}\n")


def test_the_old_reason_names_read_the_same() -> None:
    old = HEADER.replace("clocks_event_reasons.", "clocks_throttle_reasons.")
    row = ROW.split(", ")
    row[HEADER.split(", ").index("clocks_event_reasons.hw_power_brake_slowdown")] = "Active"
    (sample,) = parse_query_gpu_csv(f"{old}\n{', '.join(row)}\n")
    assert sample.reasons_active == ("hw_power_brake_slowdown",)


def test_a_thermal_slowdown_during_the_burn_in_fails_with_its_figures() -> None:
    samples = parse_query_gpu_csv(gpu_query_samples(hot=True))
    assert burn_in_sample_problems(samples) == [
        "GPU 0 clocks held by hw_thermal_slowdown in 1 of 2 samples (expected none); first at "
        "2026/07/14 08:12:53.353: 59 C, 631.95 W, SM 1980 MHz of 1980 MHz"
    ]


def test_ecc_growth_and_a_slow_link_under_load_fail() -> None:
    names = HEADER.split(", ")
    later = ROW.split(", ")
    # Uncorrected ECC 0 in the first sample, 2 in the second; the second at gen 4 of 5 with
    # the GPU busy (gpu_idle Not Active in the capture).
    later[names.index("ecc.errors.uncorrected.volatile.total")] = "2"
    later[names.index("pcie.link.gen.current")] = "4"
    samples = parse_query_gpu_csv(f"{HEADER}\n{ROW}\n{', '.join(later)}\n")
    assert burn_in_sample_problems(samples) == [
        "GPU 0 uncorrected ECC errors 0 -> 2 during the burn-in (expected no growth)",
        "GPU 0 PCIe gen 4 of 5 under load in 1 of 2 samples",
    ]


def test_the_step_is_judged_on_dcgm_and_the_samples_together() -> None:
    whole = f"{dcgm_output()}\n{SAMPLES_MARK}\n{gpu_query_samples()}"
    assert judge(STEP, whole).passed
    hot = judge(STEP, f"{dcgm_output()}\n{SAMPLES_MARK}\n{gpu_query_samples(hot=True)}")
    assert not hot.passed and len(hot.findings) == 1
    assert str(hot.reason).startswith(
        "myriad-accept: burn-in 0: dcgm diag, sampled failed: GPU 0 clocks held by "
        "hw_thermal_slowdown in 1 of 2 samples"
    )
    bare = judge(STEP, dcgm_output())
    assert not bare.passed and "no samples after DCGM's output" in str(bare.reason)
    failed_dcgm = judge(
        STEP, f"{dcgm_output('Persistence Mode')}\n{SAMPLES_MARK}\n{gpu_query_samples()}"
    )
    assert not failed_dcgm.passed and failed_dcgm.findings == ()


FAKE_SMI = f"""#!/bin/sh
# nvidia-smi stand-in: prints the capture, header and row.
echo '{HEADER}'
echo '{ROW}'
"""
FAKE_DCGMI = """#!/bin/sh
# dcgmi stand-in: the stress takes 1 s, then the capture, then its status.
sleep 1
cat "$DCGM_OUT"
exit 3
"""


def test_the_sampler_runs_beside_dcgm_and_stops_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shell of `sampled_diag` for real (sh, mktemp, kill -INT, wait); nvidia-smi and
    dcgmi are stand-ins on PATH printing the real captures."""
    for name, text in (("nvidia-smi", FAKE_SMI), ("dcgmi", FAKE_DCGMI)):
        tool = tmp_path / name
        tool.write_text(text)
        tool.chmod(0o755)
    (tmp_path / "dcgm.json").write_text(dcgm_output())
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DCGM_OUT", str(tmp_path / "dcgm.json"))
    done = subprocess.run(
        list(sampled_diag(4, every_s=0.2)), capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 3  # DCGM's status, not the sampler's
    result = judge(STEP, done.stdout)
    assert result.passed, result.reason
    samples = parse_query_gpu_csv(done.stdout.partition(SAMPLES_MARK)[2].strip())
    # 1 s of DCGM, a call each 0.2 s: about 5 rows; at least 2 shows it ran beside.
    assert len(samples) >= 2


def test_accept_burn_in_drains_a_node_that_throttled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MYRIAD_STATE_DIR", str(tmp_path / "state"))
    spec = tmp_path / "cluster.yaml"
    spec.write_text(gpu_twin_spec((ROOT / "inventories/local/cluster.yaml").read_text(), "h"))
    ctl = Controller(hot="node02")
    looks: list[float] = []

    def clock() -> float:  # one cycle: every look after the first finds the time spent
        looks.append(10**6 if looks else 0.0)
        return looks[-1]

    outcome = accept(
        spec, "burn-in", slurm=ctl.slurm(), commands=ctl, settle=lambda: None, clock=clock
    )
    assert list(ctl.drained) == ["node02"]
    assert ctl.drained["node02"].startswith(
        "myriad-accept: burn-in 0: dcgm diag, sampled failed: GPU 0 clocks held by "
        "hw_thermal_slowdown in 1 of 2 samples (expected none); first at "
        "2026/07/14 08:12:53.353: 59 C, 631.95 W"
    )
    assert not outcome.result.passed
