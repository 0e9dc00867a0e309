"""ansible-lint (production profile) and yamllint are clean over roles/ and playbooks/."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGETS = [p for p in (ROOT / "roles", ROOT / "playbooks") if p.is_dir()]


def _run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    venv_bin = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        [str(venv_bin / tool), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def test_yamllint_is_clean() -> None:
    result = _run("yamllint", "--strict", ".config", *(str(t.relative_to(ROOT)) for t in TARGETS))
    assert result.returncode == 0, result.stdout + result.stderr


def test_ansible_lint_production_profile_is_clean() -> None:
    result = _run(
        "ansible-lint",
        "--profile",
        "production",
        "--offline",
        *(str(t.relative_to(ROOT)) for t in TARGETS),
    )
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-4000:]
