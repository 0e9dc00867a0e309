"""Issue #28's fail-slow signals in the acceptance verdict, judged on real captures
(tests/samples/nvidia-smi-q-x, -q-text): a PCIe link below its maximum, clocks held by a
slowdown reason. Each expected line is read off the capture by hand (line numbers given)."""

from __future__ import annotations

from accept_stubs import SAMPLES
from myriad.node.parsers.nvidia_smi import parse_nvidia_smi_text, parse_nvidia_smi_xml
from myriad.ops.accept_plan import Step, gpu_sample_problems, judge

A5000 = SAMPLES / "nvidia-smi-q-x" / "rtx-a5000-x2_v13_drv590.44.01.xml"
T4 = SAMPLES / "nvidia-smi-q-x" / "tesla-t4_v11_drv515.105.01.xml"
H100_TEXT = SAMPLES / "nvidia-smi-q-text" / "h100-80gb-hbm3-x8_drv535.161.08_nvidia-smi-q.txt"
SAMPLE = Step("gpu sample", ("n1",), (), None)


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
