"""The node's hardware now against the map the rdma role recorded at bring-up.

A port that moved (another PCIe switch or GPU beside it), failed or was removed (gone from
the PCI tree), renumbered (the same PCI function under another RDMA name) or was swapped
(another GUID or model in the same slot) after the map was recorded breaks what was built
on it: NCCL's HCA list, the pinned names, the rails' addresses. Each difference is named
with its port; link state, rate and firmware are left to their own checks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# What identifies a port and where it sits; what may change without re-recording is not here.
PORT_KEYS = ("pci_id", "rdma_device", "guid", "switch", "gpus")
GPU_KEYS = ("pci_id", "switch")


def _by_place(items: Any, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, Mapping) and "bdf" in item:
            place = f"{item['bdf']} port {item['port']}" if "port" in item else str(item["bdf"])
            found[place] = {k: _plain(item.get(k)) for k in keys}
    return found


def _plain(value: Any) -> Any:
    # JSON gives lists where the record was written from tuples.
    return list(value) if isinstance(value, (list, tuple)) else value


def _label(values: Mapping[str, Any]) -> str:
    return str(values.get("rdma_device") or values.get("pci_id") or "?")


def differences(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    for kind, keys in (("gpus", GPU_KEYS), ("ports", PORT_KEYS)):
        before = _by_place(recorded.get(kind), keys)
        after = _by_place(now.get(kind), keys)
        noun = "GPU" if kind == "gpus" else "port"
        for place in sorted(before.keys() - after.keys()):
            problems.append(f"{noun} {_label(before[place])} at PCI {place} is gone")
        for place in sorted(after.keys() - before.keys()):
            problems.append(f"{noun} {_label(after[place])} at PCI {place} is new")
        for place in sorted(before.keys() & after.keys()):
            changed = [
                f"{key} {before[place][key]!r} -> {after[place][key]!r}"
                for key in keys
                if before[place][key] != after[place][key]
            ]
            if changed:
                problems.append(
                    f"{noun} {_label(before[place])} at PCI {place}: {', '.join(changed)}"
                )
    return problems
