"""The cluster-wide tables live in one file, `cluster_tables.yml`, merged into no host.

Ansible copies group_vars/all into every host's variables; a list of every node there made
`ansible-inventory --list` on roce-10k 410 MB and never finish on h100-100k (issue 18). These
tests hold the structure: no table in any group or host variables, the tables file beside
hosts.yml, per-host variables that do not grow with the node count, and every playbook run
of the runner given the file as extra vars. The speed is `benchmarks/inventory_scale.py`'s.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from myriad.errors import OpsInputError, RunnerError
from myriad.ops.roll import read_variables
from myriad.plan.pipeline import plan_loaded
from myriad.render.inventory import Inventory, build_inventory
from myriad.render.tables import TABLE_VARIABLES, tables_file
from myriad.render.writer import write_inventory
from myriad.runner import run_playbook
from myriad.spec import load_spec_text

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ("local", "starter-64", "roce-10k", "aws-dev")


def render(name: str, **replace: str) -> Inventory:
    text = (ROOT / "inventories" / name / "cluster.yaml").read_text()
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    result = plan_loaded(load_spec_text(text))
    assert result.plan is not None
    return build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)


def merged(inventory: Inventory, host: str) -> dict[str, Any]:
    """A host's inventory variables as Ansible merges them (all, its groups by name, host)."""
    values = dict(inventory.group_vars.get("all", {}))
    for group, members in sorted(inventory.groups.items()):
        if host in members:
            values.update(inventory.group_vars.get(group, {}))
    values.update(inventory.host_vars[host])
    return values


@pytest.mark.parametrize("example", EXAMPLES)
def test_no_group_or_host_variables_hold_a_table(example: str) -> None:
    inventory = render(example)
    for scope, values in [*inventory.group_vars.items(), *inventory.host_vars.items()]:
        assert not set(values) & set(TABLE_VARIABLES), scope
    assert set(TABLE_VARIABLES) <= set(inventory.tables)
    assert inventory.tables["myriad_cluster_tables"] is True
    assert inventory.group_vars["all"]["myriad_cluster_tables_file"] == "cluster_tables.yml"


def test_roce_10k_tables_have_an_entry_per_node() -> None:
    tables = render("roce-10k").tables
    # 3 controllers + 4 login + 1,250 GPU nodes, each with its /etc/hosts line.
    assert len(tables["common_hosts"]) == 1257
    assert tables["common_hosts"][-1] == {"name": "gpu1250", "address": "10.0.4.242"}
    # One node set and one partition for the one compute pool, naming all 1,250 nodes.
    [node_set] = tables["slurm_nodes"]
    [partition] = tables["slurm_partitions"]
    assert len(node_set["names"]) == len(partition["nodes"]) == 1250


def test_per_host_variables_do_not_grow_with_the_cluster() -> None:
    """roce-10k with 1,250 and with 250 GPU nodes: the same variables per host.

    250 nodes are two islands, so both fabrics have three tiers (nccl_ib_qps_per_connection)
    and route each rail at its leaves (a gateway per rail address). What may differ, by hand:
    the GPU nodes' names and addresses in the host's own variables (a digit more in gpu0001
    than gpu001: 1 byte each). Before the tables moved out, each host carried common_hosts
    alone: 1,257 entries of about 45 bytes, 57 KB.
    """
    big, small = render("roce-10k"), render("roce-10k", **{"count: 1250": "count: 250"})

    def largest(inventory: Inventory) -> int:
        return max(
            len(json.dumps(merged(inventory, host), separators=(",", ":")))
            for host in inventory.host_vars
        )

    assert (len(big.host_vars), len(small.host_vars)) == (1257, 257)
    assert largest(big) <= largest(small) + 32
    # all.yml's settings (about 1.1 KB), the GPU pool's port lists (about 1 KB) and the
    # node's own addresses and leaves (about 0.5 KB): well under 4 KiB.
    assert largest(big) < 4096


