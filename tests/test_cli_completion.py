"""`myriad completion bash`, loaded into a real bash: commands, sub-verbs and each command's
own options complete; a spec file completes as a file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _complete(tmp_path: Path, line: str) -> list[str]:
    script = subprocess.run(
        [sys.executable, "-m", "myriad.cli", "completion", "bash"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    (tmp_path / "completion.bash").write_text(script)
    words = line.split(" ")
    probe = (
        f"source {tmp_path / 'completion.bash'}\n"
        f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
        "_myriad_complete\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
    )
    result = subprocess.run(
        ["bash", "-c", probe], capture_output=True, text=True, timeout=30, cwd=tmp_path, check=True
    )
    return result.stdout.split()


def test_commands_complete(tmp_path: Path) -> None:
    assert {"plan", "pipeline"} & set(_complete(tmp_path, "myriad pl")) == {"plan"}
    assert "catalog" in _complete(tmp_path, "myriad ca")


def test_sub_verbs_and_options_of_that_command(tmp_path: Path) -> None:
    assert _complete(tmp_path, "myriad catalog s") == ["show"]
    options = _complete(tmp_path, "myriad plan spec.yaml --")
    assert "--explain" in options and "--diff" in options
    assert "--verbose" not in options  # validate's, not plan's


def test_a_file_completes_as_a_file(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text("")
    assert _complete(tmp_path, "myriad plan clu") == ["cluster.yaml"]


def test_accept_and_its_options_complete(tmp_path: Path) -> None:
    assert "accept" in _complete(tmp_path, "myriad ac")
    options = _complete(tmp_path, "myriad accept spec.yaml --")
    assert {"--level", "--limit", "--nodes-from", "--resume", "--json", "--junit"} <= set(options)
