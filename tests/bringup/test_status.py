"""`myriad status`: a result the CLI prints as a table or, with --json, as a document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from myriad import JSON_FORMAT
from myriad.bringup.flow import cluster_state
from myriad.bringup.verbs import status
from myriad.cli import main

ROOT = Path(__file__).resolve().parents[2]
STARTER = ROOT / "inventories" / "starter-64" / "cluster.yaml"


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MYRIAD_STATE_DIR", str(tmp_path))
    root = cluster_state("starter-64").root
    (root / "inventory" / "host_vars").mkdir(parents=True)
    for host in ("gpu01", "gpu02"):
        (root / "inventory" / "host_vars" / f"{host}.json").write_text("{}")
    return root


def test_nodes_and_the_last_bring_up(state: Path) -> None:
    (state / "status.json").write_text(
        json.dumps(
            {
                "last_bringup": {
                    "status": "failed",
                    "failed_hosts": ["gpu02"],
                    "finished_at": "2026-12-03T10:00:00Z",
                    "seconds": 42,
                    "run_dir": "/runs/x",
                }
            }
        )
    )
    result = status(STARTER)
    assert [(n.name, n.last_bringup) for n in result.nodes] == [
        ("gpu01", "ok"),
        ("gpu02", "failed"),
    ]
    assert result.summary.startswith("last bring-up: failed at 2026-12-03T10:00:00Z in 42 s")


def test_status_json(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", str(STARTER), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["format"] == JSON_FORMAT
    assert document["cluster"] == "starter-64"
    assert [n["name"] for n in document["nodes"]] == ["gpu01", "gpu02"]
    assert document["nodes"][0] == {
        "name": "gpu01",
        "state": "-",
        "address": "-",
        "last_bringup": "-",
    }
    assert document["summary"] == "no bring-up recorded yet"


def test_status_table(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", str(STARTER)]) == 0
    out = capsys.readouterr().out
    assert "Cluster starter-64" in out and "gpu02" in out
    assert "no bring-up recorded yet" in out
