"""site.yml's reboot play runs where it must do nothing: a node converging itself.

In image mode each node runs site.yml against itself (connection local) from an inventory
of its own, which has no controller group. The play must pass there without rebooting; its
reboots themselves run on the twin (tests/integration/test_health_local.py). This runs the
play for real with ansible-playbook on this machine, connection local, and only reads.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
PLAY = "Reboot the compute nodes a layer left waiting, a batch at a time"


@pytest.mark.slow
def test_the_reboot_play_passes_on_a_node_converging_itself(tmp_path: Path) -> None:
    plays = yaml.safe_load((ROOT / "playbooks" / "site.yml").read_text())
    (reboot,) = [play for play in plays if play.get("name") == PLAY]
    playbook = tmp_path / "reboot.yml"
    playbook.write_text(yaml.safe_dump([{**reboot, "become": False}], sort_keys=False))
    # A node's own image-mode inventory: itself, in compute, no controller (render/seeds.py).
    inventory = {
        "all": {
            "hosts": {
                "node01": {
                    "ansible_connection": "local",
                    "ansible_python_interpreter": sys.executable,
                }
            },
            "vars": {"myriad_orchestrator": "slurm", "myriad_reboot": "when-needed"},
            "children": {"compute": {"hosts": {"node01": None}}},
        }
    }
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    done = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(tmp_path / "hosts.yml"), str(playbook)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"ANSIBLE_NOCOLOR": "1", "PATH": f"{ANSIBLE_PLAYBOOK.parent}:/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "node01                     : ok=1    changed=0    unreachable=0    failed=0" in (
        done.stdout
    ), done.stdout[-2000:]
