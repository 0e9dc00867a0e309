"""`myriad plan --cabling/--svg/--out`: a path that cannot be written is refused before anything is
planned or written (exit 2, one line naming the path and what would work), never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from myriad.cli import main

ROOT = Path(__file__).resolve().parents[1]
STARTER = ROOT / "inventories" / "starter-64" / "cluster.yaml"


def test_cabling_into_a_missing_folder_is_refused_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "no-such-folder" / "cables.csv"
    assert main(["plan", str(STARTER), "--cabling", str(target)]) == 2
    err = capsys.readouterr().err
    assert f"--cabling {target}: the folder {target.parent} does not exist" in err
    assert not target.parent.exists()


def test_svg_with_another_suffix_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "fabric.png"
    assert main(["plan", str(STARTER), "--svg", str(target)]) == 2
    err = capsys.readouterr().err
    assert "--svg writes SVG: name the file fabric.svg" in err
    assert not target.exists()


def test_one_bad_path_writes_no_other_file(tmp_path: Path) -> None:
    cabling, svg = tmp_path / "cables.csv", tmp_path / "x" / "f.svg"
    assert main(["plan", str(STARTER), "--cabling", str(cabling), "--svg", str(svg)]) == 2
    assert not cabling.exists()


def test_out_under_a_file_is_refused_without_a_traceback(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = subprocess.run(
        [sys.executable, "-m", "myriad.cli", "plan", str(STARTER), "--out", str(blocker / "plan")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"--out {blocker / 'plan'}: {blocker} is a file, not a folder" in result.stderr


def test_cabling_onto_a_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", str(STARTER), "--cabling", str(tmp_path)]) == 2
    assert f"--cabling {tmp_path}: is a folder; name a file" in capsys.readouterr().err


def test_without_a_workload_no_training_time_is_invented(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "cluster.yaml"
    text = STARTER.read_text()
    assert "\nworkload:" in text
    spec.write_text(text[: text.index("\nworkload:") + 1])
    assert main(["plan", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "add a workload: section" in out
    assert "days at" not in out
    assert main(["plan", str(STARTER)]) == 0
    assert "train 7B params on 2000B tokens" in capsys.readouterr().out
