"""Fact parsers: pure functions from a tool's text output to frozen dataclasses.

Every parser raises ParseFailure (a ValueError) and nothing else for output it cannot
read: empty, truncated, garbage, or an error message in place of the expected output.
"""

from myriad.node.parsers.bonding import Bond, BondSlave, parse_bonding
from myriad.node.parsers.common import ParseFailure
from myriad.node.parsers.dcgm import DcgmDiag, DcgmResult, DcgmTest, parse_dcgmi_diag
from myriad.node.parsers.docker_info import DockerInfo, DockerRuntime, parse_docker_info
from myriad.node.parsers.imex import ImexDomain, ImexNode, parse_imex_nodes
from myriad.node.parsers.infiniband import (
    IbDevice,
    IbPort,
    IbReport,
    parse_ibstat,
    parse_ibv_devinfo,
    parse_sysfs_counters,
    parse_sysfs_infiniband,
)
from myriad.node.parsers.iplink import (
    Interface,
    Route,
    parse_ip_addr,
    parse_ip_link,
    parse_ip_route,
)
from myriad.node.parsers.kubernetes import GPU_RESOURCE, KubeNode, parse_kubectl_nodes
from myriad.node.parsers.mlnx_qos import MlnxQos, TrafficClass, parse_mlnx_qos
from myriad.node.parsers.nccl_tests import NcclRank, NcclRow, NcclTestsRun, parse_nccl_tests
from myriad.node.parsers.nvidia_smi import (
    Gpu,
    GpuFabric,
    NvidiaSmiReport,
    NvlinkGpu,
    NvlinkLink,
    NvlinkStatus,
    PcieLink,
    parse_nvidia_smi_text,
    parse_nvidia_smi_xml,
    parse_nvlink_status,
)
from myriad.node.parsers.perftest import PerftestRow, PerftestRun, parse_perftest_bw
from myriad.node.parsers.slurm import (
    Gres,
    SinfoGresCount,
    SinfoNodeGres,
    SlurmBlock,
    SlurmNode,
    SlurmSwitch,
    SlurmTopology,
    compress_hostlist,
    expand_hostlist,
    parse_gres,
    parse_scontrol_nodes,
    parse_scontrol_topology,
    parse_sinfo_count_gres,
    parse_sinfo_node_gres,
)

__all__ = [
    "GPU_RESOURCE",
    "Bond",
    "BondSlave",
    "DcgmDiag",
    "DcgmResult",
    "DcgmTest",
    "DockerInfo",
    "DockerRuntime",
    "Gpu",
    "GpuFabric",
    "Gres",
    "IbDevice",
    "IbPort",
    "IbReport",
    "ImexDomain",
    "ImexNode",
    "Interface",
    "KubeNode",
    "MlnxQos",
    "NcclRank",
    "NcclRow",
    "NcclTestsRun",
    "NvidiaSmiReport",
    "NvlinkGpu",
    "NvlinkLink",
    "NvlinkStatus",
    "ParseFailure",
    "PcieLink",
    "PerftestRow",
    "PerftestRun",
    "Route",
    "SinfoGresCount",
    "SinfoNodeGres",
    "SlurmBlock",
    "SlurmNode",
    "SlurmSwitch",
    "SlurmTopology",
    "TrafficClass",
    "compress_hostlist",
    "expand_hostlist",
    "parse_bonding",
    "parse_dcgmi_diag",
    "parse_docker_info",
    "parse_gres",
    "parse_ibstat",
    "parse_ibv_devinfo",
    "parse_imex_nodes",
    "parse_ip_addr",
    "parse_ip_link",
    "parse_ip_route",
    "parse_kubectl_nodes",
    "parse_mlnx_qos",
    "parse_nccl_tests",
    "parse_nvidia_smi_text",
    "parse_nvidia_smi_xml",
    "parse_nvlink_status",
    "parse_perftest_bw",
    "parse_scontrol_nodes",
    "parse_scontrol_topology",
    "parse_sinfo_count_gres",
    "parse_sinfo_node_gres",
    "parse_sysfs_counters",
    "parse_sysfs_infiniband",
]