def test_the_writer_puts_the_tables_beside_hosts_yml(tmp_path: Path) -> None:
    inventory = render("local")
    out = write_inventory(inventory, tmp_path / "inventory")
    everything = yaml.safe_load((out / "group_vars" / "all.yml").read_text())
    assert not set(everything) & set(TABLE_VARIABLES)
    written = yaml.safe_load((out / "cluster_tables.yml").read_text())
    assert written == dict(inventory.tables)
    assert written["common_hosts"][0] == {"name": "ctl01", "address": "172.31.77.10"}
    assert tables_file(out / "hosts.yml") == out / "cluster_tables.yml"
    assert tables_file(out) == out / "cluster_tables.yml"
    (out / "cluster_tables.yml").unlink()
    assert tables_file(out / "hosts.yml") is None


class _Captured:
    """ansible_runner.run replaced: records its arguments, reports a successful run."""

    def __init__(self) -> None:
        self.calls: list[Mapping[str, Any]] = []

    def __call__(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        return type("R", (), {"status": "successful", "rc": 0, "stats": {}})()


def _captured(monkeypatch: pytest.MonkeyPatch) -> _Captured:
    import ansible_runner

    captured = _Captured()
    monkeypatch.setattr(ansible_runner, "run", captured)
    return captured


def test_every_run_against_a_rendered_inventory_gets_the_tables_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    captured = _captured(monkeypatch)
    out = write_inventory(render("local"), tmp_path / "space in path" / "inventory")
    site = ROOT / "playbooks" / "site.yml"
    run_playbook(site, out / "hosts.yml", tmp_path, hosts=4, extravars={"myriad_serial": 1})
    run_playbook(site, out / "hosts.yml", tmp_path, hosts=4, check=True)
    tables = f"'@{out / 'cluster_tables.yml'}'"
    assert [call["cmdline"] for call in captured.calls] == [
        f"-e {tables}",
        f"-e {tables} --check --diff",
    ]
    assert captured.calls[0]["extravars"] == {"myriad_serial": 1}


def test_an_inventory_without_tables_gets_no_extra_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    captured = _captured(monkeypatch)
    run_playbook(tmp_path / "site.yml", tmp_path / "hosts.yml", tmp_path, hosts=1)
    assert captured.calls[0]["cmdline"] is None


def test_extra_vars_may_not_replace_a_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    captured = _captured(monkeypatch)
    with pytest.raises(RunnerError, match="slurm_nodes: cluster-wide tables come only from"):
        run_playbook(
            tmp_path / "site.yml",
            tmp_path / "hosts.yml",
            tmp_path,
            hosts=1,
            extravars={"slurm_nodes": []},
        )
    assert captured.calls == []


def test_a_roll_vars_file_may_not_name_a_table(tmp_path: Path) -> None:
    path = tmp_path / "vars.yml"
    path.write_text("slurm_accounting_enabled: true\ncommon_hosts: []\n")
    with pytest.raises(OpsInputError) as raised:
        read_variables(path)
    assert str(raised.value).startswith(f"{path}:2: common_hosts is a cluster-wide table")
    path.write_text("slurm_accounting_enabled: true\n")
    assert read_variables(path) == {"slurm_accounting_enabled": True}


def _keys(data: Any) -> list[str]:
    if isinstance(data, dict):
        return [str(k) for k in data] + [k for v in data.values() for k in _keys(v)]
    if isinstance(data, list):
        return [k for item in data for k in _keys(item)]
    return []


def test_no_play_or_task_sets_a_table() -> None:
    """Extra vars would win over a set_fact or a play's vars anyway; a setter would be dead
    code that looks like it works. Role defaults stay: they are the roles' interface."""
    files = [*(ROOT / "playbooks").rglob("*.yml")]
    for role in (ROOT / "roles").iterdir():
        for folder in ("tasks", "handlers", "vars"):
            files += (role / folder).rglob("*.yml")
    assert len(files) > 40
    setters = [
        f"{path.relative_to(ROOT)}: {key}"
        for path in files
        for document in yaml.safe_load_all(path.read_text())
        for key in _keys(document)
        if key in TABLE_VARIABLES
    ]
    assert setters == []


def test_a_relative_inventory_path_gives_an_absolute_tables_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    captured = _captured(monkeypatch)
    write_inventory(render("local"), tmp_path / "inventory")
    monkeypatch.chdir(tmp_path)
    run_playbook(Path("site.yml"), Path("inventory/hosts.yml"), tmp_path, hosts=4)
    assert captured.calls[0]["cmdline"] == f"-e @{tmp_path / 'inventory' / 'cluster_tables.yml'}"
