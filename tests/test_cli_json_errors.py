"""With `--json`, a command that fails still answers in JSON on stdout: a program reading it
gets the problems with their places, never an empty stdout and a traceback. The human text
stays on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from myriad import JSON_FORMAT
from myriad.cli import main

ROOT = Path(__file__).resolve().parents[1]
BAD = ROOT / "tests" / "spec" / "bad"


def test_an_invalid_spec_gives_a_json_error_document(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(BAD / "02-misspelt-field.yaml"), "--json"]) == 2
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["format"] == JSON_FORMAT
    error = document["error"]
    assert error["exit_code"] == 2
    assert error["kind"] == "spec"
    missing, problem = error["problems"]
    assert missing["path"] == "profiles.gpu-node.memory_gib"
    assert problem["line"] == 11 and problem["column"] == 5
    assert problem["path"] == "profiles.gpu-node.memory_gb"
    assert problem["hint"] == "did you mean 'memory_gib'?"
    assert "memory_gb" in captured.err


def test_another_error_gives_its_message(capsys: pytest.CaptureFixture[str]) -> None:
    starter = ROOT / "inventories" / "starter-64" / "cluster.yaml"
    assert main(["catalog", "show", "NO-SUCH", "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error == {
        "kind": "BadArguments",
        "exit_code": 2,
        "message": "no catalog entry 'NO-SUCH': `myriad catalog list` shows every entry",
    }
    assert main(["plan", str(starter), "--json"]) in (0, 1)
    assert json.loads(capsys.readouterr().out)["format"] == JSON_FORMAT


def test_without_json_stdout_stays_empty(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(BAD / "02-misspelt-field.yaml")]) == 2
    assert capsys.readouterr().out == ""


def test_render_json_says_what_was_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    starter = ROOT / "inventories" / "starter-64" / "cluster.yaml"
    assert main(["render", str(starter), "--out", str(tmp_path / "inv"), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    # 2 controllers, 1 login, 8 GPU nodes.
    assert (document["format"], document["cluster"], document["hosts"]) == (
        JSON_FORMAT,
        "starter-64",
        11,
    )
    assert Path(document["path"]) == tmp_path / "inv"
