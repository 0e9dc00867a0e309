"""The pre-commit configuration is valid, runs the project's own tools (the venv's, as the lint
tests do) and its whitespace hooks catch what they are named for."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
CONFIG = ROOT / ".pre-commit-config.yaml"
HOOKS = [hook for repo in yaml.safe_load(CONFIG.read_text())["repos"] for hook in repo["hooks"]]


def pre_commit(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VENV_BIN / "pre-commit"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PRE_COMMIT_HOME": str(home)},
    )


def test_the_configuration_is_valid(tmp_path: Path) -> None:
    done = pre_commit("validate-config", str(CONFIG), cwd=ROOT, home=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_tool_hook_runs_the_venvs_tool_and_the_linters_are_all_there() -> None:
    tools = [hook["entry"].split()[0] for hook in HOOKS if hook["language"] == "system"]
    assert all(tool.startswith(".venv/bin/") for tool in tools), tools
    assert all((ROOT / tool).is_file() for tool in tools), tools
    assert {Path(tool).name for tool in tools} == {"ruff", "yamllint", "ansible-lint"}


def test_the_whitespace_hooks_catch_a_trailing_blank_and_a_missing_newline(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(CONFIG, repo / CONFIG.name)
    (repo / "clean.txt").write_text("fine\n")
    (repo / "trailing.txt").write_text("a blank at the end \nfine\n")
    (repo / "unended.txt").write_text("no newline at the end")
    for argv in (["init", "-q"], ["add", "."]):
        subprocess.run(["git", *argv], cwd=repo, check=True, capture_output=True)
    home = tmp_path / "cache"
    done = pre_commit("run", "--all-files", "trailing-whitespace", cwd=repo, home=home)
    assert done.returncode == 1
    assert "trailing.txt:1:" in done.stdout and "clean.txt" not in done.stdout
    done = pre_commit("run", "--all-files", "end-of-file", cwd=repo, home=home)
    assert done.returncode == 1
    assert "unended.txt" in done.stdout and "trailing.txt" not in done.stdout
