"""The twin's stand-in `nvidia-smi -r` behaves as nvidia-smi(1) says the real one does: it
refuses, exit 255, while a process holds a GPU, and otherwise resets every GPU, clearing the
fault state a reset clears. The twin test (tests/integration/test_health_local.py) relies on
it, so its refusal is proved here, without containers."""

from __future__ import annotations

import subprocess
from pathlib import Path

from health_stubs import ecc_off_xml, gpu_xml, nvidia_smi_script


def _stub(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    xml, fault = tmp_path / "nvidia-smi.xml", tmp_path / "fault.xml"
    processes, calls = tmp_path / "gpu-processes", tmp_path / "calls"
    xml.write_text(gpu_xml(2))
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        nvidia_smi_script(
            str(xml), calls_file=str(calls), fault_file=str(fault), processes_file=str(processes)
        )
    )
    smi.chmod(0o755)
    fault.write_text(gpu_xml(1))
    return smi, fault, processes, calls


def _run(smi: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(smi), *args], capture_output=True, text=True, check=False)


def test_a_reset_is_refused_while_a_process_holds_a_gpu(tmp_path: Path) -> None:
    smi, fault, processes, calls = _stub(tmp_path)
    processes.write_text("4242\n")
    apps = _run(smi, "--query-compute-apps=pid", "--format=csv,noheader")
    assert (apps.returncode, apps.stdout) == (0, "4242\n")
    refused = _run(smi, "-r")
    assert refused.returncode == 255
    assert refused.stderr.startswith(
        "The following GPUs could not be reset:\n  GPU 00000000:18:00.0: In use by another client\n"
    ), refused.stderr
    assert "Please first kill all processes using this device" in refused.stderr
    assert fault.exists()  # nothing was reset
    assert calls.read_text().splitlines() == [
        "--query-compute-apps=pid --format=csv,noheader",
        "-r",
    ]


def test_a_reset_of_idle_gpus_resets_each_and_clears_the_fault(tmp_path: Path) -> None:
    smi, fault, _, calls = _stub(tmp_path)
    assert _run(smi, "-q", "-x").stdout.count("<gpu id=") == 1  # the fault: one GPU shown
    apps = _run(smi, "--query-compute-apps=pid", "--format=csv,noheader")
    assert (apps.returncode, apps.stdout) == (0, "")
    done = _run(smi, "-r")
    assert done.returncode == 0, done.stderr
    # gpu_xml(2): buses 0x18 + index, so 18 and 19.
    assert done.stdout.splitlines() == [
        "GPU 00000000:18:00.0 was successfully reset.",
        "GPU 00000000:19:00.0 was successfully reset.",
    ]
    assert not fault.exists()
    assert _run(smi, "-q", "-x").stdout.count("<gpu id=") == 2
    assert calls.read_text().splitlines()[-1] == "-r"


def test_ecc_off_until_a_reset_on_one_gpu_only() -> None:
    text = ecc_off_xml(8, 3)
    assert text.count("<current_ecc>Disabled</current_ecc>") == 1
    assert text.count("<pending_ecc>Enabled</pending_ecc>") == 8
    # GPU 3 is at bus 0x18 + 3 = 0x1B.
    gpu3 = text[text.index('<gpu id="00000000:1B:00.0">') :]
    assert gpu3.index("Disabled") < gpu3.index("</gpu>")
