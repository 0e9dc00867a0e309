"""container_runtime's CDI choices, evaluated by Ansible from the role's own variables.

One generator: the toolkit's nvidia-cdi-refresh units from NVIDIA Container Toolkit 1.18.0 on
(NVIDIA, "Support for Container Device Interface"), Myriad's unit for an older pinned toolkit.
Docker's CDI feature in daemon.json wherever GPUs and CDI are on (opt-in from Docker 25.0,
default from 28.2.0).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROLE = Path(__file__).resolve().parents[2] / "roles" / "container_runtime"


def _evaluate(expressions: dict[str, str], work: Path, **variables: Any) -> dict[str, Any]:
    """Each named Jinja expression, with the role's defaults and vars/main.yml loaded."""
    tasks: list[dict[str, Any]] = [
        {
            "name": "Defaults",
            "ansible.builtin.include_vars": {"file": str(ROLE / "defaults/main.yml")},
        },
        {"name": "Vars", "ansible.builtin.include_vars": {"file": str(ROLE / "vars/main.yml")}},
        {
            "name": "Evaluate",
            "ansible.builtin.debug": {
                "msg": {name: f"{{{{ {expr} }}}}" for name, expr in expressions.items()}
            },
        },
    ]
    playbook = work / "play.yml"
    playbook.write_text(
        yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}])
    )
    (work / "extra.json").write_text(json.dumps(variables))
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            "localhost,",
            "--connection",
            "local",
            str(playbook),
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            "-e",
            f"@{work / 'extra.json'}",
        ],
        env={
            **os.environ,
            "ANSIBLE_STDOUT_CALLBACK": "json",
            "ANSIBLE_LOCAL_TEMP": str(work / "tmp"),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    report = json.loads(result.stdout)
    msg: dict[str, Any] = report["plays"][0]["tasks"][-1]["hosts"]["localhost"]["msg"]
    return msg


@pytest.mark.slow
@pytest.mark.parametrize(
    ("version", "builtin"),
    [("", True), ("1.18.0-1", True), ("1.18.2", True), ("1.17.8-1", False), ("1.16.2", False)],
)
def test_one_cdi_generator(version: str, builtin: bool, tmp_path: Path) -> None:
    found = _evaluate(
        {"builtin": "__container_runtime_cdi_refresh_builtin | bool"},
        tmp_path,
        container_runtime_nvidia_toolkit_version=version,
    )
    assert found["builtin"] is builtin


@pytest.mark.slow
@pytest.mark.parametrize(("gpus", "cdi", "feature"), [(True, True, True), (True, False, False)])
def test_docker_reads_cdi_specs_where_gpus_use_them(
    gpus: bool, cdi: bool, feature: bool, tmp_path: Path
) -> None:
    found = _evaluate(
        {"daemon": "__container_runtime_daemon_json"},
        tmp_path,
        container_runtime_nvidia_enabled=gpus,
        container_runtime_nvidia_cdi=cdi,
    )
    daemon = found["daemon"]
    assert (daemon.get("features") == {"cdi": True}) is feature, daemon
    assert daemon["runtimes"]["nvidia"]["path"]


@pytest.mark.slow
def test_no_gpus_no_cdi_feature(tmp_path: Path) -> None:
    daemon = _evaluate(
        {"daemon": "__container_runtime_daemon_json"},
        tmp_path,
        container_runtime_nvidia_enabled=False,
    )["daemon"]
    assert "features" not in daemon and "runtimes" not in daemon
