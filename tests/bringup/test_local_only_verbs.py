"""`up` and `down` run only the local container cluster; on any other provider each says what
does its job there, and changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from myriad.cli import main

ROOT = Path(__file__).resolve().parents[2]
BAREMETAL = ROOT / "inventories" / "starter-64" / "cluster.yaml"
AWS = ROOT / "inventories" / "aws-dev" / "cluster.yaml"


@pytest.mark.parametrize("spec", [BAREMETAL, AWS], ids=["baremetal", "aws"])
def test_down_points_to_pulumi_destroy(spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["down", str(spec), "--yes"]) == 1
    err = capsys.readouterr().err
    assert "`myriad down` removes the local container cluster" in err
    assert "pulumi destroy" in err
    assert "pulumi up" not in err


def test_up_points_to_pulumi_up_and_bringup(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["up", str(BAREMETAL)]) == 1
    err = capsys.readouterr().err
    assert "create the machines with `pulumi up`, then run `myriad bringup`" in err
