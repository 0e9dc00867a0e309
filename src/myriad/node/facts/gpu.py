"""The GPUs (`nvidia-smi -q -x`) and their NVLinks (`nvidia-smi nvlink --status`)."""

from __future__ import annotations

from myriad.node.facts.declare import command, fact
from myriad.node.parsers import parse_nvidia_smi_xml, parse_nvlink_status

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
