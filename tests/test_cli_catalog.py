"""`myriad catalog list|show`: the hardware Myriad knows, without reading hardware.yaml; a spec's
own `catalog:` entries beside the shipped ones with `--spec`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from myriad.cli import main

ROOT = Path(__file__).resolve().parents[1]
STARTER = ROOT / "inventories" / "starter-64" / "cluster.yaml"


def test_list_names_every_kind_and_entry(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "list"]) == 0
    out = capsys.readouterr().out
    for heading in ("gpus", "nics", "switches", "servers", "driver_branches"):
        assert f"{heading} (" in out
    for name in ("H100-SXM5-80GB", "ConnectX-7", "QM9700", "DGX-H200", "HGX-H100-8GPU"):
        assert name in out


def test_list_of_one_kind_shows_its_figures(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "list", "gpus"]) == 0
    out = capsys.readouterr().out
    assert "nics (" not in out
    row = next(line for line in out.splitlines() if line.startswith("H100-SXM5-80GB "))
    # The datasheet's figures: 80 GB, 700 W, 989 dense BF16 TFLOPS.
    assert row.split()[1:4] == ["sxm", "80", "700"]
    assert "989" in row


def test_piped_output_never_cuts_a_value() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "myriad.cli", "catalog", "list", "servers"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "40", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    assert "A800-8GPU-4NIC" in result.stdout
    assert "…" not in result.stdout


def test_show_prints_every_figure_and_its_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "show", "ConnectX-7"]) == 0
    out = capsys.readouterr().out
    assert "ConnectX-7 (nics)" in out
    assert "speed_gbps: 400" in out
    assert "source: " in out


def test_show_json_has_a_format_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "show", "QM9700", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["format"] == 1
    assert document["kind"] == "switches"
    assert document["entry"]["ports"] == 64


def test_an_unknown_name_suggests_the_likely_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "show", "HGX-H200-8GPU"]) == 2
    err = capsys.readouterr().err
    assert "no catalog entry 'HGX-H200-8GPU'" in err
    # Every kind is searched: the H200 GPU itself is a likely meaning too.
    assert "did you mean 'DGX-H200' or 'H200-SXM-141GB' or 'HGX-H100-8GPU'?" in err


def _readme_catalog_example() -> str:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("```yaml\ncatalog:\n") + len("```yaml\n")
    return readme[start : readme.index("```", start)]


def test_the_readmes_own_entry_is_listed_with_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    own = tmp_path / "cluster.yaml"
    own.write_text(STARTER.read_text() + _readme_catalog_example())
    assert main(["catalog", "list", "switches", "--spec", str(own)]) == 0
    assert "LAB-SW-64" in capsys.readouterr().out
    assert main(["catalog", "list", "switches"]) == 0
    assert "LAB-SW-64" not in capsys.readouterr().out


def test_an_unknown_kind_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "list", "widgets"]) == 2
    assert "no catalog kind 'widgets': the kinds are gpus, nics" in capsys.readouterr().err


def test_cables_are_listed_with_kind_speed_and_lengths(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["catalog", "list", "cables"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("MCP4Y10-Nxxx "))
    # NVIDIA LinkX MCP4Y10: switch-to-switch NDR DAC, 0.5, 1, 1.5 and 2 m.
    assert row.split()[1:6] == ["dac", "400", "switch-switch", "MCP4Y10-Nxxx", "500,1000,1500,2000"]


def test_racks_are_listed_with_trays_domain_and_power(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "list", "racks"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("GB300-NVL72 "))
    # NVIDIA's Enterprise RA (NVL72 AI Factory): 18 trays of 4 GPUs, 9 NVSwitch trays, 72
    # GPUs at 130 TB/s, up to 142 kW.
    assert row.split()[1:6] == ["18", "9", "72", "130", "142"]
