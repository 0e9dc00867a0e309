"""The roce role's rail files as Ubuntu's netplan and Debian's networkd read them.

A RoCE rail whose cable is dead must not hold up boot: systemd-networkd-wait-online waits
for every link that is "required for online" (systemd.network(5), RequiredForOnline=, default
yes), so slurmd would start only after its timeout. netplan's `optional: true` renders
RequiredForOnline=no (netplan's YAML reference, "optional"). The files are rendered with the
role's own templates and variables through Ansible, then given to Debian's real `netplan
generate` (netplan.io, installed by scripts/bootstrap).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles/roce"
NETPLAN = shutil.which("netplan")
# rail0 behind a routed leaf (a /24 of its rail's /20, the leaf .1), rail1 one stretched subnet.
NICS = [
    {
        "netdev": "rail0",
        "device": "mlx5_0",
        "address": "10.64.0.11/24",
        "gateway": "10.64.0.1",
        "rail_network": "10.64.0.0/20",
    },
    {"netdev": "rail1", "device": "mlx5_3", "address": "10.64.16.11/20"},
]

pytestmark = pytest.mark.slow


def render(tmp_path: Path) -> tuple[str, str]:
    """(netplan file, rail0's networkd file) as the role writes them."""
    tasks = [
        {"ansible.builtin.include_vars": str(ROLE / "defaults/main.yml")},
        {"ansible.builtin.include_vars": str(ROLE / "vars/main.yml")},
        {
            "ansible.builtin.template": {
                "src": str(ROLE / "templates/netplan.yaml.j2"),
                "dest": str(tmp_path / "60-myriad-rails.yaml"),
                "mode": "0600",
            }
        },
        {
            "ansible.builtin.template": {
                "src": str(ROLE / "templates/networkd/rail.network.j2"),
                "dest": str(tmp_path / "60-myriad-rail0.network"),
                "mode": "0644",
            },
            "vars": {"__roce_rail": "{{ __roce_rails[0] }}"},
        },
    ]
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    (tmp_path / "vars.json").write_text(
        json.dumps({"roce_nics": NICS, "ansible_python_interpreter": sys.executable})
    )
    result = subprocess.run(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", "localhost,", "-c",
         "local", "-e", f"@{tmp_path / 'vars.json'}", str(tmp_path / "play.yml")],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "ANSIBLE_NOCOLOR": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:]
    return (
        (tmp_path / "60-myriad-rails.yaml").read_text(),
        (tmp_path / "60-myriad-rail0.network").read_text(),
    )


def test_a_dead_rail_does_not_hold_up_boot_under_networkd(tmp_path: Path) -> None:
    _, network = render(tmp_path)
    assert "[Link]\nMTUBytes=9000\nRequiredForOnline=no\n" in network


def test_a_routed_leaf_is_the_rails_gateway_under_networkd(tmp_path: Path) -> None:
    _, network = render(tmp_path)
    routes = [block for block in network.split("\n\n") if "[Route]" in block]
    assert [block[block.index("[Route]") :] for block in routes] == [
        "[Route]\nDestination=10.64.0.0/24\nPreferredSource=10.64.0.11\nTable=100",
        "[Route]\nDestination=10.64.0.0/20\nGateway=10.64.0.1\nPreferredSource=10.64.0.11"
        "\nTable=100",
        "[Route]\nDestination=10.64.0.0/20\nGateway=10.64.0.1\nPreferredSource=10.64.0.11",
    ]
    assert "[RoutingPolicyRule]\nFrom=10.64.0.11/32\nTable=100\nPriority=100\n" in network


@pytest.mark.skipif(NETPLAN is None, reason="netplan.io is not installed (scripts/bootstrap)")
def test_real_netplan_renders_the_rails_optional(tmp_path: Path) -> None:
    netplan_file, _ = render(tmp_path)
    assert yaml.safe_load(netplan_file)["network"]["ethernets"]["rail0"]["optional"] is True
    root = tmp_path / "root"
    (root / "etc/netplan").mkdir(parents=True)
    target = root / "etc/netplan/60-myriad-rails.yaml"
    target.write_text(netplan_file)
    target.chmod(0o600)
    assert NETPLAN is not None
    result = subprocess.run(
        [NETPLAN, "generate", "--root-dir", str(root)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    generated = {
        rail: (root / f"run/systemd/network/10-netplan-{rail}.network").read_text()
        for rail in ("rail0", "rail1")
    }
    for text in generated.values():
        assert "RequiredForOnline=no" in text, text
        assert "ConfigureWithoutCarrier=yes" in text
    # rail0's leaf: the rail's /20 through 10.64.0.1 in table 100 and in the main table.
    routes = sorted(
        block.strip() for block in generated["rail0"].split("\n\n") if block.startswith("[Route]")
    )
    assert routes == [
        "[Route]\nDestination=10.64.0.0/20\nGateway=10.64.0.1\nPreferredSource=10.64.0.11",
        "[Route]\nDestination=10.64.0.0/20\nGateway=10.64.0.1\nPreferredSource=10.64.0.11"
        "\nTable=100",
        "[Route]\nDestination=10.64.0.0/24\nPreferredSource=10.64.0.11\nScope=link\nTable=100",
    ], generated["rail0"]
    # rail1, one stretched subnet: no gateway.
    assert "Gateway=" not in generated["rail1"]
