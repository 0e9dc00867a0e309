"""Every role scenario passes `molecule test`: converge, idempotence and a verify step that
asserts real state, in systemd containers built from the local node image.

Each run gets its own names: MYRIAD_MOLECULE_NODE (the prefix of every platform and network
name, tests/roles/test_molecule_names.py) holds the role and a fresh id, and Molecule's
state lives in the test's temporary folder, so two runs on one Docker daemon (two
checkouts, two CI jobs) never share a container, a network or a state file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted(
    (p.parent.parent.parent.name, p.parent.name)
    for p in ROOT.glob("roles/*/molecule/*/molecule.yml")
)
MOLECULE_TIMEOUT_S = 1800


def run_prefix(role: str) -> str:
    """Container and network name prefix for one run: role and a random id."""
    return f"molecule-{role.replace('_', '-')}-{uuid.uuid4().hex[:8]}"


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize(("role", "scenario"), SCENARIOS, ids=[f"{r}-{s}" for r, s in SCENARIOS])
def test_role_passes_molecule(
    role: str, scenario: str, docker_available: None, tmp_path: Path
) -> None:
    venv_bin = Path(sys.executable).parent
    env = {
        **os.environ,
        # Molecule runs ansible-playbook and ansible-config from PATH: the venv's.
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "MYRIAD_MOLECULE_NODE": run_prefix(role),
        "MOLECULE_EPHEMERAL_DIRECTORY": str(tmp_path / "molecule"),
        "ANSIBLE_NOCOLOR": "1",
        "PY_COLORS": "0",
    }
    result = subprocess.run(
        [str(venv_bin / "molecule"), "test", "--scenario-name", scenario],
        cwd=ROOT / "roles" / role,
        env=env,
        capture_output=True,
        text=True,
        timeout=MOLECULE_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, (
        f"molecule test failed for {role} ({scenario}, {env['MYRIAD_MOLECULE_NODE']}):\n"
        f"{result.stdout[-12000:]}\n{result.stderr[-4000:]}"
    )


def test_every_role_has_a_molecule_scenario() -> None:
    roles = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir())
    assert roles == sorted({role for role, scenario in SCENARIOS if scenario == "default"})


def test_run_prefixes_differ_between_runs() -> None:
    assert run_prefix("storage_net") != run_prefix("storage_net")
    assert run_prefix("storage_net").startswith("molecule-storage-net-")
