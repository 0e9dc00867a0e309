"""`myriad plan --cabling/--svg` and `myriad validate --fabric --from FILE`, end to end
through the CLI: files written, exit statuses, located errors for unreadable input."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from myriad.cli import main

ROOT = Path(__file__).resolve().parents[2]
STARTER = ROOT / "inventories" / "starter-64" / "cluster.yaml"
MISWIRED = ROOT / "tests" / "fabric" / "starter-64-miswired.ibnetdiscover"


def test_plan_cabling_writes_the_csv_and_json_lists_the_cables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cabling.csv"
    assert main(["plan", str(STARTER), "--json", "--cabling", str(out)]) == 0
    document = json.loads(capsys.readouterr().out)
    totals = document["cabling"]["totals"]
    assert (totals["node_links"], totals["leaf_spine_links"], totals["spine_core_links"]) == (
        64,
        0,
        0,
    )
    # Every run leaves the server rows for the network row, past copper's 3 m: 64 optics,
    # a transceiver a host port and one a twin-port leaf cage (64 + 32).
    assert (totals["by_media"], totals["transceivers"]) == ({"optics": 64}, 96)
    assert len(document["cabling"]["cables"]) == 64
    assert document["cabling"]["cables"][63]["b_port"] == 64
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 64 and rows[63]["a_device"] == "gpu08" and rows[63]["a_hca"] == "mlx5_7"


def test_validate_fabric_from_a_miswired_capture_fails_with_the_fixes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(
        ["validate", str(STARTER), "--fabric", "--from", str(MISWIRED), "--speed-cap", "HDR"]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "60 of 64 cables as planned" in out
    assert "fix: swap the cables in is00-leaf001 port 5 and is00-leaf001 port 9" in out


def test_validate_fabric_json_is_a_validation_report(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["validate", str(STARTER), "--fabric", "--from", str(MISWIRED), "--speed-cap", "HDR"]
    assert main([*args, "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["counts"]["fail"] == 4
    assert {r["detail"] for r in document["results"]} == {
        "unexpected-device",
        "swapped",
        "missing-link",
        "wrong-width",
    }


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        (None, [], "No such file or directory"),
        ('Switch 8 "S-1" # "a"\nnot ibnetdiscover\n', [], "line 2: neither a node"),
        ("", ["--speed-cap", "FAST"], "--speed-cap FAST: one of SDR"),
    ],
)
def test_unreadable_fabric_input_is_a_located_error(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str | None,
    args: list[str],
    message: str,
) -> None:
    source = tmp_path / "discovered.txt"
    if content is not None:
        source.write_text(content or MISWIRED.read_text())
    code = main(["validate", str(STARTER), "--fabric", "--from", str(source), *args])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    if content:
        assert str(source) in err


def test_from_without_fabric_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(STARTER), "--from", str(MISWIRED)]) == 2
    assert "go with --fabric" in capsys.readouterr().err
