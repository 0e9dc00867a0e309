"""Writing an inventory as a directory, whole or not at all.

The tree is built in a temporary sibling directory and swapped in with two renames, so a
reader (or an interrupted run) sees the old inventory or the new one, never a mix.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from myriad.render.inventory import Inventory
from myriad.render.tables import TABLES_FILE

# libyaml's emitter when PyYAML was built with it: 12,500 host files in about a second.
_Base: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_Base):  # type: ignore[misc, valid-type]
    """No anchors and aliases: a reader of host_vars should see every value where it is."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


HEADER = "# Written by `myriad render` from the cluster spec; edits are overwritten.\n"


def _dump(data: Any) -> str:
    return HEADER + yaml.dump(
        data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100
    )


def _hosts_document(inventory: Inventory) -> dict[str, Any]:
    children = {
        group: {"hosts": dict.fromkeys(hosts)} for group, hosts in inventory.groups.items() if hosts
    }
    return {"all": {"children": children}}


def _write(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def write_inventory(inventory: Inventory, out: Path) -> Path:
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.new-", dir=out.parent))
    try:
        _write(staging / "hosts.yml", _dump(_hosts_document(inventory)))
        _write_vars(staging / "group_vars", inventory.group_vars, ".yml", _dump)
        # JSON (which Ansible reads like YAML) for the one file per host: PyYAML's
        # representer would spend seconds on 12,500 small files.
        _write_vars(staging / "host_vars", inventory.host_vars, ".json", _dump_json)
        if inventory.tables:
            # Not in group_vars: Ansible would copy them into every host's variables. Playbook
            # runs load this file as extra vars (render.tables). JSON, which is YAML too, and
            # without a comment: Ansible then reads it with its JSON parser, for h100-100k's
            # 0.5 MB 0.9 s instead of 3.4 s of its YAML loader on every playbook run.
            _write(staging / TABLES_FILE, _dump_json(dict(inventory.tables)))
        for relative, text in inventory.files.items():
            (staging / relative).parent.mkdir(parents=True, exist_ok=True)
            _write(staging / relative, text)
        os.chmod(staging, 0o755)
        _swap_in(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


def _dump_json(data: Any) -> str:
    return json.dumps(data, indent=2) + "\n"


def _write_vars(
    folder: Path,
    variables: Mapping[str, Mapping[str, Any]],
    suffix: str,
    dump: Callable[[Any], str],
) -> None:
    folder.mkdir()
    for name, values in variables.items():
        if values:
            _write(folder / f"{name}{suffix}", dump(dict(values)))


def _swap_in(staging: Path, out: Path) -> None:
    if not out.exists():
        os.rename(staging, out)
        return
    retired = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    os.rmdir(retired)
    os.rename(out, retired)
    try:
        os.rename(staging, out)
    except BaseException:
        os.rename(retired, out)
        raise
    shutil.rmtree(retired, ignore_errors=True)
