"""The hardware map (myriad.node.hardware): as the rdma role recorded it at bring-up and as
discovery finds it now, and the RoCE ports' GID tables."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from myriad.node.facts.declare import Probe, file, json_fact
from myriad.node.facts.probe import at, record

if TYPE_CHECKING:
    from myriad.node.facts.probe import Record

HARDWARE_RECORD_FILE = "/etc/myriad/hardware.json"


def hardware_map(root: str) -> Record:
    """The node's hardware map discovered now (myriad.node.hardware), as JSON text."""
    from myriad.node.hardware.discover import discover
    from myriad.node.hardware.sysfs import Sysfs

    return record(0, stdout=json.dumps(discover(Sysfs(at(root, "/sys"))).to_json()))


def roce_gids(root: str) -> Record:
    """Port 1's populated GIDs and their types on every Ethernet RDMA device, as JSON."""
    from myriad.node.hardware.gids import roce_gids as read_gids
    from myriad.node.hardware.sysfs import Sysfs

    return record(0, stdout=json.dumps(read_gids(Sysfs(at(root, "/sys")))))


HARDWARE_RECORD = json_fact(
    "hardware_record",
    file("hardware_record", HARDWARE_RECORD_FILE),
    "/etc/myriad/hardware.json",
    "the hardware map",
)
HARDWARE_MAP = json_fact(
    "hardware_map",
    Probe("hardware_map", lambda o: hardware_map(o.root)),
    "hardware discovery",
    "the hardware map",
)
# RoCE ports' GID tables (device -> [[index, gid, type], ...]).
ROCE_GIDS = json_fact(
    "roce_gids",
    Probe("roce_gids", lambda o: roce_gids(o.root)),
    "RoCE GID tables",
    "the GID tables",
)
