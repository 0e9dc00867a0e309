"""The infiniband role's OpenSM configuration, run for real against a simulated subnet.

What this exercises: the role's own templates (opensm.conf.j2, partitions.conf.j2),
rendered by Ansible's templating engine with the role's defaults, the variables
`myriad render` writes for the SM node (network.infiniband: opensm on gpu01, P_Keys
0x7fff and 0x8001) and the role's vars; then the real `opensm` (Debian's) started with that
configuration on the starter fabric in ibsim. It reaches MASTER at the
role's priority, and every HCA port's P_Key table (`smpquery pkeys`) holds both
partitions as full members, so the partitions file was loaded; `saquery` shows the SA
answering with a planned node description. What it does not exercise: the role's tasks
(packages, the systemd unit, binding by port GUID), which the role's Molecule scenario
covers. Two limits of ibsim 0.10 shape the test: OpenSM is attached where ibsim attaches
clients by default, the leaf switch's port 0 (an SM like the switches' embedded one),
because attached to an HCA (SIM_HOST) it enters MASTER but never finishes its first sweep;
and its SA answers PKeyTableRecord queries with SA_ERR_REQ_INVALID, so the P_Keys are read
with SMPs rather than `saquery PKTR`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from ibsim_fabric import Simulator, available, planned
from myriad.cli import main
from myriad.plan.ibnet import ibsim_net, links_from_cables

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "infiniband"
STARTER = ROOT / "inventories" / "starter-64" / "cluster.yaml"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        (not available() or not shutil.which("opensm")) and not os.environ.get("CI"),
        reason="needs ibsim-utils, opensm and infiniband-diags (scripts/bootstrap installs them)",
    ),
]


def _role_files(tmp_path: Path) -> tuple[Path, Path]:
    """opensm.conf and partitions.conf as the role renders them for gpu01."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template
    from ansible.vars.manager import VariableManager

    spec = tmp_path / "cluster.yaml"
    spec.write_text(
        STARTER.read_text().replace(
            "subnet_manager: switch",
            "subnet_manager: opensm\n    sm_nodes: [gpu01]\n"
            '    partition_keys: ["0x7fff", "0x8001"]',
        )
    )
    assert main(["render", str(spec), "--out", str(tmp_path / "inventory")]) == 0
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(tmp_path / "inventory/hosts.yml")])
    host_vars = VariableManager(loader=loader, inventory=inventory).get_vars(
        host=inventory.get_host("gpu01")
    )
    assert host_vars["infiniband_opensm_enabled"] is True
    conf, partitions = tmp_path / "opensm.conf", tmp_path / "partitions.conf"
    variables: dict[str, Any] = {
        **yaml.safe_load((ROLE / "defaults/main.yml").read_text()),
        **{k: v for k, v in host_vars.items() if k.startswith("infiniband_")},
        **yaml.safe_load((ROLE / "vars/main.yml").read_text()),
        # Where the files land here, and no GUID to bind: ibsim chooses the port.
        "__infiniband_partitions_conf": str(partitions),
        "__infiniband_bind_guids": [],
    }
    templar = Templar(loader=loader, variables=variables)
    for target, template in ((conf, "opensm.conf.j2"), (partitions, "partitions.conf.j2")):
        source = (ROLE / "templates" / template).read_text()
        target.write_text(str(templar.template(trust_as_template(source))) + "\n")
    return conf, partitions


def test_the_roles_opensm_reaches_master_and_loads_the_partitions(tmp_path: Path) -> None:
    conf, partitions = _role_files(tmp_path)
    assert "sm_priority 14" in conf.read_text()
    assert "0x8001" in partitions.read_text()
    cables, ports = planned(STARTER)
    net = tmp_path / "starter.net"
    net.write_text(ibsim_net(links_from_cables(cables), ports))
    with Simulator(net) as sim:
        env = {
            **sim.env,
            "OSM_CACHE_DIR": str(tmp_path),
            "OSM_TMP_DIR": str(tmp_path),
        }
        log = tmp_path / "opensm.log"
        opensm = subprocess.Popen(
            ["ibsim-run", "opensm", "-F", str(conf), "-f", str(log)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            _check_master_and_pkeys(sim, env, log)
        finally:
            opensm.terminate()
            opensm.wait(timeout=20)


def _query(argv: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(
        ["ibsim-run", *argv], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    return done.stdout


def _hca_lids(sim: Simulator) -> list[int]:
    """LIDs of the HCAs, from ibnetdiscover's switch port lines (0 until the SM assigns)."""
    text = sim.run(["ibnetdiscover"], check=False).stdout
    return [int(lid) for lid in re.findall(r'# "\S+ mlx5_\d+" lid (\d+)', text)]


def _check_master_and_pkeys(sim: Simulator, env: dict[str, str], log: Path) -> None:
    deadline = time.monotonic() + 60
    lids: list[int] = []
    sminfo = ""
    while time.monotonic() < deadline:
        sminfo = _query(["sminfo"], env)
        if "SMINFO_MASTER" in sminfo:
            lids = _hca_lids(sim)
            if len(lids) == 64 and all(lids):
                break
        time.sleep(0.5)
    assert "SMINFO_MASTER" in sminfo and "priority 14" in sminfo, sminfo
    assert "Entering MASTER state" in log.read_text()
    assert len(set(lids)) == 64 and all(lids), lids
    # The SA answers (ibsim returns the first record only: it has no RMPP).
    assert re.search(r"NodeDescription\.+gpu\d\d mlx5_\d", _query(["saquery", "NR"], env))
    for lid in lids:
        table = ""
        for _ in range(40):  # the SM writes P_Key tables in the sweep after it becomes master
            table = _query(["smpquery", "pkeys", str(lid), "1"], env)
            if "0x8001" in table:
                break
            time.sleep(0.25)
        keys = re.findall(r"0x[0-9a-f]{4}", table.split("\n")[0])
        assert "0xffff" in keys and "0x8001" in keys, (lid, table)
