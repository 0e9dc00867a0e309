"""Planning needs only the core distribution: pydantic, PyYAML, Jinja2 and rich.

Ansible, ansible-runner, Mitogen and Pulumi are extras (`myriad-cluster[bringup]`, `[aws]`),
so `pip install myriad-cluster` gives a planner without a 600 MB environment. Each planning
command runs here with those packages made unimportable, as on such an install."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# psutil comes with the bringup extra: only stopping a run needs it.
HEAVY = (
    "ansible", "ansible_runner", "ansible_mitogen", "mitogen", "pulumi", "pulumi_aws", "psutil",
)  # fmt: skip
# Run before the command: a finder that refuses the heavy packages like a missing install.
BLOCK = f"""
import sys
class _Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {HEAVY!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _Missing())
import runpy
sys.argv = ["myriad", *sys.argv[1:]]
runpy.run_module("myriad.cli", run_name="__main__")
"""
STARTER = str(ROOT / "inventories" / "starter-64" / "cluster.yaml")


@pytest.mark.parametrize(
    "args",
    [
        ["plan", STARTER, "--json"],
        ["schema"],
        ["catalog", "list"],
        ["render", STARTER, "--out", "{tmp}/inventory"],
        ["init", "{tmp}/lab/cluster.yaml", "--yes"],
    ],
    ids=["plan", "schema", "catalog", "render", "init"],
)
def test_a_planning_command_runs_without_the_extras(args: list[str], tmp_path: Path) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    result = subprocess.run(
        [sys.executable, "-c", BLOCK, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MYRIAD_STATE_DIR": str(tmp_path / "state")},
    )
    assert result.returncode in (0, 1), result.stderr
    assert "ModuleNotFoundError" not in result.stderr


def test_the_core_distribution_leaves_them_to_extras() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "myriad-cluster"
    core = " ".join(project["dependencies"])
    for heavy in ("ansible", "pulumi", "mitogen", "psutil"):
        assert heavy not in core, heavy
    extras = project["optional-dependencies"]
    assert any("ansible-runner" in d for d in extras["bringup"])
    assert any(d.startswith("psutil>=") for d in extras["bringup"])
    assert any(d.startswith("pulumi>=") for d in extras["aws"])
