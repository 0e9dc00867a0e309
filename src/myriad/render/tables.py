"""The cluster-wide tables: role variables whose size grows with the node count.

Ansible merges group_vars/all into every host's variables, so a list of every node there is
copied into each of the cluster's hosts whenever the inventory is read: on 12,519 hosts,
`ansible-inventory --list` never finishes. These tables are written once, beside the
inventory, as `cluster_tables.yml`, and every playbook run gets that file as extra vars
(`-e @<inventory>/cluster_tables.yml`, which `myriad.runner.run_playbook` adds). The roles
keep their variables: only where the values come from moves.

Extra vars beat every other source, so nothing else may set these names (a roll's --vars is
refused, the runner refuses them as extra vars); `site.yml` stops a run that has the
inventory's `myriad_cluster_tables_file` but not the file's `myriad_cluster_tables`.
"""

from __future__ import annotations

from pathlib import Path

# The role variables that hold one entry per node (or per node set of every pool).
TABLE_VARIABLES = (
    "common_hosts",
    "slurm_nodes",
    "slurm_partitions",
    "slurm_topology_switches",
    "slurm_topology_blocks",
)
TABLES_FILE = "cluster_tables.yml"
# In the tables file: the run has loaded it.
LOADED_MARKER = "myriad_cluster_tables"
# In group_vars/all: the inventory keeps its tables in this file beside hosts.yml.
FILE_MARKER = "myriad_cluster_tables_file"


def tables_file(inventory: Path) -> Path | None:
    """The tables file of an inventory (its folder, or its hosts.yml), when it has one."""
    folder = inventory if inventory.is_dir() else inventory.parent
    path = folder / TABLES_FILE
    return path if path.is_file() else None
