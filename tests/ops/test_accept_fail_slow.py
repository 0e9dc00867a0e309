"""Issue #28's fail-slow signals in the acceptance verdict, judged on real captures
(tests/samples/nvidia-smi-q-x, -q-text, sysfs-infiniband): a PCIe link below its maximum,
clocks held by a slowdown reason, IB error counters that grew during the run. Each expected
line is read off the capture by hand (line numbers or files given)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from accept_fakes import Controller, gpu_sample
from accept_stubs import SAMPLES, dcgm_output
from health_stubs import h100_spec
from myriad.node.parsers.nvidia_smi import parse_nvidia_smi_text, parse_nvidia_smi_xml
from myriad.ops.accept import carry_out
from myriad.ops.accept_cluster import accept
from myriad.ops.accept_plan import (
    COUNTERS_AFTER,
    COUNTERS_BEFORE,
    Step,
    counter_growth,
    counters_step,
    gpu_sample_problems,
    judge,
    judge_counters,
    node_steps,
    read_counters,
    waves,
)
from myriad.ops.accept_state import AcceptRun, summary_rows
from myriad.plan.acceptance import ProfileFigures
from myriad.plan.slow_nodes import AcceptNode, AcceptTopology
from myriad.spec.accept import Accept

A5000 = SAMPLES / "nvidia-smi-q-x" / "rtx-a5000-x2_v13_drv590.44.01.xml"
T4 = SAMPLES / "nvidia-smi-q-x" / "tesla-t4_v11_drv515.105.01.xml"
H100_TEXT = SAMPLES / "nvidia-smi-q-text" / "h100-80gb-hbm3-x8_drv535.161.08_nvidia-smi-q.txt"
SAMPLE = Step("gpu sample", ("n1",), (), None)
GPU = ProfileFigures("gpu", 8, 1, None, None, None, None)  # no NVLink, no RDMA figure


def test_an_idle_gpus_lowered_gen_is_not_judged() -> None:
    # Both A5000s read current_link_gen 1 of max_link_gen 4 with gpu_idle Active (lines
    # 85-86, 110): the power saving of an idle GPU, not a link that trained slow.
    assert gpu_sample_problems(parse_nvidia_smi_xml(A5000.read_text())) == []


def test_a_busy_gpus_gen_below_its_maximum_fails() -> None:
    # The same capture with GPU 0's gpu_idle Not Active: the GPU is busy and its link still
    # at gen 1 of 4. GPU 1 stays idle, so its gen 1 is not judged.
    text = A5000.read_text().replace(
        "<clocks_event_reason_gpu_idle>Active<", "<clocks_event_reason_gpu_idle>Not Active<", 1
    )
    assert gpu_sample_problems(parse_nvidia_smi_xml(text)) == ["GPU 0 PCIe gen 1 of 4 under load"]


def test_gen_is_not_judged_without_the_reasons_to_say_the_gpu_was_busy() -> None:
    text = A5000.read_text()
    start = text.index("<clocks_event_reasons>")
    end = text.index("</clocks_event_reasons>") + len("</clocks_event_reasons>")
    assert gpu_sample_problems(parse_nvidia_smi_xml(text[:start] + text[end:])) == []


def test_a_narrow_link_fails_busy_or_idle() -> None:
    # The T4 reads current_link_width 8x of max_link_width 16x (lines 67-68 of the
    # capture), gen 3 of 3, every throttle reason Not Active.
    assert gpu_sample_problems(parse_nvidia_smi_xml(T4.read_text())) == ["GPU 0 PCIe x8 of x16"]


def test_clocks_held_by_a_power_brake_fail_each_gpu_with_the_reasons() -> None:
    # Each of the eight H100s prints HW Slowdown Active and under it HW Power Brake Slowdown
    # Active (GPU 0: lines 87, 89), PCIe gen 5 of 5 at x16 of x16.
    problems = gpu_sample_problems(parse_nvidia_smi_text(H100_TEXT.read_text()))
    assert problems == [
        f"GPU {i} clocks held by hw_slowdown, hw_power_brake_slowdown (expected none)"
        for i in range(8)
    ]


def test_a_power_cap_or_a_clock_setting_is_not_a_fault() -> None:
    text = T4.read_text()
    for reason in ("sw_power_cap", "applications_clocks_setting", "sync_boost"):
        text = text.replace(
            f"<clocks_throttle_reason_{reason}>Not Active<",
            f"<clocks_throttle_reason_{reason}>Active<",
        )
    # Still only the T4's narrow link, as above.
    assert gpu_sample_problems(parse_nvidia_smi_xml(text)) == ["GPU 0 PCIe x8 of x16"]


def test_the_thermal_slowdowns_fail() -> None:
    text = T4.read_text()
    for reason in ("hw_thermal_slowdown", "sw_thermal_slowdown"):
        text = text.replace(
            f"<clocks_throttle_reason_{reason}>Not Active<",
            f"<clocks_throttle_reason_{reason}>Active<",
        )
    assert gpu_sample_problems(parse_nvidia_smi_xml(text)) == [
        "GPU 0 PCIe x8 of x16",
        "GPU 0 clocks held by hw_thermal_slowdown, sw_thermal_slowdown (expected none)",
    ]


def test_the_verdict_lists_every_signal_in_the_drain_reason() -> None:
    result = judge(SAMPLE, H100_TEXT.read_text())
    # judge reads the XML only: the text capture is no reading, never a pass.
    assert not result.passed and "could not read" in str(result.reason)
    text = T4.read_text().replace(
        "<clocks_throttle_reason_hw_slowdown>Not Active<",
        "<clocks_throttle_reason_hw_slowdown>Active<",
    )
    result = judge(SAMPLE, text)
    assert not result.passed
    assert result.reason == (
        "myriad-accept: gpu sample failed: GPU 0 PCIe x8 of x16, "
        "GPU 0 clocks held by hw_slowdown (expected none)"
    )


# --- IB port counters read before and after the tests ----------------------------------

SYSFS = SAMPLES / "sysfs-infiniband" / "node_exporter-mlx4_0-i40iw0"


def _grep_counters(root: Path, replace: dict[str, str] | None = None) -> str:
    """What `counters_step`'s `grep -rH .` prints on a node, from the real grep run over the
    sysfs capture, its folder put where sysfs has it."""
    done = subprocess.run(
        ["grep", "-rH", ".", "mlx4_0/ports/1/counters/", "mlx4_0/ports/2/counters/"],
        cwd=root, capture_output=True, text=True, check=True,
    )  # fmt: skip
    text = "".join(f"/sys/class/infiniband/{line}\n" for line in done.stdout.splitlines())
    for old, new in (replace or {}).items():
        text = text.replace(old, new)
    return text


def test_the_counters_read_as_sysfs_gives_them() -> None:
    counters = read_counters(_grep_counters(SYSFS))
    # mlx4_0 port 1: port_xmit_discards 5, link_downed 0 (the capture's files).
    assert counters["mlx4_0"][1]["port_xmit_discards"] == 5
    assert counters["mlx4_0"][1]["link_downed"] == 0
    assert "port_rcv_errors" not in counters["mlx4_0"][2]  # port 2 has no such file


def test_no_growth_passes_and_growth_names_the_counter_and_delta() -> None:
    before = read_counters(_grep_counters(SYSFS))
    assert counter_growth(before, before) == []
    after = read_counters(
        _grep_counters(
            SYSFS,
            {
                "1/counters/link_downed:0": "1/counters/link_downed:1",
                "1/counters/port_rcv_errors:0": "1/counters/port_rcv_errors:10",
                "1/counters/link_error_recovery:0": "1/counters/link_error_recovery:3",
            },
        )
    )
    # Health's per-run limits (spec/health.py): link_downed +0, port_rcv_errors +10,
    # link_error_recovery +0. link_downed 0 -> 1 is +1 > 0; port_rcv_errors 0 -> 10 is +10,
    # not above its +10; link_error_recovery 0 -> 3 is +3 > 0.
    assert counter_growth(before, after) == [
        "mlx4_0 port 1 link_downed 0 -> 1 (+1, at most +0 expected)",
        "mlx4_0 port 1 link_error_recovery 0 -> 3 (+3, at most +0 expected)",
    ]


def test_a_counter_read_only_once_is_named() -> None:
    before = read_counters(_grep_counters(SYSFS))
    text = "".join(
        line + "\n"
        for line in _grep_counters(SYSFS).splitlines()
        if not line.endswith("/1/counters/link_downed:0")
    )
    assert counter_growth(before, read_counters(text)) == [
        "mlx4_0 port 1 link_downed not read both before and after"
    ]


def test_judging_the_after_reading() -> None:
    step = Step(COUNTERS_AFTER, ("n1",), (), None)
    before = _grep_counters(SYSFS)
    assert judge_counters(step, before, before).passed
    grown = judge_counters(step, before, _grep_counters(SYSFS, {"link_downed:0": "link_downed:2"}))
    # Both ports' link_downed 0 -> 2.
    assert grown.reason == (
        "myriad-accept: ib counters after failed: "
        "mlx4_0 port 1 link_downed 0 -> 2 (+2, at most +0 expected), "
        "mlx4_0 port 2 link_downed 0 -> 2 (+2, at most +0 expected)"
    )
    nothing = judge_counters(step, None, before)
    assert not nothing.passed and "no reading from before" in str(nothing.reason)
    empty = judge_counters(step, before, "grep: /sys/class/infiniband/mlx5_0: No such file\n")
    assert not empty.passed and "could not read" in str(empty.reason)


def test_quick_reads_counters_first_and_last_and_carry_out_judges_growth(
    tmp_path: Path,
) -> None:
    topo = AcceptTopology((AcceptNode("n1", "gpu", 0, "0/a", ("0/a",)),), rails=1)
    steps = node_steps("quick", ["n1"], topo, {"gpu": GPU}, Accept(), "r", (), ("mlx5_0",))
    assert [s.test for s in steps] == [
        COUNTERS_BEFORE,
        "dcgm diag",
        "gpu sample",
        COUNTERS_AFTER,
    ]
    shell, flag, script = steps[0].argv[-3:]
    assert (shell, flag) == ("sh", "-c") and script.endswith("grep -rH . mlx5_0/ports/*/counters/")
    before = _grep_counters(SYSFS)
    after = _grep_counters(SYSFS, {"1/counters/link_downed:0": "1/counters/link_downed:1"})
    # The two readings run the same command: the first call answers before, the second after.
    counters = [before, after]
    answers = {"dcgm diag": dcgm_output(), "gpu sample": gpu_sample()}

    class Fake:
        def run(self, argv: Sequence[str]) -> tuple[int, str]:
            if argv[0] == "scontrol":
                return 0, ""
            if argv == steps[0].argv:
                return 0, counters.pop(0)
            return 0, answers[next(s.test for s in steps if s.argv == tuple(argv))]

        def run_lanes(
            self, lanes: Sequence[Sequence[Sequence[str]]]
        ) -> list[list[tuple[int, str]]]:
            return [[self.run(argv) for argv in lane] for lane in lanes]

        def start(self, argv: Sequence[str]) -> object:
            raise AssertionError("no server side in this run")

        def reap(self, handle: object) -> None:
            raise AssertionError("no server side in this run")

        def drain(self, node: str, reason: str) -> None:
            self.drained = (node, reason)

        def resume(self, node: str) -> None:
            raise AssertionError("not a re-test")

    fake = Fake()
    run = AcceptRun.create(tmp_path, "quick", ["n1"], "r")
    result = carry_out(fake, run, waves(steps), duration_s=60)
    assert fake.drained == (
        "n1",
        "myriad-accept: ib counters after failed: "
        "mlx4_0 port 1 link_downed 0 -> 1 (+1, at most +0 expected)",
    )
    assert result.drained == ("n1",)
    assert AcceptRun.load(run.run_dir).data["counters_before"] == {"n1": before}


def _run_counters_script(
    tmp_path: Path, config_text: str | None, devices: Sequence[str]
) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "node.json"
    if config_text is not None:
        config.write_text(config_text)
    step = counters_step(COUNTERS_BEFORE, "n1", "r", devices, config=str(config))
    return subprocess.run(
        list(step.argv[-3:]), capture_output=True, text=True, timeout=30, check=False
    )


def test_the_counters_script_reads_under_node_healths_root(tmp_path: Path) -> None:
    """The step's shell for real (sh, python3, grep) over the sysfs capture, put where node
    health's document says the IB tree is, as the twin's nodes have it."""
    done = _run_counters_script(
        tmp_path, json.dumps({"policy": {"infiniband": str(SYSFS)}}), ["mlx4_0"]
    )
    assert done.returncode == 0, done.stderr
    counters = read_counters(done.stdout)
    assert counters == read_counters(_grep_counters(SYSFS))
    assert counters["mlx4_0"][1]["port_xmit_discards"] == 5


def test_without_node_health_the_counters_are_read_from_sysfs(tmp_path: Path) -> None:
    # No document (or one without the key): /sys/class/infiniband, which this machine
    # lacks, so the step fails and reads as no reading, never a pass.
    for text in (None, json.dumps({"policy": {}}), "not json"):
        done = _run_counters_script(tmp_path, text, ["mlx5_0"])
        assert done.returncode != 0
        assert "/sys/class/infiniband" in done.stderr or not Path("/sys/class/infiniband").exists()
        assert not judge(Step(COUNTERS_BEFORE, ("n1",), (), None), done.stdout).passed


class CountingController(Controller):
    """The fake controller, answering the counters step with the sysfs capture's counters
    (the same at every reading: no growth)."""

    def run(self, argv: Sequence[str]) -> tuple[int, str]:
        if any("grep -rH ." in a for a in argv):
            self.steps.append(tuple(argv))
            return 0, _grep_counters(SYSFS)
        return super().run(argv)


@pytest.mark.parametrize("level", ["quick", "full"])
def test_on_infiniband_the_counters_come_first_and_last(
    level: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # health_stubs.h100_spec: two compute nodes of 8 H100 and two ConnectX-7 on InfiniBand.
    monkeypatch.setenv("MYRIAD_STATE_DIR", str(tmp_path / "state"))
    spec = tmp_path / "cluster.yaml"
    spec.write_text(yaml.safe_dump(h100_spec("ibacc", "10.77.0.0/24"), sort_keys=False))
    ctl = CountingController()
    outcome = accept(spec, level, slurm=ctl.slurm(), commands=ctl, settle=lambda: None)
    assert outcome.result.passed, outcome.result.verdicts
    sruns = [s for s in ctl.steps if s[0] == "srun"]
    # Each node's first step reads its counters, and so does its last (the fake runs a
    # wave's lanes one after another; the controller runs them at once).
    for node in ("node01", "node02"):
        mine = [s for s in sruns if node in s[2].split("=", 1)[1].split(",")]
        assert "grep -rH ." in mine[0][-1] and "grep -rH ." in mine[-1][-1]
        assert sum("grep -rH ." in s[-1] for s in mine) == 2
    assert sruns[0][-1].endswith("grep -rH . mlx5_0/ports/*/counters/ mlx5_1/ports/*/counters/")
    if level == "full":  # the second readings after the search's last group test
        assert all("grep -rH ." in s[-1] for s in sruns[-2:])
        assert any("all_reduce_perf" in s and "--nodes=2" in s for s in sruns[:-2])
    rows = [r for r in summary_rows(outcome.run) if r["test"].startswith("ib counters")]
    assert len(rows) == 4 and all(r["passed"] for r in rows)
