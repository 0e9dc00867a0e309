"""A node's seed: everything it needs to run the site play against itself.

In image mode a node converges itself (`myriad.node.converge`). Its seed is a small
folder, made here from the same inventory push mode uses, so a node's variables cannot differ
between the modes: an inventory of this one node (the groups it is in with their variables,
its own host variables, connection local), the cluster-wide tables, its health document, the
monitoring files where it runs the server, the munge key. Pure: bytes in, files (path →
bytes) out; the caller writes the archive (`seed_archive`) and ships it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Mapping
from typing import Any

import yaml

from myriad.render.inventory import CONNECTION_VARS, Inventory
from myriad.render.tables import TABLES_FILE

# Where the seed lives on the node; the image's systemd unit waits for SEED_DIR/seed.json.
SEED_DIR = "/var/lib/myriad/seed"
MUNGE_KEY = "munge.key"


def seed_inventory(inventory: Inventory, node: str) -> dict[str, Any]:
    """hosts.yml of one node: Ansible merges its groups' variables as it would in push mode."""
    host_vars = {k: v for k, v in inventory.host_vars[node].items() if k not in CONNECTION_VARS}
    host_vars.update(ansible_connection="local", ansible_python_interpreter="/usr/bin/python3")
    children: dict[str, Any] = {}
    for group, members in inventory.groups.items():
        if node in members:
            children[group] = {"hosts": {node: None}}
            if inventory.group_vars.get(group):
                children[group]["vars"] = dict(inventory.group_vars[group])
    return {
        "all": {
            "vars": dict(inventory.group_vars.get("all", {})),
            "hosts": {node: host_vars},
            "children": children,
        }
    }


def seed_files(
    inventory: Inventory,
    node: str,
    *,
    tables: Mapping[str, Any] | bytes,
    health_document: bytes | None = None,
    munge_key: bytes | None = None,
) -> dict[str, bytes]:
    """The seed's files by path relative to SEED_DIR, `seed.json` (node, digest) included.
    `tables`: the inventory's cluster tables, or their JSON already made (once for every
    node of a big cluster)."""
    document = seed_inventory(inventory, node)
    if munge_key is not None:
        # The slurm role installs the key from here: a node converging itself cannot read
        # the key host.
        document["all"]["hosts"][node]["slurm_munge_key_file"] = f"{SEED_DIR}/{MUNGE_KEY}"
    files: dict[str, bytes] = {"inventory/hosts.yml": _yaml(document)}
    if tables:
        # JSON, as the inventory writes it: YAML to Ansible, and quick at 12,500 nodes.
        files[f"inventory/{TABLES_FILE}"] = (
            tables if isinstance(tables, bytes) else json.dumps(dict(tables)).encode()
        )
    if node in inventory.groups.get("monitoring_server", ()):
        for relative, text in inventory.files.items():
            if relative.startswith("monitoring/"):
                files[f"inventory/{relative}"] = text.encode()
    if health_document is not None:
        files[f"health/{node}.json"] = health_document
    if munge_key is not None:
        files[MUNGE_KEY] = munge_key
    files["seed.json"] = json.dumps(
        {"cluster": inventory.cluster, "node": node, "digest": seed_digest(files)}, indent=2
    ).encode()
    return files


def seed_digest(files: Mapping[str, bytes]) -> str:
    """Names a seed's content: the node's result carries it, so it is never read for another."""
    digest = hashlib.sha256()
    for relative in sorted(files):
        if relative == "seed.json":
            continue
        content = files[relative]
        digest.update(f"{relative}\0{len(content)}\0".encode())
        digest.update(content)
    return digest.hexdigest()


def seed_archive(files: Mapping[str, bytes]) -> bytes:
    """The seed as a gzip'd tar (fixed owners, modes and times: the same seed, the same bytes);
    the munge key and the folder holding it readable by root only."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        folders = sorted({p.rsplit("/", 1)[0] for p in files if "/" in p})
        for folder in [".", *folders]:
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o700 if folder == "." else 0o755
            archive.addfile(info)
        for relative in sorted(files):
            info = tarfile.TarInfo(relative)
            info.size = len(files[relative])
            info.mode = 0o400 if relative == MUNGE_KEY else 0o644
            archive.addfile(info, io.BytesIO(files[relative]))
    return gzip.compress(buffer.getvalue(), compresslevel=6, mtime=0)


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def _yaml(data: Any) -> bytes:
    text: str = yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False)
    return text.encode()
