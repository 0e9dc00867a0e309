"""Which port OpenSM binds when the inventory names none (infiniband_opensm_bind: first).

Run with Ansible on this machine: the role's ports step against a stand-in
/sys/class/infiniband laid out as the kernel lays it out (ports/N/{link_layer,phys_state,
gids/0}, attribute formats as in tests/samples/sysfs-infiniband). The first port in glob
order used to be bound even with no cable in it, leaving the fabric without an SM.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def port(root: Path, device: str, guid: str, phys_state: str) -> None:
    base = root / "class/infiniband" / device / "ports/1"
    (base / "gids").mkdir(parents=True)
    (base / "link_layer").write_text("InfiniBand\n")
    (base / "phys_state").write_text(phys_state + "\n")
    (base / "gids/0").write_text(f"fe80:0000:0000:0000:{guid}\n")


def run(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    tasks = [
        {"ansible.builtin.include_role": {"name": "infiniband", "tasks_from": "ports"}},
        {"ansible.builtin.debug": {"msg": "BOUND {{ __infiniband_bind_guids | to_json }}"}},
    ]
    (tmp_path / "play.yml").write_text(
        yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}])
    )
    (tmp_path / "vars.json").write_text(
        json.dumps(
            {
                "__infiniband_sysfs": str(tmp_path / "sys"),
                "ansible_python_interpreter": sys.executable,
            }
        )
    )
    return subprocess.run(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", "localhost,", "-c",
         "local", "-e", f"@{tmp_path / 'vars.json'}", str(tmp_path / "play.yml")],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "ANSIBLE_ROLES_PATH": str(ROOT / "roles"), "ANSIBLE_NOCOLOR": "1"},
    )  # fmt: skip


def test_a_port_with_its_link_up_is_bound_before_a_dead_one(tmp_path: Path) -> None:
    port(tmp_path / "sys", "mlx5_0", "0002:c903:0002:fce9", "2: Polling")
    port(tmp_path / "sys", "mlx5_1", "0002:c903:0002:fb06", "5: LinkUp")
    result = run(tmp_path)
    assert result.returncode == 0, result.stdout[-3000:]
    assert 'BOUND [\\"0x0002c9030002fb06\\"]' in result.stdout, result.stdout[-2000:]
    assert "WARNING" not in result.stdout


def test_several_ports_up_warn_that_other_rails_may_have_no_sm(tmp_path: Path) -> None:
    port(tmp_path / "sys", "mlx5_0", "0002:c903:0002:fce9", "5: LinkUp")
    port(tmp_path / "sys", "mlx5_1", "0002:c903:0002:fb06", "5: LinkUp")
    result = run(tmp_path)
    assert result.returncode == 0, result.stdout[-3000:]
    assert 'BOUND [\\"0x0002c9030002fce9\\"]' in result.stdout
    assert "has 2 InfiniBand ports up and OpenSM binds only 0x0002c9030002fce9" in result.stdout
