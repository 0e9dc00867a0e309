"""The slurm role's check of a node's slurm.conf line against what `slurmd -C` finds.

The sample is what Debian 12's slurmd (22.05.8-4+deb12u3, unpacked with dpkg-deb and run as
`slurmd -C`) printed on a 2-core VM without SMT; the H100 samples are that line with an HGX
node's numbers, as `slurmd -C` prints them with SMT on and off.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

PLUGIN = Path(__file__).resolve().parents[2] / "roles/slurm/filter_plugins/slurm_node_check.py"


def _plugin() -> ModuleType:
    spec = importlib.util.spec_from_file_location("slurm_node_check", PLUGIN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


check = _plugin()

DEBIAN_VM = (
    "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 "
    "RealMemory=24105\nUpTime=0-00:17:58\n"
)
HGX_SMT_OFF = (
    "NodeName=gpu01 CPUs=96 Boards=1 SocketsPerBoard=2 CoresPerSocket=48 ThreadsPerCore=1 "
    "RealMemory=2063812\nUpTime=3-04:00:10\n"
)
# starter-64's h100-node profile as rendered: 2 x 48 cores, 2048 GiB x 0.95.
H100_NODE = {"sockets": 2, "cores_per_socket": 48, "real_memory": 1992294}


def test_the_real_output_is_read() -> None:
    assert check.slurmd_hardware(DEBIAN_VM) == {
        "cpus": 2,
        "sockets": 1,
        "cores_per_socket": 2,
        "threads_per_core": 1,
        "real_memory": 24105,
    }


def test_a_node_line_within_the_hardware_passes() -> None:
    node = {"sockets": 1, "cores_per_socket": 2, "threads_per_core": 1, "real_memory": 1945}
    assert check.slurm_node_shortfall(DEBIAN_VM, node) == []
    assert check.slurm_node_shortfall(HGX_SMT_OFF, {**H100_NODE, "threads_per_core": 1}) == []


def test_threads_per_core_2_where_smt_is_off_is_refused() -> None:
    reasons = check.slurm_node_shortfall(HGX_SMT_OFF, {**H100_NODE, "threads_per_core": 2})
    assert reasons[0].startswith("ThreadsPerCore=2 but the node runs 1 thread(s) per core")
    assert "Sockets*CoresPerSocket*ThreadsPerCore=192 but slurmd counts 96" in reasons


def test_more_memory_than_measured_is_refused() -> None:
    node = {**H100_NODE, "threads_per_core": 1, "real_memory": 2100000}
    assert check.slurm_node_shortfall(HGX_SMT_OFF, node) == [
        "RealMemory=2100000 MiB but slurmd measures 2063812"
    ]


def test_no_node_line_is_an_error() -> None:
    with pytest.raises(ValueError, match="no NodeName= line"):
        check.slurmd_hardware("slurmd: error: something\n")
