"""Compare a node set's slurm.conf line with what `slurmd -C` finds on the node.

slurmctld marks a node INVALID (and drains it) when its slurm.conf line asks for more than
slurmd registers: fewer CPUs, fewer sockets x cores x threads, or less memory than configured
(Slurm 22.05, src/slurmctld/node_mgr.c validate_node_specs: "Low CPUs", "Low socket*core*thread
count", "Low RealMemory"). The usual cause is ThreadsPerCore=2 on a node whose SMT is off.

    {{ slurmd_c.stdout | slurm_node_shortfall(node_set) }}  -> [] or the reasons

`slurmd -C` prints one line such as (Debian 12, slurmd 22.05.8), then UpTime=:
    NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 \
        RealMemory=24105
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DOCUMENTATION = """
name: slurm_node_shortfall
short_description: What a slurm.conf node line asks for beyond what slurmd -C reports
positional: _input, node_set
options:
  _input:
    description: The output of C(slurmd -C) on the node.
    type: str
    required: true
  node_set:
    description: >-
      The node's entry of slurm_nodes (sockets, cores_per_socket, threads_per_core,
      real_memory, cpus).
    type: dict
    required: true
"""


def slurmd_hardware(output: str) -> dict[str, int]:
    """The numbers of `slurmd -C`'s NodeName line (Sockets = Boards x SocketsPerBoard)."""
    line = next((ln for ln in output.splitlines() if ln.startswith("NodeName=")), "")
    if not line:
        raise ValueError(f"slurmd -C printed no NodeName= line: {output!r}")
    fields = dict(word.split("=", 1) for word in line.split() if "=" in word)
    numbers = {key: int(value) for key, value in fields.items() if value.isdigit()}
    sockets = numbers.get("Sockets") or numbers.get("Boards", 1) * numbers["SocketsPerBoard"]
    return {
        "cpus": numbers["CPUs"],
        "sockets": sockets,
        "cores_per_socket": numbers["CoresPerSocket"],
        "threads_per_core": numbers["ThreadsPerCore"],
        "real_memory": numbers["RealMemory"],
    }


def slurm_node_shortfall(output: str, node_set: Mapping[str, Any]) -> list[str]:
    """Each way the configured node exceeds the reported one, in Slurm's terms."""
    found = slurmd_hardware(output)
    sockets = int(node_set["sockets"])
    cores = int(node_set["cores_per_socket"])
    threads = int(node_set.get("threads_per_core", 1))
    configured_threads = sockets * cores * threads
    reported_threads = found["sockets"] * found["cores_per_socket"] * found["threads_per_core"]
    cpus = int(node_set.get("cpus") or configured_threads)
    reasons = []
    if threads > found["threads_per_core"]:
        reasons.append(
            f"ThreadsPerCore={threads} but the node runs {found['threads_per_core']} thread(s) "
            "per core (SMT off in the firmware or the kernel)"
        )
    if configured_threads > reported_threads:
        reasons.append(
            f"Sockets*CoresPerSocket*ThreadsPerCore={configured_threads} but slurmd counts "
            f"{reported_threads}"
        )
    if cpus > found["cpus"]:
        reasons.append(f"CPUs={cpus} but slurmd counts {found['cpus']}")
    if int(node_set["real_memory"]) > found["real_memory"]:
        reasons.append(
            f"RealMemory={node_set['real_memory']} MiB but slurmd measures {found['real_memory']}"
        )
    return reasons


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self) -> dict[str, object]:
        return {"slurm_node_shortfall": slurm_node_shortfall}
