"""The GPUs (`nvidia-smi -q -x`), their NVLinks (`nvidia-smi nvlink --status`) and, on
NVLink-network trays (GB200/GB300 NVL72), the IMEX domain (`nvidia-imex-ctl -N`)."""

from __future__ import annotations

from myriad.node.facts.declare import command, fact
from myriad.node.parsers import parse_imex_nodes, parse_nvidia_smi_xml, parse_nvlink_status

GPUS = fact(
    "gpus",
    command("nvidia_smi", "nvidia-smi", "-q", "-x"),
    "nvidia-smi -q -x",
    parse_nvidia_smi_xml,
)
NVLINK = fact(
    "nvlink",
    command("nvlink", "nvidia-smi", "nvlink", "--status"),
    "nvidia-smi nvlink --status",
    parse_nvlink_status,
)
# Elsewhere the tool is not installed: the fact is `missing`, which only the IMEX check reads,
# and only where the platform runs IMEX.
IMEX = fact(
    "imex",
    command("imex", "nvidia-imex-ctl", "-N"),
    "nvidia-imex-ctl -N",
    parse_imex_nodes,
)
