"""`myriad plan`: exit codes, JSON output, and the plan file written whole or not at all."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from myriad.cli import main

ROOT = Path(__file__).resolve().parents[1]
STARTER = ROOT / "inventories" / "starter-64" / "cluster.yaml"


def test_plan_prints_the_tables_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(STARTER)]) == 0
    out = capsys.readouterr().out
    for heading in ("Cluster starter-64", "Fabric", "Power and cost", "Compute", "Checkpoint"):
        assert heading in out
    assert "0 error(s)" in out


def test_plan_json_is_machine_readable(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(STARTER), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["plan"]["gpus"] == 64
    assert document["plan"]["fabric"]["leaves"] == 1
    assert all("location" in f for f in document["findings"])


def _floats(value: object) -> list[float]:
    if isinstance(value, float):
        return [value]
    if isinstance(value, dict):
        return [f for item in value.values() for f in _floats(item)]
    if isinstance(value, list):
        return [f for item in value for f in _floats(item)]
    return []


def test_plan_json_figures_are_rounded(capsys: pytest.CaptureFixture[str]) -> None:
    """Figures carry six significant digits, not the binary noise of their sums."""
    assert main(["plan", str(STARTER), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    # The eleven servers' sum in floating point is 85.19999999999999.
    assert document["plan"]["power"]["server_kw"] == 85.2
    noisy = [f for f in _floats(document) if len(f"{abs(f):e}".split("e")[0].rstrip("0")) > 7]
    assert noisy == []


def test_plan_out_writes_plan_json_and_nothing_else(tmp_path: Path) -> None:
    out = tmp_path / "plans" / "starter"
    assert main(["plan", str(STARTER), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["plan.json"]
    assert json.loads((out / "plan.json").read_text())["plan"]["cluster"] == "starter-64"


def test_invalid_spec_writes_nothing(tmp_path: Path) -> None:
    bad = ROOT / "tests" / "spec" / "bad" / "03-count-quoted.yaml"
    assert main(["plan", str(bad), "--out", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()


def test_a_lint_error_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "hot.yaml"
    spec.write_text(STARTER.read_text().replace("rack_kw: 25", "rack_kw: 8"))
    assert main(["plan", str(spec)]) == 1
    assert "rack-power" in capsys.readouterr().out


def test_the_console_script_runs_without_a_traceback(tmp_path: Path) -> None:
    bad = ROOT / "tests" / "spec" / "bad" / "21-two-documents.yaml"
    result = subprocess.run(
        [sys.executable, "-m", "myriad.cli", "plan", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "more than one YAML document" in result.stderr
    assert "Traceback" not in result.stderr


BAD = sorted((ROOT / "tests" / "spec" / "bad").glob("[0-9]*.yaml"))


@pytest.mark.parametrize("bad", BAD, ids=[path.name for path in BAD])
def test_every_bad_spec_exits_2_with_a_located_message_and_writes_nothing(
    bad: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["plan", str(bad), "--out", str(out)]) == 2
    assert not out.exists()
    err = capsys.readouterr().err
    assert f"{bad}:" in err and "Traceback" not in err


def test_user_text_is_printed_as_written_not_as_markup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # rich reads [..] as markup: '[/]' closes a style that was never opened (a crash after
    # plan.json is written), '[ocp]' reads as a style name and silently vanishes.
    text = STARTER.read_text()
    text = "\n".join(
        '  description: "[/] as written"' if line.startswith("  description:") else line
        for line in text.splitlines()
    )
    custom = (
        "catalog:\n  gpus:\n    H100[ocp][/]:\n      source: an H100 with an odd name [/]\n"
        "      form_factor: sxm\n      memory_gb: 80\n      board_power_w: 700\n"
        "      bf16_dense_tflops: 989\n      fp8_dense_tflops: 1979\n      nvlink_gbs: 900\n"
        "      nvlink_links: 18\n      pcie_gen: 5\n"
    )
    text = text.replace("model: H100-SXM5-80GB", "model: 'H100[ocp][/]'") + "\n" + custom
    spec = tmp_path / "odd.yaml"
    spec.write_text(text)
    code = main(["plan", str(spec)])
    out = capsys.readouterr().out
    assert code in (0, 1)
    assert "H100[ocp][/]" in out


def test_phase_lines_print_names_and_notes_as_text() -> None:
    import io

    from rich.console import Console

    from myriad.views.progress import Phases

    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, color_system=None, width=100)
    with Phases(console).phase("nodes of [ocp][/]") as notes:
        notes.append("spec at /tmp/[x]/cluster.yaml")
    text = buffer.getvalue()
    assert "nodes of [ocp][/]" in text and "/tmp/[x]/cluster.yaml" in text
